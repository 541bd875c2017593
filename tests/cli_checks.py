"""Checks shared by the command-line tests."""

from __future__ import annotations

import numpy as np

from bnnkit import storage
from bnnkit.cli import main


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


def stored_files(run_dir) -> dict[str, np.ndarray]:
    """Every array of a run's samples and state, keyed ``UNIT/key`` and ``state/key``."""
    from bnnkit.runs.directory import RunDir

    rundir = RunDir(run_dir)
    out = {}
    for unit in rundir.sample_units():
        for key, value in storage.load_arrays(rundir.sample_file(unit)).items():
            out[f"{unit}/{key}"] = value
    for key, value in storage.load_arrays(rundir.state_file).items():
        out[f"state/{key}"] = value
    return out
