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
    from bnnkit.evaluate import evaluate

    if not (reference_dir / "predictions" / "test.npz").is_file():
        evaluate(reference_dir)
    means = [storage.load_arrays(d / "predictions" / "test.npz")["means"].mean(0)
             for d in (run_dir, reference_dir)]
    return float(np.sqrt(np.mean((means[0] - means[1]) ** 2)))
