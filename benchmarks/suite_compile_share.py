"""How much of the test suite's time is XLA compiling, file by file.

Runs pytest on the given test files (two processes, whole files each, as ``make test`` runs
them, with a fresh persistent compilation cache) with a plugin that listens to JAX's own
monitoring events in each test process: ``/jax/core/compile/backend_compile_duration`` (XLA
compiling a program), ``jaxpr_trace_duration`` and ``jaxpr_to_mlir_module_duration`` (tracing
and lowering it), and the persistent cache's hits. Per test it records the wall seconds and
those sums; it prints them per file, longest first, with the totals. Programs compiled by a
subprocess that a test starts (the kill tests, a command run as a user would) are not seen: the
wall time counts them, the compile sums do not.

    python benchmarks/suite_compile_share.py tests/inference/test_protocol.py ... \\
        [--out benchmarks/results/suite_compile_share.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: The plugin, written to a file of its own and loaded with ``-p``.
PLUGIN = """
import json, os, time
import jax.monitoring
import pytest

_sums = {"compile": 0.0, "trace": 0.0, "programs": 0, "cache_hits": 0}
_TRACE = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
)


def _duration(event, seconds, **_):
    if event == "/jax/core/compile/backend_compile_duration":
        _sums["compile"] += seconds
        _sums["programs"] += 1
    elif event in _TRACE:
        _sums["trace"] += seconds


def _event(event, **_):
    if event == "/jax/compilation_cache/cache_hits":
        _sums["cache_hits"] += 1


jax.monitoring.register_event_duration_secs_listener(_duration)
jax.monitoring.register_event_listener(_event)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start = dict(_sums), time.perf_counter()
    yield
    row = {"test": item.nodeid, "wall": time.perf_counter() - start}
    row.update({k: _sums[k] - before[k] for k in _sums})
    with open(os.environ["BNNKIT_BENCH_COMPILE_ROWS"], "a") as f:
        f.write(json.dumps(row) + "\\n")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="test files")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing or args.workers < 1:
        parser.error(f"not a file: {', '.join(missing)}" if missing else "--workers must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "compile_share_plugin.py").write_text(PLUGIN)
        rows_file = Path(tmp, "rows.jsonl")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")])),
            "BNNKIT_BENCH_COMPILE_ROWS": str(rows_file),
            "JAX_COMPILATION_CACHE_DIR": str(Path(tmp, "jax_cache")),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        }
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        command += ["-p", "compile_share_plugin", "-n", str(args.workers), "--dist", "loadfile"]
        code = subprocess.run([*command, *map(str, args.files)], env=env).returncode
        rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        files[row["test"].split("::")[0]].update({k: v for k, v in row.items() if k != "test"})
    total = sum(files.values(), collections.Counter())
    print("\n| file | wall s | XLA compile s | trace and lower s | programs | cache hits |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, s in sorted(files.items(), key=lambda kv: -kv[1]["wall"]):
        print(
            f"| {name} | {s['wall']:.1f} | {s['compile']:.1f} | {s['trace']:.1f} "
            f"| {s['programs']} | {s['cache_hits']} |"
        )
    share = {k: total[k] / max(total["wall"], 1e-9) for k in ("compile", "trace")}
    print(
        f"| all | {total['wall']:.1f} | {total['compile']:.1f} ({share['compile']:.0%}) "
        f"| {total['trace']:.1f} ({share['trace']:.0%}) | {total['programs']} "
        f"| {total['cache_hits']} |"
    )
    if args.out is not None:
        args.out.write_text(json.dumps({"rows": rows, "pytest_exit": code}, indent=1) + "\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
