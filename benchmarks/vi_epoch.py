"""Seconds per epoch of Bayes by Backprop on Blundell et al.'s MNIST setting, and the ratio to SGD.

Setting: MLP 784-400-400-10 (``mlp_bbb_400``, 478,410 parameters) on 60,000 MNIST-shaped
inputs, batch 128 (468 steps per epoch), one Monte Carlo sample of the weights per step. SGD and
VI run through the same jitted epoch (:func:`bnnkit.runs.units.make_epoch`: one ``lax.scan`` over
the minibatches of a random permutation), on the same model and data, so the ratio measures only
what VI adds: the noise draw (one flat normal vector for all parameters), ``μ + softplus(ρ) ε``,
the gradient with respect to twice as many variational parameters, the KL term and Adam.

Wall seconds are what the target is about; CPU seconds (all threads of this process) are the
work done, which other jobs on a shared machine inflate less. Rows: SGD with momentum (the
baseline); VI with the Gaussian prior (closed-form KL) for each ``--vi-estimator`` (weights:
Blundell's one weight sample per minibatch; local_reparam: per-example pre-activation noise;
flipout: shared weight noise with per-example signs); VI with Blundell's scale-mixture prior
(Monte Carlo KL, ``log p(θ_s)`` of a weight draw) with the weights and local_reparam estimators;
and a plain PyTorch Bayes-by-Backprop loop (``benchmarks/torch_bbb.py``: same network, batch,
weight noise, Gaussian-prior KL and Adam, ``torch.set_num_threads`` = the cores JAX uses),
measured in the same run, when torch is installed. Each row's ratio is to SGD's epoch and to
PyTorch's. Targets: weight-noise BBB ≤ 0.6× PyTorch's epoch, the best estimator ≤ 0.35×.

Usage::

    python benchmarks/vi_epoch.py [--repeats 3] [--num-samples 1] [--no-torch]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time

import jax

from bnnkit import likelihoods, priors
from bnnkit.inference import sgd, vi
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import get, num_params
from bnnkit.runs.units import make_epoch
from bnnkit.types import Batch

try:  # the PyTorch reference beside this file; optional
    import torch_bbb
except ImportError:
    torch_bbb = None

SCALE_MIXTURE = f"scale_mixture:pi=0.5,sigma1=1,sigma2={math.exp(-6)!r}"


def setting(prior):
    key = jax.random.PRNGKey(0)
    n, batch_size = 60_000, 128
    x = jax.random.normal(key, (n, 784))
    y = jax.random.randint(key, (n,), 0, 10)
    model = get("mlp_bbb_400", num_outputs=10)
    lp = LogPosterior(model.apply, likelihoods.Categorical(10), prior, n)
    return lp, model.init(key, x[:1]), Batch(x, y), batch_size


def time_epochs(method, params, train, batch_size, repeats):
    epoch = jax.jit(make_epoch(method, batch_size))
    state = method.init(None, params, None)
    key = jax.random.PRNGKey(1)
    jax.block_until_ready(epoch(state, key, key, 0, train))  # compile and warm up
    wall, cpu = [], []
    for e in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(epoch(state, key, key, e + 1, train))
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--num-samples", type=int, default=1, help="Monte Carlo samples of the weights per VI step"
    )
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    args = parser.parse_args()
    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform} "
        f"[{jax.devices()[0].device_kind}] "
        f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)"
    )
    gaussian = priors.Gaussian(1.0)
    lp, params, train, batch_size = setting(gaussian)
    steps = train.x.shape[0] // batch_size
    # A 100-epoch cosine schedule from 1e-3, as every row uses.
    epochs = dict(init_step_size=1e-3, num_epochs=100, batch_size=batch_size)
    rows = {
        "SGD (momentum 0.9)": time_epochs(
            sgd.build(lp, sgd.Config(**epochs)), params, train, batch_size, args.repeats
        )
    }
    lp_mix, *_ = setting(priors.make(SCALE_MIXTURE))
    cases = [(f"BBB {e}, Gaussian prior", lp, e) for e in vi.ESTIMATORS]
    cases += [(f"BBB {e}, scale mixture (MC KL)", lp_mix, e) for e in ("weights", "local_reparam")]
    for name, log_posterior, estimator in cases:
        config = vi.Config(**epochs, vi_num_samples=args.num_samples, vi_estimator=estimator)
        rows[name] = time_epochs(
            vi.build(log_posterior, config), params, train, batch_size, args.repeats
        )
    reference = None
    if torch_bbb is None or args.no_torch:
        note = "skipped (--no-torch)" if args.no_torch else "benchmarks/torch_bbb.py not found"
    else:
        # The same kind of device as JAX's: a GPU run is compared with PyTorch on the GPU.
        device = "cuda" if jax.default_backend() == "gpu" else "cpu"
        reference = torch_bbb.time_epochs(args.repeats, train.x.shape[0], batch_size, device)
        note = f"torch is not installed or sees no {device}" if reference is None else None
    if reference is not None:
        where = "GPU" if device == "cuda" else f"{torch_bbb.cores()} threads"
        rows[f"PyTorch BBB ({where})"] = reference
    base = rows["SGD (momentum 0.9)"]
    print(
        f"mlp_bbb_400 ({num_params(params):,} parameters), {train.x.shape[0]:,} examples, "
        f"batch {batch_size}, {steps} steps/epoch, {args.num_samples} MC sample(s), "
        f"median of {args.repeats} epochs"
    )
    print(
        f"{'method':<40} {'s/epoch':>8} {'to SGD':>7} {'to torch':>9} {'CPU s/epoch':>12} "
        f"{'CPU to SGD':>11}"
    )
    for name, (sec, cpu) in rows.items():
        to_torch = f"{sec / reference[0]:9.2f}" if reference is not None else f"{'-':>9}"
        print(
            f"{name:<40} {sec:8.3g} {sec / base[0]:7.2f} {to_torch} {cpu:12.3g} "
            f"{cpu / base[1]:11.2f}"
        )
    if note:
        print(f"no PyTorch reference: {note}")


if __name__ == "__main__":
    main()
