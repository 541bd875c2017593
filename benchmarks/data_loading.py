"""Data-loading benchmark: load + normalise times and corruption throughput.

Measures, on the machine it runs on:

1. MNIST (real files from ``$BNNKIT_DATA_DIR``): ``bnnkit.data.load("mnist")`` and the on-device
   normalisation ``(x - mean) / std`` of the whole training set (jitted, float32);
2. CIFAR-10-shaped data: decoding the JPEG proxy (Pillow) when it is in ``$BNNKIT_DATA_DIR``, and
   normalising 50,000 x 32 x 32 x 3 uint8 images;
3. corruption throughput (images/s) of every corruption at severity 3 on ``--num-images``
   32 x 32 x 3 images (the proxy test set when present, else random pixels); corruptions slower
   than ``--slow-below`` images/s on a 500-image probe are timed on ``--slow-images`` instead.

Usage:
    BNNKIT_DATA_DIR=/path/to/data python benchmarks/data_loading.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnnkit.data as data
from bnnkit.data.corruptions import CORRUPTIONS, corrupt


def _timed(fn, repeats: int = 1):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


@jax.jit
def _normalise(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    return (x.astype(jnp.float32) - mean) / std


def _normalise_time(x: np.ndarray, norm) -> float:
    mean = jnp.asarray(norm.mean, jnp.float32)
    std = jnp.asarray(norm.std, jnp.float32)
    device_x = jax.device_put(x)
    _normalise(device_x, mean, std).block_until_ready()  # compile
    seconds, _ = _timed(lambda: _normalise(jax.device_put(x), mean, std).block_until_ready(), 3)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-images", type=int, default=10_000)
    parser.add_argument("--slow-images", type=int, default=2_000)
    parser.add_argument("--slow-below", type=float, default=2_000.0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    results: dict = {"device": str(jax.devices()[0]), "cpu_count": os.cpu_count()}
    data_dir = os.environ.get("BNNKIT_DATA_DIR")

    if data_dir:
        seconds, mnist = _timed(lambda: data.load("mnist"), 3)
        results["mnist_load_s"] = seconds
        results["mnist_normalise_60000_s"] = _normalise_time(
            mnist.x_train, mnist.input_normalization
        )
    proxy_test = None
    if data_dir and os.path.isdir(os.path.join(data_dir, "cifar10_jpeg_proxy")):
        seconds, proxy = _timed(lambda: data.load("cifar10_jpeg_proxy"))
        results["cifar10_jpeg_proxy_load_decode_60000_s"] = seconds
        proxy_test = proxy.x_test
    rng = np.random.default_rng(0)
    random_cifar = rng.integers(0, 256, (50_000, 32, 32, 3), dtype=np.uint8)
    from bnnkit.data.normalization import image_normalization

    results["cifar10_shape_normalise_50000_s"] = _normalise_time(
        random_cifar, image_normalization("cifar10", "bnn_hmc", 3)
    )

    if proxy_test is not None and len(proxy_test) >= args.num_images:
        images, source = proxy_test[: args.num_images], "cifar10_jpeg_proxy test set"
    else:
        images, source = random_cifar[: args.num_images], "random uint8"
    results["corruption_images"] = source
    throughput = {}
    for name in CORRUPTIONS:
        probe_s, _ = _timed(lambda name=name: corrupt(images[:500], name, 3, seed=0))
        count = args.num_images if 500 / probe_s >= args.slow_below else args.slow_images
        seconds, _ = _timed(lambda name=name, count=count: corrupt(images[:count], name, 3, seed=0))
        throughput[name] = {
            "images": count,
            "seconds": round(seconds, 3),
            "images_per_s": round(count / seconds, 1),
        }
    results["corruption_throughput_severity3"] = throughput

    for key, value in results.items():
        if key != "corruption_throughput_severity3":
            print(f"{key:42s} {value if isinstance(value, str) else round(value, 4)}")
    print(f"{'corruption (severity 3)':22s} {'images':>7s} {'seconds':>8s} {'images/s':>10s}")
    for name, row in throughput.items():
        print(f"{name:22s} {row['images']:7d} {row['seconds']:8.3f} {row['images_per_s']:10.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
