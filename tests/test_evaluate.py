"""``evaluate`` of a classification run stores the reliability diagram's bins of its test
predictive beside (not inside) the test metrics; a regression run has none; the printed table
leaves them out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.metrics.predictive import calibration_bins, ece_from_bins
from cli_checks import run_ok

SGD = [
    "sgd",
    "--init-step-size",
    "1e-2",
    "--num-epochs",
    "2",
    "--batch-size",
    "16",
    "--no-progress",
    "--no-evaluate",
]


@pytest.fixture(scope="module")
def classification_run(tmp_path_factory):
    """SGD on a linear classifier of 40 random 4×4 images (12 test points), the label whether
    the top half is brighter."""
    folder = tmp_path_factory.mktemp("classification")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4, 4, 1)).astype(np.float32)
    y = (x[:, :2].mean((1, 2, 3)) > x[:, 2:].mean((1, 2, 3))).astype(np.int64)
    np.savez(folder / "data.npz", x_train=x[:28], y_train=y[:28], x_test=x[28:], y_test=y[28:])
    assert (
        main(
            [
                *SGD,
                "--dataset",
                str(folder / "data.npz"),
                "--model",
                "linear",
                "--dir",
                str(folder / "run"),
            ]
        )
        == 0
    )
    return folder / "run", y[28:]


def test_classification_calibration_is_the_bins_of_the_stored_predictive(classification_run):
    run, labels = classification_run
    result = evaluate(run)
    probs = storage.load_arrays(run / "predictions" / "test.npz")["probs"]
    assert result["calibration"] == calibration_bins(probs, labels)
    assert sum(result["calibration"]["counts"]) == len(labels) == 12
    assert ece_from_bins(result["calibration"]) == result["test"]["ece"]
    assert "calibration" not in result["test"]  # every test value stays one number
    stored = storage.read_json(run / "evaluation.json")
    assert stored["calibration"] == json.loads(json.dumps(result["calibration"]))


def test_the_cli_prints_json_with_the_bins_and_a_table_without(classification_run, capsys):
    run, _ = classification_run
    printed = json.loads(run_ok(["evaluate", str(run), "--json"], capsys))
    assert len(printed["calibration"]["counts"]) == 15
    table = run_ok(["evaluate", str(run)], capsys)
    assert "test ece" in table and "calibration" not in table and "counts" not in table


def test_a_regression_run_has_no_calibration(tmp_path):
    run = tmp_path / "run"
    assert (
        main([*SGD, "--dataset", "yacht_0", "--model", "mlp_regression_small", "--dir", str(run)])
        == 0
    )
    result = evaluate(run, write=False)
    assert "rmse" in result["test"] and "calibration" not in result
