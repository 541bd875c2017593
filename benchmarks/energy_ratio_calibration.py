"""How far a tuned MCLMC chain's energy error sits from its target on a well-posed problem.

L0 of the verdict fails an unadjusted MCLMC chain whose bulk energy error, the median over kept
iterations of ``energy_var / v``, exceeds ``THRESHOLDS.max_energy_ratio``
(:mod:`bnnkit.metrics.numerics`). On a problem where the chains are right by construction (the
verdict tests' Bayesian linear regression with a fixed noise std,
``tests/metrics/test_verdict_levels.py``), this runs the default reference's recipe with 4
members, the default tuning and 1,200 kept iterations for each seed and prints each chain's
ratio: what a tuned chain reads, whose spread is the tuning's precision on ε (``ΔE² ∝ ε⁶``),
and so the least the threshold can be without failing correct chains.

    BNNKIT_DATA_DIR=... python benchmarks/energy_ratio_calibration.py [--seeds 0 1 ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    parser.add_argument("--num-tuning", type=int, default=None, help="default: the recipe's")
    args = parser.parse_args()
    tests = Path(__file__).resolve().parents[1] / "tests"
    sys.path[:0] = [str(tests), str(tests / "metrics")]
    from test_verdict_levels import LINEAR

    from bnnkit.experiments.reference import Config, reference

    ratios = []
    for seed in args.seeds:
        config = Config(
            members=4,
            num_tuning=args.num_tuning,
            num_samples=1200,
            ensemble_steps=200,
            seed=seed,
        )
        folder = Path(tempfile.mkdtemp(prefix="bnnkit-energy-ratio-")) / "ref"
        levels = reference(LINEAR, config, folder, progress=False).evaluation["levels"]
        found = levels["L0"]["figures"]["energy_ratio"]
        ratios += found
        print(f"seed {seed}: {levels['verdict']}, ratios {[round(r, 2) for r in found]}")
    print(
        f"{len(ratios)} chains: ratio from {min(ratios):.2f} to {max(ratios):.2f}, "
        f"{sum(r > 2 for r in ratios)} above 2, {sum(r > 3 for r in ratios)} above 3"
    )


if __name__ == "__main__":
    main()
