"""How long the default reference's chains' program takes to compile, against the program of
its gradients alone, for this checkout and for another one in the same run.

Each compile runs in a fresh process on one CPU device with nothing cached: it builds the
default reference's chains (``bnnkit reference``'s sampler settings, 8 chains of MCLMC) on a
split's problem, lowers and compiles

- ``block``: the run driver's block program (:func:`bnnkit.runs.blocks.block_function`, what
  a reference's chains run), and
- ``gradients``: the floor, as many vmapped gradient evaluations of the same log posterior as
  one iteration makes (:data:`bnnkit.inference.mclmc.GRADIENTS_PER_STEP` × its 10 transitions)
  in one jitted ``lax.fori_loop``,

and prints the median compile seconds over ``--repeats`` processes (wall and the process's
CPU: XLA compiles one program on several threads), the ratio block ÷
gradients, and the size of the compiled block (fusions and instructions of its optimised
HLO), which unlike the seconds does not depend on the machine's load. ``--other-src`` names
another checkout's ``src`` folder (for example a worktree of an earlier commit) whose block
program is compiled the same way, taking turns with this one's.

    python benchmarks/iteration_compile.py [--dataset yacht_0 ...] [--repeats 3]
        [--other-src PATH] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: Run in the child: one program lowered and compiled; prints a JSON line.
CHILD = """
import json, re, sys, time
import jax
jax.config.update("jax_num_cpu_devices", 1)
from bnnkit.experiments.reference import Config
from bnnkit.problem import ProblemConfig
from bnnkit.runs import blocks
from bnnkit.runs.keys import INIT_STREAM, member_keys
from bnnkit.runs.prepare import built_problem, member_init, method_module
from bnnkit.runs.units import placed_batch

dataset, which = sys.argv[1], sys.argv[2]
config = Config().sampler_config()
built = built_problem(ProblemConfig(dataset, "mlp_regression_small"), config)
method = method_module(config).build(built.log_posterior, config)
loop = config.loop(built.dataset.num_train)
batch, _ = placed_batch(built, loop, "auto")
init_all = member_init(method, jax.vmap(built.init_params))
keys = member_keys(config.seed, INIT_STREAM, loop.num_members)
template = jax.eval_shape(init_all, keys, batch)
if which == "block":
    length = blocks.scan_length(method, template, loop)
    program = blocks.block_function(method, loop, config.seed, length)
    args = (template, 0, 1, batch)
else:
    from bnnkit.inference import mclmc
    steps = config.steps_per_iteration or mclmc.DEFAULT_STEPS_PER_ITERATION[False]
    count = mclmc.GRADIENTS_PER_STEP * steps
    grad = jax.vmap(jax.grad(built.log_posterior), in_axes=(0, None))
    def gradients(position, batch):
        return jax.lax.fori_loop(0, count, lambda i, p: grad(p, batch), position)
    program = jax.jit(gradients)
    args = (jax.eval_shape(lambda t: t.position, template), batch)
lowered = program.lower(*args)
start, cpu = time.perf_counter(), time.process_time()
text = lowered.compile().as_text()
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({
    "seconds": seconds,
    "cpu_seconds": cpu,
    "fusions": len(re.findall(r"^\\s*(?:ROOT )?\\S+ = \\S+ fusion\\(", text, re.M)),
    "instructions": len(re.findall(r"^\\s*(?:ROOT )?%?\\S+ = ", text, re.M)),
}))
"""


def compile_once(dataset: str, which: str, src: Path) -> dict:
    """One program compiled in a fresh process with ``src`` first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
        "BNNKIT_COMPILE_CACHE": "off",
        "JAX_ENABLE_COMPILATION_CACHE": "false",
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, dataset, which],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="+", default=["yacht_0"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--other-src", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.other_src is not None and not (args.other_src / "bnnkit").is_dir():
        parser.error(f"--other-src {args.other_src} holds no bnnkit package")
    checkouts = {"this": SRC, **({"other": args.other_src} if args.other_src else {})}
    results = {"load_average": list(os.getloadavg()), "datasets": {}}
    for dataset in args.dataset:
        runs: dict[str, list[dict]] = {}
        for _ in range(args.repeats):  # taking turns, so that a change of load hits both
            runs.setdefault("gradients", []).append(compile_once(dataset, "gradients", SRC))
            for name, src in checkouts.items():
                runs.setdefault(f"block ({name})", []).append(compile_once(dataset, "block", src))
        floor = statistics.median(r["seconds"] for r in runs["gradients"])
        rows = {}
        for name, found in runs.items():
            seconds = statistics.median(r["seconds"] for r in found)
            cpu = statistics.median(r["cpu_seconds"] for r in found)
            rows[name] = {
                "seconds": round(seconds, 2),
                "cpu_seconds": round(cpu, 2),
                "over_gradients": round(seconds / floor, 1),
                "fusions": found[0]["fusions"],
                "instructions": found[0]["instructions"],
            }
            print(
                f"{dataset} {name}: median {seconds:.2f} s ({cpu:.2f} s of CPU) of "
                f"{len(found)} compiles, "
                f"{seconds / floor:.1f}x the gradients' program; "
                f"{found[0]['fusions']} fusions, {found[0]['instructions']} instructions",
                flush=True,
            )
        results["datasets"][dataset] = rows
    results["load_average_after"] = list(os.getloadavg())
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
