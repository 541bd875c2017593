"""The UCI regression benchmark: bnnkit's reference posterior and its deep ensemble against the
published tables.

For every dataset and standard split (Hernández-Lobato & Adams 2015: 20 random 90 / 10 splits,
5 for protein) it makes ``bnnkit reference`` at its defaults with bnnkit's UCI model
(``mlp_regression_small``: bnn_hmc's heteroscedastic one-hidden-layer 50-unit MLP, a Gaussian
prior of precision 1, T = 1): a deep ensemble, then unadjusted MCLMC from every member, tuned
per chain (:mod:`bnnkit.experiments.reference`). Two rows per split come out of it:

- ``reference``: the pooled model average of the chains, and its verdict
  (within each chain, between chains, and the number of distinct modes);
- ``ensemble``: the same reference's deep ensemble on its own (its first stage).

Each split is scored by test RMSE and test log-likelihood per point in the original units of
the target (the tables' convention). The table gives mean ± standard error over the splits run,
beside the published figures of PBP and MC dropout (Gal & Ghahramani 2016, Table 1) and deep
ensembles (Lakshminarayanan, Pritzel & Blundell 2017, Table 1), printed as those papers give
them, the verdict counts and the wall time per split.

Finished splits are not recomputed (each writes ``ROOT/DATASET/split_S/result.json`` last, with
the recipe's settings), so a killed benchmark continues where it stopped (the reference itself
resumes bit for bit), and a split whose settings changed runs again; ``--workers`` runs splits
in parallel processes, one CPU thread each. ``--table-only`` runs nothing and tables the
finished splits.

Usage::

    python experiments/uci_benchmark.py --root /tmp/uci --out experiments/results/uci \\
        [--datasets yacht boston] [--splits 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

#: name -> number of standard splits.
DATASETS = {
    "yacht": 20,
    "boston": 20,
    "energy": 20,
    "concrete": 20,
    "wine-quality-red": 20,
    "kin8nm": 20,
    "naval": 20,
    "power-plant": 20,
    "protein": 5,
}
SMALL = ("yacht", "boston", "energy", "concrete", "wine-quality-red")

#: Published test RMSE and test log-likelihood, as printed (mean ± the papers' ±). PBP and MC
#: dropout: Gal & Ghahramani, "Dropout as a Bayesian Approximation", ICML 2016, Table 1 (the
#: same figures reappear in Lakshminarayanan et al.'s Table 1). Deep ensembles: Lakshminarayanan,
#: Pritzel & Blundell, "Simple and Scalable Predictive Uncertainty Estimation using Deep
#: Ensembles", NeurIPS 2017, Table 1 (which reports NLL; its log-likelihood is the negation).
PUBLISHED = {
    "boston": {
        "PBP": ((3.01, 0.18), (-2.57, 0.09)),
        "MC dropout": ((2.97, 0.85), (-2.46, 0.25)),
        "Deep ensembles": ((3.28, 1.00), (-2.41, 0.25)),
    },
    "concrete": {
        "PBP": ((5.67, 0.09), (-3.16, 0.02)),
        "MC dropout": ((5.23, 0.53), (-3.04, 0.09)),
        "Deep ensembles": ((6.03, 0.58), (-3.06, 0.18)),
    },
    "energy": {
        "PBP": ((1.80, 0.05), (-2.04, 0.02)),
        "MC dropout": ((1.66, 0.19), (-1.99, 0.09)),
        "Deep ensembles": ((2.09, 0.29), (-1.38, 0.22)),
    },
    "kin8nm": {
        "PBP": ((0.10, 0.00), (0.90, 0.01)),
        "MC dropout": ((0.10, 0.00), (0.95, 0.03)),
        "Deep ensembles": ((0.09, 0.00), (1.20, 0.02)),
    },
    "naval": {
        "PBP": ((0.01, 0.00), (3.73, 0.01)),
        "MC dropout": ((0.01, 0.00), (3.80, 0.05)),
        "Deep ensembles": ((0.00, 0.00), (5.63, 0.05)),
    },
    "power-plant": {
        "PBP": ((4.12, 0.03), (-2.84, 0.01)),
        "MC dropout": ((4.02, 0.18), (-2.80, 0.05)),
        "Deep ensembles": ((4.11, 0.17), (-2.79, 0.04)),
    },
    "protein": {
        "PBP": ((4.73, 0.01), (-2.97, 0.00)),
        "MC dropout": ((4.36, 0.04), (-2.89, 0.01)),
        "Deep ensembles": ((4.71, 0.06), (-2.83, 0.02)),
    },
    "wine-quality-red": {
        "PBP": ((0.64, 0.01), (-0.97, 0.01)),
        "MC dropout": ((0.62, 0.04), (-0.93, 0.06)),
        "Deep ensembles": ((0.64, 0.04), (-0.94, 0.12)),
    },
    "yacht": {
        "PBP": ((1.02, 0.05), (-1.63, 0.02)),
        "MC dropout": ((1.11, 0.38), (-1.55, 0.12)),
        "Deep ensembles": ((1.58, 0.48), (-1.18, 0.21)),
    },
}

MODEL = "mlp_regression_small"
ROWS = ("reference", "ensemble")


def recipe():
    """The reference's settings: ``bnnkit reference``'s defaults."""
    from bnnkit.experiments.reference import Config

    return Config()


def split_result(path: Path) -> dict | None:
    """A finished split's stored result made with today's settings, else ``None``."""
    if not path.exists():
        return None
    stored = json.loads(path.read_text())
    settings = json.loads(json.dumps(dataclasses.asdict(recipe())))
    return stored if stored.get("config") == settings else None


def run_split(dataset: str, split: int, root: str) -> dict:
    """The reference on one split (resumed where it stopped), scored with its ensemble."""
    from bnnkit.evaluation import evaluate
    from bnnkit.experiments.reference import ENSEMBLE_DIR, REFERENCE_FILE, reference
    from bnnkit.problem import ProblemConfig

    split_dir = Path(root) / dataset / f"split_{split}"
    done = split_dir / "result.json"
    stored = split_result(done)
    if stored is not None:
        return stored
    config = recipe()
    folder = split_dir / "reference"
    resume = (folder / REFERENCE_FILE).is_file()
    try:
        made = reference(
            ProblemConfig(f"{dataset}_{split}", MODEL),
            config,
            folder,
            resume=resume,
            overwrite=not resume and folder.exists(),
            progress=False,
        )
    except Exception as err:  # other settings stored: start afresh
        if not resume:
            raise
        print(f"{dataset} split {split}: not resumed ({err}); made again", flush=True)
        made = reference(
            ProblemConfig(f"{dataset}_{split}", MODEL),
            config,
            folder,
            overwrite=True,
            progress=False,
        )
    scores = made.evaluation
    levels = scores.get("levels", {})
    ensemble = evaluate(folder / ENSEMBLE_DIR)
    result = {
        "dataset": dataset,
        "split": split,
        "config": dataclasses.asdict(config),
        "num_train": scores.get("num_train"),
        "reference": {
            "rmse": scores["test"]["rmse"],
            "ll": -scores["test"]["nll"],
            "seconds": made.seconds["chains"] + made.seconds["evaluate"],
            "within_chain": _within_holds(levels),
            "modes": _modes(levels),
            "reference_level": levels.get("verdict"),
            "levels_failed": levels.get("failed"),
            "chains": scores["num_chains"],
            "samples_per_chain": scores["num_samples_per_chain"],
        },
        "ensemble": {
            "rmse": ensemble["test"]["rmse"],
            "ll": -ensemble["test"]["nll"],
            "seconds": made.seconds["ensemble"],
        },
    }
    tmp = done.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(done)  # the split counts as done only once it has been scored
    return result


def _within_holds(levels: dict) -> bool | None:
    """Whether every chain is stationary on its own (the verdict's level 1 passed)."""
    found = levels.get("L1")
    return None if found is None else found["status"] == "pass"


def _modes(levels: dict) -> int | None:
    """How many modes the chains sit in (the verdict's level 2 evidence)."""
    groups = ((levels.get("L2") or {}).get("figures") or {}).get("modes")
    return None if groups is None else len(groups)


#: The reference levels' verdicts (:data:`bnnkit.metrics.levels.VERDICTS`), best first.
LEVEL_VERDICTS = ("certified", "reproducible", "not a reference")


def _level_counts(refs: list[dict]) -> str:
    """Certified / reproducible / not a reference among ``refs``; "—" for splits made before
    the levels were recorded."""
    if not all(r.get("reference_level") for r in refs):
        return "—"
    return " / ".join(str(sum(r["reference_level"] == v for r in refs)) for v in LEVEL_VERDICTS)


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error over splits (0 for one split)."""
    a = np.asarray(values, float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) > 1 else 0.0


def table(results: dict[str, list[dict]]) -> tuple[str, dict]:
    """Markdown table and JSON summary of per-split results."""
    cols = ["Reference", "Ensemble", "PBP", "MC dropout", "Deep ensembles"]
    lines = [
        "| dataset | splits | chains × draws | within-chain verdict | modes (median) | "
        "reference levels (C / R / N) | "
        + " | ".join(f"RMSE {c}" for c in cols)
        + " | "
        + " | ".join(f"LL {c}" for c in cols)
        + " | s / split |",
        "|" + "---|" * (7 + 2 * len(cols)),
    ]
    summary = {}
    for dataset, splits in results.items():
        if not splits:
            continue
        ours = {
            label: (
                mean_se([s[row]["rmse"] for s in splits]),
                mean_se([s[row]["ll"] for s in splits]),
            )
            for row, label in zip(ROWS, cols, strict=False)
        }
        cells = {**ours, **PUBLISHED[dataset]}
        refs = [s["reference"] for s in splits]
        within = sum(bool(r["within_chain"]) for r in refs)
        modes = float(np.median([r["modes"] or 0 for r in refs]))
        seconds = float(
            np.mean([s["reference"]["seconds"] + s["ensemble"]["seconds"] for s in splits])
        )
        shape = f"{refs[0]['chains']} × {refs[0]['samples_per_chain']}"

        def fmt(pair):
            return f"{pair[0]:.3f} ± {pair[1]:.3f}"

        lines.append(
            f"| {dataset} | {len(splits)} | {shape} | {within}/{len(splits)} | "
            f"{modes:g} | {_level_counts(refs)} | "
            + " | ".join(fmt(cells[c][0]) for c in cols)
            + " | "
            + " | ".join(fmt(cells[c][1]) for c in cols)
            + f" | {seconds:.0f} |"
        )
        summary[dataset] = {
            "splits": len(splits),
            "within_chain": within,
            "modes_median": modes,
            "levels": {
                lvl: sum(r.get("level") == lvl for r in refs)
                for lvl in sorted({r.get("level") for r in refs}, key=str)
            },
            "reference_levels": {
                v: sum(r.get("reference_level") == v for r in refs) for v in LEVEL_VERDICTS
            },
            "ours": {k: {"rmse": v[0], "ll": v[1]} for k, v in ours.items()},
            "published": {k: {"rmse": v[0], "ll": v[1]} for k, v in PUBLISHED[dataset].items()},
            "seconds_per_split": seconds,
        }
    return "\n".join(lines) + "\n", summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/tmp/uci_benchmark", help="run directories")
    parser.add_argument(
        "--out", default="experiments/results/uci", help="table.md and results.json go here"
    )
    parser.add_argument("--datasets", nargs="+", default=list(SMALL), choices=list(DATASETS))
    parser.add_argument(
        "--splits",
        type=int,
        default=None,
        help="first N standard splits of each dataset (default: all)",
    )
    parser.add_argument("--workers", type=int, default=1, help="splits run in parallel")
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="run nothing: the table of the splits already finished",
    )
    args = parser.parse_args()
    if args.workers > 1:  # one thread per process: the splits are the parallelism
        os.environ.setdefault(
            "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    # Split-major order, so that a benchmark stopped early has the same splits of every dataset.
    jobs = [
        (d, s)
        for s in range(max(DATASETS.values()))
        for d in args.datasets
        if s < min(DATASETS[d], args.splits or DATASETS[d])
    ]
    results: dict[str, list[dict]] = {d: [] for d in args.datasets}
    t0 = time.perf_counter()
    if args.table_only:
        for d, s in jobs:
            stored = split_result(Path(args.root) / d / f"split_{s}" / "result.json")
            if stored is not None:
                results[d].append(stored)
        jobs = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(run_split, d, s, args.root): (d, s) for d, s in jobs}
        for future in as_completed(futures):
            dataset, split = futures[future]
            result = future.result()
            results[dataset].append(result)
            ref = result["reference"]
            print(
                f"{dataset} split {split}: reference RMSE {ref['rmse']:.3f} LL {ref['ll']:.3f} "
                f"({ref['level']}, {ref['modes']} modes; {ref.get('reference_level')}), "
                "ensemble LL "
                f"{result['ensemble']['ll']:.3f}, {ref['seconds']:.0f} + "
                f"{result['ensemble']['seconds']:.0f} s [{time.perf_counter() - t0:.0f} s]",
                flush=True,
            )
    for splits in results.values():
        splits.sort(key=lambda r: r["split"])
    text, summary = table(results)
    summary["wall_seconds_this_invocation"] = time.perf_counter() - t0
    summary["settings"] = {"workers": args.workers, "recipe": dataclasses.asdict(recipe())}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = recipe()
    tuning, kept = config.budget()
    preamble = (
        "# UCI regression: test RMSE and log-likelihood\n\n"
        f"`python experiments/uci_benchmark.py --workers {args.workers}"
        f"{f' --splits {args.splits}' if args.splits else ''}"
        f"{' --table-only' if args.table_only else ''}`: the finished splits of each dataset "
        f"(how many in the 'splits' column). `bnnkit reference` at its defaults with "
        f"`{MODEL}`: a deep ensemble of {config.members}, then {config.sampler} from every "
        f"member ({tuning} tuning and {kept} kept iterations per chain, tuned per chain). "
        "'Ensemble' is the same reference's deep ensemble on its own. Mean ± standard error "
        "over the splits; published columns as printed (see the script for the sources). "
        "'within-chain verdict': splits where every chain passed its within-chain checks "
        "(converged, or mixed within each chain with the chains in distinct modes, which the "
        "model average pools). 'reference levels': splits certified / reproducible / not a "
        "reference (docs/concepts/reference.md, 'Is it a reference? Four levels'). "
        "'s / split': the reference's own time per split, ensemble and "
        "chains and evaluation, one CPU thread per split when run with several workers.\n\n"
    )
    (out / "table.md").write_text(preamble + text)
    (out / "results.json").write_text(json.dumps({"summary": summary, "splits": results}, indent=2))
    print(text)


if __name__ == "__main__":
    main()
