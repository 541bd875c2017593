"""The prior check: its share against a closed form, its warning on the paper's heteroscedastic
network and not with the noise fixed, and the record a run keeps of it, which evaluate shows.

The closed form: a linear network's noise pre-activation ``f₂ = x·w + b`` under N(0, s²) weights
is N(0, s² (|x|² + 1)) at each input, so the share of σ = softplus(f₂) + 1e-6 below the floor
is the mean over inputs of a normal CDF. The check's draws are independent, so its estimate
lies within 4 of its standard errors of that value but for a chance below 1e-4.
"""

from __future__ import annotations

import json

import flax.linen as nn
import numpy as np
import pytest
from scipy import stats

from bnnkit import likelihoods, prior_check
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate
from bnnkit.inference import sgd
from bnnkit.problem import Problem, ProblemConfig, build
from bnnkit.report.tables import rows
from bnnkit.runs.loop import run
from bnnkit.runs.provenance import settings_digest


def _linear_problem(weight_decay: float, noise_std: float | None = None) -> Problem:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3)).astype(np.float32)
    y = (0.5 * x[:, 0] + 0.1 * rng.normal(size=60)).astype(np.float32)
    return Problem.from_arrays(
        x[:40],
        y[:40],
        x[40:],
        y[40:],
        model=nn.Dense(2 if noise_std is None else 1),
        weight_decay=weight_decay,
        noise_std=noise_std,
    )


def test_share_below_floor_is_the_normal_cdf_of_a_linear_noise_head():
    problem = _linear_problem(weight_decay=0.01)  # weights N(0, 10²)
    assert problem.dataset.input_normalization is None  # the network sees x as given
    found = prior_check.check(problem, num_draws=400, num_inputs=40)
    x = np.asarray(problem.dataset.x_train, np.float64)
    target_std = float(np.std(np.asarray(problem.dataset.y_train, np.float64)))
    floor = prior_check.FLOOR_FRACTION * target_std
    # σ < floor  <=>  f₂ < softplus⁻¹(floor - MIN_STD)
    cut = np.log(np.expm1(floor - likelihoods.MIN_STD))
    expected = np.mean(stats.norm.cdf(cut / (10.0 * np.sqrt(np.sum(x**2, axis=1) + 1.0))))
    assert found.noise == "network" and found.num_draws == 400 and found.num_inputs == 40
    assert found.noise_floor == pytest.approx(floor)
    assert 0.05 < expected < 0.95  # a share the check can get wrong either way
    assert found.share_se > 0
    assert abs(found.share_below_floor - expected) < 4 * found.share_se
    # Above the threshold: it warns, naming the flags that fix it.
    assert found.warning is not None and "--noise-std" in found.warning


def test_prior_predictive_scale_is_the_sd_of_the_predicted_mean():
    # The mean head of the same network: f₁ ~ N(0, s² (|x|² + 1)), its sd averaged over inputs.
    problem = _linear_problem(weight_decay=1.0, noise_std=0.1)
    found = prior_check.check(problem, num_draws=400, num_inputs=40)
    x = np.asarray(problem.dataset.x_train, np.float64)
    expected = np.mean(np.sqrt(np.sum(x**2, axis=1) + 1.0))
    # The sd of 400 Gaussian draws is within 4 of its standard errors (sd/√(2n)) of the truth.
    assert abs(found.predictive_scale - expected) < 4 * expected / np.sqrt(2 * 400)
    assert found.share_below_floor == 0.0 and found.warning is None and found.noise == "fixed"


def test_paper_heteroscedastic_network_warns_and_fixed_noise_does_not():
    # The paper's N(0, 1) on the network that outputs its std (--weight-decay 1).
    paper = prior_check.check(
        build(ProblemConfig("yacht_0", "mlp_regression_small", weight_decay=1.0))
    )
    assert paper.share_below_floor - 4 * paper.share_se > prior_check.THRESHOLD
    assert paper.warning.startswith("the prior puts ")
    for flag in ("--noise-std", "--noise-prior", "--prior", "--weight-decay"):
        assert flag in paper.warning
    fixed = prior_check.check(
        build(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35))
    )
    assert fixed.share_below_floor == 0.0 and fixed.warning is None
    # Targets standardised: the floor is a thousandth of their unit sd.
    assert fixed.target_std == pytest.approx(1.0, rel=1e-3)


def test_the_default_prior_of_such_a_network_passes_the_check():
    # Its default precision (3) leaves less than the threshold below the floor, by more than
    # 4 standard errors of the Monte Carlo share.
    default = prior_check.check(build(ProblemConfig("yacht_0", "mlp_regression_small")))
    assert default.share_below_floor + 4 * default.share_se < prior_check.THRESHOLD
    assert default.warning is None


def test_classifier_is_measured_against_uniform():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=50).astype(np.int32)
    problem = Problem.from_arrays(
        x[:40], y[:40], x[40:], y[40:], model=nn.Dense(3), weight_decay=1e4
    )  # weights ~ 0: near-uniform predictions
    found = prior_check.check(problem, num_draws=50, num_inputs=20)
    assert found.task == "classification" and found.warning is None
    assert found.entropy_uniform == pytest.approx(np.log(3))
    assert found.entropy == pytest.approx(np.log(3), abs=0.01)
    assert found.max_prob == pytest.approx(1 / 3, abs=0.01)


def test_bad_sizes_are_refused():
    problem = _linear_problem(weight_decay=1.0, noise_std=0.1)
    with pytest.raises(ConfigError, match="num_draws 1 must be >= 2"):
        prior_check.check(problem, num_draws=1)


def test_run_records_the_check_and_evaluate_shows_it(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run(
        ProblemConfig("yacht_0", "mlp_regression_small", weight_decay=1.0),  # the paper's
        sgd.Config(init_step_size=1e-4, num_epochs=1, batch_size=64),
        run_dir,
        progress=False,
    )
    err = capsys.readouterr().err
    assert err.count("bnnkit: warning: the prior puts ") == 1
    record = json.loads((run_dir / "run.json").read_text())
    recorded = record[prior_check.RECORD_KEY]
    assert recorded["warning"] is not None and recorded["warning"] in err
    # Outside the digested settings: the digest is that of the record without it.
    without = {k: v for k, v in record.items() if k != prior_check.RECORD_KEY}
    assert record["settings_sha256"] == settings_digest(without)
    result = evaluate(run_dir, write=False)
    assert result["prior_check"] == recorded
    table = dict(rows(result))
    assert "% (±" in table["prior check"] and table["  warning"] == recorded["warning"]
    # The terminal's table shows a check that warns, without its note.
    terminal = dict(rows(result, full=False))
    assert terminal["  warning"] == recorded["warning"] and "  note" not in terminal
    # A run made before runs recorded the check still reads, saying so.
    (run_dir / "run.json").write_text(json.dumps(without))
    old = evaluate(run_dir, write=False)
    assert old["prior_check"] is None
    assert dict(rows(old))["prior check"].startswith("not recorded")
    assert "prior check" not in dict(rows(old, full=False))


def test_prior_predictive_command_prints_the_check(tmp_path, capsys):
    from bnnkit.cli import main

    out = tmp_path / "prior.png"
    assert (
        main(
            [
                "prior-predictive",
                "--dataset",
                "yacht_0",
                "--model",
                "mlp_regression_small",
                "--num-draws",
                "20",
                "--num-points",
                "10",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err.count("bnnkit: warning: the prior puts ") == 1
    assert captured.out.startswith("prior check (") and out.is_file()
    assert main(["prior-predictive", "--noise-std", "0.35", "--out", str(out)]) == 2
    assert "needs --dataset and --model" in capsys.readouterr().err


@pytest.mark.slow  # a whole reference
def test_a_reference_tells_its_prior_check_once(tmp_path, capsys):
    from bnnkit.experiments.reference import Config, reference

    config = Config(sampler="nuts", members=2, num_tuning=4, num_samples=8, ensemble_steps=20)
    problem = ProblemConfig("yacht_0", "linear", weight_decay=1e-8)  # a prior far too wide
    reference(problem, config, tmp_path / "ref", progress=False)
    assert capsys.readouterr().err.count("bnnkit: warning: the prior") == 1
    # Both stages record it.
    for stage in ("ensemble", "chains"):
        record = json.loads((tmp_path / "ref" / stage / "run.json").read_text())
        assert record[prior_check.RECORD_KEY]["warning"] is not None
