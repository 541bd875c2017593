"""A fit that is not clearly better than predicting the training targets' mean (or the training
class frequencies), or than least squares on the inputs, gets one warning line at the end of
the run, in ``bnnkit evaluate`` and in its JSON; a fitted network gets none."""

from __future__ import annotations

import json
import math

import flax.linen as nn
import numpy as np
import pytest
from scipy import stats

import bnnkit
from bnnkit import data
from bnnkit.cli import main
from bnnkit.inference import sgd
from bnnkit.metrics import baseline

YACHT = [
    "sgd",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--batch-size",
    "32",
    "--no-progress",
]


def yacht_bars() -> tuple[float, float, float]:
    """The training mean's test RMSE and Gaussian NLL (with the training std), and least
    squares' test RMSE, from the raw targets, apart from the code under test."""
    raw = data.load("yacht_0", standardize_data=False)
    y_train, y_test = raw.y_train.astype(np.float64), raw.y_test.astype(np.float64)
    mean, std = y_train.mean(), y_train.std()
    rmse = math.sqrt(np.mean((y_test - mean) ** 2))
    nll = -np.mean(stats.norm.logpdf(y_test, mean, std))
    # The line is the same on raw or standardised inputs (an affine map of the columns).
    design = np.c_[raw.x_train.astype(np.float64), np.ones(len(y_train))]
    w = np.linalg.lstsq(design, y_train, rcond=None)[0]
    line = math.sqrt(np.mean((np.c_[raw.x_test, np.ones(len(y_test))] @ w - y_test) ** 2))
    return rmse, nll, line


def poor_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "poor fit" in line]


def test_an_under_trained_sgd_run_on_yacht_warns_naming_its_figure_and_the_bars(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*YACHT, "--init-step-size", "3e-7", "--num-epochs", "20", "--dir", str(run)]) == 0
    err = capsys.readouterr().err
    rmse0, nll0, line = yacht_bars()
    evaluation = json.loads((run / "evaluation.json").read_text())
    bars = evaluation["baseline"]
    assert bars["constant"]["rmse"] == pytest.approx(rmse0, rel=1e-6)
    assert bars["constant"]["nll"] == pytest.approx(nll0, rel=1e-6)
    assert bars["least_squares"]["rmse"] == pytest.approx(line, rel=1e-6)
    mine = evaluation["test"]["rmse"]
    assert mine > min(rmse0, 1.1 * line)  # what the rule is about, computed here
    warned = poor_lines(err)
    assert len(warned) == 1 and warned[0].startswith("bnnkit: warning: poor fit: test RMSE ")
    assert f"{mine:.4g}" in warned[0] and f"{rmse0:.4g}" in warned[0]
    assert "step size too small" in warned[0] and "epochs" in warned[0]
    assert warned[0].endswith(bars["poor_fit"])

    # bnnkit evaluate prints the same line after its table, and --json carries it as a field.
    assert main(["evaluate", str(run)]) == 0
    assert poor_lines(capsys.readouterr().err) == warned
    assert main(["evaluate", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"]["poor_fit"] == bars["poor_fit"]


def test_a_fitted_sgd_run_on_yacht_gets_no_warning(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*YACHT, "--init-step-size", "1e-5", "--num-epochs", "200", "--dir", str(run)]) == 0
    assert poor_lines(capsys.readouterr().err) == []
    evaluation = json.loads((run / "evaluation.json").read_text())
    rmse0, _, line = yacht_bars()
    assert evaluation["test"]["rmse"] < 0.5 * line < rmse0  # far better than either bar
    assert evaluation["baseline"]["poor_fit"] is None


def classes(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Three imbalanced classes (6:3:1), each a well separated cloud in 2-d."""
    y = rng.choice(3, size=n, p=[0.6, 0.3, 0.1]).astype(np.int32)
    centres = np.array([[3.0, 0.0], [-3.0, 3.0], [-3.0, -3.0]])
    return (centres[y] + rng.normal(size=(n, 2))).astype(np.float32), y


@pytest.mark.parametrize("fitted", [True, False])
def test_classification_against_the_training_class_frequencies(fitted, tmp_path):
    rng = np.random.default_rng(0)
    (x_train, y_train), (x_test, y_test) = classes(120, rng), classes(60, rng)
    problem = bnnkit.Problem.from_arrays(
        x_train, y_train, x_test, y_test, model=nn.Dense(3), weight_decay=1.0
    )
    # Fitted: 30 full-batch steps. Not: one step that barely leaves the initialisation.
    config = (
        sgd.Config(init_step_size=1e-2, num_epochs=30, batch_size=120)
        if fitted
        else sgd.Config(init_step_size=1e-9, num_epochs=1, batch_size=120)
    )
    bnnkit.run(problem, config, tmp_path / "run", progress=False)
    result = bnnkit.evaluate(tmp_path / "run", problem=problem)

    freq = np.bincount(y_train, minlength=3) / len(y_train)
    accuracy0 = float(np.mean(y_test == np.argmax(freq)))
    nll0 = float(-np.mean(np.log(freq[y_test])))
    bars = result["baseline"]["constant"]
    assert bars["accuracy"] == pytest.approx(accuracy0) and bars["nll"] == pytest.approx(nll0)
    test = result["test"]
    poor = result["baseline"]["poor_fit"]
    if fitted:
        assert test["accuracy"] > accuracy0 and test["nll"] < nll0
        assert poor is None
    else:
        assert test["accuracy"] < accuracy0 or test["nll"] >= nll0
        named = (
            [f"{test['accuracy']:.4g}", f"{accuracy0:.4g}"]
            if test["accuracy"] < accuracy0
            else [f"{test['nll']:.4g}", f"{nll0:.4g}"]
        )
        assert poor is not None and all(figure in poor for figure in named), poor


# The rule itself, branch by branch, on figures given directly.
BARS = {"constant": {"rmse": 10.0, "nll": 3.0}, "least_squares": {"rmse": 6.0}}


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ({"rmse": 10.0, "nll": 2.0}, "no better than predicting the training mean (10)"),
        ({"rmse": float("nan"), "nll": 2.0}, "no better than predicting the training mean"),
        ({"rmse": 6.7, "nll": 2.0}, "worse than least squares on the inputs (6;"),
        ({"rmse": 6.5, "nll": 3.0}, "test NLL 3 is no better than a Gaussian"),
        ({"rmse": 6.5, "nll": 2.9}, None),  # within 10 % of least squares, NLL below the bar's
    ],
)
def test_regression_rule(test, expected):
    line = baseline.poor_fit(test, BARS, "hmc")
    if expected is None:
        assert line is None
    else:
        assert expected in line
        cause = "predictive spread" if "NLL" in expected else "chains have likely not left"
        assert cause in line


def test_without_least_squares_only_the_constant_predictor_counts():
    assert (
        baseline.poor_fit({"rmse": 9.0, "nll": 2.0}, {"constant": BARS["constant"]}, "sgd") is None
    )


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ({"accuracy": 0.5, "nll": 0.5}, "below always naming the training majority class (0.6)"),
        ({"accuracy": 0.6, "nll": 0.9}, "no better than the training class frequencies' (0.9)"),
        ({"accuracy": 0.6, "nll": 0.8}, None),  # a tie in accuracy with a better NLL passes
    ],
)
def test_classification_rule(test, expected):
    line = baseline.poor_fit(test, {"constant": {"accuracy": 0.6, "nll": 0.9}}, "sgd")
    assert line is None if expected is None else expected in line


def test_least_squares_is_left_out_where_it_would_interpolate_or_read_token_ids():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(10, 5)), rng.normal(size=10)
    assert baseline.least_squares_rmse(x, y, x, y) is None  # 10 examples, 6 coefficients
    tokens = rng.integers(0, 9, size=(40, 3))
    assert (
        baseline.least_squares_rmse(tokens, rng.normal(size=40), tokens, rng.normal(size=40))
        is None
    )
    assert baseline.least_squares_rmse(np.r_[x, x], np.r_[y, y], x, y) is not None
