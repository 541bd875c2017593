"""``bnnkit experiment prior-sweep``: HMC under several priors on a tiny setting, runs reused
on a second call, unknown datasets and priors refused."""

from __future__ import annotations

import math

import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.experiments import prior_sweep
from experiment_checks import count_runs, png_ok

TINY = {
    "yacht": prior_sweep.Setting(
        "yacht",
        "UCI yacht, split 0 (linear)",
        dict(dataset="yacht_0", model="linear", noise_std=0.5),
        scale=1.0,
        hmc=dict(
            step_size=1e-3,
            trajectory_len=0.003,
            num_iterations=2,
            num_burn_in=1,
            num_chains=1,
            max_num_leapfrog_steps=10,
        ),
        metric="rmse",
    )
}


@pytest.mark.slow  # two HMC runs and their evaluations: about 15 s on 2 cores
def test_each_prior_gets_a_row_and_runs_are_reused(tmp_path, monkeypatch):
    calls = count_runs(monkeypatch)
    config = prior_sweep.Config(datasets="yacht", priors="laplace,gaussian")
    result = prior_sweep.prior_sweep(config, tmp_path, settings_=TINY, progress=False)
    assert [r["prior"] for r in result.rows] == ["Gaussian σ=1", "Laplace"]
    assert [r["spec"] for r in result.rows] == ["gaussian:scale=1", "laplace:scale=0.707"]
    for r in result.rows:
        assert math.isfinite(r["rmse"]) and math.isfinite(r["nll"]) and r["seconds"] > 0
        assert 0 <= r["acceptance"] <= 1
        # The run's own verdict level, as evaluate gives it (the findings read it; None: too
        # few draws to judge).
        evaluation = storage.read_json(
            tmp_path
            / "runs"
            / f"yacht_{r['spec'].replace(':', '_').replace(',', '_')}"
            / "evaluation.json"
        )
        assert r["levels"] == (evaluation.get("levels") or {}).get("verdict")
    stored = storage.read_json(tmp_path / "results.json")  # R-hat is NaN with one chain
    assert [(r["spec"], r["nll"]) for r in stored] == [(r["spec"], r["nll"]) for r in result.rows]
    assert "`laplace:scale=0.707`" in (tmp_path / "prior_sweep.md").read_text()
    assert png_ok(tmp_path / "prior_sweep.png")
    assert len(calls) == 2
    prior_sweep.prior_sweep(config, tmp_path, settings_=TINY, progress=False)
    assert len(calls) == 2


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--datasets", "boston"], "unknown --datasets 'boston'; allowed: yacht, mnist160"),
        (["--priors", "cauchy"], "unknown --priors 'cauchy'"),
        (["--noise-std", "0"], "--noise-std 0.0 out of range"),
    ],
)
def test_bad_settings_refused_with_exit_2_and_nothing_written(flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["experiment", "prior-sweep", "--out", str(out), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_an_mclmc_setting_samples_from_the_members_and_says_so_in_its_table():
    import dataclasses

    from bnnkit.errors import ConfigError

    base = TINY["yacht"]
    setting = dataclasses.replace(
        base,
        sampler="mclmc",
        hmc=dict(
            num_iterations=12,
            num_burn_in=4,
            num_chains=2,
            init_checkpoint="/study/compare_methods/yacht/hmc/ensemble",
        ),
    )
    config = setting.sampler_config(3)
    assert (type(config).__module__, config.seed, config.num_chains) == (
        "bnnkit.inference.mclmc",
        3,
        2,
    )
    row = {
        "dataset": "yacht",
        "prior": "Laplace",
        "spec": "laplace:scale=0.707",
        "nll": 1.0,
        "rmse": 0.5,
        "acceptance": 1.0,
        "rhat_function_max": 1.01,
        "level": "converged",
        "seconds": 3.0,
    }
    table = prior_sweep.markdown([row], {"yacht": setting})
    assert (
        "MCLMC tuned per chain: 2 chains x 12 iterations (4 tuning), chain k from member "
        "k of the ensemble `compare_methods/yacht/hmc/ensemble`"
    ) in table
    with pytest.raises(
        ConfigError, match="unknown prior-sweep sampler 'nuts'; allowed: hmc, mclmc"
    ):
        dataclasses.replace(base, sampler="nuts").sampler_config(0)
