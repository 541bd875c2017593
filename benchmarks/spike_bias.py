"""What unadjusted MCLMC's energy spikes cost a model average: against an exact reference.

On a network posterior the unadjusted sampler's energy error has a heavy tail (a few per cent
of its iterations spike past ten times the target), which fails level 0 of the reference
levels (:mod:`bnnkit.metrics.numerics`). This measures whether the spikes move the model
average beyond what a reference can resolve: on one split with the noise std fixed (so that
HMC, which is exact, passes level 0 too), ``bnnkit reference`` at its defaults (MCLMC) and
with ``--sampler hmc``, each from its own fresh ensemble with the same seed, then
``bnnkit evaluate MCLMC --reference HMC``: the MCLMC model average's distance to the HMC one
(mean per-test-point W₁, LPD difference, RMSE between the means) beside the HMC reference's
own half-to-half distance (its noise floor) and the distance of the HMC reference's own deep
ensemble to it (``bnnkit evaluate HMC/ensemble --reference HMC``: what an approximation's
distance looks like), all scored alike.

    python benchmarks/spike_bias.py --dataset yacht_0 --noise-std 0.35 --root /tmp/spikes
    python benchmarks/spike_bias.py --dataset concrete_0 --noise-std 0.3 --root /tmp/spikes

Each reference runs in a fresh interpreter with the command-line compilation cache off.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def bnnkit(*argv: str) -> dict:
    """``bnnkit ARGV --json``'s result."""
    env = {**os.environ, "BNNKIT_COMPILE_CACHE": "off"}
    done = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *argv, "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="yacht_0")
    parser.add_argument("--model", default="mlp_regression_small")
    parser.add_argument("--noise-std", default="0.35")
    parser.add_argument("--root", required=True, help="a new folder for the two references")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    root = Path(args.root)
    problem = ["--dataset", args.dataset, "--model", args.model, "--noise-std", args.noise_std]
    made = {}
    for sampler in ("mclmc", "hmc"):
        folder = root / sampler
        made[sampler] = bnnkit(
            "reference", *problem, "--sampler", sampler, "--dir", str(folder), "--no-progress"
        )
    compared = bnnkit("evaluate", str(root / "mclmc"), "--reference", str(root / "hmc"))
    ensemble = bnnkit("evaluate", str(root / "hmc" / "ensemble"), "--reference", str(root / "hmc"))
    hmc_levels = made["hmc"]["levels"]
    found = {
        "dataset": args.dataset,
        "noise_std": float(args.noise_std),
        "mclmc_spike_share": made["mclmc"]["levels"]["L0"]["spike_share"],
        "mclmc_verdict": made["mclmc"]["levels"]["verdict"],
        "hmc_verdict": hmc_levels["verdict"],
        "hmc_divergent_share": hmc_levels["L0"].get("divergent_share"),
        "mclmc_to_hmc": compared["reference"],
        "hmc_halves": compared["reference_noise_floor"],
        "hmc_ensemble_to_hmc": ensemble["reference"],
        "hmc_levels_l2": {k: hmc_levels["L2"].get(k) for k in ("halves", "ensemble")},
        "test_ll": {k: -v["test"]["nll"] for k, v in made.items()},
    }
    text = json.dumps(found, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
