"""HMC started from a deep ensemble's members against HMC started at random, on UCI splits.

The UCI benchmark (``uci_benchmark.py``) starts HMC's chains from the prior's initialisation,
as bnn_hmc does. With a short burn-in on the larger datasets the chains are then still on
their way to the typical set when sampling starts (a function-space ESS of about 2 of 640
draws, and on protein a test RMSE worse than predicting the training mean). This script runs,
on one split, the benchmark's deep ensemble and then HMC with the benchmark's settings whose
chain c starts from member c (``init_checkpoint``), and prints one JSON line: HMC's test RMSE,
log-likelihood per point and convergence verdict, beside the ensemble's.

Usage::

    python experiments/hmc_from_ensemble.py DATASET SPLIT ROOT [--scale 0.2] [--chains 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from uci_benchmark import DATASETS, MODEL, method_configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=list(DATASETS))
    parser.add_argument("split", type=int)
    parser.add_argument("root", help="the two run directories go here")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args()
    from bnnkit import runs
    from bnnkit.data import load
    from bnnkit.evaluation import evaluate
    from bnnkit.problem import ProblemConfig

    problem = ProblemConfig(f"{args.dataset}_{args.split}", MODEL)
    configs = method_configs(len(load(problem.dataset).x_train), args.scale, args.chains)
    root = Path(args.root)
    ensemble_dir, hmc_dir = root / f"{problem.dataset}_ensemble", root / f"{problem.dataset}_hmc"
    t0 = time.perf_counter()
    runs.run(problem, configs["ensemble"], ensemble_dir, progress=False)
    hmc_config = dataclasses.replace(configs["hmc"], init_checkpoint=str(ensemble_dir))
    runs.run(problem, hmc_config, hmc_dir, progress=False)
    hmc, ensemble = evaluate(hmc_dir), evaluate(ensemble_dir)
    verdict = hmc["convergence"]
    print(json.dumps({
        "dataset": args.dataset, "split": args.split,
        "hmc_from_ensemble": {"rmse": hmc["test"]["rmse"], "ll": -hmc["test"]["nll"],
                              "rhat_share_ok": verdict["rhat_share_below"],
                              "ess_min": verdict["ess_min"],
                              "acceptance_rate": hmc["sampler"]["acceptance_rate"]},
        "ensemble": {"rmse": ensemble["test"]["rmse"], "ll": -ensemble["test"]["nll"]},
        "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
