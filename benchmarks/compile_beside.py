"""A cold reference with the chains' block program compiled ahead in its thread (as it runs)
and without (the first block compiles it on the main thread), taking turns.

:mod:`bnnkit.runs.blocks` compiles the block program in a thread while the main thread builds
and compiles the ensemble's programs and the chains' start; on few cores the two share them.
Per run this records the wall and CPU seconds and each program's compile seconds over 0.5 s
(JAX's compile log, in the order compiled), and whether the draws equal the first run's.

    python benchmarks/compile_beside.py [--dataset yacht_0] [--rounds 2] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from compile_options import COMPILED, cold_reference, draws

#: Run in the child: without ahead compiling (``BNNKIT_BENCH_NO_AHEAD=1``), the command line.
CHILD = """
import os, sys
# The command line's CPU devices first: once JAX has started it keeps one device, and a
# reference on one device draws other bits than on two.
from bnnkit import cpu_devices
cpu_devices.enable_for_command_line()
if os.environ.get("BNNKIT_BENCH_NO_AHEAD") == "1":
    import bnnkit.runs.blocks
    bnnkit.runs.blocks.compile_ahead = lambda *args, **kwargs: None
from bnnkit.cli import main
sys.argv = ["bnnkit", *sys.argv[1:]]
sys.exit(main())
"""


def run_once(dataset: str, model: str, ahead: bool) -> tuple[dict, dict]:
    """One cold reference; its figures and its draws."""
    folder = Path(tempfile.mkdtemp(prefix="bnnkit-compile-beside-")) / "run"
    env = {"BNNKIT_BENCH_NO_AHEAD": "0" if ahead else "1"}
    log, wall, cpu = cold_reference(CHILD, dataset, model, folder, env)
    compiles: dict[str, list[float]] = {}
    for name, seconds in COMPILED.findall(log):
        compiles.setdefault(name, []).append(round(float(seconds), 2))
    figures = {
        "ahead": ahead,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "compile_seconds": {k: v for k, v in compiles.items() if max(v) > 0.5},
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    return figures, draws(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="yacht_0")
    parser.add_argument("--model", default="mlp_regression_small")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    first: dict | None = None
    lines = []
    for round_ in range(args.rounds):
        for ahead in (True, False):
            figures, found = run_once(args.dataset, args.model, ahead)
            first = found if first is None else first
            figures["same_draws"] = first.keys() == found.keys() and all(
                np.array_equal(first[key], found[key]) for key in first
            )
            figures["round"] = round_
            lines.append(json.dumps(figures))
            print(lines[-1], flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
