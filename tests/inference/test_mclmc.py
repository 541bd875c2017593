"""MCLMC: its bias where unadjusted, exactness where adjusted, per-chain tuning and resume."""

from __future__ import annotations

import dataclasses

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnnkit
from bnnkit import runs, storage
from bnnkit.errors import ConfigError
from bnnkit.inference import ensemble, mclmc, mclmc_tuning
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.metrics import diagnostics
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from cli_checks import stored_units
from conjugate import conjugate_problem, linear_draws
from mcmc_checks import assert_expectations, assert_gaussian_moments, z_threshold

SCALES = jnp.logspace(-2, 2, 100)  # 100-d, posterior scales over four orders of magnitude


def spread_gaussian(params, batch):
    return -0.5 * jnp.sum((params["x"] / SCALES) ** 2)


def chains_runner(method, config):
    """``(init_positions, key) -> (states, kept positions, infos)``: every chain's iterations in
    one jitted scan, vmapped over chains as the run driver does; positions are (chains, S, ...)."""

    def one_chain(key, params):
        key_init, key_run = jax.random.split(key)
        state = method.init(key_init, params, None)

        def body(state, k):
            state, info = method.step(k, state, None)
            return state, (method.position(state), info)

        state, (positions, info) = jax.lax.scan(
            body, state, jax.random.split(key_run, config.num_iterations)
        )
        return state, jax.tree.map(lambda p: p[config.num_burn_in :], positions), info

    @jax.jit
    def run(init_positions, key):
        num_chains = jax.tree.leaves(init_positions)[0].shape[0]
        return jax.vmap(one_chain, axis_name=MEMBERS)(
            jax.random.split(key, num_chains), init_positions
        )

    return run


def run_chains(method, config, init_positions, key):
    return chains_runner(method, config)(init_positions, key)


@pytest.mark.slow
def test_unadjusted_bias_on_a_spread_gaussian_is_within_its_stated_bound():
    config = mclmc.Config(num_iterations=3000, num_burn_in=1000)
    num_chains = 8
    key = jax.random.PRNGKey(7)
    start = {"x": SCALES * jax.random.normal(jax.random.PRNGKey(8), (num_chains, 100))}
    state, positions, info = run_chains(mclmc.build(spread_gaussian, config), config, start, key)
    draws = np.asarray(positions["x"], np.float64) / np.asarray(SCALES, np.float64)
    z = z_threshold(2 * 100)
    # The target is symmetric and so is every transition (the integrator is palindromic, the
    # refreshment isotropic): the sampled distribution is symmetric too, and its means are
    # exact. Checked within z MCSE (Bonferroni over means and second moments, family-wise
    # error 1e-3), with the MCSE from the chains' ESS.
    assert_expectations(draws, np.zeros(100), "mean", z)
    # Second moments are off by the unadjusted sampler's bias (mclmc.SECOND_MOMENT_BIAS, measured
    # by benchmarks/mclmc_bias.py): each relative second moment E[θ²]/σ² − 1 lies within that
    # bound plus z of its own MCSE (sd of θ²/σ² over √ESS).
    squares = draws**2
    relative = squares.mean(axis=(0, 1)) - 1.0
    mcse = squares.std(axis=(0, 1)) / np.sqrt(diagnostics.ess(squares))
    excess = np.abs(relative) - (mclmc.SECOND_MOMENT_BIAS + z * mcse)
    worst = int(np.argmax(excess))
    assert np.all(excess < 0), (
        f"coordinate {worst} (σ {float(SCALES[worst]):.3g}): E[θ²]/σ² − 1 = {relative[worst]:.3f}, "
        f"outside ±{mclmc.SECOND_MOMENT_BIAS} + {z:.2f} MCSE ({mcse[worst]:.3f})"
    )
    # The bias is not zero: its mean over the 100 coordinates is many MCSE from 0.
    assert abs(relative.mean()) > 10 * np.sqrt(np.mean(mcse**2) / 100)
    # Tuned to the step size BlackJAX's own tuner finds for v = 0.1 on the whitened (standard
    # normal, 100-d) target: mclmc_find_L_and_step_size gave ε = 21.08..21.18 over 3 seeds,
    # 10,000 tuning steps each. Each chain's ε within 25 % of 21.1: the predictor's noise at
    # N = 150 effective steps (chains here spread 20.9..23.3). The realised mean of ΔE²/d is
    # not checked against v: at ε ≈ 2√d it varies between chains over two orders of magnitude
    # (0.003..1.1 here, 0.01..0.02 from BlackJAX's tuned kernel), in both implementations.
    eps = np.asarray(state.step_size)
    assert np.all(np.abs(eps / 21.1 - 1) < 0.25), eps
    # No divergences after tuning.
    assert int(np.sum(info.num_divergent[:, config.num_burn_in :])) == 0


@pytest.mark.slow
def test_adjusted_recovers_a_tempered_conjugate_posterior_at_its_target_acceptance():
    # T = 1 is in the protocol test's row; here T = 0.5, with the acceptance checked too.
    model, lp, batch, mean, cov = conjugate_problem()
    tempered = dataclasses.replace(lp, temperature=0.5)
    # The default tuning length: with 200 burn-in iterations the dual averaging, restarted when
    # the preconditioner is set, has 30 iterations left and freezes ε at an average still
    # pulled down by its first iterates (acceptance 0.99 after tuning, against 0.94 with 1,000).
    config = mclmc.Config(adjusted=True)
    method = mclmc.build(lambda p, b: tempered(p, batch), config)
    starts = jax.vmap(lambda k: model.init(k, batch.x[:1]))(
        jax.random.split(jax.random.PRNGKey(1), 4)
    )
    _, positions, info = run_chains(method, config, starts, jax.random.PRNGKey(2))
    assert_gaussian_moments(linear_draws(positions), mean, 0.5 * cov, "T=0.5")
    # ε freezes at its dual average, so the acceptance after tuning is at or above the target
    # (Hoffman & Gelman 2014): not significantly below it (3 MCSE, from the ESS of the
    # iterations' mean acceptance), and not ~1, which would mean a needlessly small step.
    acc = np.asarray(info.acceptance_rate[:, config.num_burn_in :], np.float64)
    mcse = acc.std() / np.sqrt(float(np.ravel(diagnostics.ess(acc))[0]))
    assert 0.9 - 3 * mcse < acc.mean() < 0.99


@pytest.mark.slow
def test_mclachlan_step_costs_the_stated_gradients():
    # BlackJAX's isokinetic McLachlan step evaluates the log density (and its gradient) this
    # many times: counted on eager calls, where every evaluation runs the Python function.
    calls = []

    def log_density(x):
        calls.append(1)
        return -0.5 * jnp.sum(x**2)

    state = blackjax.mcmc.mclmc.init(jnp.ones(3), log_density, jax.random.PRNGKey(0))
    calls.clear()
    kernel = blackjax.mcmc.mclmc.build_kernel()
    with jax.disable_jit():
        kernel(jax.random.PRNGKey(1), state, log_density, jnp.ones(3), 1.0, 0.1)
    assert len(calls) == mclmc.GRADIENTS_PER_STEP


def test_fewer_than_two_parameters_are_refused_in_one_line():
    with pytest.raises(ConfigError) as raised:
        bnnkit.sample(
            lambda p: -0.5 * jnp.sum(p["x"] ** 2),
            {"x": jnp.zeros((1, 1))},
            mclmc.Config(num_iterations=2, num_burn_in=1),
        )
    assert "at least 2 parameters" in str(raised.value) and "\n" not in str(raised.value)


def bimodal(params, batch):
    # Two far-apart modes, narrow (sd 0.05) at -20 and wide (sd 2) at +20, in 3-d: a chain
    # stays in the mode it starts in, and the step sizes they call for differ by 40x.
    x = params["x"]
    narrow = -0.5 * jnp.sum(((x + 20.0) / 0.05) ** 2) - 3 * jnp.log(0.05)
    wide = -0.5 * jnp.sum(((x - 20.0) / 2.0) ** 2) - 3 * jnp.log(2.0)
    return jnp.logaddexp(narrow, wide)


# The adjusted variants compile a second program of their own: slow checks.
VARIANTS = [
    pytest.param(False, id="unadjusted"),
    pytest.param(True, id="adjusted", marks=pytest.mark.slow),
]


@pytest.mark.slow
@pytest.mark.parametrize("adjusted", VARIANTS)
def test_no_statistic_crosses_chains(adjusted):
    # Without a preconditioner the step sizes themselves must differ.
    config = mclmc.Config(
        adjusted=adjusted, num_iterations=60, num_burn_in=50, num_chains=2, preconditioner="none"
    )
    method = mclmc.build(bimodal, config)
    key = jax.random.PRNGKey(0)
    near = {"x": jnp.stack([jnp.full(3, -20.0), jnp.full(3, 20.0)])}
    moved = {"x": jnp.stack([jnp.full(3, -20.0), jnp.full(3, 25.0)])}
    run = chains_runner(method, config)
    state, _, _ = run(near, key)
    other, _, _ = run(moved, key)
    # Each chain tuned to its own mode...
    eps = np.asarray(state.step_size)
    assert eps[1] > 5 * eps[0], eps
    # ...and chain 0 is the same, bit for bit, whatever chain 1 does.
    for a, b in zip(
        jax.tree.leaves(jax.tree.map(lambda v: v[0], state)),
        jax.tree.leaves(jax.tree.map(lambda v: v[0], other)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(state.position["x"][1], other.position["x"][1])


def stored(run_dir) -> dict[str, np.ndarray]:
    rundir = RunDir(run_dir)
    out = {f"{u}/{k}": v for u, arrays in stored_units(rundir).items() for k, v in arrays.items()}
    out.update({f"state/{k}": v for k, v in storage.load_arrays(rundir.state_file).items()})
    return out


# 12 iterations, 8 of tuning in four parts of 2 (step size; variance; readjust; autocorrelation),
# 3 transitions each: interrupted in the autocorrelation part (with the preconditioner set and
# the coordinates being recorded), resumed, interrupted again while sampling and resumed, the
# run stores exactly what the uninterrupted one does.
PARTS = dict(
    num_iterations=12,
    num_burn_in=8,
    steps_per_iteration=3,
    variance_fraction=0.25,
    readjust_fraction=0.25,
    autocorrelation_fraction=0.25,
    num_chains=2,
)


@pytest.mark.slow
@pytest.mark.parametrize("adjusted", VARIANTS)
def test_resume_is_bit_exact_during_tuning_and_sampling(adjusted, tmp_path):
    problem = ProblemConfig("yacht_0", "linear", noise_std=0.5)
    config = mclmc.Config(adjusted=adjusted, **PARTS)
    schedule = mclmc.schedule(config)
    assert (
        schedule.variance_start,
        schedule.variance_end,
        schedule.autocorrelation_start,
        schedule.rows,
    ) == (2, 4, 6, 6)
    runs.run(problem, config, tmp_path / "full", progress=False)
    part = tmp_path / "part"
    for stop in (6, 9):

        def interrupt(unit, log, stop=stop):
            if unit == stop:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            runs.run(problem, config, part, progress=False, on_unit=interrupt, resume=stop != 6)
    runs.run(problem, config, part, resume=True, progress=False)
    whole, resumed = stored(tmp_path / "full"), stored(part)
    assert sorted(resumed) == sorted(whole)
    for key in whole:
        np.testing.assert_array_equal(whole[key], resumed[key], err_msg=key)
    # The tuning did its parts: a preconditioner from the positions' variance, and L refined
    # from the autocorrelation at the end of tuning, then frozen.
    assert not np.allclose(whole["state/inverse_mass_matrix"], 1.0)
    lengths = [line["L"][0] for line in RunDir(tmp_path / "full").read_log()]
    assert lengths[8] != lengths[7] and len(set(lengths[8:])) == 1
    assert bnnkit.evaluate(tmp_path / "full")["sampler"]["num_leapfrog"][0] >= 3


@pytest.mark.slow
def test_chains_start_from_the_members_of_an_ensemble(tmp_path):
    problem = ProblemConfig("yacht_0", "linear", noise_std=0.5)
    runs.run(
        problem,
        ensemble.Config(init_step_size=1e-3, num_epochs=2, batch_size=32, num_members=3),
        tmp_path / "ensemble",
        progress=False,
    )
    source = RunDir(tmp_path / "ensemble")
    members = stored_units(source)[source.sample_units()[-1]]
    # One step of length 1e-6 from each member: chain k's first draw lies within 1e-6 of
    # member k (an isokinetic step moves the position by ε in norm, identity preconditioner).
    config = mclmc.Config(
        init_checkpoint=str(tmp_path / "ensemble"),
        num_chains=3,
        num_iterations=1,
        num_burn_in=0,
        steps_per_iteration=1,
        step_size=1e-6,
    )
    runs.run(problem, config, tmp_path / "mclmc", progress=False)
    run = RunDir(tmp_path / "mclmc")
    draws = stored_units(run)[run.sample_units()[0]]
    names = [k for k in members if not k.startswith("__")]
    flat = {
        name: np.concatenate([np.asarray(a[name]).reshape(3, -1) for a in (members, draws)], axis=0)
        for name in names
    }
    member = np.concatenate([flat[n][:3] for n in names], axis=1)
    chain = np.concatenate([flat[n][3:] for n in names], axis=1)
    distance = np.linalg.norm(chain[:, None] - member[None], axis=-1)
    assert np.all(np.diag(distance) < 2e-6), distance
    assert np.all(distance + np.eye(3) > 1e-3), distance  # the members are apart


def test_step_size_shrinks_on_an_energy_error_whose_square_overflows_float32():
    """From a sharp mode the first step's ΔE can be finite (1e25) while ΔE² is not in float32;
    the predictor must shrink ε by ξ^(−1/6), as for any other error, not turn it NaN."""
    tuner = mclmc.tuner(mclmc.Config())
    fresh = mclmc_tuning.MCLMCTuning(
        *[jnp.asarray(v, jnp.float32) for v in (-jnp.inf, -jnp.inf, jnp.inf)], *[None] * 9
    )
    dim, v, eps = 10, jnp.float32(0.1), jnp.float32(1.0)
    _, shrunk = mclmc_tuning.predict_step_size(fresh, eps, jnp.float32(1e25), True, dim, v, tuner)
    # ξ = 1e50 / (d v) = 1e50: ε · ξ^(−1/6) = 10^(−50/6), exact to float32 rounding of the logs.
    assert np.isfinite(float(shrunk))
    assert float(shrunk) == pytest.approx(10.0 ** (-50.0 / 6.0), rel=1e-5)
    # Below the overflow the same formula holds (the direct branch).
    _, small = mclmc_tuning.predict_step_size(fresh, eps, jnp.float32(1e10), True, dim, v, tuner)
    assert float(small) == pytest.approx(10.0 ** (-20.0 / 6.0), rel=1e-5)


@pytest.mark.slow
def test_a_step_past_the_energy_cap_is_taken_again_shorter_instead_of_undone():
    """With ε fixed at 1 (no tuning, no preconditioner) on the spread Gaussian, whose stiffest
    scale is 0.01, every step's energy error passes the cap. Undone at once (BlackJAX's
    handling, ``step_retries=0``), each step leaves the chain where it was, so it never moves;
    retried with ε/2, ε/4, ..., each step is resolved by a shorter one, none is undone, the
    chain moves, and the extra steps are logged and counted as gradients. Exact counts, not
    statistics: with ε = 0.2 no step passes the cap, with ε = 1 every one does."""
    init = {"x": jnp.asarray(np.random.default_rng(0).normal(size=(2, 100)) * SCALES)}
    found = {}
    for retries in (0, 4):
        config = mclmc.Config(
            num_iterations=40,
            num_burn_in=0,
            step_size=1.0,
            preconditioner="none",
            num_chains=2,
            step_retries=retries,
        )
        _, kept, info = run_chains(
            mclmc.build(spread_gaussian, config), config, init, jax.random.PRNGKey(1)
        )
        found[retries] = (np.asarray(kept["x"]), info)
    steps = 2 * 40 * 10  # chains x iterations x steps per iteration
    frozen, info = found[0]
    assert int(info.num_divergent.sum()) == steps and int(info.num_retried.sum()) == 0
    assert np.all(frozen == frozen[:, :1])
    moving, info = found[4]
    assert int(info.num_divergent.sum()) == 0 and int(info.num_retried.sum()) == steps
    assert int(info.num_leapfrog.sum()) > steps
    assert np.all(np.abs(np.diff(moving, axis=1)).max(axis=(1, 2)) > 0)
