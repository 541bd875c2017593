"""Epoch time of SGLD, SGHMC and RMSprop-SGHMC relative to SGD, and vmapped vs sequential ensembles.

Every method runs through the same jitted epoch (:func:`bnnkit.runs.units.make_epoch`: one
``lax.scan`` over the minibatches of a random permutation), on the same model and data, so the
ratio ``epoch time of X / epoch time of SGD`` measures only the method's own work (noise draws,
momentum and preconditioner updates). Target: ≤ 1.3. Each SGMCMC variant runs with Gaussian
noise and with Rademacher (±1) noise (``rad``), which has the same mean and covariance (see
:mod:`bnnkit.inference.noise_draws`).

Settings (the issue's):

- ``mlp``: MLP 784-400-400-10 (``mlp_bbb_400``) on 60,000 MNIST-shaped inputs, batch 128;
- ``resnet``: ResNet-20-FRN-swish on CIFAR-shaped inputs, batch 80. A CPU epoch of 50,000 images
  takes minutes per method, so ``--resnet-batches`` minibatches (default 10) stand for an epoch
  and the ratio is of the same number of steps.

Ensembles: K members of SGD, one vmapped step for all members vs K sequential runs of the
single-member step, wall time of one epoch each: on the MNIST MLP (``ensemble``) and on a
UCI-sized problem (``ensemble-small``).

Usage::

    python benchmarks/sgmcmc_epoch.py [--repeats 3] [--cases mlp ensemble ensemble-small resnet]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import jax.numpy as jnp

from bnnkit import likelihoods, priors
from bnnkit.inference import sgd, sgmcmc
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import get
from bnnkit.runs.units import make_epoch
from bnnkit.types import Batch

# Every method on a 100-epoch schedule starting at 1e-6: small enough that nothing diverges,
# and the same arithmetic per step whatever the step size.
EPOCHS = dict(init_step_size=1e-6, num_epochs=100)

VARIANTS = {
    "SGD": (sgd, dict(momentum_decay=0.9)),
    "SGLD": (sgmcmc, dict(momentum_decay=0.0)),
    "SGHMC": (sgmcmc, dict(momentum_decay=0.9)),
    "SGHMC-Prec": (sgmcmc, dict(momentum_decay=0.9, preconditioner="rmsprop")),
    "SGLD rad": (sgmcmc, dict(noise="rademacher")),
    "SGHMC rad": (sgmcmc, dict(momentum_decay=0.9, noise="rademacher")),
    "SGHMC-Prec rad": (
        sgmcmc,
        dict(momentum_decay=0.9, preconditioner="rmsprop", noise="rademacher"),
    ),
}


def build(module, lp, batch_size: int, **settings):
    return module.build(lp, module.Config(**EPOCHS, batch_size=batch_size, **settings))


def problem(case: str, resnet_batches: int):
    key = jax.random.PRNGKey(0)
    if case == "small":
        # UCI-sized regression: yacht's 277 x 6 with the paper's 50-unit MLP, batch 32.
        n, batch_size = 277, 32
        x = jax.random.normal(key, (n, 6))
        y = jax.random.normal(key, (n,))
        model = get("mlp_regression_small", num_outputs=1)
        lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=0.1), priors.Gaussian(1.0), n)
        return lp, model.init(key, x[:1]), Batch(x, y), batch_size
    if case == "resnet":
        batch_size, n = 80, 80 * resnet_batches
        x = jax.random.normal(key, (n, 32, 32, 3))
        model = get("resnet20_frn_swish", num_outputs=10)
    else:
        batch_size, n = 128, 60_000
        x = jax.random.normal(key, (n, 784))
        model = get("mlp_bbb_400", num_outputs=10)
    y = jax.random.randint(key, (n,), 0, 10)
    lp = LogPosterior(model.apply, likelihoods.Categorical(10), priors.Gaussian(1.0), n)
    params = model.init(key, x[:1])
    return lp, params, Batch(x, y), batch_size


def time_epochs(epoch, state, train, repeats, *, members=None):
    key = jax.random.PRNGKey(1)
    keys = key if members is None else jnp.stack([key] * members)
    out = epoch(state, keys, keys, 0, train)  # compile
    jax.block_until_ready(out)
    times = []
    for e in range(repeats):
        t0 = time.perf_counter()
        out = epoch(state, keys, keys, e + 1, train)
        jax.block_until_ready(out)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def method_ratios(case: str, repeats: int, resnet_batches: int) -> None:
    lp, params, train, batch_size = problem(case, resnet_batches)
    steps = train.x.shape[0] // batch_size
    results = {}
    for name, (module, settings) in VARIANTS.items():
        method = build(module, lp, batch_size, **settings)
        epoch = jax.jit(make_epoch(method, batch_size))
        state = method.init(None, params, None)
        results[name] = time_epochs(epoch, state, train, repeats)
    base = results["SGD"]
    print(
        f"\n{case}: {train.x.shape[0]} examples, batch {batch_size}, {steps} steps/epoch, "
        f"median of {repeats}"
    )
    print(f"{'method':<15} {'s/epoch':>9} {'ratio to SGD':>13}")
    for name, sec in results.items():
        print(f"{name:<15} {sec:9.3f} {sec / base:13.2f}")


def ensemble_speedup(members: int, repeats: int, case: str = "mlp") -> None:
    lp, params, train, batch_size = problem(case, 0)
    method = build(sgd, lp, batch_size, momentum_decay=0.9)
    epoch = make_epoch(method, batch_size)
    state = method.init(None, params, None)
    many = jax.tree.map(lambda a: jnp.stack([a] * members), state)
    vmapped = jax.jit(jax.vmap(epoch, in_axes=(0, 0, 0, None, None)))
    t_vmap = time_epochs(vmapped, many, train, repeats, members=members)
    single = jax.jit(epoch)
    t_one = time_epochs(single, state, train, repeats)
    what = (
        "mlp 784-400-400-10, 60,000 examples, batch 128"
        if case == "mlp"
        else "mlp_regression_small, 277 x 6, batch 32"
    )
    print(f"\nensemble of K={members} (SGD, {what}), one epoch")
    print(
        f"vmapped: {t_vmap * 1e3:.2f} ms   sequential: {members} x {t_one * 1e3:.2f} ms = "
        f"{members * t_one * 1e3:.2f} ms   speed-up {members * t_one / t_vmap:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--cases", nargs="+", default=["mlp", "ensemble", "ensemble-small", "resnet"]
    )
    parser.add_argument("--resnet-batches", type=int, default=10)
    parser.add_argument("--members", type=int, default=5)
    args = parser.parse_args()
    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform} "
        f"({platform.processor() or platform.machine()})"
    )
    for case in args.cases:
        if case == "ensemble":
            ensemble_speedup(args.members, args.repeats)
        elif case == "ensemble-small":
            ensemble_speedup(args.members, 20 * args.repeats, "small")
        else:
            method_ratios(case, args.repeats, args.resnet_batches)


if __name__ == "__main__":
    main()
