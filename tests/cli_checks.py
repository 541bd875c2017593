"""Checks shared by the command-line tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bnnkit import storage
from bnnkit.cli import main

#: The problem of :data:`SMALL_HMC`.
SMALL_PROBLEM = ["--dataset", "yacht_0", "--model", "mlp_regression_small", "--noise-std", "0.35"]
#: A whole run in seconds, for the tests that damage, verify or resume run folders: HMC on
#: yacht_0, 6 iterations of which 2 burn-in, one chain, not evaluated.
SMALL_HMC = [
    "hmc",
    *SMALL_PROBLEM,
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "0.05",
    "--num-iterations",
    "6",
    "--num-burn-in",
    "2",
    "--num-chains",
    "1",
    "--no-progress",
    "--no-evaluate",
]


def small_hmc_run(path: Path, *more: str) -> Path:
    """:data:`SMALL_HMC` (with ``more`` flags) made in ``path``; it must exit 0."""
    assert main([*SMALL_HMC, *more, "--dir", str(path)]) == 0
    return path


def run_ok(argv, capsys) -> str:
    """``bnnkit ARGV`` through ``main``: it must exit 0; returns what it printed."""
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def rmse_between_predictions(run_dir, reference_dir) -> float:
    """RMSE between the two runs' predictive means, from the predictions evaluate stored."""
    from bnnkit.evaluation import evaluate

    if not (reference_dir / "predictions" / "test.npz").is_file():
        evaluate(reference_dir)
    means = [
        storage.load_arrays(d / "predictions" / "test.npz")["means"].mean(0)
        for d in (run_dir, reference_dir)
    ]
    return float(np.sqrt(np.mean((means[0] - means[1]) ** 2)))


def stored_units(rundir) -> dict[int, dict[str, np.ndarray]]:
    """Each kept unit's arrays, as one file per unit holds them: a block's file
    (``sample_<first>-<last>.npz``) is cut into its units along the sample axis, so that runs
    whose blocks fell apart differently compare unit by unit."""
    out = {}
    for first, path in rundir.sample_files().items():
        arrays = storage.load_arrays(path)
        last = int(path.stem.partition("-")[2] or first)
        for i, unit in enumerate(range(first, last + 1)):
            out[unit] = {
                k: (v if k.startswith("__") or last == first else v[:, i : i + 1])
                for k, v in arrays.items()
            }
    return out


def stored_files(run_dir) -> dict[str, np.ndarray]:
    """Every array of a run's samples and state, keyed ``UNIT/key`` and ``state/key``."""
    from bnnkit.runs.directory import RunDir

    rundir = RunDir(run_dir)
    out = {
        f"{unit}/{key}": value
        for unit, arrays in stored_units(rundir).items()
        for key, value in arrays.items()
    }
    for key, value in storage.load_arrays(rundir.state_file).items():
        out[f"state/{key}"] = value
    return out
