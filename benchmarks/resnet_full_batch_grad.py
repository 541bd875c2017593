"""Wall time and peak memory of one full-batch gradient of the ResNet-20-FRN log posterior.

This is the unit of work of full-batch HMC on CIFAR-10 (the paper used 40,960 training images, a
multiple of its 512 TPU cores): one jitted ``value_and_grad`` of

    log p(θ | D) = log p(θ) + Σ_{i=1..N} log p(y_i | x_i, θ)

for ``resnet20_frn_swish``, with the sum accumulated in chunks under ``jax.checkpoint``
(``LogPosterior(chunk_size=...)``) so memory is that of one chunk, not of N examples. Compilation
is done ahead of time and reported separately. Peak resident memory is the process maximum
(``getrusage``), so it includes the inputs themselves (N·32·32·3 float32).

``--method host_loop`` computes the same value and gradient as a Python loop over chunks, each
one jitted ``value_and_grad`` of a chunk's log-likelihood, summed on the host (plus the prior).
On XLA:CPU the gradient of a convolution inside a loop body (``lax.scan``, which
``LogPosterior(chunk_size=...)`` uses) runs far slower than the same convolution outside a loop
(jax-ml/jax#12868), so on CPU the two methods differ a lot in speed; ``--check`` compares their
results.

Inputs are random normal images by default (the time does not depend on pixel values);
``--data proxy`` decodes the first N images of the JPEG CIFAR-10 proxy in the shared data folder
instead (needs Pillow).

The model's work per example is XLA:CPU's count of the floating-point operations of one
un-chunked ``value_and_grad`` on a small batch (``cost_analysis``), divided by the batch size: the
forward and backward pass once, without the forward pass ``jax.checkpoint`` repeats. Achieved
TFLOP/s is that count times examples per second; on an accelerator it is also given as a
fraction of the device's dense peak (``--peak-tflops``, or a table of known devices: on NVIDIA
GPUs since Ampere, JAX's default precision runs float32 convolutions on TF32 tensor cores, so the
TF32 peak is the one that applies; ``--matmul-precision float32`` asks for true float32).

Usage::

    python benchmarks/resnet_full_batch_grad.py [--n 40960] [--chunk-size 512] [--repeats 1]
        [--method log_posterior|host_loop] [--check] [--data random|proxy]
        [--matmul-precision default|tensorfloat32|float32] [--peak-tflops T]
"""

from __future__ import annotations

import argparse
import io
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import likelihoods, priors
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import get, num_params
from bnnkit.types import Batch

PROXY = Path("/work/shared/data/cifar10_jpeg_proxy/cifar10_jpeg_q75_proxy.npz")
# bnn_hmc's normalisation constants for CIFAR-10.
MEAN, STD = np.array([0.49, 0.48, 0.44], np.float32), np.array([0.2, 0.2, 0.2], np.float32)


def random_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` standard-normal 32×32×3 images and uniform labels in 0..9."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 32, 32, 3), np.float32), rng.integers(0, 10, n, np.int32)


def proxy_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` training images of the JPEG proxy, a random subset, normalised as in bnn_hmc."""
    from PIL import Image  # optional: only this option needs it

    with np.load(PROXY, allow_pickle=False) as f:
        blob, offsets, labels = f["train_jpeg_bytes"], f["train_offsets"], f["y_train"]
    # The proxy is stored class by class; a random subset keeps the classes mixed.
    index = np.sort(np.random.default_rng(seed).permutation(len(labels))[:n])
    images = np.stack(
        [
            np.asarray(
                Image.open(io.BytesIO(blob[offsets[i] : offsets[i + 1]].tobytes())).convert("RGB")
            )
            for i in index
        ]
    )
    return (images.astype(np.float32) / 255.0 - MEAN) / STD, labels[index].astype(np.int32)


# Dense (no sparsity) peak TFLOP/s of known accelerators: (TF32 tensor cores, plain FP32), from
# NVIDIA's data sheets (SXM parts).
PEAK_TFLOPS = {"H100": (494.7, 66.9), "H200": (494.7, 66.9), "A100": (156.0, 19.5)}


def device_peak_tflops(precision: str) -> float | None:
    """The dense peak of this process's first device for ``precision``, if it is a known GPU."""
    kind = jax.devices()[0].device_kind
    for name, (tf32, fp32) in PEAK_TFLOPS.items():
        if name in kind:
            return fp32 if precision == "float32" else tf32
    return None


def flops_per_example(
    log_posterior: LogPosterior, params: Any, x: jax.Array, y: jax.Array
) -> float | None:
    """XLA's count of floating-point operations of one example's forward and backward pass.

    Counted by XLA:CPU whatever the run's backend: on GPUs XLA hands convolutions to cuDNN
    as custom calls, which its cost analysis does not count.
    """
    plain = LogPosterior(
        log_posterior.apply,
        log_posterior.likelihood,
        log_posterior.prior,
        num_data=log_posterior.num_data,
    )
    cpu = jax.devices("cpu")[0]
    args = jax.device_put((params, Batch(x, y)), cpu)
    with jax.default_device(cpu):
        compiled = jax.jit(jax.value_and_grad(plain)).lower(*args).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    flops = (cost or {}).get("flops")
    return None if flops is None else float(flops) / x.shape[0]


def peak_rss_gib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def host_loop_value_and_grad(
    log_posterior: LogPosterior, chunk_size: int
) -> Callable[[Any, Batch], tuple[jax.Array, Any]]:
    """``value_and_grad(log_posterior)`` as a host loop over jitted per-chunk gradients.

    Computes ``[∇ log p(θ) + (N/n) Σ_chunks ∇ Σ_{i∈chunk} log p(y_i | x_i, θ)] / T`` with one
    compiled chunk gradient (the last, shorter chunk compiles a second one).

    Example:
        >>> vg = host_loop_value_and_grad(lp, 512)  # doctest: +SKIP
        >>> value, grad = vg(params, Batch(x, y))  # doctest: +SKIP
    """
    chunk_grad = jax.jit(
        jax.value_and_grad(
            lambda p, x, y: jnp.sum(log_posterior.likelihood.log_prob(log_posterior.apply(p, x), y))
        )
    )
    prior_grad = jax.jit(jax.value_and_grad(log_posterior.log_prior))
    add = jax.jit(lambda a, b: jax.tree.map(jnp.add, a, b))

    def value_and_grad(params: Any, batch: Batch) -> tuple[jax.Array, Any]:
        n = batch.x.shape[0]
        total, grad = prior_grad(params)
        ll_total, ll_grad = 0.0, None
        for start in range(0, n, chunk_size):
            v, g = chunk_grad(
                params, batch.x[start : start + chunk_size], batch.y[start : start + chunk_size]
            )
            ll_total = ll_total + v
            ll_grad = g if ll_grad is None else add(ll_grad, g)
        scale = log_posterior.num_data / n
        t = log_posterior.temperature
        value = (total + scale * ll_total) / t
        grad = jax.tree.map(lambda a, b: (a + scale * b) / t, grad, ll_grad)
        return value, grad

    return value_and_grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40_960, help="number of training examples")
    parser.add_argument("--chunk-size", type=int, default=512, help="examples per chunk")
    parser.add_argument("--repeats", type=int, default=1, help="timed gradient evaluations")
    parser.add_argument("--data", choices=("random", "proxy"), default="random")
    parser.add_argument("--weight-decay", type=float, default=5.0, help="prior precision")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--method",
        choices=("log_posterior", "host_loop"),
        default="log_posterior",
        help="one jitted scan, or a host loop",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="also run the other method once and compare the results",
    )
    parser.add_argument(
        "--matmul-precision",
        choices=("default", "tensorfloat32", "float32"),
        default="default",
        help="jax_default_matmul_precision for the run",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's peak TFLOP/s (default: known accelerators' table)",
    )
    args = parser.parse_args()
    if args.matmul_precision != "default":
        jax.config.update("jax_default_matmul_precision", args.matmul_precision)

    load = proxy_data if args.data == "proxy" else random_data
    x_np, y_np = load(args.n, args.seed)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)
    del x_np, y_np
    model = get("resnet20_frn_swish", num_outputs=10)
    params = jax.jit(model.init)(jax.random.PRNGKey(args.seed), x[:1])
    log_posterior = LogPosterior(
        model.apply,
        likelihoods.Categorical(num_classes=10),
        priors.Gaussian(weight_decay=args.weight_decay),
        num_data=args.n,
        chunk_size=args.chunk_size,
    )
    batch = Batch(x, y)
    rss_before = peak_rss_gib()

    def scan_grad() -> Callable[[Any, Batch], tuple[jax.Array, Any]]:
        return jax.jit(jax.value_and_grad(log_posterior)).lower(params, batch).compile()

    loop_grad = host_loop_value_and_grad(log_posterior, args.chunk_size)
    start = time.perf_counter()
    if args.method == "log_posterior":
        compiled = scan_grad()
    else:
        compiled = loop_grad  # compiles on a first chunk, so the timed runs exclude it
        jax.block_until_ready(loop_grad(params, Batch(x[: args.chunk_size], y[: args.chunk_size])))
    compile_s = time.perf_counter() - start

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        value, grad = jax.block_until_ready(compiled(params, batch))
        times.append(time.perf_counter() - start)
    grad_norm = float(jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(grad))))

    small = min(args.n, 256)
    per_example = flops_per_example(log_posterior, params, x[:small], y[:small])
    peak = args.peak_tflops or device_peak_tflops(args.matmul_precision)
    device = jax.devices()[0]
    print(
        f"jax {jax.__version__}, backend {jax.default_backend()} ({device.device_kind}), "
        f"{platform.processor() or platform.machine()}, float32 parameters, matmul precision "
        f"{args.matmul_precision}, {args.data} inputs\n"
    )
    print(
        "| method | N | chunk | params | compile (s) | gradient (s) | examples/s "
        "| GFLOP/example | TFLOP/s | of peak | peak RSS (GiB) | RSS before compile (GiB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    best = min(times)
    rate = args.n / best
    tflops = None if per_example is None else per_example * rate / 1e12
    print(
        f"| {args.method} | {args.n:,} | {args.chunk_size} | {num_params(params):,} "
        f"| {compile_s:.1f} | {best:.3f} | {rate:,.1f} "
        f"| {'-' if per_example is None else f'{per_example / 1e9:.3f}'} "
        f"| {'-' if tflops is None else f'{tflops:.2f}'} "
        f"| {'-' if tflops is None or peak is None else f'{tflops / peak:.1%} of {peak:g}'} "
        f"| {peak_rss_gib():.2f} | {rss_before:.2f} |"
    )
    if args.check:
        other = loop_grad if args.method == "log_posterior" else scan_grad()
        other_value, other_grad = jax.block_until_ready(other(params, batch))
        diff = max(
            float(jnp.max(jnp.abs(a - b)) / (float(jnp.max(jnp.abs(b))) + 1e-30))
            for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(other_grad), strict=True)
        )
        print(
            f"check: other method's value {float(other_value):.6g}, "
            f"largest per-leaf relative gradient difference {diff:.2e}"
        )
    print(
        f"\nlog posterior {float(value):.6g}, gradient norm {grad_norm:.6g}, "
        f"all times (s): {', '.join(f'{t:.3f}' for t in times)}"
    )


if __name__ == "__main__":
    main()
