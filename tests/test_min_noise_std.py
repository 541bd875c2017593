"""The floor of a heteroscedastic network's noise std, ``--min-noise-std``: left unset it is the
1e-6 of before, bit for bit, and runs recorded before the setting existed read back as the
same problem; set, it is the likelihood's floor, the prior check measures the σ it gives, it is
recorded in ``run.json`` and refused where no network outputs a std."""

from __future__ import annotations

import argparse
import dataclasses
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bnnkit import likelihoods, prior_check
from bnnkit.commands.flags import add_config_arguments, config_from_args
from bnnkit.errors import ConfigError
from bnnkit.inference import sgd
from bnnkit.problem import POSTERIOR_SETTINGS, Problem, ProblemConfig, build, differences
from bnnkit.runs import composite
from bnnkit.runs.loop import run

YACHT = ("yacht_0", "mlp_regression_small")


def _arrays(n: int = 60, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (0.5 * x[:, 0] + 0.1 * rng.normal(size=n)).astype(np.float32)
    k = 2 * n // 3
    return x[:k], y[:k], x[k:], y[k:]


def test_unset_floor_is_the_old_likelihood_bit_for_bit():
    outputs = jax.random.normal(jax.random.PRNGKey(0), (64, 2)) * 8.0
    y = jax.random.normal(jax.random.PRNGKey(1), (64,))
    old = -0.5 * ((y - outputs[:, 0]) / (jax.nn.softplus(outputs[:, 1]) + 1e-6)) ** 2
    old = old - jnp.log(jax.nn.softplus(outputs[:, 1]) + 1e-6) - 0.5 * np.log(2 * np.pi)
    made = likelihoods.make(None, task="regression", num_classes=None, noise_std=None)
    assert made == likelihoods.Gaussian() and made.min_std == likelihoods.MIN_STD == 1e-6
    np.testing.assert_array_equal(np.asarray(made.log_prob(outputs, y)), np.asarray(old))
    problem = build(ProblemConfig(*YACHT))
    assert problem.config.min_noise_std is None
    assert problem.likelihood == likelihoods.Gaussian()


def test_floor_bounds_the_std_and_the_density():
    floored = likelihoods.Gaussian(min_std=0.05)
    outputs = jnp.array([[0.0, -50.0], [0.0, 0.0]])
    _, std = floored.mean_std(outputs)
    assert float(std[0]) == pytest.approx(0.05)
    assert float(std[1]) == pytest.approx(0.05 + np.log(2.0))
    # A point fitted exactly gains at most -log(0.05) - ½ log 2π nats, however small f₂ is.
    best = float(floored.log_prob(outputs[:1], jnp.zeros(1))[0])
    assert best == pytest.approx(-np.log(0.05) - 0.5 * np.log(2 * np.pi), rel=1e-5)
    problem = build(ProblemConfig(*YACHT, min_noise_std=0.05))
    assert problem.likelihood == likelihoods.Gaussian(min_std=0.05)
    assert problem.likelihood_at(problem.init_params(jax.random.PRNGKey(0))).min_std == 0.05


def test_old_records_read_back_as_the_unset_floor():
    config = ProblemConfig(*YACHT, weight_decay=30.0)
    stored = {k: v for k, v in dataclasses.asdict(config).items() if k != "min_noise_std"}
    assert ProblemConfig.from_dict(stored) == config
    assert ProblemConfig.from_dict(json.loads(json.dumps(stored))).min_noise_std is None
    # A reference recorded before the setting resumes with it unset, and not with it set.
    from bnnkit.experiments.reference import Config

    made = composite.Recipe("reference", config, Config(members=2), ())
    record = {**made.record(), "problem": stored}
    assert composite.resume_refusal(record, made) is None
    floored = dataclasses.replace(made, problem=dataclasses.replace(config, min_noise_std=0.05))
    refusal = composite.resume_refusal(record, floored)
    assert refusal == (
        "was made with --min-noise-std 1e-06 (keeps the std off zero); this call gives 0.05"
    )


def test_floor_is_a_posterior_setting_named_by_its_flag():
    assert "min_noise_std" in POSTERIOR_SETTINGS
    a, b = ProblemConfig(*YACHT, min_noise_std=0.1), ProblemConfig(*YACHT)
    assert differences(a, b, POSTERIOR_SETTINGS, "the reference") == [
        "--min-noise-std 0.1 (the reference: 1e-06 (keeps the std off zero))"
    ]
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, ProblemConfig)
    args = parser.parse_args(
        ["--dataset", "yacht_0", "--model", YACHT[1], "--min-noise-std", "0.05"]
    )
    assert config_from_args(args, ProblemConfig).min_noise_std == 0.05


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_noise_std": 0.0}, "--min-noise-std"),
        ({"min_noise_std": -0.1}, "--min-noise-std"),
        ({"min_noise_std": 0.05, "noise_std": 0.3}, "with --noise-std 0.3 there is none"),
        (
            {"min_noise_std": 0.05, "noise_prior": "lognormal:loc=-1,scale=1"},
            "give one or the other",
        ),
    ],
)
def test_floor_is_refused_where_no_network_outputs_a_std(settings, message):
    with pytest.raises(ConfigError, match=message):
        build(ProblemConfig(*YACHT, **settings))


def test_floor_is_refused_for_classification():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=30).astype(np.int32)
    with pytest.raises(ConfigError, match="gaussian likelihood only"):
        Problem.from_arrays(x[:20], y[:20], x[20:], y[20:], model=nn.Dense(3), min_noise_std=0.1)


def test_prior_check_measures_the_floored_std():
    # A linear noise head f₂ ~ N(0, s² (|x|² + 1)) at each input: σ = m + softplus(f₂) lies
    # below the check's floor c where f₂ < softplus⁻¹(c - m), a normal CDF per input.
    x_train, y_train, x_test, y_test = _arrays()
    common = dict(model=nn.Dense(2), weight_decay=0.01)  # weights N(0, 10²)
    loose = Problem.from_arrays(x_train, y_train, x_test, y_test, **common)
    floor = prior_check.FLOOR_FRACTION * float(np.std(np.asarray(y_train, np.float64)))
    half = Problem.from_arrays(x_train, y_train, x_test, y_test, min_noise_std=floor / 2, **common)
    x = np.asarray(x_train, np.float64)
    spread = 10.0 * np.sqrt(np.sum(x**2, axis=1) + 1.0)
    found = {}
    for name, problem, m in (("loose", loose, likelihoods.MIN_STD), ("half", half, floor / 2)):
        result = prior_check.check(problem, num_draws=400, num_inputs=40)
        expected = np.mean(stats.norm.cdf(np.log(np.expm1(floor - m)) / spread))
        assert abs(result.share_below_floor - expected) < 4 * result.share_se
        found[name] = result.share_below_floor
    assert found["half"] < found["loose"]
    # A floor above the check's (float32 rounds one at it either way) leaves nothing below it.
    at = Problem.from_arrays(x_train, y_train, x_test, y_test, min_noise_std=2 * floor, **common)
    result = prior_check.check(at, num_draws=100, num_inputs=40)
    assert result.share_below_floor == 0.0 and result.warning is None


def test_paper_network_with_a_floor_has_no_mass_below_the_check():
    paper = prior_check.check(build(ProblemConfig(*YACHT, weight_decay=1.0)))
    assert "--min-noise-std" in paper.warning
    floored = prior_check.check(build(ProblemConfig(*YACHT, weight_decay=1.0, min_noise_std=0.05)))
    assert floored.share_below_floor == 0.0 and floored.warning is None


def test_run_records_the_floor(tmp_path):
    run_dir = tmp_path / "run"
    config = ProblemConfig(*YACHT, min_noise_std=0.05)
    run(
        config,
        sgd.Config(init_step_size=1e-4, num_epochs=1, batch_size=64),
        run_dir,
        progress=False,
    )
    record = json.loads((run_dir / "run.json").read_text())
    assert record["problem"]["min_noise_std"] == 0.05
    assert ProblemConfig.from_dict(record["problem"]) == config
    assert record[prior_check.RECORD_KEY]["share_below_floor"] == 0.0
