"""bnnkit.runs.sample: any log density over a pytree, with the driver's chains and verdict."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit.errors import ConfigError
from bnnkit.inference import hmc, nuts, sgd
from bnnkit.runs import sample
from mcmc_checks import assert_gaussian_moments

# A correlated 3-d Gaussian with scales over two orders of magnitude, split over two leaves.
MEAN = np.array([1.0, -2.0, 0.5])
COV = np.array([[1.0, 0.05, 0.0], [0.05, 0.01, 0.0], [0.0, 0.0, 1e-4]])
PRECISION = np.linalg.inv(COV)


def log_density(p):
    x = jnp.concatenate([p["a"], p["b"]]) - MEAN
    return -0.5 * x @ jnp.asarray(PRECISION, x.dtype) @ x


def start(num_chains):
    return {"a": jnp.zeros((num_chains, 2)), "b": jnp.zeros((num_chains, 1))}


def test_same_config_same_chains_and_the_seed_matters():
    config = hmc.Config(step_size=1e-2, trajectory_len=0.1, adapt="mass", num_chains=2,
                        num_iterations=20, num_burn_in=10)
    one, two = sample(log_density, start(2), config), sample(log_density, start(2), config)
    assert jax.tree.map(lambda x: x.shape, one.positions) == {"a": (2, 10, 2), "b": (2, 10, 1)}
    assert one.info.accepted.shape == (2, 20)
    np.testing.assert_array_equal(one.positions["a"], two.positions["a"])
    other = sample(log_density, start(2), hmc.Config(**{**config.to_dict(), "seed": 1}))
    assert not np.array_equal(one.positions["a"], other.positions["a"])


def test_refuses_minibatch_methods_and_positions_without_a_chain_axis():
    with pytest.raises(ConfigError, match="full-batch samplers"):
        sample(log_density, start(1), sgd.Config(init_step_size=1e-3, num_epochs=1,
                                                 batch_size=1))
    config = hmc.Config(step_size=1e-2, trajectory_len=0.1, num_chains=3, num_iterations=4)
    with pytest.raises(ConfigError, match="leading axis of length --num-chains 3"):
        sample(log_density, start(2), config)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hmc-mass", "hmc-chees", "nuts"])
def test_sample_recovers_a_gaussian_and_says_it_converged(name):
    # Every mean and covariance entry within Bonferroni-corrected MCSE (tests/mcmc_checks.py).
    common = dict(step_size=1e-2, num_chains=4, num_iterations=1500, num_burn_in=500)
    config = (nuts.Config(**common) if name == "nuts" else
              hmc.Config(**common, trajectory_len=2.0, adapt=name.split("-")[1]))
    chains = sample(log_density, start(4), config)
    draws = np.concatenate([chains.positions["a"], chains.positions["b"]], -1)
    assert_gaussian_moments(draws.astype(np.float64), MEAN, COV, name)
    # Exactly Gaussian, adapted: ESS in the thousands, R-hat ≈ 1; the verdict must agree.
    assert chains.convergence["converged"], chains.convergence["problems"]
