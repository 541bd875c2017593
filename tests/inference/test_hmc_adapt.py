"""HMC's adaptive modes (``--adapt mass`` and ``--adapt chees``) against exact posteriors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bnnkit.inference import hmc
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.metrics import diagnostics
from conjugate import conjugate_problem, linear_draws
from mcmc_checks import assert_gaussian_moments, z_threshold

pytestmark = pytest.mark.slow


def run_chains(method, params, batch, key, config):
    """Every chain in one jitted scan, vmapped under the driver's axis name (ChEES pools over
    it). Returns the kept positions (chains, samples, ...), the final states and the number of
    gradient evaluations per chain."""

    def one_chain(key, params):
        k_init, k_run = jax.random.split(key)
        state = method.init(k_init, params, batch)

        def body(state, k):
            state, info = method.step(k, state, batch)
            return state, (state.position, info.num_leapfrog, info.divergent)

        keys = jax.random.split(k_run, config.num_iterations)
        state, (positions, steps, divergent) = jax.lax.scan(body, state, keys)
        kept = jax.tree.map(lambda p: p[config.num_burn_in :], positions)
        return kept, state, steps, divergent

    keys = jax.random.split(key, config.num_chains)
    return jax.jit(jax.vmap(one_chain, axis_name=MEMBERS))(keys, params)


# Covariates multiplied by 100, 1 and 0.01: posterior standard deviations from ~1e-3 to ~0.7,
# so an identity mass matrix would need a step below 1e-3 and ~1,000 leapfrog steps for the
# widest direction.
BADLY_SCALED = (100.0, 1.0, 0.01)
CASES = {
    "mass-fisher": dict(adapt="mass", mass_estimator="fisher"),
    "mass-variance": dict(adapt="mass", mass_estimator="variance"),
    "chees": dict(adapt="chees", mass_estimator="fisher"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_adaptive_hmc_recovers_a_badly_scaled_conjugate_posterior(case):
    model, lp, batch, mean, cov = conjugate_problem(BADLY_SCALED)
    # Deliberately poor starting values: ε a thousand times too large for the narrowest
    # direction, τ two units of the whitened posterior; adaptation has to find the rest.
    config = hmc.Config(
        step_size=1.0,
        trajectory_len=2.0,
        num_iterations=1500,
        num_burn_in=500,
        num_chains=4,
        max_num_leapfrog_steps=1000,
        **CASES[case],
    )
    method = hmc.build(lp, config)
    init = jax.vmap(lambda k: model.init(k, batch.x[:1]))(
        jax.random.split(jax.random.PRNGKey(1), config.num_chains)
    )
    positions, state, _, divergent = run_chains(method, init, batch, jax.random.PRNGKey(2), config)
    # Mean and every covariance entry within Bonferroni-corrected MCSE (tests/mcmc_checks.py).
    assert_gaussian_moments(linear_draws(positions), mean, cov, case)
    # No sampling-phase divergences: the tuned step is stable for a Gaussian target.
    assert not np.any(np.asarray(divergent)[:, config.num_burn_in :])
    if case == "mass-variance":
        return  # Stan's estimator adds a 1e-3 regulariser, larger than the smallest variance
    # The Fisher estimator's target for a Gaussian is √(Σᵢᵢ / Λᵢᵢ) (Var ∇ log p = Λ), i.e. the
    # marginal variance up to the posterior's correlations. Its estimate comes from the last
    # slow window (200 draws per chain; pooled over 4 chains for ChEES): with ESS ≥ 50 the
    # relative standard error of a variance is ≤ √(2/50) = 0.2, of the square root of a ratio
    # of two ≤ 0.2, so a factor of 2 is ≥ 3.5 standard errors — while the scales themselves span
    # a factor of ~10⁶.
    precision = np.linalg.inv(cov)
    target = np.sqrt(np.diag(cov) / np.diag(precision))
    # M⁻¹ is ordered like ravel_pytree of the params: unravel the indices to find (w, b).
    one = jax.tree.map(lambda p: p[0], state.position)
    _, unravel = ravel_pytree(one)
    index = linear_draws(jax.tree.map(lambda p: p[None, None], unravel(jnp.arange(4.0))))
    estimated = np.asarray(state.inverse_mass_matrix)[:, index[0, 0].astype(int)]
    ratio = estimated / target
    assert np.all((ratio > 0.5) & (ratio < 2.0)), (case, ratio, target)
    assert np.ptp(np.log10(np.diag(cov))) > 5


def gaussian_100d():
    """A 100-d independent Gaussian with standard deviations log-spaced over two orders of
    magnitude (variances over four)."""
    scales = jnp.logspace(-2, 0, 100)

    def log_density(params, batch):
        del batch
        return -0.5 * jnp.sum((params["x"] / scales) ** 2)

    return log_density, np.asarray(scales)


def efficiency(config: hmc.Config, log_density, key) -> tuple[float, np.ndarray]:
    """(min over coordinates of the ESS of x and x², per gradient evaluation after burn-in;
    the kept draws)."""
    method = hmc.build(log_density, config)
    params = {"x": jnp.zeros((config.num_chains, 100))}
    positions, _, steps, _ = run_chains(method, params, None, key, config)
    draws = np.asarray(positions["x"], np.float64)
    ess = np.concatenate([diagnostics.ess(draws), diagnostics.ess(draws**2)])
    gradients = float(np.sum(np.asarray(steps)[:, config.num_burn_in :]))
    return float(np.min(ess)) / gradients, draws


def test_mass_matrix_pays_off_on_a_badly_scaled_gaussian():
    # Theory (Neal 2011, §4.2; Beskos et al. 2013): with an identity mass matrix, stability and
    # the target acceptance hold ε to a fixed fraction of the smallest scale σ_min, while an
    # independent draw of the widest coordinate needs an integration time of order σ_max, so
    # gradients per effective sample grow like κ = σ_max / σ_min = 100 here. With a diagonal
    # mass matrix equal to the variances every coordinate has scale 1 and the cost no longer
    # depends on κ. The expected ratio is therefore at least ~100 (more in practice: a fixed
    # trajectory resonates with the periods 2πσᵢ of some coordinates, whose x² then barely
    # mixes, which the adaptive mode's jittered trajectories avoid). We require k = 10,
    # leaving a factor of 10 for an estimated (not exact) mass matrix and ESS estimation error
    # (relative error ~ 1/√ESS, ~10 % here).
    log_density, scales = gaussian_100d()
    common = dict(num_iterations=1500, num_burn_in=500, num_chains=4, max_num_leapfrog_steps=2000)
    # Identity mass, ε adapted (the paper's mode), and the most favourable τ for the widest
    # coordinate: a quarter period (π/2 · σ_max), rounded up.
    identity, _ = efficiency(
        hmc.Config(step_size=1e-3, trajectory_len=1.6, adapt="step", **common),
        log_density,
        jax.random.PRNGKey(0),
    )
    adapted, draws = efficiency(
        hmc.Config(step_size=1e-3, trajectory_len=2.0, adapt="mass", **common),
        log_density,
        jax.random.PRNGKey(0),
    )
    assert adapted >= 10 * identity, (adapted, identity)
    # And it samples the right distribution: every variance within Bonferroni-corrected
    # standard errors, the standard error of a variance from draws with ESS n being ≈ σ²√(2/n).
    ess = diagnostics.ess(draws**2)
    err = np.abs(draws.var(axis=(0, 1)) - scales**2) / (scales**2 * np.sqrt(2 / ess))
    assert np.all(err < z_threshold(len(scales))), float(err.max())


@pytest.mark.parametrize(
    ("adapt", "expected"),
    [("step", 0.8), ("none", 0.8), ("mass", 0.9), ("chees", 0.9), ("MASS", 0.9)],
)
def test_each_mode_has_its_own_default_target(adapt, expected):
    config = hmc.Config(step_size=0.1, trajectory_len=1.0, adapt=adapt, num_chains=2)
    assert config.target_accept_rate == hmc.DEFAULT_TARGET_ACCEPT_RATE[adapt.lower()] == expected
    # An explicit target wins, and the resolved one is what is stored (so resume compares it).
    explicit = hmc.Config(
        step_size=0.1, trajectory_len=1.0, adapt=adapt, num_chains=2, target_accept_rate=0.65
    )
    assert explicit.target_accept_rate == 0.65
    assert hmc.Config(**config.to_dict()) == config
