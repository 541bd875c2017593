"""``bnnkit evaluate --calibrate / --conformal / --ood`` and the regression W1 against a
reference, through stored runs and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate, ood_file
from bnnkit.metrics import ood
from bnnkit.metrics.predictive import predictive_wasserstein_1
from bnnkit.predict import Prediction
from bnnkit.report.run_report import OOD_FILE, run_section
from cli_checks import run_ok

SGD = [
    "sgd",
    "--init-step-size",
    "1e-2",
    "--num-epochs",
    "3",
    "--batch-size",
    "16",
    "--no-progress",
    "--no-evaluate",
]


def images(rng, n, shift=0.0):
    x = rng.normal(loc=shift, size=(n, 4, 4, 1)).astype(np.float32)
    y = (x[:, :2].mean((1, 2, 3)) > x[:, 2:].mean((1, 2, 3))).astype(np.int64)
    return x, y


@pytest.fixture(scope="module")
def classification(tmp_path_factory):
    """SGD on a linear classifier of 4×4 images with 20 held out, and a second dataset of
    images from another distribution (mean 4) for OOD detection."""
    folder = tmp_path_factory.mktemp("posthoc")
    rng = np.random.default_rng(0)
    x, y = images(rng, 140)
    np.savez(folder / "data.npz", x_train=x[:100], y_train=y[:100], x_test=x[100:], y_test=y[100:])
    xo, yo = images(rng, 60, shift=4.0)
    np.savez(folder / "far.npz", x_train=xo[:30], y_train=yo[:30], x_test=xo[30:], y_test=yo[30:])
    assert (
        main(
            [
                *SGD,
                "--dataset",
                str(folder / "data.npz"),
                "--model",
                "linear",
                "--validation-size",
                "20",
                "--dir",
                str(folder / "run"),
            ]
        )
        == 0
    )
    return folder


def test_calibrate_and_conformal_fit_on_the_held_out_examples(classification):
    run = classification / "run"
    result = evaluate(run, calibrate=True, conformal=0.2)
    scaled = result["temperature_scaling"]
    assert scaled["validation_size"] == 20 and scaled["temperature"] > 0
    # Temperature scaling keeps every argmax: the accuracy is the same.
    assert scaled["test"]["accuracy"] == result["test"]["accuracy"]
    assert set(scaled["test"]) == {"accuracy", "nll", "ece", "brier"}
    conf = result["conformal"]
    assert conf["score"] == "lac" and conf["calibration_size"] == 20 and conf["alpha"] == 0.2
    assert 0 <= conf["coverage"] <= 1 and 0 <= conf["mean_set_size"] <= 2
    assert "brier" in result["test"]
    stored = storage.read_json(run / "evaluation.json")
    assert stored["conformal"] == json.loads(json.dumps(conf))


def test_the_validation_set_is_the_end_of_the_training_set(classification):
    from bnnkit.problem import ProblemConfig, build

    problem = build(ProblemConfig(str(classification / "data.npz"), "linear", validation_size=20))
    raw = np.load(classification / "data.npz")
    x_val, y_val = problem.dataset.info["validation"]
    np.testing.assert_array_equal(x_val, raw["x_train"][80:])
    np.testing.assert_array_equal(y_val, raw["y_train"][80:])
    assert problem.dataset.num_train == 80


def test_ood_against_a_shifted_dataset(classification):
    run = classification / "run"
    result = evaluate(run, ood=str(classification / "far.npz"))
    found = result["ood"]
    assert found["num_in"] == 40 and found["num_out"] == 30
    for score in ("entropy", "mutual_information"):
        assert 0 <= found[score]["auroc"] <= 1 and 0 <= found[score]["fpr_at_95_tpr"] <= 1
    scores = storage.load_arrays(run / "predictions" / ood_file(str(classification / "far.npz")))
    assert ood.auroc(scores["in_entropy"], scores["out_entropy"]) == found["entropy"]["auroc"]
    # One weight sample (SGD): the draws never disagree, so the mutual information is 0.
    np.testing.assert_allclose(scores["out_mutual_information"], 0.0, atol=1e-5)
    section = run_section(run)
    assert any(f.path.name == OOD_FILE for f in section.figures)


def test_the_cli_prints_the_posthoc_parts(classification, capsys):
    run = classification / "run"
    printed = json.loads(
        run_ok(
            [
                "evaluate",
                str(run),
                "--calibrate",
                "--conformal",
                "0.1",
                "--ood",
                str(classification / "far.npz"),
                "--json",
            ],
            capsys,
        )
    )
    assert {"temperature_scaling", "conformal", "ood"} <= set(printed)
    table = run_ok(["evaluate", str(run), "--conformal", "0.1"], capsys)
    assert "test coverage" in table and "mean set size" in table


def test_refusals(classification, tmp_path):
    run = classification / "run"
    # From Python the parameter's name, not the flag's (the command line's is tested in
    # tests/commands/test_errors_name_flags.py).
    with pytest.raises(ConfigError, match=r"^bnnkit.evaluate: conformal=1.5 is outside \(0, 1\)"):
        evaluate(run, conformal=1.5, write=False)
    plain = tmp_path / "plain"
    assert (
        main(
            [
                *SGD,
                "--dataset",
                str(classification / "data.npz"),
                "--model",
                "linear",
                "--dir",
                str(plain),
            ]
        )
        == 0
    )
    with pytest.raises(
        ConfigError, match=r"^bnnkit.evaluate: calibrate=True fits on held-out data"
    ):
        evaluate(plain, calibrate=True, write=False)
    regression = tmp_path / "regression"
    # yacht's unscaled step of 1e-2 diverges on a linear model (and is refused as such).
    assert (
        main(
            [
                *SGD,
                "--init-step-size",
                "1e-4",
                "--dataset",
                "yacht_0",
                "--model",
                "linear",
                "--dir",
                str(regression),
            ]
        )
        == 0
    )
    with pytest.raises(
        ConfigError,
        match=r"^bnnkit.evaluate: ood='yacht_1' for .* a regression dataset; allowed: another ",
    ):
        evaluate(regression, ood="yacht_1", write=False)
    rng = np.random.default_rng(1)
    np.savez(
        tmp_path / "wide.npz",
        x_train=rng.normal(size=(10, 5)),
        y_train=np.zeros(10, int),
        x_test=rng.normal(size=(10, 5)),
        y_test=np.zeros(10, int),
    )
    with pytest.raises(
        ConfigError, match="allowed: a dataset with inputs of this run's shape and kind"
    ):
        evaluate(run, ood=str(tmp_path / "wide.npz"), write=False)


@pytest.mark.slow
def test_regression_calibration_conformal_and_w1_against_a_reference(tmp_path):
    runs = {}
    for name, lr in (("a", "1e-2"), ("b", "1e-3")):
        runs[name] = tmp_path / name
        assert (
            main(
                [
                    "sgd",
                    "--init-step-size",
                    lr,
                    "--num-epochs",
                    "3",
                    "--batch-size",
                    "32",
                    "--no-progress",
                    "--no-evaluate",
                    "--dataset",
                    "yacht_0",
                    "--model",
                    "mlp_regression_small",
                    "--validation-size",
                    "40",
                    "--dir",
                    str(runs[name]),
                ]
            )
            == 0
        )
    result = evaluate(runs["a"], reference=runs["b"], calibrate=True, conformal=0.1)
    assert result["temperature_scaling"]["std_scale"] > 0
    assert result["temperature_scaling"]["test"]["rmse"] == pytest.approx(result["test"]["rmse"])
    assert result["conformal"]["score"] == "normalized_residual"
    assert result["conformal"]["mean_width"] > 0
    w1 = result["reference"]["wasserstein_1"]
    # The stored predictives give the same number (the draws' seed is fixed).
    a = storage.load_arrays(runs["a"] / "predictions" / "test.npz")
    b_result = evaluate(runs["b"], write=True)
    assert np.isfinite(b_result["test"]["rmse"])
    b = storage.load_arrays(runs["b"] / "predictions" / "test.npz")
    assert w1 == pytest.approx(
        predictive_wasserstein_1(
            Prediction("regression", means=a["means"], stds=a["stds"]),
            Prediction("regression", means=b["means"], stds=b["stds"]),
        )
    )
    assert w1 > 0
