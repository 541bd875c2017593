"""The chains' iteration with JAX's Threefry lowered as a loop (JAX's CPU default) and without
one (:mod:`bnnkit.threefry_lowering`, bnnkit's), against the iteration's gradient floor.

Each side runs in a fresh process on one CPU device with nothing cached, the two taking turns
``--repeats`` times. A process builds the default reference's chains (``bnnkit reference``'s
sampler settings, 8 chains of MCLMC; ``--chains`` per device) on a split, started where the
members' initial parameters put them, compiles the run driver's block program
(:func:`bnnkit.runs.blocks.block_function`) and runs ``--blocks`` blocks of tuning iterations;
after each block it times the floor: as many vmapped gradients of the same log posterior as
the block's iterations make (:data:`bnnkit.inference.mclmc.GRADIENTS_PER_STEP` × 10 transitions
each), in one jitted ``lax.fori_loop``. An iteration's time over its floor is taken block by
block (the same load on both) and the median printed, with the block's compile seconds (wall
and the process's CPU), its fused kernels, and a digest of the chains' state after the last
block: the two lowerings must give the same bits.

The straight side lowers the program inside :func:`bnnkit.threefry_lowering.straight`, as the
run driver does; the loop side outside it, as JAX lowers the hash on CPU.

    python benchmarks/threefry_lowering.py [--dataset yacht_0 ...] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

#: Run in the child: argv = dataset, lowering ("loop" or "straight"), chains, blocks.
CHILD = r"""
import dataclasses, hashlib, json, re, sys, time
import jax
jax.config.update("jax_num_cpu_devices", 1)
import numpy as np
import contextlib
import bnnkit.inference  # installs the rule that straight() switches
from bnnkit.experiments.reference import Config
from bnnkit.inference import mclmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import blocks
from bnnkit.runs.keys import INIT_STREAM, member_keys
from bnnkit.runs.prepare import built_problem, member_init, method_module
from bnnkit.runs.units import placed_batch
from bnnkit.threefry_lowering import straight

dataset, lowering, chains, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
config = dataclasses.replace(Config().sampler_config(), num_chains=chains)
built = built_problem(ProblemConfig(dataset, "mlp_regression_small"), config)
method = method_module(config).build(built.log_posterior, config)
loop = config.loop(built.dataset.num_train)
batch, _ = placed_batch(built, loop, "auto")
keys = member_keys(config.seed, INIT_STREAM, loop.num_members)
state = jax.jit(member_init(method, jax.vmap(built.init_params)))(keys, batch)
length = blocks.scan_length(method, state, loop)
with straight() if lowering == "straight" else contextlib.nullcontext():
    lowered = blocks.block_function(method, loop, config.seed, length).lower(state, 0, 1, batch)
start, cpu = time.perf_counter(), time.process_time()
program = lowered.compile()
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
text = program.as_text()
gradients = mclmc.GRADIENTS_PER_STEP * config.steps_per_iteration * length
grad = jax.vmap(jax.grad(built.log_posterior), in_axes=(0, None))
floor = jax.jit(lambda p, b: jax.lax.fori_loop(0, gradients, lambda i, q: grad(q, b), p))
position = method.position(state)
jax.block_until_ready(floor(position, batch))
iteration, floors = [], []
for b in range(count):
    t = time.perf_counter()
    state, _ = program(state, b * length, length, batch)
    jax.block_until_ready(state)
    iteration.append((time.perf_counter() - t) / length)
    t = time.perf_counter()
    jax.block_until_ready(floor(position, batch))
    floors.append((time.perf_counter() - t) / length)
digest = hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in jax.tree.leaves(state)))
print(json.dumps({
    "compile_seconds": seconds,
    "compile_cpu_seconds": cpu,
    "kernels": len(re.findall(r"^\s*(?:ROOT )?\S+ = \S+ fusion\(", text, re.M)),
    "loops": text.count(" while("),
    "iteration_ms": [1e3 * t for t in iteration],
    "floor_ms": [1e3 * t for t in floors],
    "over_floor": [a / b for a, b in zip(iteration, floors)],
    "digest": digest.hexdigest()[:16],
}))
"""


def run_child(dataset: str, lowering: str, chains: int, count: int) -> dict:
    """One fresh process's figures (see :data:`CHILD`)."""
    env = {**os.environ, "BNNKIT_COMPILE_CACHE": "off", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    env.pop("XLA_FLAGS", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, dataset, lowering, str(chains), str(count)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the {lowering} child failed on {dataset}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="+", default=["yacht_0"])
    parser.add_argument("--repeats", type=int, default=3, help="processes of each lowering")
    parser.add_argument("--chains", type=int, default=4, help="chains on the one device")
    parser.add_argument("--blocks", type=int, default=4, help="timed blocks of each process")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    for name in ("repeats", "chains", "blocks"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    results = {"load_average": list(os.getloadavg()), "datasets": {}}
    for dataset in args.dataset:
        runs: dict[str, list[dict]] = {"loop": [], "straight": []}
        for _ in range(args.repeats):  # taking turns, so that a change of load hits both
            for lowering, found in runs.items():
                found.append(run_child(dataset, lowering, args.chains, args.blocks))
        rows = {}
        for lowering, found in runs.items():
            ratios = [r for run in found for r in run["over_floor"]]
            rows[lowering] = {
                "compile_seconds": statistics.median(r["compile_seconds"] for r in found),
                "compile_cpu_seconds": statistics.median(r["compile_cpu_seconds"] for r in found),
                "kernels": found[0]["kernels"],
                "loops": found[0]["loops"],
                "iteration_ms": statistics.median(t for r in found for t in r["iteration_ms"]),
                "floor_ms": statistics.median(t for r in found for t in r["floor_ms"]),
                "over_floor": statistics.median(ratios),
                "digests": sorted({r["digest"] for r in found}),
            }
            row = rows[lowering]
            print(
                f"{dataset} Threefry as {lowering}: iteration {row['over_floor']:.2f}x its "
                f"gradient floor (median of {len(ratios)} blocks; {row['iteration_ms']:.2f} "
                f"against {row['floor_ms']:.2f} ms); block compiled in "
                f"{row['compile_seconds']:.2f} s ({row['compile_cpu_seconds']:.2f} s of CPU), "
                f"{row['kernels']} kernels, {row['loops']} loops; state {row['digests']}",
                flush=True,
            )
        same = rows["loop"]["digests"] == rows["straight"]["digests"]
        print(f"{dataset}: the same bits with both lowerings: {'yes' if same else 'NO'}")
        results["datasets"][dataset] = {**rows, "same_bits": same}
    results["load_average_after"] = list(os.getloadavg())
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
