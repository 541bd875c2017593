"""``bnnkit experiment compare-methods``: every method against HMC on a tiny setting, runs
reused on a second call, unknown settings refused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from bnnkit import priors, storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.experiments import compare_methods
from bnnkit.experiments.compared_methods import DROPOUT_LABEL
from bnnkit.inference import hmc
from bnnkit.metrics.levels import VERDICTS
from bnnkit.metrics.predictive import calibration_bins
from bnnkit.problem import ProblemConfig
from experiment_checks import count_runs, png_ok

# Three epochs: SWAG collects once an epoch after the burn-in and needs two iterates.
TINY = {
    "tiny": compare_methods.Setting(
        problem=ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.1),
        hmc=hmc.Config(step_size=1e-3, trajectory_len=0.003, num_iterations=2, num_burn_in=1),
        batch_size=64,
        epochs=3,
        burn_in=1,
        cycle=1,
    )
}


@pytest.mark.slow  # eleven runs, each compiled: about 90 s on 2 cores
def test_every_method_is_compared_with_hmc_and_runs_are_reused(tmp_path, monkeypatch):
    calls = count_runs(monkeypatch)
    config = compare_methods.Config(settings="tiny", validation_size=40, conformal=0.2)
    result = compare_methods.compare_methods(config, tmp_path, settings=TINY, progress=False)
    rows = result.rows["tiny"]
    # The labels do not depend on the step sizes.
    labels = list(compare_methods.methods(TINY["tiny"], eta=1.0, grad_rms=1.0, num_train=100))
    assert labels[:6] == [
        "SGD",
        "Deep ensemble (K=5)",
        "SGLD",
        "SGHMC",
        "SGHMC-CLR",
        "SGHMC-CLR-Prec",
    ]
    assert {"MultiSWAG (M=5)", DROPOUT_LABEL, "IVON", "MFVI"} <= set(labels)
    assert [r["method"] for r in rows] == ["HMC (reference)", *labels]
    assert len(calls) == 1 + len(labels)
    for r in rows:
        assert math.isfinite(r["rmse"]) and math.isfinite(r["nll"]) and r["seconds"] > 0
        # 40 held-out points: coverage is a share of the test points, the width positive.
        assert 0 <= r["conformal_coverage"] <= 1 and r["conformal_width"] > 0
    assert all(
        math.isfinite(r["rmse_to_reference_mean"]) and r["wasserstein_1"] >= 0 for r in rows[1:]
    )
    by = {r["method"]: r for r in rows}
    assert by[DROPOUT_LABEL]["note"].endswith("mlp_regression_small_dropout")
    assert (
        storage.read_json(tmp_path / "tiny" / "hmc" / "run.json")["problem"]["validation_size"]
        == 40
    )
    stored = storage.read_json(tmp_path / "results.json")
    assert stored["tiny"]["rows"] == rows
    table = (tmp_path / "table.md").read_text()
    assert "| SGHMC-CLR-Prec |" in table
    assert all(f"| {label} |" in table for label in labels)
    assert "wasserstein_1" in table and "conformal_coverage" in table
    assert png_ok(tmp_path / "compare_methods.png")
    again = compare_methods.compare_methods(config, tmp_path, settings=TINY, progress=False)
    assert len(calls) == 1 + len(labels) and again.rows == result.rows


@pytest.mark.slow
def test_a_reference_made_by_the_recipe_and_a_subset_of_methods(tmp_path, monkeypatch):
    from bnnkit.experiments import reference

    # The reference by bnnkit reference's recipe (an ensemble, then a chain per member), and
    # only SGD against it: 3 runs (ensemble, chains, SGD), the reference's row first.
    calls = count_runs(monkeypatch)
    recipe = reference.Config(
        sampler="mclmc", members=2, num_tuning=4, num_samples=8, ensemble_steps=20
    )
    setting = dataclasses.replace(TINY["tiny"], reference=recipe, methods=("SGD",))
    result = compare_methods.compare_methods(
        compare_methods.Config(settings="tiny"),
        tmp_path,
        settings={"tiny": setting},
        progress=False,
    )
    rows = result.rows["tiny"]
    assert [r["method"] for r in rows] == ["MCLMC (reference)", "SGD"]
    assert len(calls) == 3
    assert (tmp_path / "tiny" / "hmc" / reference.REFERENCE_FILE).is_file()
    # The level of its verdict is recorded for the findings, and named in the note.
    assert rows[0]["levels"] in (*VERDICTS, None)
    assert rows[0]["note"].startswith("from the 2 members of a deep ensemble")
    assert rows[0]["note"].endswith(f"verdict {rows[0]['levels'] or 'not judged'}")
    # An MCLMC step is not a leapfrog step: SGD's step comes from the setting's HMC ε.
    assert rows[1]["note"].startswith(f"η₀ {10 * setting.hmc.step_size**2 / 2:.2g}")


@pytest.mark.slow  # five runs, each compiled: about 25 s on 2 cores
def test_point_estimates_get_the_prior_sgd_picks_on_validation_and_samplers_keep_the_settings(
    tmp_path, monkeypatch
):
    # Two candidates: one that collapses SGD's MAP to a constant, one under which it fits.
    # SGD (a point estimate) gets the fitting one; SGLD keeps the setting's prior.
    calls = count_runs(monkeypatch)
    collapse, fit = "gaussian:scale=0.001", "gaussian:scale=1.0"
    setting = dataclasses.replace(
        TINY["tiny"],
        methods=("SGD", "SGLD"),
        epochs=20,
        baseline_priors=(collapse, fit),
        baseline_validation=60,
    )
    result = compare_methods.compare_methods(
        compare_methods.Config(settings="tiny"),
        tmp_path,
        settings={"tiny": setting},
        progress=False,
    )
    by = {r["method"]: r for r in result.rows["tiny"]}
    # HMC, two candidates, SGD, SGLD (the collapsing candidate's step, 5e-6, diverges under
    # its precision 10⁶ and is made again at a tenth: that directory is called twice).
    assert {p.relative_to(tmp_path).as_posix() for p in map(Path, calls)} == {
        "tiny/hmc",
        "tiny/prior_choice/0",
        "tiny/prior_choice/1",
        "tiny/sgd",
        "tiny/sgld",
    }
    assert by["SGD"]["prior"] == fit and by["SGD"]["prior_choice"]["prior"] == fit
    assert f"prior {fit}, picked by SGD's NLL on 60 held-out" in by["SGD"]["note"]
    assert "prior" not in by["SGLD"]
    run = storage.read_json(tmp_path / "tiny" / "sgd" / "run.json")["problem"]
    assert run["prior"] == priors.spec.canonical(fit) and run["validation_size"] is None
    assert storage.read_json(tmp_path / "tiny" / "sgld" / "run.json")["problem"]["prior"] is None


def test_a_model_without_a_dropout_variant_gets_a_skipped_row_and_no_dropout_run():
    setting = dataclasses.replace(TINY["tiny"], problem=ProblemConfig("cifar10", "resnet20_frn"))
    skipped = compare_methods.skipped_methods(setting)
    assert list(skipped) == [DROPOUT_LABEL]
    assert "resnet20_frn_dropout" in skipped[DROPOUT_LABEL]
    for chosen, has_dropout in ((setting, False), (TINY["tiny"], True)):
        labels = compare_methods.methods(chosen, 1.0, 1.0, num_train=9)
        assert (DROPOUT_LABEL in labels) == has_dropout
    rows = [
        {"method": "HMC (reference)", "rmse": 0.3, "nll": 0.5, "seconds": 9.0, "note": ""},
        {"method": DROPOUT_LABEL, "note": skipped[DROPOUT_LABEL]},
    ]
    table = compare_methods.markdown("cifar", rows)
    assert (f"| {DROPOUT_LABEL} | — | — | — | {skipped[DROPOUT_LABEL]} |") in table


@pytest.mark.parametrize(
    ("eta", "num_train", "alpha"),
    [
        (1e-6, 100, 100 * 0.1 * 10 * 1e-6),  # N h₀ · 10 η: SGD's step while h is near h₀
        (1.0, 9, 0.1),  # capped at the paper's α
    ],
)
def test_ivon_starts_at_sgds_step_capped_at_the_papers(eta, num_train, alpha):
    config = compare_methods.methods(TINY["tiny"], eta, 1.0, num_train=num_train)["IVON"]
    assert config.hess_init == 0.1 and config.beta2 == 0.99999  # the published defaults
    assert config.init_step_size == pytest.approx(alpha, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1])
def test_a_conformal_level_outside_the_open_unit_interval_is_refused(alpha):
    with pytest.raises(ConfigError, match="conformal"):
        compare_methods.Config(conformal=alpha)


def test_unknown_setting_refused_with_exit_2_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(["experiment", "compare-methods", "--settings", "yacht,cifar", "--out", str(out)]) == 2
    )
    assert "unknown --settings 'cifar'; allowed: yacht, mnist160" in capsys.readouterr().err
    assert not out.exists()


def classification_rows() -> list[dict]:
    """Two methods' rows of a classification setting, each with its calibration bins."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 50)
    rows = []
    for method, sharpness in (("HMC (reference)", 1.0), ("SGD", 3.0)):
        probs = rng.dirichlet(np.full(3, 1.0 / sharpness), size=50)
        rows.append(
            {
                "method": method,
                "accuracy": 0.5,
                "nll": 0.9,
                "ece": 0.1,
                "calibration": calibration_bins(probs, labels),
                "seconds": 1.0,
                "note": "",
            }
        )
    return rows


def test_a_classification_setting_gets_a_reliability_diagram_and_no_bins_in_the_table(tmp_path):
    regression = [
        {"method": "HMC (reference)", "nll": 0.5, "rmse": 0.3, "seconds": 9.0, "note": ""}
    ]
    written = compare_methods.Comparison(
        {"mnist160": classification_rows(), "yacht": regression}, {"mnist160": {}, "yacht": {}}
    ).write(tmp_path)
    assert [p.name for p in written if p.name.startswith("reliability")] == [
        "reliability_mnist160.png"
    ]
    assert png_ok(tmp_path / "reliability_mnist160.png")
    assert not (tmp_path / "reliability_yacht.png").exists()
    stored = storage.read_json(tmp_path / "results.json")["mnist160"]["rows"]
    assert [sum(r["calibration"]["counts"]) for r in stored] == [50, 50]
    table = (tmp_path / "table.md").read_text()
    assert "| SGD | 0.5000 | 0.9000 | 0.1000 | 1 |  |" in table and "calibration" not in table
