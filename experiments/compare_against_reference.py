"""Score a ``bnnkit experiment compare-methods`` regression setting against another reference.

compare-methods measures every method against the HMC run it makes itself; this scores the
same runs against a reference made apart (``bnnkit reference``: HMC chains started at a deep
ensemble's members, with its convergence verdict), with split conformal intervals at
``--conformal`` α (the runs must hold out a validation set: ``--validation-size``), and the
cost of each run in full-batch gradients: leapfrog steps for HMC, epochs times members times
Monte Carlo samples for the minibatch methods (MFVI's SGD start not counted). It prints a
markdown table; the runs' ``evaluation.json`` are rewritten with the reference's comparison.

Usage::

    python experiments/compare_against_reference.py OUT SETTING REFERENCE [--conformal 0.1]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="compare-methods' --out folder")
    parser.add_argument("setting", help="a regression setting of it, e.g. yacht")
    parser.add_argument("reference", help="the reference folder (bnnkit reference --dir)")
    parser.add_argument("--conformal", type=float, default=0.1, help="α of the intervals")
    args = parser.parse_args()
    rows = json.loads((args.out / "results.json").read_text())[args.setting]["rows"]
    print("| method | RMSE | NLL | RMSE to ref. mean | W1 to ref. | W1 to own HMC | "
          f"coverage (α={args.conformal}) | interval width | full-batch gradients | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "seconds" not in row:  # a method the setting skipped
            print(f"| {row['method']} | {' | '.join(['—'] * 8)} | — | {row['note']} |")
            continue
        folder = run_dir(args.out, args.setting, row["method"])
        result = evaluate(folder, reference=args.reference, conformal=args.conformal)
        config = json.loads((folder / "run.json").read_text())["method_config"]
        ref, conf = result["reference"], result["conformal"]
        own = row.get("wasserstein_1")
        print(f"| {row['method']} | {result['test']['rmse']:.3f} | {result['test']['nll']:.3f} | "
              f"{ref['rmse_to_reference_mean']:.3f} | {ref['wasserstein_1']:.3f} | "
              f"{'—' if own is None else f'{own:.3f}'} | {conf['coverage']:.3f} | "
              f"{conf['mean_width']:.3f} | "
              f"{full_batch_gradients(config, result.get('sampler')):,.0f} | "
              f"{row['seconds']:.1f} |")


if __name__ == "__main__":
    main()
