"""How long the run driver's finiteness check of an ensemble's parameters takes to compile on
its own, at XLA's defaults and with lower optimisation settings.

A cold reference compiles it (``jit(<lambda>)`` in JAX's compile log:
``finite_members(method.position(s), ...)`` in :mod:`bnnkit.runs.loop`) while the chains'
block program compiles in another thread; this times it with nothing beside it, over
``--devices`` CPU devices with the members split across them as the ensemble places them, so
that the two can be read together.

    python benchmarks/finite_check_compile.py [--devices 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.devices < 1 or args.repeats < 1:
        parser.error("--devices and --repeats must be at least 1")
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from bnnkit.runs.divergence import finite_members

    members = NamedSharding(Mesh(np.array(jax.devices()), ("d",)), PartitionSpec("d"))
    # mlp_regression_small's parameters on yacht_0 (6 inputs), 8 members.
    shapes = [(8, 50), (8, 6, 50), (8, 2), (8, 50, 2)]
    leaves = [jax.device_put(np.zeros(s, np.float32), members) for s in shapes]
    settings = {
        "defaults": None,
        "xla_backend_optimization_level=0": {"xla_backend_optimization_level": 0},
        "xla_llvm_disable_expensive_passes": {"xla_llvm_disable_expensive_passes": True},
    }
    times: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(args.repeats):
        for name, options in settings.items():
            # A new function each time, so that nothing comes from JAX's caches.
            check = jax.jit(lambda *s: finite_members(list(s), 8), compiler_options=options)
            start = time.perf_counter()
            check.lower(*leaves).compile()
            times[name].append(time.perf_counter() - start)
    for name, seconds in times.items():
        print(f"{name}: median {statistics.median(seconds):.2f} s of {len(seconds)} compiles")


if __name__ == "__main__":
    main()
