"""XLA CPU compiler options for a cold reference's largest programs: compile time, run time
and whether the draws stay the same bits.

Each configuration runs one cold ``bnnkit reference`` (a fresh process, its compilation
cache off) in which the programs named in the configuration (``jax.jit``'s function names,
e.g. ``block`` for the chains' block program, ``epoch_fn`` for the ensemble's epoch) are
compiled with the given ``compiler_options``; the others keep XLA's defaults. The
configurations run in turn, ``--rounds`` times, so that a loaded machine's load falls on
each alike. Per run it records the process's wall and CPU seconds, each program's compile
seconds (JAX's compile log), the median tuning and kept iteration of the chains
(``chains/metrics.jsonl``), the test NLL and the prior check's scale ratio, and whether
every kept draw (``chains/samples``) equals the first configuration's, bit for bit.

    python benchmarks/compile_options.py [--dataset yacht_0] [--rounds 2] \\
        [--config "block,epoch_fn:xla_llvm_disable_expensive_passes=true"] \\
        [--out benchmarks/results/compile_options.json]

A configuration is ``NAMES:OPTION=VALUE[;OPTION=VALUE]`` (``base`` alone: no option).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: Run in the child: ``jax.jit`` of a function named in ``BNNKIT_BENCH_JIT_NAMES`` gets the
#: options of ``BNNKIT_BENCH_JIT_OPTIONS`` (a JSON object), then the command line runs.
CHILD = """
import functools, json, os, sys
import jax
names = set(filter(None, os.environ.get("BNNKIT_BENCH_JIT_NAMES", "").split(",")))
options = json.loads(os.environ.get("BNNKIT_BENCH_JIT_OPTIONS", "{}"))
plain = jax.jit
def jit(fun=None, /, **kw):
    if fun is None:
        return functools.partial(jit, **kw)
    if getattr(fun, "__name__", None) in names and options:
        kw = {**kw, "compiler_options": {**options, **(kw.get("compiler_options") or {})}}
    return plain(fun, **kw)
jax.jit = jit
from bnnkit.cli import main
sys.argv = ["bnnkit", *sys.argv[1:]]
sys.exit(main())
"""

COMPILED = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.e-]+) sec")


def parse_config(text: str) -> tuple[str, list[str], dict]:
    """``NAMES:OPT=VALUE;...`` as (label, names, options); values are JSON or strings."""
    if text == "base":
        return text, [], {}
    names, _, rest = text.partition(":")
    options = {}
    for item in filter(None, rest.split(";")):
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return text, names.split(","), options


def draws(folder: Path) -> dict[str, np.ndarray]:
    """Every kept draw of the chains, iterations in order, by leaf."""
    out: dict[str, list] = {}
    for name in sorted(glob.glob(str(folder / "chains" / "samples" / "*.npz"))):
        with np.load(name) as stored:
            for key in stored.files:
                if stored[key].ndim > 1:
                    out.setdefault(key, []).append(stored[key])
    return {key: np.concatenate(parts, axis=1) for key, parts in out.items()}


def cold_reference(
    child: str, dataset: str, model: str, folder: Path, env: dict[str, str]
) -> tuple[str, float, float]:
    """Run ``child`` (a Python program that ends in bnnkit's command line) as one cold
    reference into ``folder``, its compilation cache off and its compilations logged, with
    ``env`` added; its log, wall seconds and CPU seconds (every core's)."""
    env = {**os.environ, "BNNKIT_COMPILE_CACHE": "off", "JAX_LOG_COMPILES": "1", **env}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    command = [sys.executable, "-c", child, "reference", "--dataset", dataset, "--model", model]
    command += ["--seed", "0", "--no-progress", "--dir", str(folder)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the reference failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return done.stderr + done.stdout, wall, cpu


def run_once(dataset: str, model: str, names: list[str], options: dict) -> dict:
    """One cold reference with the options; its figures and the folder's draws."""
    run = Path(tempfile.mkdtemp(prefix="bnnkit-compile-options-")) / "run"
    env = {
        "BNNKIT_BENCH_JIT_NAMES": ",".join(names),
        "BNNKIT_BENCH_JIT_OPTIONS": json.dumps(options),
    }
    log, wall, cpu = cold_reference(CHILD, dataset, model, run, env)
    compiles: dict[str, float] = {}
    for name, seconds in COMPILED.findall(log):
        compiles[name] = compiles.get(name, 0.0) + float(seconds)
    rows = [json.loads(line) for line in (run / "chains" / "metrics.jsonl").open()]
    tuning = [row["seconds"] for row in rows if row.get("burn_in")]
    kept = [row["seconds"] for row in rows if not row.get("burn_in")]
    evaluation = json.loads((run / "chains" / "evaluation.json").read_text())
    return {
        "wall_seconds": wall,
        # CPU seconds count the compilers' work whatever else competes for the cores.
        "cpu_seconds": cpu,
        "compile_seconds": dict(sorted(compiles.items(), key=lambda kv: -kv[1])[:8]),
        "tuning_iteration_ms": 1000 * statistics.median(tuning),
        "kept_iteration_ms": 1000 * statistics.median(kept),
        "test_nll": evaluation["test"]["nll"],
        "prior_check_scale_ratio": evaluation["prior_check"].get("scale_ratio"),
        "draws": draws(run),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="yacht_0")
    parser.add_argument("--model", default="mlp_regression_small")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--config", action="append", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    configs = [parse_config(text) for text in (args.config or ["base"])]
    if configs[0][0] != "base":
        configs.insert(0, parse_config("base"))
    reference: dict[str, np.ndarray] | None = None
    results = []
    for round_ in range(args.rounds):
        for label, names, options in configs:
            result = run_once(args.dataset, args.model, names, options)
            found = result.pop("draws")
            if reference is None:
                reference = found
            result["same_draws"] = reference.keys() == found.keys() and all(
                np.array_equal(reference[key], found[key]) for key in reference
            )
            result.update(config=label, round=round_, load_average=list(os.getloadavg()))
            results.append(result)
            print(json.dumps(result), flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"dataset": args.dataset, "model": args.model, "runs": results}
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
