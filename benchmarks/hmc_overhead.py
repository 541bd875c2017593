"""HMC overhead: time per leapfrog step / time of one full-batch gradient, in the same run.

Two floors are measured for the same jitted log posterior:

- ``dispatched``: one jitted ``value_and_grad`` call from Python (what the issue's target
  refers to: the cost of a gradient as a user would call it);
- ``in-loop``: the per-gradient time inside a ``lax.fori_loop`` of gradients (no dispatch
  overhead; the stricter floor).

The HMC figure is the wall time of one ``bnnkit.inference.hmc`` iteration (momentum draw,
``L`` leapfrog steps, energy, accept/reject, state update) divided by ``L``, with the leapfrog
loop inside the jitted step (``scan``) or, for LeNet-5, also run from the host (``host``, one
jitted leapfrog step per call: XLA's CPU backend runs convolution gradients several times
slower inside a compiled loop). Medians of repeated runs after a warm-up; compare ratios, not
absolute times, across machines.

    python benchmarks/hmc_overhead.py [--repeats 7] [--cases a b c resnet]
        [--resnet-n 40960] [--chunk-size 4096]

The ``resnet`` case (ResNet-20-FRN on CIFAR-shaped images, the paper's CIFAR-10 HMC) is for
accelerators; it is not run by default.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import data, likelihoods, priors
from bnnkit.inference import hmc
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import get
from bnnkit.models.mlp import MLP
from bnnkit.types import Batch


def median_time(fn, repeats: int) -> float:
    jax.block_until_ready(fn())  # compile and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def measure(
    name: str,
    lp: LogPosterior,
    params,
    batch: Batch,
    num_leapfrog: int,
    repeats: int,
    integrators: tuple[str, ...] = ("scan",),
) -> list[dict]:
    value_and_grad = jax.jit(jax.value_and_grad(lp))
    calls = max(min(10, num_leapfrog), num_leapfrog // 4)

    def dispatched():
        out = None
        for _ in range(calls):
            out = value_and_grad(params, batch)
        return out

    @jax.jit
    def grad_loop(params, batch):
        def body(_, carry):
            _, g = jax.value_and_grad(lp)(carry, batch)
            return jax.tree.map(lambda p, gi: p + 1e-12 * gi, carry, g)

        return jax.lax.fori_loop(0, calls, body, params)

    t_dispatch = median_time(dispatched, repeats) / calls
    t_loop = median_time(lambda: grad_loop(params, batch), repeats) / calls

    rows = []
    for integrator in integrators:
        t_step = leapfrog_time(lp, params, batch, num_leapfrog, integrator, repeats)
        rows.append(
            {
                "name": name,
                "integrator": integrator,
                "grad_dispatched_ms": 1e3 * t_dispatch,
                "grad_loop_ms": 1e3 * t_loop,
                "leapfrog_ms": 1e3 * t_step,
                "ratio_dispatched": t_step / t_dispatch,
                "ratio_loop": t_step / t_loop,
                "L": num_leapfrog,
            }
        )
    return rows


def leapfrog_time(
    lp: LogPosterior, params, batch: Batch, num_leapfrog: int, integrator: str, repeats: int
) -> float:
    """Seconds per leapfrog step of one HMC iteration of one chain: ``scan`` jits the whole
    iteration, ``host`` runs its leapfrog loop from Python (as the run driver does)."""
    step_size = 1e-6  # tiny: every trajectory is accepted, the work is the same regardless
    method = hmc.build(
        lp,
        hmc.Config(
            step_size=step_size,
            trajectory_len=num_leapfrog * step_size,
            num_iterations=1,
            adapt_step_size=False,
            max_num_leapfrog_steps=num_leapfrog,
            integrator=integrator,
        ),
    )
    key = jax.random.PRNGKey(0)
    if integrator == "scan":
        state = method.init(None, params, batch)
        jitted = jax.jit(method.step)

        def step():
            return jitted(key, state, batch)
    else:  # a members axis of one chain
        state = jax.jit(jax.vmap(lambda p: method.init(None, p, batch)))(
            jax.tree.map(lambda a: a[None], params)
        )

        def step():
            return method.step_members(key[None], state, batch)

    _, info = step()
    assert int(info.num_leapfrog.max()) == num_leapfrog, info.num_leapfrog
    return median_time(step, repeats) / num_leapfrog


def yacht_case():
    ds = data.load("yacht_0")
    model = get("mlp_regression_small", num_outputs=2)
    params = model.init(jax.random.PRNGKey(0), ds.x_train[:1])
    lp = LogPosterior(model.apply, likelihoods.Gaussian(), priors.Gaussian(1.0), ds.num_train)
    return lp, params, Batch(jnp.asarray(ds.x_train), jnp.asarray(ds.y_train))


def mnist_shaped_case(n: int = 10_000):
    key_x, key_y = jax.random.split(jax.random.PRNGKey(1))
    x = jax.random.normal(key_x, (n, 784))
    y = jax.random.randint(key_y, (n,), 0, 10)
    net = MLP(hidden=(100, 100), num_outputs=10)
    params = net.init(jax.random.PRNGKey(0), x[:1])
    lp = LogPosterior(net.apply, likelihoods.Categorical(10), priors.Gaussian(1.0), n)
    return lp, params, Batch(x, y)


def lenet_case(n: int = 1_000):
    key_x, key_y = jax.random.split(jax.random.PRNGKey(1))
    x = jax.random.normal(key_x, (n, 28, 28, 1))
    y = jax.random.randint(key_y, (n,), 0, 10)
    model = get("lenet5", num_outputs=10)
    params = model.init(jax.random.PRNGKey(0), x[:1])
    lp = LogPosterior(model.apply, likelihoods.Categorical(10), priors.Gaussian(1.0), n)
    return lp, params, Batch(x, y)


def resnet_case(n: int, chunk_size: int):
    """ResNet-20-FRN-swish on ``n`` CIFAR-shaped random images, the likelihood summed in chunks.

    The paper's HMC on CIFAR-10 (40,960 images); on a CPU use a small ``n``.
    """
    key_x, key_y = jax.random.split(jax.random.PRNGKey(1))
    x = jax.random.normal(key_x, (n, 32, 32, 3))
    y = jax.random.randint(key_y, (n,), 0, 10)
    model = get("resnet20_frn_swish", num_outputs=10)
    params = jax.jit(model.init)(jax.random.PRNGKey(0), x[:1])
    lp = LogPosterior(
        model.apply,
        likelihoods.Categorical(10),
        priors.Gaussian(weight_decay=5.0),
        n,
        chunk_size=min(chunk_size, n),
    )
    return lp, params, Batch(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--cases", nargs="+", choices=("a", "b", "c", "resnet"), default=("a", "b", "c")
    )
    parser.add_argument(
        "--resnet-n",
        type=int,
        default=40_960,
        help="CIFAR-shaped images of the resnet case (the paper's 40,960)",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=4096,
        help="examples per chunk of the resnet case's likelihood sum",
    )
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.default_backend()} ({jax.device_count()} device(s))")
    cases = {
        "a": lambda: measure(
            "(a) mlp_regression_small, yacht_0 (277 x 6)",
            *yacht_case(),
            num_leapfrog=2000,
            repeats=args.repeats,
        ),
        "b": lambda: measure(
            "(b) MLP 784-100-100-10, 10,000 MNIST-shaped",
            *mnist_shaped_case(),
            num_leapfrog=40,
            repeats=max(3, args.repeats // 2),
        ),
        # Seconds per gradient: few leapfrog steps and repeats suffice.
        "c": lambda: measure(
            "(c) LeNet-5, 1,000 MNIST-shaped (28 x 28 x 1)",
            *lenet_case(),
            num_leapfrog=10,
            repeats=max(2, args.repeats // 3),
            integrators=("scan", "host"),
        ),
        # Not a default: on an accelerator, the paper's CIFAR-10 setting.
        "resnet": lambda: measure(
            f"ResNet-20-FRN, {args.resnet_n:,} CIFAR-shaped",
            *resnet_case(args.resnet_n, args.chunk_size),
            num_leapfrog=10,
            repeats=max(2, args.repeats // 3),
        ),
    }
    rows = [row for name in args.cases for row in cases[name]()]
    print(
        "| case | integrator | L | gradient, dispatched (ms) | gradient, in loop (ms) "
        "| leapfrog step (ms) | ratio vs dispatched | ratio vs in-loop |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {r['integrator']} | {r['L']} | {r['grad_dispatched_ms']:.4f} "
            f"| {r['grad_loop_ms']:.4f} | {r['leapfrog_ms']:.4f} "
            f"| {r['ratio_dispatched']:.3f} | {r['ratio_loop']:.3f} |"
        )
    print(
        "target: leapfrog step / gradient <= 1.05 for the MLPs; <= 1.2 vs dispatched for "
        "LeNet-5 with the host integrator (the one --integrator auto picks there on CPU)"
    )


if __name__ == "__main__":
    main()
