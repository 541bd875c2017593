"""Score a ``bnnkit experiment compare-methods`` setting against another reference.

compare-methods measures every method against the HMC run it makes itself; this scores the
same runs against a reference made apart (``bnnkit reference``: chains started at a deep
ensemble's members, with its convergence verdict), with split conformal sets or intervals at
``--conformal`` α (the runs must hold out a validation set: ``--validation-size``), for a
classification setting out-of-distribution detection against ``--ood DATASET``'s test inputs,
and the cost of each run in full-batch gradients: leapfrog steps for HMC, epochs times members
times Monte Carlo samples for the minibatch methods (MFVI's SGD start not counted). It prints a
markdown table (and writes every row as JSON with ``--json``); the runs' ``evaluation.json``
are rewritten with the reference's comparison.

Usage::

    python experiments/compare_against_reference.py OUT SETTING REFERENCE [--conformal 0.1]
        [--ood fashion_mnist] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bnnkit.evaluation import evaluate


def run_dir(root: Path, setting: str, label: str) -> Path:
    """compare-methods' folder of a row: ``hmc``, or the label's first word in lower case."""
    name = "hmc" if label.startswith("HMC") else label.split(" ")[0].lower()
    return root / setting / name


def full_batch_gradients(config: dict, sampler: dict | None) -> float:
    """Gradients of the whole training set a run took (a minibatch epoch counts as one)."""
    if sampler is not None and "num_leapfrog" in sampler:
        return config["num_iterations"] * float(np.sum(sampler["num_leapfrog"]))
    samples = config.get("ivon_num_samples", config.get("vi_num_samples", 1))
    return config["num_epochs"] * config.get("num_members", 1) * samples


#: (header, how to read it from a row) of the regression and the classification tables.
REGRESSION = (
    ("RMSE", "rmse"),
    ("NLL", "nll"),
    ("RMSE to ref. mean", "rmse_to_reference_mean"),
    ("W1 to ref.", "wasserstein_1"),
    ("W1 to own HMC", "own_wasserstein_1"),
    ("coverage", "coverage"),
    ("interval width", "mean_width"),
)
CLASSIFICATION = (
    ("accuracy", "accuracy"),
    ("NLL", "nll"),
    ("ECE", "ece"),
    ("Brier", "brier"),
    ("agreement with ref.", "agreement"),
    ("TV to ref.", "total_variation"),
    ("agreement with own HMC", "own_agreement"),
    ("coverage", "coverage"),
    ("set size", "mean_set_size"),
    ("OOD AUROC (entropy)", "auroc_entropy"),
    ("OOD AUROC (MI)", "auroc_mutual_information"),
)


def score(folder: Path, row: dict, reference: str, conformal: float, ood: str | None) -> dict:
    """One method's figures against the reference, its conformal sets and its OOD scores."""
    result = evaluate(folder, reference=reference, conformal=conformal, ood=ood)
    config = json.loads((folder / "run.json").read_text())["method_config"]
    figures = {
        **result["test"],
        **result["reference"],
        **result["conformal"],
        "own_agreement": row.get("agreement"),
        "own_wasserstein_1": row.get("wasserstein_1"),
        "gradients": full_batch_gradients(config, result.get("sampler")),
        "seconds": row["seconds"],
    }
    for name, detection in (result.get("ood") or {}).items():
        if isinstance(detection, dict) and "auroc" in detection:
            figures[f"auroc_{name}"] = detection["auroc"]
            figures[f"fpr95_{name}"] = detection["fpr_at_95_tpr"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="compare-methods' --out folder")
    parser.add_argument("setting", help="a setting of it, e.g. yacht or mnist160")
    parser.add_argument("reference", help="the reference folder (bnnkit reference --dir)")
    parser.add_argument("--conformal", type=float, default=0.1, help="α of the sets/intervals")
    parser.add_argument(
        "--ood",
        default=None,
        help="classification: out-of-distribution dataset, e.g. fashion_mnist",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the rows here as JSON")
    args = parser.parse_args()
    rows = json.loads((args.out / "results.json").read_text())[args.setting]["rows"]
    scored = []
    for row in rows:
        if "seconds" not in row:  # a method the setting skipped
            scored.append({"method": row["method"], "note": row["note"]})
            continue
        figures = score(
            run_dir(args.out, args.setting, row["method"]),
            row,
            args.reference,
            args.conformal,
            args.ood,
        )
        scored.append({"method": row["method"], **figures})
    columns = (
        CLASSIFICATION if "accuracy" in next(r for r in scored if "seconds" in r) else REGRESSION
    )
    print(f"| method | {' | '.join(h for h, _ in columns)} | full-batch gradients | seconds |")
    print(f"|---|{'---|' * len(columns)}---|---|")
    for row in scored:
        if "seconds" not in row:
            print(f"| {row['method']} | {' | '.join(['—'] * len(columns))} | — | {row['note']} |")
            continue
        cells = ["—" if row.get(key) is None else f"{row[key]:.3f}" for _, key in columns]
        print(
            f"| {row['method']} | {' | '.join(cells)} | {row['gradients']:,.0f} | "
            f"{row['seconds']:.1f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(scored, indent=1, default=float))


if __name__ == "__main__":
    main()
