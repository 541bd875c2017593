"""``bnnkit experiment compare-methods``: every method against HMC on a tiny setting, runs
reused on a second call, unknown settings refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.experiments import compare_methods
from bnnkit.inference import hmc
from bnnkit.metrics.predictive import calibration_bins
from bnnkit.problem import ProblemConfig
from experiment_checks import count_runs, png_ok

TINY = {"tiny": compare_methods.Setting(
    problem=ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.1),
    hmc=hmc.Config(step_size=1e-3, trajectory_len=0.003, num_iterations=2, num_burn_in=1),
    batch_size=64, epochs=2, burn_in=1, cycle=1)}


@pytest.mark.slow  # seven runs, each compiled: about 40 s on 2 cores
def test_every_method_is_compared_with_hmc_and_runs_are_reused(tmp_path, monkeypatch):
    calls = count_runs(monkeypatch)
    config = compare_methods.Config(settings="tiny")
    result = compare_methods.compare_methods(config, tmp_path, settings=TINY, progress=False)
    rows = result.rows["tiny"]
    assert [r["method"] for r in rows] == ["HMC (reference)", "SGD", "Deep ensemble (K=5)",
                                           "SGLD", "SGHMC", "SGHMC-CLR", "SGHMC-CLR-Prec"]
    assert len(calls) == 7
    for r in rows:
        assert math.isfinite(r["rmse"]) and math.isfinite(r["nll"]) and r["seconds"] > 0
    assert all(math.isfinite(r["rmse_to_reference_mean"]) for r in rows[1:])
    stored = storage.read_json(tmp_path / "results.json")
    assert stored["tiny"]["rows"] == rows
    assert "| SGHMC-CLR-Prec |" in (tmp_path / "table.md").read_text()
    assert png_ok(tmp_path / "compare_methods.png")
    again = compare_methods.compare_methods(config, tmp_path, settings=TINY, progress=False)
    assert len(calls) == 7 and again.rows == result.rows


def test_unknown_setting_refused_with_exit_2_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["experiment", "compare-methods", "--settings", "yacht,cifar",
                 "--out", str(out)]) == 2
    assert "unknown --settings 'cifar'; allowed: yacht, mnist160" in capsys.readouterr().err
    assert not out.exists()


def classification_rows() -> list[dict]:
    """Two methods' rows of a classification setting, each with its calibration bins."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 50)
    rows = []
    for method, sharpness in (("HMC (reference)", 1.0), ("SGD", 3.0)):
        probs = rng.dirichlet(np.full(3, 1.0 / sharpness), size=50)
        rows.append({"method": method, "accuracy": 0.5, "nll": 0.9, "ece": 0.1,
                     "calibration": calibration_bins(probs, labels), "seconds": 1.0,
                     "note": ""})
    return rows


def test_a_classification_setting_gets_a_reliability_diagram_and_no_bins_in_the_table(
        tmp_path):
    regression = [{"method": "HMC (reference)", "nll": 0.5, "rmse": 0.3, "seconds": 9.0,
                   "note": ""}]
    written = compare_methods.Comparison(
        {"mnist160": classification_rows(), "yacht": regression},
        {"mnist160": {}, "yacht": {}}).write(tmp_path)
    assert [p.name for p in written if p.name.startswith("reliability")] == [
        "reliability_mnist160.png"]
    assert png_ok(tmp_path / "reliability_mnist160.png")
    assert not (tmp_path / "reliability_yacht.png").exists()
    stored = storage.read_json(tmp_path / "results.json")["mnist160"]["rows"]
    assert [sum(r["calibration"]["counts"]) for r in stored] == [50, 50]
    table = (tmp_path / "table.md").read_text()
    assert "| SGD | 0.5000 | 0.9000 | 0.1000 | 1 |  |" in table and "calibration" not in table
