"""Where ``bnnkit reference`` spends its seconds, what the command line's compilation cache
saves on a user's second run, and what its CPU devices (one per core) save.

Each run is the command a user types, in a fresh process, timed from its start to its exit:

- ``off``: ``BNNKIT_COMPILE_CACHE=off`` (every program compiled);
- ``cold``: the cache on, in an empty folder (compiled, then stored);
- ``warm``: the same command again (the programs loaded from the cache).

Each of the three runs once per number of JAX CPU devices (``--devices``; by default one, and
the command line's default, :func:`bnnkit.cpu_devices.device_count`: one per core, the chains
split over them). Per run it prints the wall time, the stages the command reports (ensemble,
chains, evaluation) and, from the chains' log, the seconds of their tuning and of their kept
draws; start-up is the time to import bnnkit and JAX and compile one trivial program. Ratios
are against ``off`` on the first device count of the same call; times depend on the machine and
on what else it runs.

    python benchmarks/compile_cache.py [--dataset yacht_0] [--repeats 1] [--devices 1 2] \\
        [--extra "--num-tuning 200"] [--out benchmarks/results/compile_cache.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bnnkit import cpu_devices


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of ``argv`` in a fresh process, and what it printed on stderr."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 3):
        raise SystemExit(f"{shlex.join(argv)} failed:\n{done.stderr[-2000:]}")
    return seconds, done.stderr


def stages(stderr: str) -> dict[str, float]:
    """The stage seconds ``bnnkit reference`` prints: ``reference in DIR (ensemble 1.0 s, ...)``."""
    found = re.search(r"reference in .*?\((.*)\)", stderr)
    if not found:
        return {}
    return {name: float(value) for name, value in re.findall(r"(\w+) ([0-9.]+) s", found.group(1))}


def chain_phases(folder: Path) -> dict[str, float]:
    """Seconds of the chains' tuning iterations and of their kept ones, from their log."""
    tuning = kept = 0.0
    for line in (folder / "chains" / "metrics.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("burn_in"):
            tuning += entry.get("seconds", 0.0)
        else:
            kept += entry.get("seconds", 0.0)
    return {"tuning": tuning, "kept": kept}


def startup(env: dict[str, str]) -> float:
    code = "import bnnkit.cli, jax.numpy as jnp; jnp.zeros(1).block_until_ready()"
    return timed([sys.executable, "-c", code], env)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="yacht_0")
    parser.add_argument("--model", default="mlp_regression_small")
    parser.add_argument("--extra", default="", help="more flags for bnnkit reference")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--devices",
        type=int,
        nargs="+",
        default=sorted({1, cpu_devices.device_count({})}),
        help="JAX CPU devices of each set of runs (default: 1 and the command line's default)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bnnkit-cache-bench-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "XLA_FLAGS"}
    base["BNNKIT_CACHE_DIR"] = str(work / "cache")
    command = [
        sys.executable, "-m", "bnnkit.cli", "reference", "--dataset", args.dataset,
        "--model", args.model, "--no-progress", *shlex.split(args.extra),
    ]  # fmt: skip
    rows = []
    for repeat in range(args.repeats):
        for devices in args.devices:
            here = {**base, cpu_devices.ENV: str(devices)}
            cache = str(work / f"jax{repeat}-{devices}")
            for label, env in (
                ("off", {**here, "BNNKIT_COMPILE_CACHE": "off"}),
                ("cold", {**here, "BNNKIT_COMPILE_CACHE": cache}),
                ("warm", {**here, "BNNKIT_COMPILE_CACHE": cache}),
            ):
                folder = work / f"{label}{repeat}-{devices}"
                seconds, stderr = timed([*command, "--dir", str(folder)], env)
                row = {
                    "run": label, "devices": devices, "repeat": repeat, "seconds": seconds,
                    **stages(stderr),
                }  # fmt: skip
                row.update(chain_phases(folder))
                rows.append(row)
                print(json.dumps(row), flush=True)
    start = startup({**base, "BNNKIT_COMPILE_CACHE": "off", cpu_devices.ENV: "1"})
    first = args.devices[0]
    off = [r["seconds"] for r in rows if r["run"] == "off" and r["devices"] == first]
    summary = {
        f"{label}, {devices} device(s)": sum(
            r["seconds"] for r in rows if r["run"] == label and r["devices"] == devices
        )
        / sum(off)
        for devices in args.devices
        for label in ("off", "cold", "warm")
    }
    print(f"start-up (import and one program): {start:.1f} s")
    print(f"wall time against the cache off on {first} device(s), same call: " + ", ".join(
        f"{k} {v:.2f}x" for k, v in summary.items()
    ))  # fmt: skip
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "command": shlex.join(command[2:]),
                    "machine": platform.processor() or platform.machine(),
                    "startup_seconds": start,
                    "runs": rows,
                    "ratio_to_off": summary,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
