"""HMC with no tuning knobs (``--adapt auto``): what the settings resolve to, the cost of its
burn-in from a far start, NUTS's first step size, ChEES's guard against stranded chains, and
the conjugate posterior recovered with no knobs."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnnkit
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.inference import hmc, nuts
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.chees import pooled_chains
from bnnkit.metrics import mcmc
from bnnkit.runs import faults
from mcmc_checks import assert_gaussian_moments


def test_no_knobs_is_auto_and_both_knobs_are_the_papers_mode():
    default = hmc.Config()
    assert (default.adapt, default.num_burn_in, default.trajectory_len) == ("auto", 500, None)
    assert default.step_size == hmc.DEFAULT_STEP_SIZE  # where its search starts
    assert default.target_accept_rate == 0.8
    paper = hmc.Config(step_size=1e-3, trajectory_len=0.1, num_iterations=20)
    # Exactly what the paper's mode was when both were required: adapt "step", no burn-in.
    assert paper == hmc.Config(
        step_size=1e-3,
        trajectory_len=0.1,
        num_iterations=20,
        adapt="step",
        num_burn_in=0,
        target_accept_rate=0.8,
    )
    assert hmc.Config(step_size=1e-3, trajectory_len=0.1, adapt_step_size=False).adapt == "none"
    # One knob: the other is tuned, the given one is where it starts (ε) or kept (τ).
    assert hmc.Config(step_size=1e-3).adapt == "auto"
    assert hmc.Config(trajectory_len=2.0).adapt == "auto"
    assert hmc.Config(adapt="mass").trajectory_len == hmc.DEFAULT_TRAJECTORY_LEN["mass"]
    assert hmc.Config(adapt="chees", num_chains=4).trajectory_len == 1.0
    # Stored runs read back as they were made.
    assert hmc.Config.from_dict(default.to_dict()) == default
    assert hmc.Config.from_dict(paper.to_dict()) == paper


@pytest.mark.parametrize(
    "settings, named",
    [
        (dict(adapt="step", step_size=0.1), "--trajectory-len"),
        (dict(adapt="none", trajectory_len=1.0), "--step-size"),
        (dict(adapt="auto", num_burn_in=0), "--num-burn-in"),
        (dict(adapt="mass", num_burn_in=0), "--num-burn-in"),
    ],
)
def test_a_mode_without_what_it_needs_is_refused_in_one_line(settings, named):
    with pytest.raises(ConfigError, match=named) as refused:
        hmc.Config(**settings)
    assert "\n" not in str(refused.value)


def test_chees_warns_below_a_safe_number_of_chains():
    with pytest.warns(UserWarning, match="stranded"):
        hmc.Config(adapt="chees", num_chains=2)


def income_regression(n: int = 100):
    """Linear regression with known noise σ = 0.5 on a raw, income-scale predictor (income ~
    5e4 ± 2e4, not centred; N(0, 10²) priors): an exact 2-d Gaussian posterior whose sds are
    0.19 (intercept) and 3.5e-6 (slope), correlated −0.93 — the badly scaled case of
    ``benchmarks/sampler_defaults.py``."""
    rng = np.random.default_rng(20240)
    income = rng.normal(5e4, 2e4, n)
    x = np.stack([np.ones(n), income], 1)
    y = 1.0 + 2e-5 * income + rng.normal(0, 0.5, n)
    precision = x.T @ x / 0.25 + np.eye(2) / 100.0
    cov = np.linalg.inv(precision)
    mean = cov @ x.T @ y / 0.25
    xj, yj = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)

    def log_density(beta):
        return -0.5 * jnp.sum((yj - xj @ beta) ** 2) / 0.25 - 0.5 * jnp.sum(beta**2) / 100.0

    return log_density, mean, cov


@pytest.mark.slow
def test_burn_in_from_a_far_start_is_bounded_and_reaches_the_typical_set():
    """From uniform(-2, 2) starts the regression's log density is ~ -1e12 and the identity
    metric's stable step ~1e-6: ``mass``'s fixed τ took ~4,000 steps per iteration there. The
    default's burn-in runs NUTS whose trees are at most 63 steps deep until the first slow
    window has estimated a metric, and at most 1023 after: a bound from the schedule alone.
    Within it every chain reaches the typical set of the exact posterior (its log density
    within d/2 + 6·sqrt(d/2) of the mode's: a chi-square tail of 5e-4 for a draw from the
    posterior)."""
    log_density, mean, _ = income_regression()
    start = jax.random.uniform(jax.random.PRNGKey(0), (4, 2), minval=-2.0, maxval=2.0)
    burn_in = 500
    common = dict(num_chains=4, num_iterations=burn_in + 1, num_burn_in=burn_in)
    default = bnnkit.sample(log_density, start, hmc.Config(**common))
    cost = np.asarray(default.info.num_leapfrog)[:, :burn_in]
    early = hmc.hmc_adaptation(
        "auto", num_burn_in=burn_in, num_iterations=burn_in + 1, target=0.8
    ).early_until
    assert np.all(cost[:, : early + 1] <= 63) and np.all(cost <= 1023)
    mode = float(log_density(jnp.asarray(mean, jnp.float32)))
    reached = np.asarray(default.info.log_posterior)[:, burn_in - 1]
    assert np.all(reached > mode - (1.0 + 6 * np.sqrt(1.0))), reached


@pytest.mark.slow
def test_nuts_searches_a_first_step_size_per_chain():
    def log_density(x):  # curvature 3x², so the stable step depends on where a chain is
        return -0.25 * jnp.sum(x**4)

    start = jnp.stack([0.5 * jnp.ones(5), 3 * jnp.ones(5)])
    found = bnnkit.sample(
        log_density, start, nuts.Config(num_chains=2, num_iterations=2, num_burn_in=1)
    )
    first = np.asarray(found.info.step_size)[:, 0]
    # From 1e-3, Hoffman & Gelman's doubling and halving reach each start's own scale: the
    # chain where the curvature is 36 times larger gets a smaller step, both far from 1e-3.
    assert np.all(first > 0.05) and first[0] > 2 * first[1]
    fixed = bnnkit.sample(log_density, start, nuts.Config(num_chains=2, num_iterations=2))
    assert np.all(np.asarray(fixed.info.step_size) == np.float32(1e-3))  # no burn-in: kept


def test_pooled_chains_leaves_out_a_stranded_chain_only():
    keep = jax.vmap(lambda lp: pooled_chains(lp, 10), axis_name=MEMBERS)
    # Chains in a 10-d typical set (log densities within a few sds, sqrt(5) ~ 2.2) all stay.
    assert keep(jnp.array([-5.0, -9.0, -3.0, -12.0])).tolist() == [True] * 4
    assert keep(jnp.array([-5.0, -9.0, -3.0, -1e6])).tolist() == [True, True, True, False]
    assert keep(jnp.array([-5.0, jnp.nan, -3.0, -4.0])).tolist() == [True, False, True, True]
    # Two chains: the median is their mean and neither can be outvoted.
    assert keep(jnp.array([-5.0, -1e9])).tolist() == [True, True]


def test_chees_is_not_dragged_by_a_stranded_chain():
    """Four chains on a 20-d Gaussian with scales 0.1..1, one started 1e4 away: a stranded
    chain accepts nothing at the others' step size, and with its statistics pooled ChEES's
    harmonic-mean acceptance is ~0, which shrinks the shared ε to nothing (and the pooled mass
    matrix takes its distance as variance). Left out, the three others tune as if it were not
    there: their ε is that of four well-started chains within the dual averaging's noise
    (a factor of 1.5)."""
    scales = jnp.linspace(0.1, 1.0, 20)

    def log_density(x):
        return -0.5 * jnp.sum((x / scales) ** 2)

    good = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (4, 20))
    stranded = good.at[3].set(1e4)
    config = hmc.Config(adapt="chees", num_chains=4, num_iterations=201, num_burn_in=200)
    healthy = bnnkit.sample(log_density, good, config)
    guarded = bnnkit.sample(log_density, stranded, config)
    eps_healthy = float(np.asarray(healthy.state.step_size)[0])
    eps_guarded = float(np.asarray(guarded.state.step_size)[0])
    assert eps_healthy / 1.5 < eps_guarded < 1.5 * eps_healthy
    inverse_mass = np.asarray(guarded.state.inverse_mass_matrix)[0]
    assert np.all(inverse_mass < 10.0)  # the stranded chain's 1e4 is no variance


def test_a_capped_run_says_so():
    """A fixed trajectory of 10 and at most 2 leapfrog steps: every iteration after burn-in is
    capped, which the chains' warning names with the cap's advice."""

    def log_density(x):
        return -0.5 * jnp.sum(x**2)

    config = hmc.Config(
        adapt="mass",
        trajectory_len=10.0,
        max_num_leapfrog_steps=2,
        num_chains=2,
        num_iterations=60,
        num_burn_in=20,
    )
    chains = bnnkit.sample(log_density, jnp.zeros((2, 3)), config)
    capped = np.asarray(chains.info.capped)
    # τ = 10 in a unit Gaussian's metric wants ~u·10/ε ≫ 2 steps unless the iteration's
    # quasi-random fraction u is below ~2ε/10: most iterations after burn-in are capped.
    assert capped[:, 20:].mean() > 0.5
    assert any(
        "hit the cap on trajectory length" in w and "a larger max_num_leapfrog_steps" in w
        for w in chains.warnings
    )
    uncapped = bnnkit.sample(
        log_density,
        jnp.zeros((2, 3)),
        hmc.Config(step_size=0.2, trajectory_len=1.0, num_chains=2, num_iterations=30),
    )
    assert not np.asarray(uncapped.info.capped).any() and not uncapped.warnings


@pytest.mark.slow
def test_no_knobs_recover_the_conjugate_posterior():
    """``bnnkit.HMC()`` with nothing but chains and iterations on the exact 2-d regression
    posterior (badly scaled and correlated, from over-dispersed starts): means and every
    covariance entry within the Monte Carlo error of their ESS (mcmc_checks), and
    rank-normalised R-hat below 1.01."""
    log_density, mean, cov = income_regression()
    sd = np.sqrt(np.diag(cov))
    z = jax.random.normal(jax.random.PRNGKey(4), (4, 2))
    start = jnp.asarray(mean + 3 * sd * np.asarray(z), jnp.float32)
    chains = bnnkit.sample(
        log_density, start, bnnkit.HMC(num_chains=4, num_iterations=3000, seed=1)
    )
    draws = np.asarray(chains.positions, np.float64)
    assert np.max(mcmc.rhat(draws)) < 1.01
    assert_gaussian_moments(draws, mean, cov, "no knobs")


@pytest.mark.slow
def test_bnnkit_hmc_runs_without_knobs(tmp_path):
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "hmc",
                "--dataset",
                "yacht_0",
                "--model",
                "linear",
                "--noise-std",
                "0.35",
                "--num-iterations",
                "20",
                "--num-chains",
                "2",
                "--dir",
                str(run_dir),
                "--no-progress",
                "--no-evaluate",
            ]
        )
        == 0
    )
    config = json.loads((run_dir / "run.json").read_text())["method_config"]
    assert (config["adapt"], config["num_burn_in"], config["trajectory_len"]) == ("auto", 10, None)


@pytest.mark.slow
def test_the_default_resumes_bit_for_bit(tmp_path, monkeypatch):
    """Cut off after its second chunk (in NUTS's burn-in), resumed: the same chains, info and
    adapted state as the uninterrupted run, across the switch to static HMC."""

    def log_density(x):
        return -0.5 * jnp.sum((x / jnp.array([0.1, 1.0, 10.0])) ** 2)

    config = hmc.Config(num_chains=2, num_iterations=30, num_burn_in=20, checkpoint_every=5)
    start = jnp.ones((2, 3))
    whole = bnnkit.sample(log_density, start, config)
    reached = []

    def point(at):
        if at == "unit-done":
            reached.append(at)
            if len(reached) == 2:
                raise KeyboardInterrupt(at)

    monkeypatch.setattr(faults, "point", point)
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(log_density, start, config, run_dir=tmp_path / "run")
    monkeypatch.undo()
    resumed = bnnkit.sample(log_density, start, config, run_dir=tmp_path / "run", resume=True)
    for part in ("positions", "info", "state"):
        for a, b in zip(
            jax.tree.leaves(getattr(resumed, part)),
            jax.tree.leaves(getattr(whole, part)),
            strict=True,
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=part)
