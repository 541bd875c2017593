"""HMC against exact posteriors: conjugate Bayesian linear regression and a 100-d Gaussian."""

from __future__ import annotations

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors
from bnnkit.inference import hmc
from bnnkit.inference.adaptation import Tuning
from bnnkit.inference.hmc_kernel import HMCState
from bnnkit.inference.hmc_modes import HMCAdaptationState
from bnnkit.log_posterior import LogPosterior
from bnnkit.metrics import diagnostics
from bnnkit.types import Batch
from mcmc_checks import assert_expectations, assert_gaussian_moments, z_threshold

pytestmark = pytest.mark.slow


def run_chains(method, params, batch, key, num_chains, num_iterations, num_burn_in):
    """All chains, all iterations in one jitted scan; returns kept positions (chains, S, ...)."""

    def one_chain(key, params):
        state = method.init(key, params, batch)

        def body(state, k):
            state, info = method.step(k, state, batch)
            return state, (state.position, info.accepted)

        keys = jax.random.split(key, num_iterations)
        _, (positions, accepted) = jax.lax.scan(body, state, keys)
        return jax.tree.map(lambda p: p[num_burn_in:], positions), accepted[num_burn_in:]

    keys = jax.random.split(key, num_chains)
    return jax.jit(jax.vmap(one_chain))(keys, params)


def conjugate_problem(temperature: float):
    rng = np.random.default_rng(0)
    n, d, noise, weight_decay = 40, 3, 0.5, 2.0
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ np.array([1.0, -0.5, 0.25]) + 0.3 + noise * rng.normal(size=n)).astype(np.float32)
    model = models.get("linear", num_outputs=1)
    lp = LogPosterior(
        model.apply,
        likelihoods.Gaussian(noise_std=noise),
        priors.Gaussian(weight_decay),
        n,
        temperature=temperature,
    )
    # Exact tempered posterior over z = (w, b): precision (λI + XᵀX/σ²)/T, mean Λ⁻¹Xᵀy/σ².
    xa = np.concatenate([x, np.ones((n, 1))], axis=1).astype(np.float64)
    precision = weight_decay * np.eye(d + 1) + xa.T @ xa / noise**2
    mean = np.linalg.solve(precision, xa.T @ y / noise**2)
    cov = np.linalg.inv(precision / temperature)
    return model, lp, Batch(jnp.asarray(x), jnp.asarray(y)), mean, cov


def flatten_linear(positions) -> np.ndarray:
    dense = positions["params"]["Dense_0"]
    w = np.asarray(dense["kernel"])[..., 0]  # (chains, S, d)
    b = np.asarray(dense["bias"])  # (chains, S, 1)
    return np.concatenate([w, b], axis=-1)


# T = 1 is in every sampler's row of tests/inference/test_protocol.py; here the tempered case.
@pytest.mark.parametrize("temperature", [0.5])
def test_hmc_recovers_conjugate_linear_regression(temperature):
    model, lp, batch, mean, cov = conjugate_problem(temperature)
    num_chains = 4
    init = jax.vmap(lambda k: model.init(k, batch.x[:1]))(
        jax.random.split(jax.random.PRNGKey(1), num_chains)
    )
    scale = float(np.sqrt(np.min(np.linalg.eigvalsh(cov))))
    method = hmc.build(
        lp,
        hmc.Config(
            step_size=0.3 * scale,
            trajectory_len=1.3 * float(np.sqrt(np.max(np.linalg.eigvalsh(cov)))),
            num_iterations=2200,
            num_burn_in=200,
        ),
    )
    positions, accepted = run_chains(
        method, init, batch, jax.random.PRNGKey(2), num_chains, 2200, 200
    )
    draws = flatten_linear(positions)
    # The step size adapts towards an acceptance rate of 0.8, and dual averaging freezes the
    # average log step, so the rate after burn-in is at or above the target (Hoffman & Gelman
    # 2014): not significantly below it (3 MCSE, from the ESS of the accept indicators), and
    # not ~1, which would mean a needlessly tiny step.
    acc = np.asarray(accepted, np.float64)
    mcse = acc.std() / np.sqrt(float(np.ravel(diagnostics.ess(acc))[0]))
    assert 0.8 - 3 * mcse < acc.mean() < 0.99
    assert_gaussian_moments(draws, mean, cov, f"T={temperature}")
    assert np.max(diagnostics.split_rhat(draws)) < 1.01


def test_hmc_standard_normal_100d():
    d, num_chains = 100, 4

    def lp(params, batch):
        return -0.5 * jnp.sum(params["theta"] ** 2)

    method = hmc.build(
        lp, hmc.Config(step_size=0.25, trajectory_len=1.3, num_iterations=1100, num_burn_in=100)
    )
    init = {"theta": 3.0 * jax.random.normal(jax.random.PRNGKey(0), (num_chains, d))}
    positions, _ = run_chains(method, init, None, jax.random.PRNGKey(3), num_chains, 1100, 100)
    draws = np.asarray(positions["theta"], np.float64)
    z = z_threshold(2 * d)
    assert_expectations(draws, np.zeros(d), "mean", z)
    assert_expectations(draws**2, np.ones(d), "variance", z)
    # Well-mixed chains: split R-hat near 1 (Vehtari et al. 2021 recommend < 1.01).
    assert np.max(diagnostics.split_rhat(draws)) < 1.01


def test_step_size_adapts_towards_target_and_freezes():
    def lp(params, batch):
        return -0.5 * jnp.sum(params["theta"] ** 2 / jnp.linspace(0.1, 1.0, 10) ** 2)

    method = hmc.build(
        lp,
        hmc.Config(
            step_size=1e-3,
            trajectory_len=0.5,
            num_iterations=500,
            num_burn_in=300,
            target_accept_rate=0.8,
            max_num_leapfrog_steps=1000,
        ),
    )
    state = method.init(None, {"theta": jnp.zeros(10)}, None)
    step = jax.jit(method.step)
    rates, sizes = [], []
    for i in range(500):
        state, info = step(jax.random.PRNGKey(i), state, None)
        rates.append(float(info.acceptance_rate))
        sizes.append(float(info.step_size))
    assert sizes[300] > 10 * 1e-3  # it moved away from the poor initial value
    assert len(set(sizes[300:])) == 1  # frozen after burn-in
    # Dual averaging freezes the average of log step sizes, which sits below the last iterate,
    # so the frozen acceptance is at or above the target (Hoffman & Gelman 2014). It must not be
    # significantly below it (3 standard errors), nor stuck at the ~1.0 of the tiny initial step.
    post = np.array(rates[300:])
    se = post.std() / np.sqrt(len(post))
    assert post.mean() > 0.8 - 3 * se
    assert post.mean() < 0.99


def test_nonfinite_energy_is_a_counted_divergence_not_a_crash():
    def lp(params, batch):
        # Finite at the start, NaN once the position leaves |θ| < 1.
        theta = params["theta"]
        return jnp.where(jnp.all(jnp.abs(theta) < 1.0), -0.5 * jnp.sum(theta**2), jnp.nan)

    method = hmc.build(
        lp, hmc.Config(step_size=0.5, trajectory_len=5.0, num_iterations=20, adapt_step_size=False)
    )
    start = {"theta": jnp.zeros(3)}
    state = method.init(None, start, None)
    divergent = 0
    for i in range(20):
        state, info = method.step(jax.random.PRNGKey(i), state, None)
        divergent += int(info.divergent)
        assert np.all(np.isfinite(np.asarray(state.position["theta"])))
    assert divergent > 0


def test_state_at_takes_each_field_from_its_namesake():
    """``HMCState.at`` builds the state positionally from BlackJAX's state, the tuning and the
    adaptation's state: each field must land where its name says."""
    point = blackjax.mcmc.hmc.HMCState(*blackjax.mcmc.hmc.HMCState._fields)
    tuning = Tuning(*Tuning._fields)
    tuned = HMCAdaptationState(*HMCAdaptationState._fields)
    state = HMCState.at(point, tuned, tuning, "iteration")
    assert state._asdict() == {
        **{f: f for f in HMCState._fields},
        "adaptation": "step",  # the adaptation state's dual averaging of ε
    }
