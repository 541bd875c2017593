"""Is "reproducible" what a reference is for? The verdict against the ranking of approximations.

A reference exists to rank cheaper methods as a much longer reference would. On each split:

1. the **truth**: a long reference (``--long-members`` members, ``--long-samples`` kept draws
   per chain, ``bnnkit reference``'s recipe otherwise) and the cheap methods of
   ``bnnkit experiment compare-methods`` (:func:`bnnkit.experiments.compare_methods.run_setting`,
   their settings derived as there), each scored against it: the mean Wasserstein-1 per test
   point between the method's predictive and the long reference's (``wasserstein_1``), the
   test LPD difference (the method's mean test log-likelihood minus the long reference's) and
   the long reference's own half-to-half floor of both (``reference_noise_floor``). The
   methods ranked by W₁ are the truth.
2. the **candidates**: the default reference (the problem flags given, none by default) at
   each ``--budgets`` share of its tuning and kept iterations, each judged as ``bnnkit
   evaluate`` judges it (its verdict), and the same method runs ranked by their W₁ to it.
   Kendall's τ between that ranking and the truth, and whether the closest method is the same
   one: a candidate **ranks as the truth** when τ ≥ ``--tau`` and the top method matches.

The table crosses the verdict (reproducible or better, or not a reference) with "ranks as the
truth": the precision of "reproducible" is the share of the candidates it calls reproducible
or better that rank as the truth. Every folder is kept under ``--root``; a finished one is
reused, one cut off is resumed, so the study can run in pieces and ``--table-only`` re-reads
it.

    BNNKIT_DATA_DIR=... python benchmarks/reference_calibration.py --root DIR \\
        [--datasets yacht boston energy concrete wine-quality-red] [--splits 0 1 2 3 4] \\
        [--budgets 1 0.5 0.25] [--long-members 16] [--long-samples 800] \\
        [--methods SGD "Deep ensemble (K=5)" ...] [--epochs 1500] [--problem-flags "..."] \\
        [--workers 1] [--out benchmarks/results/reference_calibration] [--table-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

DATASETS = ("yacht", "boston", "energy", "concrete", "wine-quality-red")
MODEL = "mlp_regression_small"
#: The cheap methods of the comparison (labels of bnnkit.experiments.compared_methods.methods)
#: and a Laplace around the SGD run.
METHODS = (
    "SGD",
    "Deep ensemble (K=5)",
    "MultiSWAG (M=5)",
    "MFVI",
    "MC-dropout (T=20)",
    "Laplace",
)
LAPLACE = "Laplace"
#: The default reference's (tuning, kept) iterations per chain (MCLMC's, DEFAULT_BUDGET).
FULL_BUDGET = (500, 200)
OUT = Path(__file__).resolve().parent / "results" / "reference_calibration"


def problem_settings(flags: str) -> dict[str, Any]:
    """The ProblemConfig fields that ``--problem-flags`` names (``--weight-decay 1`` ...)."""
    words = shlex.split(flags)
    settings: dict[str, Any] = {}
    for i in range(0, len(words), 2):
        name = words[i].removeprefix("--").replace("-", "_")
        value = words[i + 1]
        try:
            settings[name] = float(value)
        except ValueError:
            settings[name] = value
    return settings


def kendall_tau(truth: list[float], candidate: list[float]) -> float:
    """Kendall's τ-b between two scorings of the same methods (scipy's, ties counted).

    Example:
        >>> kendall_tau([1.0, 2.0, 3.0], [0.1, 0.3, 0.2])
        0.333...
    """
    from scipy import stats

    return float(stats.kendalltau(truth, candidate).statistic)


def ranks_as_truth(truth: dict[str, float], candidate: dict[str, float], tau: float) -> dict:
    """How a candidate's ranking of the methods (by W₁ to it) compares with the truth's."""
    names = sorted(set(truth) & set(candidate))
    found = kendall_tau([truth[n] for n in names], [candidate[n] for n in names])
    top_truth = min(names, key=truth.__getitem__)
    top_candidate = min(names, key=candidate.__getitem__)
    return {
        "tau": found,
        "top_truth": top_truth,
        "top_candidate": top_candidate,
        # τ is a ratio of pair counts; scipy's float can fall an ulp short of it (0.8 as
        # 0.7999999999999999 for one swap in five).
        "ranks_as_truth": bool(round(found, 12) >= tau and top_truth == top_candidate),
    }


def judged_levels(levels: dict[str, Any]) -> dict[str, Any]:
    """What a candidate's verdict was made of, to judge it again under other thresholds (the
    calibration cases of ``tests/metrics/test_plateau_calibration.py``): each level's status
    and softness, and level 3's figures."""
    names = levels.get("order") or []
    return {
        "levels": {n: {"status": levels[n]["status"], "soft": levels[n]["soft"]} for n in names},
        "plateau": (levels.get("L3") or {}).get("figures"),
    }


def _setting(dataset: str, args: argparse.Namespace):
    from bnnkit.experiments import reference
    from bnnkit.experiments.compared_methods import SETTINGS, Setting
    from bnnkit.problem import ProblemConfig

    problem = ProblemConfig(dataset, MODEL, **problem_settings(args.problem_flags))
    long = reference.Config(members=args.long_members, num_samples=args.long_samples)
    cheap = tuple(m for m in args.methods if m != LAPLACE)
    return Setting(
        problem=problem,
        hmc=SETTINGS["yacht"].hmc,  # its step sets SGLD's η under an MCLMC reference
        batch_size=32,
        epochs=args.epochs,
        burn_in=args.epochs // 3,
        cycle=max(args.epochs // 15, 1),
        reference=long,
        methods=cheap,
    )


def run_split(dataset: str, args: argparse.Namespace) -> dict[str, Any]:
    """The truth and every candidate on one split, as one JSON-ready result, on the CPU
    devices the command line would use (before JAX starts in this process), so that the runs
    are those a user's ``bnnkit reference`` makes."""
    from bnnkit import cpu_devices

    cpu_devices.enable_for_command_line()
    from bnnkit.evaluation import evaluate
    from bnnkit.experiments import reference
    from bnnkit.experiments.compare_methods import run_setting
    from bnnkit.experiments.run_reuse import run_or_reuse
    from bnnkit.inference import laplace

    root = Path(args.root)
    setting = _setting(dataset, args)
    start = time.perf_counter()
    rows = run_setting(dataset, setting, root, progress=False)
    long_dir = root / dataset / "hmc"
    runs = {
        row["method"]: root / dataset / row["method"].split(" ")[0].lower()
        for row in rows[1:]
        if "wasserstein_1" in row
    }
    if LAPLACE in args.methods and "SGD" in runs:
        laplace_dir = root / dataset / "laplace"
        config = laplace.Config(map_run=os.fspath(runs["SGD"]))
        run_or_reuse(None, config, laplace_dir, progress=False)
        runs[LAPLACE] = laplace_dir
    long_eval = evaluate(long_dir, write=False)
    truth, methods = {}, {}
    for label, run_dir in runs.items():
        scored = evaluate(run_dir, reference=long_dir, write=False)
        truth[label] = scored["reference"]["wasserstein_1"]
        methods[label] = {
            "wasserstein_1": truth[label],
            "lpd_difference": long_eval["test"]["nll"] - scored["test"]["nll"],
            "floor": scored["reference_noise_floor"],
            "test": scored["test"],
        }
    candidates = []
    for share in args.budgets:
        tuning, kept = (max(1, round(share * n)) for n in FULL_BUDGET)
        folder = root / dataset / f"default_{share:g}"
        config = reference.Config(num_tuning=tuning, num_samples=kept)
        reference.reference_or_reuse(setting.problem, config, folder, progress=False)
        judged = evaluate(folder, write=False)
        theirs = {
            label: evaluate(run_dir, reference=folder, write=False)["reference"]["wasserstein_1"]
            for label, run_dir in runs.items()
        }
        candidates.append(
            {
                "budget": share,
                "iterations": [tuning, kept],
                "verdict": (judged.get("levels") or {}).get("verdict"),
                "failed": (judged.get("levels") or {}).get("failed"),
                **judged_levels(judged.get("levels") or {}),
                "test": judged["test"],
                "wasserstein_1": theirs,
                **ranks_as_truth(truth, theirs, args.tau),
            }
        )
    return {
        "dataset": dataset,
        "long": {
            "test": long_eval["test"],
            "verdict": (long_eval.get("levels") or {}).get("verdict"),
        },
        "methods": methods,
        "candidates": candidates,
        "seconds": time.perf_counter() - start,
    }


def table(results: list[dict[str, Any]]) -> str:
    """The study as Markdown: per split and budget the verdict, τ and "ranks as the truth";
    then the verdict crossed with it, and the precision of "reproducible"."""
    lines = [
        "| split | budget | verdict | τ | top (truth / candidate) | ranks as the truth |",
        "| --- | ---: | --- | ---: | --- | --- |",
    ]
    cross: dict[tuple[bool, bool], int] = {}
    for result in results:
        for c in result["candidates"]:
            good = c["verdict"] in ("reproducible", "certified")
            cross[good, c["ranks_as_truth"]] = cross.get((good, c["ranks_as_truth"]), 0) + 1
            same = "yes" if c["ranks_as_truth"] else "no"
            lines.append(
                f"| {result['dataset']} | {c['budget']:g} | {c['verdict']} | {c['tau']:.2f} | "
                f"{c['top_truth']} / {c['top_candidate']} | {same} |"
            )
    lines += ["", "| verdict | ranks as the truth | does not |", "| --- | ---: | ---: |"]
    for good, name in ((True, "reproducible or better"), (False, "not a reference")):
        lines.append(f"| {name} | {cross.get((good, True), 0)} | {cross.get((good, False), 0)} |")
    called = cross.get((True, True), 0) + cross.get((True, False), 0)
    precision = (
        "none called reproducible" if not called else f"{cross.get((True, True), 0) / called:.2f}"
    )
    lines.append(f'\nprecision of "reproducible or better": {precision}')
    lines += ["", "| split | method | W₁ to the long reference | floor W₁ | LPD difference |"]
    lines.append("| --- | --- | ---: | ---: | ---: |")
    for result in results:
        for label, m in sorted(result["methods"].items(), key=lambda kv: kv[1]["wasserstein_1"]):
            floor = (m["floor"] or {}).get("wasserstein_1")
            lines.append(
                f"| {result['dataset']} | {label} | {m['wasserstein_1']:.4g} | "
                f"{'—' if floor is None else format(floor, '.3g')} | {m['lpd_difference']:+.3f} |"
            )
    return "\n".join(lines) + "\n"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="where every run is kept (reused on a rerun)")
    p.add_argument("--datasets", nargs="+", default=list(DATASETS))
    p.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--budgets", nargs="+", type=float, default=[1.0, 0.5, 0.25])
    p.add_argument("--long-members", type=int, default=16)
    p.add_argument("--long-samples", type=int, default=4 * FULL_BUDGET[1])
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--epochs", type=int, default=1500, help="the cheap methods' epochs")
    p.add_argument("--tau", type=float, default=0.8, help="Kendall's τ to rank as the truth")
    p.add_argument("--problem-flags", default="", help='e.g. "--weight-decay 1"')
    p.add_argument("--workers", type=int, default=1, help="splits run at once")
    p.add_argument("--out", default=os.fspath(OUT), help="writes OUT.json and OUT.md")
    p.add_argument("--table-only", action="store_true", help="re-read OUT.json, run nothing")
    return p.parse_args()


def main() -> None:
    args = parse()
    out = Path(args.out)
    if args.table_only:
        print(table(json.loads(out.with_suffix(".json").read_text())["results"]), end="")
        return
    names = [f"{d}_{s}" for d in args.datasets for s in args.splits]
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(run_split, name, args): name for name in names}
        for future in as_completed(futures):
            results.append(future.result())
            print(f"{futures[future]} done ({results[-1]['seconds']:.0f} s)", file=sys.stderr)
    results.sort(key=lambda r: names.index(r["dataset"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "args": {k: v for k, v in vars(args).items() if k != "table_only"},
        "cpu": platform.processor() or platform.machine(),
        "load_average": os.getloadavg(),
        "median_seconds_per_split": statistics.median(r["seconds"] for r in results),
        "results": results,
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=1))
    text = table(results)
    out.with_suffix(".md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
