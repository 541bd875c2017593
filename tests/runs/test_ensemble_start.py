"""Chains started from a deep ensemble: one chain per member, each starting at its member."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from bnnkit import ConfigError
from bnnkit.inference import ensemble, hmc
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs import run
from bnnkit.runs.initial import positions_from_run, with_chains
from bnnkit.runs.stored import load_run

PROBLEM = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.5)


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ens") / "ensemble"
    run(
        PROBLEM,
        ensemble.Config(init_step_size=1e-4, num_epochs=2, batch_size=64, num_members=3),
        folder,
        progress=False,
    )
    return folder


@pytest.mark.slow
def test_chains_default_to_one_per_member(ensemble_run, tmp_path):
    config = hmc.Config(
        step_size=1e-4,
        trajectory_len=1e-3,
        num_iterations=2,
        num_burn_in=1,
        init_checkpoint=str(ensemble_run),
    )
    assert config.num_chains is None and config.chains == 1  # unresolved until the run
    assert with_chains(config).num_chains == 3
    result = run(PROBLEM, config, tmp_path / "hmc", progress=False)
    assert result.record["method_config"]["num_chains"] == 3
    assert load_run(tmp_path / "hmc").posterior.num_chains == 3


def test_chain_k_starts_at_member_k(ensemble_run):
    members = load_run(ensemble_run).posterior.params  # (members, 1, ...)
    starts = positions_from_run(str(ensemble_run), build(PROBLEM), 3)
    for a, b in zip(jax.tree.leaves(members), jax.tree.leaves(starts), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[:, 0], np.asarray(b))


def test_a_given_number_of_chains_is_kept(ensemble_run):
    config = hmc.Config(
        step_size=1e-4, trajectory_len=1e-3, num_chains=5, init_checkpoint=str(ensemble_run)
    )
    assert with_chains(config) == config


def test_without_a_start_run_one_chain():
    config = hmc.Config(step_size=1e-4, trajectory_len=1e-3)
    assert with_chains(config) == dataclasses.replace(config, num_chains=1)


def test_chees_is_refused_for_chains_from_another_run(ensemble_run):
    with pytest.raises(ConfigError, match="pools its tuning across chains"):
        hmc.Config(
            step_size=1e-4,
            trajectory_len=1e-3,
            adapt="chees",
            num_chains=3,
            init_checkpoint=str(ensemble_run),
        )
