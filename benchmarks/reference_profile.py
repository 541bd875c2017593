"""Where one cold ``bnnkit reference`` spends its wall time, against its gradient floor.

One reference runs as a user's first one on a dataset: the command line in a fresh process,
its compilation cache off (``BNNKIT_COMPILE_CACHE=off``, no JAX persistent cache), on the
command line's CPU devices (``--devices``). Its wall time, from the process's start to its
exit, is split into phases that add up to it:

- ``start``: Python, JAX and bnnkit imported;
- ``compile``: XLA's compilations in the main thread (the union of JAX's backend-compile
  event spans, recorded by a :func:`jax.monitoring.register_event_time_span_listener` in the
  process); a compilation in another thread (a block program compiled ahead,
  :mod:`bnnkit.runs.blocks`) runs beside the main thread's work, so it is no phase: it is
  reported apart (``compile_beside``), and its seconds that the main thread waited for it
  fall in the stage that waited;
- ``trace and lower``: tracing and lowering to MLIR outside those compilations;
- ``ensemble`` and ``evaluation``: the stages' seconds less the compilation within them;
- ``tuning iterations`` and ``kept iterations``: the chains' log (``chains/metrics.jsonl``,
  a line per iteration with its ``seconds``), the first iteration of each counted at its
  phase's median (its excess is the compilation of the iteration's program);
- ``writes of kept draws``: the log lines' ``write_seconds`` where they carry it, else
  estimated as (median kept iteration − median tuning iteration) × kept iterations, taken out
  of the kept iterations;
- ``chains' set-up and checkpoints``: the chains' stage less its compilation and iterations;
- ``the rest``: what remains (the problem's build, the folder's checks, the process's exit).

In the same call, once the reference has finished, the **gradient floor**: one jitted
``lax.fori_loop`` of as many vmapped gradient evaluations of the same log posterior as one
iteration makes (:func:`gradients_per_iteration`: MCLMC's ``GRADIENTS_PER_STEP`` × its
transitions per iteration, of :mod:`bnnkit.inference.mclmc`; an HMC or NUTS iteration's
longest trajectory in leapfrog steps, at the median over the tuning or the kept iterations),
for as many chains, every chain at the ensemble's first member, on the full training set,
over the devices split as the chains were. Its compilation is excluded: the median of
``--repeats`` calls after one to compile.

It prints the phases and their shares of the wall time, the largest compilations, and the
ratios: a tuning and a kept iteration ÷ their floors, kept iteration ÷ tuning iteration,
compile ÷ wall. Times depend on the machine and on what else it runs (the CPU model and the
load average are printed and recorded); read the shares and ratios of one run together.
``--sampler hmc`` or ``nuts`` in ``--extra`` profiles those chains the same way.

    python benchmarks/reference_profile.py [--dataset yacht_0 concrete_0] \\
        [--model mlp_regression_small] [--devices 2] [--seed 0] \\
        [--extra "--num-tuning 200"] [--repeats 20] \\
        [--out benchmarks/results/reference_profile.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bnnkit import cpu_devices

#: JAX's monitoring events of a compilation (``jax._src.dispatch``): the backend's compile,
#: and tracing and lowering before it.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRACE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
)
#: The phases in the order of the table.
PHASES = (
    "start",
    "compile",
    "trace and lower",
    "ensemble",
    "tuning iterations",
    "kept iterations",
    "writes of kept draws",
    "chains' set-up and checkpoints",
    "evaluation",
    "the rest",
)

#: Run in the reference's own process: the compilation events and each stage's span, written
#: as JSON to argv[2] when the command line returns. ``bnnkit.runs.run`` (each stage's run)
#: and ``reference`` are wrapped to record when they start and end.
CHILD = r"""
import json, sys, time
launched, out, argv = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
import jax.monitoring
import threading
events = []
jax.monitoring.register_event_time_span_listener(
    lambda event, start, end, **kw: events.append(
        [event, start, end, str(kw.get("fun_name")), threading.current_thread().name]
    )
)
from pathlib import Path
import bnnkit.cpu_devices
bnnkit.cpu_devices.enable_for_command_line()  # as the command line does, before JAX starts
import bnnkit.cli, bnnkit.runs
import bnnkit.experiments.reference as recipe
ready = time.time()
spans, seconds = {}, {}
run, reference = bnnkit.runs.run, recipe.reference

def timed_run(built, config, run_dir, **kwargs):
    t0 = time.time()
    try:
        return run(built, config, run_dir, **kwargs)
    finally:
        spans[Path(run_dir).name] = [t0, time.time()]

def timed_reference(*args, **kwargs):
    result = reference(*args, **kwargs)
    seconds.update(result.seconds)
    if "evaluate" in result.seconds:
        spans["evaluate"] = [time.time() - result.seconds["evaluate"], time.time()]
    return result

bnnkit.runs.run, recipe.reference = timed_run, timed_reference
code = bnnkit.cli.main(argv)
Path(out).write_text(json.dumps(
    {"launched": launched, "ready": ready, "spans": spans, "seconds": seconds,
     "events": events, "exit_code": code}
))
sys.exit(code)
"""


def union_seconds(
    intervals: list[tuple[float, float]], within: tuple[float, float] | None = None
) -> float:
    """Seconds covered by ``intervals`` (overlaps counted once), clipped to ``within``.

    Nested spans (a program traced while another is) count once.

    Example:
        >>> union_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)])
        4.0
        >>> union_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)], within=(2.5, 5.5))
        1.0
    """
    if within is not None:
        intervals = [(max(a, within[0]), min(b, within[1])) for a, b in intervals]
    total, end = 0.0, float("-inf")
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def iteration_times(log: list[dict]) -> dict:
    """The chains' tuning and kept iterations from their log lines: counts, medians, and the
    phases' seconds with each phase's first iteration counted at its median (its excess is
    the compilation of the iteration's program); writes of the kept draws from
    ``write_seconds`` where the lines carry it, else estimated.

    Example:
        >>> log = [{"burn_in": True, "seconds": s} for s in (9.0, 1.0, 1.0, 1.0)]
        >>> log += [{"burn_in": False, "seconds": s} for s in (2.0, 1.5, 1.5)]
        >>> t = iteration_times(log)
        >>> t["tuning"], t["kept"], t["writes"], t["writes_estimated"]
        (4.0, 3.0, 1.5, True)
    """
    estimated = not any("write_seconds" in e for e in log)
    phases = {}
    for name, lines in (
        ("tuning", [e for e in log if e.get("burn_in")]),
        ("kept", [e for e in log if not e.get("burn_in")]),
    ):
        seconds = [float(e.get("seconds", 0.0)) for e in lines]
        writes = [float(e.get("write_seconds", 0.0)) for e in lines]
        # The iterations' own work: a logged write is taken out of its line before the first
        # line is counted at the median.
        work = [s - w for s, w in zip(seconds, writes, strict=True)]
        median = statistics.median(work) if work else 0.0
        phases[name] = {
            "count": len(seconds),
            "median": statistics.median(seconds) if seconds else 0.0,
            "seconds": sum(work) - (work[0] - median if work else 0.0),
            "first": seconds[0] if seconds else 0.0,
            "writes": sum(writes),
        }
    tuning, kept = phases["tuning"], phases["kept"]
    tuning_seconds, kept_seconds = tuning["seconds"], kept["seconds"]
    writes = tuning["writes"] + kept["writes"]
    if estimated:
        # What a kept iteration costs beyond a tuning one is the writing of its draws.
        writes = max(0.0, (kept["median"] - tuning["median"]) * kept["count"])
        kept_seconds -= writes
    return {
        "tuning": round(tuning_seconds, 9),
        "kept": round(kept_seconds, 9),
        "writes": round(writes, 9),
        "writes_estimated": estimated,
        "num_tuning": tuning["count"],
        "num_kept": kept["count"],
        "median_tuning": tuning["median"],
        "median_kept": kept["median"],
        "first_tuning": tuning["first"],
        "first_kept": kept["first"],
    }


def phase_table(wall: float, child: dict, iterations: dict) -> dict[str, float]:
    """The wall time split into :data:`PHASES` (seconds; they add up to ``wall``).

    Args:
        wall: seconds from the process's start to its exit.
        child: what :data:`CHILD` recorded: ``launched`` and ``ready`` (epoch seconds),
            ``spans`` of the stages (``ensemble``, ``chains``, ``evaluate``: epoch start and
            end) and ``events`` ``[event, start, end, name, thread]`` (a thread other than
            ``MainThread`` compiles beside the main thread; no thread: the main one).
        iterations: :func:`iteration_times` of the chains' log.

    Example:
        >>> child = {"launched": 0.0, "ready": 2.0, "events": [
        ...     ["/jax/core/compile/backend_compile_duration", 3.0, 4.0, "a"],
        ...     ["/jax/core/compile/jaxpr_trace_duration", 2.5, 3.5, "a"],
        ...     ["/jax/core/compile/backend_compile_duration", 6.0, 7.0, "b"]],
        ...     "spans": {"ensemble": [2.5, 5.0], "chains": [5.0, 10.0], "evaluate": [10.0, 11.0]}}
        >>> iterations = {"tuning": 1.5, "kept": 1.0, "writes": 0.5}
        >>> table = phase_table(12.0, child, iterations)
        >>> [table[p] for p in PHASES]
        [2.0, 2.0, 0.5, 1.0, 1.5, 1.0, 0.5, 1.0, 1.0, 1.5]
    """
    spans = child["spans"]
    main = [e for e in child["events"] if (e[4] if len(e) > 4 else "MainThread") == "MainThread"]
    compiles = [(a, b) for event, a, b, *_ in main if event == COMPILE_EVENT]
    pipeline = [(a, b) for event, a, b, *_ in main if event in (COMPILE_EVENT, *TRACE_EVENTS)]

    def net(stage: str) -> float:
        if stage not in spans:
            return 0.0
        a, b = spans[stage]
        return (b - a) - union_seconds(pipeline, within=(a, b))

    table = {
        "start": child["ready"] - child["launched"],
        "compile": union_seconds(compiles),
        "trace and lower": union_seconds(pipeline) - union_seconds(compiles),
        "ensemble": net("ensemble"),
        "tuning iterations": iterations["tuning"],
        "kept iterations": iterations["kept"],
        "writes of kept draws": iterations["writes"],
        "chains' set-up and checkpoints": net("chains")
        - iterations["tuning"]
        - iterations["kept"]
        - iterations["writes"],
        "evaluation": net("evaluate"),
    }
    table["the rest"] = wall - sum(table.values())
    return table


def compile_beside(child: dict) -> float:
    """Seconds of compilation in threads other than the main one (the union of their spans),
    which ran beside the main thread's work.

    Example:
        >>> compile_beside({"events": [
        ...     ["/jax/core/compile/backend_compile_duration", 1.0, 4.0, "a", "worker"],
        ...     ["/jax/core/compile/backend_compile_duration", 2.0, 3.0, "b", "MainThread"]]})
        3.0
    """
    spans = [
        (e[1], e[2])
        for e in child["events"]
        if e[0] == COMPILE_EVENT and len(e) > 4 and e[4] != "MainThread"
    ]
    return union_seconds(spans)


def largest_compilations(child: dict, count: int = 5) -> list[tuple[str, float]]:
    """The ``count`` longest backend compilations: (program, seconds)."""
    found = [(e[3], e[2] - e[1]) for e in child["events"] if e[0] == COMPILE_EVENT]
    return sorted(found, key=lambda item: -item[1])[:count]


def cpu_model() -> str:
    """The CPU's model name as ``lscpu`` says it (the platform's processor otherwise)."""
    try:
        listed = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        listed = ""
    for line in listed.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def run_reference(command: list[str], devices: int, work: Path) -> tuple[float, dict]:
    """Wall seconds of the reference ``command`` (``bnnkit`` arguments) in a fresh process,
    cold, on ``devices`` CPU devices, and what :data:`CHILD` recorded in it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "XLA_FLAGS"}
    env.update({cpu_devices.ENV: str(devices), "BNNKIT_COMPILE_CACHE": "off"})
    record = work / "profile.json"
    launched = time.time()
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, repr(launched), str(record), *command],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if done.returncode == 2:  # bad input: bnnkit's own line, which names the value
        print((done.stderr.strip().splitlines() or ["bad input"])[-1], file=sys.stderr)
        raise SystemExit(2)
    if done.returncode != 0:
        raise SystemExit(f"bnnkit {shlex.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall, json.loads(record.read_text())


def gradients_per_iteration(method: str, settings: dict, log: list[dict]) -> dict[str, float]:
    """Gradient evaluations of one iteration of each chain, in the tuning and in the kept
    iterations: unadjusted MCLMC's ``GRADIENTS_PER_STEP`` × its transitions per iteration; an
    HMC or NUTS iteration's longest trajectory among the chains (a leapfrog step is one
    gradient, and vmapped chains wait for the longest), at the median over the phase.

    Example:
        >>> gradients_per_iteration("mclmc", {"steps_per_iteration": 10}, [])
        {'tuning': 20, 'kept': 20}
        >>> log = [{"burn_in": True, "num_leapfrog": n} for n in ([3, 7], [5, 9], [1, 2])]
        >>> gradients_per_iteration("nuts", {}, [*log, {"burn_in": False, "num_leapfrog": [4, 3]}])
        {'tuning': 7, 'kept': 4}
    """
    if method == "mclmc":
        from bnnkit.inference import mclmc

        if settings.get("adjusted"):
            raise SystemExit("the floor counts unadjusted MCLMC's gradients; this ran adjusted")
        steps = settings.get("steps_per_iteration") or mclmc.DEFAULT_STEPS_PER_ITERATION[False]
        return {
            "tuning": mclmc.GRADIENTS_PER_STEP * steps,
            "kept": mclmc.GRADIENTS_PER_STEP * steps,
        }

    def longest(line: dict) -> float:
        steps = line["num_leapfrog"]
        return max(steps) if isinstance(steps, list) else steps

    return {
        name: statistics.median(longest(e) for e in lines) if lines else 0
        for name, lines in (
            ("tuning", [e for e in log if e.get("burn_in")]),
            ("kept", [e for e in log if not e.get("burn_in")]),
        )
    }


def gradient_floor(folder: Path, record: dict, gradients: dict[str, float], repeats: int) -> dict:
    """Seconds of a tuning and of a kept iteration's ``gradients`` (vmapped, every chain) in
    one jitted loop, at the ensemble's first member, placed over the devices as the reference's
    chains (their ``run.json``, ``record``) were."""
    # Imported here, once main has set the devices: importing a sampler starts JAX.
    import jax

    from bnnkit import distributed, problem
    from bnnkit.experiments.reference import CHAINS_DIR, ENSEMBLE_DIR
    from bnnkit.runs import sharding
    from bnnkit.runs.initial import positions_from_run
    from bnnkit.runs.stored import recorded_problem
    from hmc_overhead import median_time

    num_chains = int(record["loop"]["num_members"])
    where = repr(str(folder / CHAINS_DIR / "run.json"))
    built = problem.build(recorded_problem(record, where))
    params = positions_from_run(str(folder / ENSEMBLE_DIR), built, num_chains, member=0)
    batch = built.train_batch()
    split = (record.get(sharding.RECORD_KEY) or {}).get("split", "none")
    placements = sharding.placement(split, num_chains, built.dataset.num_train)
    if placements is not None:
        params = distributed.place(params, placements[0])
        batch = distributed.place(batch, placements[1])
    value_and_grad = jax.vmap(jax.value_and_grad(built.log_posterior), in_axes=(0, None))

    @jax.jit
    def iteration(params, batch, count):
        def body(_, carry):
            _, g = value_and_grad(carry, batch)
            # A step too small to move, so that no gradient can be hoisted out of the loop.
            return jax.tree.map(lambda p, gi: p + 1e-12 * gi, carry, g)

        return jax.lax.fori_loop(0, count, body, params)

    counts = {phase: max(1, round(count)) for phase, count in gradients.items()}
    seconds = {
        count: median_time(lambda count=count: iteration(params, batch, count), repeats)
        for count in set(counts.values())
    }
    return {
        "seconds": seconds[counts["tuning"]],
        "kept_seconds": seconds[counts["kept"]],
        "gradients_per_chain": counts["tuning"],
        "chains": num_chains,
        "devices": int(jax.device_count()),
        "split": split,
    }


def ratios(table: dict[str, float], wall: float, iterations: dict, floor: dict) -> dict:
    """A tuning and a kept iteration ÷ their floors, kept ÷ tuning iteration, compile ÷ wall,
    and each phase's share of the wall time."""
    return {
        "tuning_iteration_over_floor": iterations["median_tuning"] / floor["seconds"],
        "kept_iteration_over_floor": iterations["median_kept"] / floor["kept_seconds"],
        "kept_over_tuning_iteration": iterations["median_kept"] / iterations["median_tuning"],
        "compile_over_wall": table["compile"] / wall,
        "shares": {phase: seconds / wall for phase, seconds in table.items()},
    }


def printed(result: dict) -> str:
    """The result as the markdown table and lines the benchmark prints."""
    it, floor, r = result["iterations"], result["floor"], result["ratios"]
    writes = "writes of kept draws" + (" (estimated)" if it["writes_estimated"] else "")
    lines = [
        f"{result['cpu']}; load average {result['load_before']} before, "
        f"{result['load_after']} after; {floor['devices']} CPU device(s)",
        f"bnnkit {result['command']}: {result['wall']:.1f} s wall",
        "",
        "| phase | seconds | share of the wall time |",
        "|---|---:|---:|",
        *(
            f"| {writes if phase == 'writes of kept draws' else phase} | {seconds:.1f} "
            f"| {100 * r['shares'][phase]:.0f} % |"
            for phase, seconds in result["phases"].items()
        ),
        "",
        f"chains: {it['num_tuning']} tuning iterations, median {1e3 * it['median_tuning']:.1f} ms "
        f"(first {it['first_tuning']:.1f} s); {it['num_kept']} kept, median "
        f"{1e3 * it['median_kept']:.1f} ms (first {it['first_kept']:.2f} s)",
        f"gradient floor of a tuning iteration ({floor['chains']} chains x "
        f"{floor['gradients_per_chain']} gradients, split {floor['split']}): "
        f"{1e3 * floor['seconds']:.2f} ms; gradients per iteration of a chain: "
        f"{result['gradients_per_iteration']['tuning']:g} tuning, "
        f"{result['gradients_per_iteration']['kept']:g} kept",
        f"tuning iteration / floor {r['tuning_iteration_over_floor']:.1f}x; kept iteration / "
        f"floor {r['kept_iteration_over_floor']:.1f}x; kept iteration / tuning iteration "
        f"{r['kept_over_tuning_iteration']:.2f}x; compile / wall "
        f"{100 * r['compile_over_wall']:.0f} %",
        f"{result['compilations']} compilations; the largest: "
        + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result["largest"])
        + f"; {result.get('compile_beside', 0.0):.1f} s compiled beside the main thread",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", nargs="+", default=["yacht_0"], help="dataset splits, profiled in turn"
    )
    parser.add_argument("--model", default="mlp_regression_small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--extra", default="", help="more flags for bnnkit reference")
    devices = cpu_devices.device_count({})  # the command line's: one per core, at most 8
    parser.add_argument("--devices", type=int, default=devices, help="JAX CPU devices")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls of the floor")
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    args = parser.parse_args()
    if args.devices < 1 or args.repeats < 1:
        parser.error("--devices and --repeats must be at least 1")
    # The floor runs in this process, on the reference's devices.
    cpu_devices.enable_for_command_line({**os.environ, cpu_devices.ENV: str(args.devices)})
    results = []
    for dataset in args.dataset:  # one after the other, each in a fresh process
        results.append(profile(dataset, args))
        print(printed(results[-1]) + "\n", flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"runs": results}, indent=2) + "\n")


def profile(dataset: str, args: argparse.Namespace) -> dict:
    """One cold reference on ``dataset`` and its gradient floor, as the result's JSON."""
    from bnnkit.experiments.reference import CHAINS_DIR  # JAX starts: after the devices
    from bnnkit.runs.directory import RunDir

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bnnkit-profile-") as tmp:
        work = Path(tmp)
        folder = work / "reference"
        command = [
            "reference", "--dataset", dataset, "--model", args.model,
            "--seed", str(args.seed), "--no-progress", *shlex.split(args.extra),
        ]  # fmt: skip
        wall, child = run_reference([*command, "--dir", str(folder)], args.devices, work)
        missing = {"ensemble", CHAINS_DIR} - set(child["spans"])
        if missing:  # the stages are timed by wrapping bnnkit.runs.run
            raise SystemExit(f"no span recorded for the stage(s) {sorted(missing)}")
        chains = RunDir(folder / CHAINS_DIR)
        record, log = chains.read_record(), chains.read_log()
        iterations = iteration_times(log)
        gradients = gradients_per_iteration(record["method"], record["method_config"], log)
        floor = gradient_floor(folder, record, gradients, args.repeats)
    phases = phase_table(wall, child, iterations)
    return {
        "command": shlex.join(command),
        "devices": args.devices,
        "cpu": cpu_model(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "wall": wall,
        "stage_seconds": child["seconds"],
        "phases": phases,
        "iterations": iterations,
        "gradients_per_iteration": gradients,
        "floor": floor,
        "ratios": ratios(phases, wall, iterations, floor),
        "compilations": sum(1 for e in child["events"] if e[0] == COMPILE_EVENT),
        "compile_beside": compile_beside(child),
        "largest": largest_compilations(child),
    }


if __name__ == "__main__":
    main()
