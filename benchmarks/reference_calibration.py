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
   A candidate **ranks as the truth** when it orders what the truth itself resolves: Kendall's
   τ over the pairs of methods whose W₁ to the truth differ by more than the truth's own
   half-to-half floor is at least ``--tau``, and its closest method is within that floor of
   the truth's closest (:func:`ranks_as_truth`, which also gives the strict reading: τ over
   every pair and the very same closest method).

The table crosses the verdict (reproducible or better, or not a reference) with "ranks as the
truth": the precision of "reproducible" is the share of the candidates it calls reproducible
or better that rank as the truth. Every folder is kept under ``--root``; a finished one is
reused, one cut off is resumed, so the study can run in pieces and ``--table-only`` re-reads
it; ``--rejudge`` judges a stored study's verdicts and rankings again by this code, and
``--combine`` makes one study of several (a split's budgets from all of them).

    BNNKIT_DATA_DIR=... python benchmarks/reference_calibration.py --root DIR \\
        [--datasets yacht boston energy concrete wine-quality-red] [--splits 0 1 2 3 4] \\
        [--budgets 1 0.5 0.25] [--long-members 16] [--long-samples 800] \\
        [--methods SGD "Deep ensemble (K=5)" ...] [--epochs 1500] [--problem-flags "..."] \\
        [--workers 1] [--out benchmarks/results/reference_calibration] \\
        [--table-only | --rejudge | --combine A.json B.json ...]
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

import numpy as np

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


def resolved_pairs(truth: dict[str, float], floor: float) -> list[tuple[str, str]]:
    """The pairs of methods the truth ranks: those whose W₁ to it differ by more than its own
    half-to-half floor.

    Another long reference R' moves each method's distance by at most d(R, R') (the triangle
    inequality of the mean W₁ per test point), and two long references are about as far apart
    as the halves of one (the floor): a pair closer than that can come out in either order from
    a truth of the same length, so no candidate is asked to order it.

    Example:
        >>> resolved_pairs({"a": 1.0, "b": 1.05, "c": 2.0}, floor=0.1)
        [('a', 'c'), ('b', 'c')]
    """
    names = sorted(truth, key=truth.__getitem__)
    return [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if abs(truth[a] - truth[b]) > floor
    ]


def ranks_as_truth(
    truth: dict[str, float], candidate: dict[str, float], tau: float, floor: float = 0.0
) -> dict:
    """How a candidate's ranking of the methods (by W₁ to it) compares with the truth's.

    Two readings are returned. **Strict** (``strict``): Kendall's τ-b over every pair and the
    same closest method. **Resolved** (the primary ``ranks_as_truth``): only what the truth
    itself resolves (:func:`resolved_pairs`): τ over the resolved pairs, (concordant −
    discordant) / resolved, and the candidate's closest method within ``floor`` of the
    truth's closest. With ``floor`` 0 both read the same.

    Args:
        truth: each method's W₁ to the long reference.
        candidate: each method's W₁ to the candidate.
        tau: the τ a candidate needs.
        floor: the long reference's own half-to-half W₁.
    """
    names = sorted(set(truth) & set(candidate))
    strict_tau = kendall_tau([truth[n] for n in names], [candidate[n] for n in names])
    top_truth = min(names, key=truth.__getitem__)
    top_candidate = min(names, key=candidate.__getitem__)
    pairs = resolved_pairs({n: truth[n] for n in names}, floor)
    signs = [np.sign(candidate[b] - candidate[a]) for a, b in pairs]
    resolved_tau = float(np.mean(signs)) if pairs else 1.0
    tops = [n for n in names if truth[n] - truth[top_truth] <= floor]
    # τ is a ratio of pair counts; scipy's float can fall an ulp short of it (0.8 as
    # 0.7999999999999999 for one swap in five).
    return {
        "tau": resolved_tau,
        "resolved_pairs": len(pairs),
        "top_truth": top_truth,
        "top_candidate": top_candidate,
        "tops_resolved": tops,
        "ranks_as_truth": bool(round(resolved_tau, 12) >= tau and top_candidate in tops),
        "strict": {
            "tau": strict_tau,
            "ranks_as_truth": bool(round(strict_tau, 12) >= tau and top_truth == top_candidate),
        },
    }


def judged_levels(levels: dict[str, Any]) -> dict[str, Any]:
    """What a candidate's verdict was made of, to judge it again under other thresholds (the
    calibration cases of ``tests/metrics/test_plateau_calibration.py``): each level's status
    and softness, level 2's distances and level 3's figures."""
    names = levels.get("order") or []
    l2 = (levels.get("L2") or {}).get("figures") or {}
    halves = None
    if l2.get("halves") and l2.get("ensemble"):
        halves = {
            side: {k: v for k, v in l2[side].items() if k not in ("chains", "run")}
            for side in ("halves", "ensemble")
        }
    return {
        "levels": {n: {"status": levels[n]["status"], "soft": levels[n]["soft"]} for n in names},
        "halves": halves,
        "plateau": (levels.get("L3") or {}).get("figures"),
    }


def truth_floor(result: dict[str, Any]) -> float:
    """The long reference's half-to-half W₁ on a split (the same for every method)."""
    floors = [(m.get("floor") or {}).get("wasserstein_1") for m in result["methods"].values()]
    return max(f for f in floors if f is not None)


def verdict_again(candidate: dict[str, Any]) -> dict[str, Any]:
    """A candidate's levels and verdict judged again by this code's thresholds: level 2 from its
    stored distances (where stored), level 3 from its stored figures, the others as stored."""
    from bnnkit.metrics import halves, levels, plateau
    from bnnkit.metrics.findings import Finding

    found = {}
    for name, stored in candidate["levels"].items():
        if name == "L2" and candidate.get("halves"):
            found[name] = halves.judge({**candidate["halves"], "modes": []})
        elif name == "L3" and candidate.get("plateau"):
            found[name] = plateau.judge(candidate["plateau"])
        else:
            found[name] = Finding(stored["status"], ("as stored",), soft=stored["soft"])
    judged = levels.verdict(found)
    return {
        "verdict": judged.outcome,
        "failed": judged.failed,
        "levels": {n: {"status": f.status, "soft": f.soft} for n, f in found.items()},
    }


def combined(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Several studies of one problem as one: the splits of all, a split's candidates from all
    the studies that ran it (its truth and methods from the first), sorted by budget."""
    by_split: dict[str, dict[str, Any]] = {}
    for record in records:
        for result in record["results"]:
            found = by_split.setdefault(result["dataset"], {**result, "candidates": []})
            budgets = {c["budget"] for c in found["candidates"]}
            found["candidates"] += [c for c in result["candidates"] if c["budget"] not in budgets]
    for result in by_split.values():
        result["candidates"].sort(key=lambda c: -c["budget"])
    first = records[0]
    args = {**first["args"], "splits": sorted({s for r in records for s in r["args"]["splits"]})}
    args["budgets"] = sorted({b for r in records for b in r["args"]["budgets"]}, reverse=True)
    order = sorted(
        by_split, key=lambda n: (int(n.rsplit("_", 1)[1]), DATASETS.index(n.rsplit("_", 1)[0]))
    )
    return {**first, "args": args, "results": [by_split[n] for n in order]}


def stored_figures(results: list[dict[str, Any]], root: Path) -> None:
    """Each candidate recorded before its levels' figures were stored gets them from its run
    under ``root`` (evaluated again, nothing written), where that run is there."""
    from bnnkit.evaluation import evaluate

    for result in results:
        for c in result["candidates"]:
            folder = root / result["dataset"] / f"default_{c['budget']:g}"
            if c.get("halves") or not (folder / "reference.json").is_file():
                continue
            judged = evaluate(folder, write=False)
            if judged["test"] != c["test"]:
                raise SystemExit(f"{folder}: not the run recorded (its test figures differ)")
            c.update(judged_levels(judged.get("levels") or {}))


def rejudge(results: list[dict[str, Any]], tau: float) -> list[dict[str, Any]]:
    """Every candidate judged again from what is stored: its verdict (:func:`verdict_again`,
    where its levels are stored) and its ranking (:func:`ranks_as_truth`), so a recorded study
    reads by this code's rules."""
    for result in results:
        truth = {label: m["wasserstein_1"] for label, m in result["methods"].items()}
        floor = truth_floor(result)
        for c in result["candidates"]:
            if c.get("levels"):
                c.update(verdict_again(c))
            c.update(ranks_as_truth(truth, c["wasserstein_1"], tau, floor))
    return results


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
            }
        )
    found = {
        "dataset": dataset,
        "long": {
            "test": long_eval["test"],
            "verdict": (long_eval.get("levels") or {}).get("verdict"),
        },
        "methods": methods,
        "candidates": candidates,
        "seconds": time.perf_counter() - start,
    }
    return rejudge([found], args.tau)[0]


def _cross(results: list[dict[str, Any]], ranks: Any) -> list[str]:
    """The verdict crossed with a reading of "ranks as the truth", and the precision of
    "reproducible or better"."""
    cross: dict[tuple[bool, bool], int] = {}
    for result in results:
        for c in result["candidates"]:
            key = (c["verdict"] in ("reproducible", "certified"), bool(ranks(c)))
            cross[key] = cross.get(key, 0) + 1
    lines = ["| verdict | ranks as the truth | does not |", "| --- | ---: | ---: |"]
    for good, name in ((True, "reproducible or better"), (False, "not a reference")):
        lines.append(f"| {name} | {cross.get((good, True), 0)} | {cross.get((good, False), 0)} |")
    called = cross.get((True, True), 0) + cross.get((True, False), 0)
    precision = (
        "none called reproducible" if not called else f"{cross.get((True, True), 0) / called:.2f}"
    )
    return [*lines, "", f'precision of "reproducible or better": {precision}']


def table(results: list[dict[str, Any]]) -> str:
    """The study as Markdown: per split and budget the verdict, τ over the pairs the truth
    resolves (and over every pair), and "ranks as the truth"; then the verdict crossed with it,
    resolved and strict, and the precision of "reproducible"."""
    lines = [
        "| split | budget | verdict | τ (resolved pairs) | τ (all) | top (truth / candidate) "
        "| ranks as the truth | strictly |",
        "| --- | ---: | --- | ---: | ---: | --- | --- | --- |",
    ]
    for result in results:
        for c in result["candidates"]:
            strict = c.get("strict") or {}
            lines.append(
                f"| {result['dataset']} | {c['budget']:g} | {c['verdict']} | "
                f"{c['tau']:.2f} ({c.get('resolved_pairs', '?')}) | "
                f"{strict.get('tau', float('nan')):.2f} | {c['top_truth']} / {c['top_candidate']} "
                f"| {'yes' if c['ranks_as_truth'] else 'no'} | "
                f"{'yes' if strict.get('ranks_as_truth') else 'no'} |"
            )
    lines += ["", "Ranking what the truth resolves (its pairs further apart than its floor):", ""]
    lines += _cross(results, lambda c: c["ranks_as_truth"])
    lines += ["", "Strictly (every pair, the same closest method):", ""]
    lines += _cross(results, lambda c: (c.get("strict") or {}).get("ranks_as_truth"))
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
    p.add_argument(
        "--combine",
        nargs="+",
        type=Path,
        default=None,
        help="write OUT.json and .md from these studies' JSON files, run nothing",
    )
    p.add_argument(
        "--rejudge",
        action="store_true",
        help="re-read OUT.json, judge its verdicts and rankings again by this code (the levels' "
        "figures of runs under --root where not recorded), rewrite OUT.json and .md",
    )
    return p.parse_args()


def main() -> None:
    args = parse()
    out = Path(args.out)
    if args.combine:
        record = combined([json.loads(Path(f).read_text()) for f in args.combine])
        out.with_suffix(".json").write_text(json.dumps(record, indent=1))
        out.with_suffix(".md").write_text(table(record["results"]))
        print(table(record["results"]), end="")
        return
    if args.table_only or args.rejudge:
        record = json.loads(out.with_suffix(".json").read_text())
        if args.rejudge:
            stored_figures(record["results"], Path(args.root))
            rejudge(record["results"], record["args"]["tau"])
            out.with_suffix(".json").write_text(json.dumps(record, indent=1))
            out.with_suffix(".md").write_text(table(record["results"]))
        print(table(record["results"]), end="")
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
        "args": {
            k: v for k, v in vars(args).items() if k not in ("table_only", "rejudge", "combine")
        },
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
