"""Forward and forward+backward throughput (examples/second) of every registered network.

Each model gets a batch of its example input (``bnnkit models`` shows which): 80 examples for
image and text models, as in the paper, and 128 for the MLPs (784 features for classification,
6 for regression-only ones). The backward pass is the gradient with respect to the parameters of
the summed log-likelihood under a softmax (categorical) likelihood, jitted; times are the median
of several runs after warm-up. Random inputs: the cost of these networks does not depend on the
values.

Usage::

    python benchmarks/model_throughput.py [--repeats 10] [--models resnet20_frn_swish lenet5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import jax

from bnnkit import likelihoods, priors
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import MODELS, get, num_params
from bnnkit.models.catalog import example_for
from bnnkit.types import Batch

IMAGE_TEXT_BATCH = 80
MLP_BATCH = 128


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` (which must block until its result is ready).

    Example:
        >>> median_seconds(lambda: sum(range(10)), repeats=3) >= 0.0
        True
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, repeats: int) -> dict[str, object]:
    """Compile time and examples/second of the forward pass and of forward+backward for one model.

    Returns:
        a row: name, batch, input shape, parameter count, compile seconds, forward and
        forward+backward examples per second.
    """
    spec = MODELS[name]
    shape, outputs = example_for(spec)
    batch = MLP_BATCH if spec.example_shape is None else IMAGE_TEXT_BATCH
    model = get(name, outputs)
    key_init, key_x, key_y = jax.random.split(jax.random.PRNGKey(0), 3)
    if spec.input_dtype == "int":
        x = jax.random.randint(key_x, (batch, *shape), 0, 20_000)
    else:
        x = jax.random.normal(key_x, (batch, *shape))
    y = jax.random.randint(key_y, (batch,), 0, outputs)
    params = jax.jit(model.init)(key_init, x[:1])
    log_posterior = LogPosterior(
        model.apply,
        likelihoods.Categorical(num_classes=outputs),
        priors.Gaussian(weight_decay=1.0),
        num_data=batch,
    )
    forward = jax.jit(model.apply)
    forward_backward = jax.jit(jax.value_and_grad(log_posterior))

    start = time.perf_counter()
    jax.block_until_ready(forward_backward(params, Batch(x, y)))
    compile_s = time.perf_counter() - start
    fwd_s = median_seconds(lambda: jax.block_until_ready(forward(params, x)), repeats)
    both_s = median_seconds(
        lambda: jax.block_until_ready(forward_backward(params, Batch(x, y))), repeats
    )
    return {
        "name": name,
        "batch": batch,
        "input": "×".join(map(str, shape)),
        "params": num_params(params),
        "compile_s": compile_s,
        "forward": batch / fwd_s,
        "forward_backward": batch / both_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per model")
    parser.add_argument("--models", nargs="*", default=sorted(MODELS), help="names to measure")
    args = parser.parse_args()

    print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, "
        f"{jax.devices()[0].device_kind}, {platform.processor() or platform.machine()}, "
        f"median of {args.repeats} runs after 2 warm-up runs, float32\n"
    )
    print(
        "| model | batch | input | params | compile+1st run (s) | forward (ex/s) "
        "| forward+backward (ex/s) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for name in args.models:
        r = measure(name, args.repeats)
        print(
            f"| {r['name']} | {r['batch']} | {r['input']} | {r['params']:,} "
            f"| {r['compile_s']:.1f} | {r['forward']:,.0f} | {r['forward_backward']:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
