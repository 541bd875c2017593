"""Every registered method satisfies the one method interface, and the run driver can use it."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors, runs, storage
from bnnkit.evaluation import evaluate
from bnnkit.inference import METHODS, sgd
from bnnkit.inference.base import Loop
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior import Posterior, store
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from bnnkit.runs.stored import combine
from bnnkit.types import Batch
from cli_checks import stored_units
from conjugate import conjugate_problem, linear_draws
from mcmc_checks import assert_gaussian_moments


def hmc_exact(scale_min: float, scale_max: float) -> dict:
    return dict(
        step_size=0.3 * scale_min,
        trajectory_len=1.3 * scale_max,
        num_iterations=2200,
        num_burn_in=200,
    )


# One row per method: the Config of a tiny run; whether the step draws randomness (its result
# must then depend on the key; otherwise it must not); and, for samplers of the full-batch
# posterior, the Config (from the posterior's smallest and largest standard deviations) with
# which they must recover the conjugate Bayesian linear regression posterior.
ROWS = {
    "hmc": (
        dict(step_size=1e-2, trajectory_len=0.05, num_iterations=4, num_burn_in=2),
        True,
        hmc_exact,
    ),
    "nuts": (
        dict(step_size=1e-2, num_iterations=4, num_burn_in=2),
        True,
        lambda lo, hi: dict(step_size=0.3 * lo, num_iterations=1200, num_burn_in=200),
    ),
    # MCLMC's adjusted variant is exact; the unadjusted default has a stated bias, checked in
    # tests/inference/test_mclmc.py.
    "mclmc": (
        dict(num_iterations=4, num_burn_in=2, steps_per_iteration=2),
        True,
        lambda lo, hi: dict(adjusted=True, num_iterations=1200, num_burn_in=200),
    ),
    "laplace": (
        dict(structure="last_layer", prior_precision="auto", curvature_chunk_size=100),
        False,
        None,
    ),
    "sgd": (dict(init_step_size=1e-3, num_epochs=2, batch_size=16), False, None),
    "ensemble": (
        dict(init_step_size=1e-3, num_epochs=2, batch_size=16, num_members=2),
        False,
        None,
    ),
    "sgmcmc": (
        dict(
            init_step_size=1e-3,
            num_epochs=2,
            batch_size=16,
            momentum_decay=0.9,
            preconditioner="rmsprop",
            num_chains=2,
        ),
        True,
        None,
    ),
    "vi": (
        dict(
            init_step_size=1e-3,
            num_epochs=2,
            batch_size=4,
            vi_num_samples=2,
            kl_weighting="blundell",
        ),
        True,
        None,
    ),
    "swag": (
        dict(
            init_step_size=1e-3,
            num_epochs=2,
            batch_size=16,
            num_burn_in=0,
            collect_every=1,
            max_rank=3,
            num_members=2,
        ),
        False,
        None,
    ),
    "ivon": (dict(init_step_size=0.1, num_epochs=2, batch_size=4, ivon_num_samples=2), True, None),
    "dropout": (dict(init_step_size=1e-3, num_epochs=2, batch_size=16, num_passes=3), False, None),
}


def tiny_problem():
    rng = np.random.default_rng(0)
    batch = Batch(
        jnp.asarray(rng.normal(size=(16, 3)), jnp.float32),
        jnp.asarray(rng.normal(size=16), jnp.float32),
    )
    model = models.get("linear", num_outputs=2)
    lp = LogPosterior(model.apply, likelihoods.Gaussian(), priors.Gaussian(1.0), num_data=16)
    return model, lp, batch


def leaves_equal(a, b) -> bool:
    return all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def test_every_method_has_a_row():
    assert sorted(METHODS) == sorted(ROWS), "add a row for every method to ROWS"


#: Cases that cost several times the others (a full-batch sampler's whole iteration, eager and
#: compiled; dropout's network; ChEES's adaptation over two chains): they run with the slow
#: checks, and every other method keeps the contract in make test.
SLOW_CASES = {"mclmc", "nuts", "dropout", "hmc-chees"}


def case(*values, id: str):
    """One parametrized case, marked slow when its id is in :data:`SLOW_CASES`."""
    return pytest.param(*values, id=id, marks=[pytest.mark.slow] if id in SLOW_CASES else [])


@pytest.mark.parametrize("name", [case(name, id=name) for name in sorted(METHODS)])
def test_method_protocol(name, tmp_path):
    module = METHODS[name]
    settings, stochastic, _ = ROWS[name]
    config = module.Config(**settings)
    assert name == config.METHOD
    # The Config is what run.json stores: it round-trips through JSON unchanged.
    assert module.Config.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert isinstance(config.loop(16), Loop)

    model, lp, batch = tiny_problem()
    method = module.build(lp, config)
    params = model.init(jax.random.PRNGKey(0), batch.x[:1])
    state = method.init(jax.random.PRNGKey(1), params, batch)

    # Pure: the eager step, called twice on the same inputs, gives the same state (no hidden
    # Python state such as counters or a global generator); the compiled step agrees with it.
    eager1, info = method.step(jax.random.PRNGKey(2), state, batch)
    eager2, _ = method.step(jax.random.PRNGKey(2), state, batch)
    assert leaves_equal(eager1, eager2)
    jitted, _ = jax.jit(method.step)(jax.random.PRNGKey(2), state, batch)
    for a, b in zip(jax.tree.leaves(eager1), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Randomness only through the key.
    other, _ = method.step(jax.random.PRNGKey(3), state, batch)
    assert leaves_equal(eager1, other) != stochastic
    # The state moved (or, for Laplace, gathered curvature) and the input state is untouched.
    assert not leaves_equal(eager1, state)
    assert leaves_equal(method.init(jax.random.PRNGKey(1), params, batch), state)

    # Info: a NamedTuple of finite numbers, which the driver logs under its field names.
    assert hasattr(info, "_fields") and info._fields
    for field, value in info._asdict().items():
        assert np.all(np.isfinite(np.asarray(value, np.float64))), field

    # Position has the structure of the params.
    assert jax.tree.structure(method.position(eager1)) == jax.tree.structure(params)

    # The posterior of kept states (stacked along a leading axis) draws n samples, and goes
    # through the one store unchanged.
    kept = jax.tree.map(lambda *xs: jnp.stack(xs), eager1, eager2)
    posterior = method.posterior(kept)
    assert isinstance(posterior, Posterior) and store.KINDS[posterior.kind] is type(posterior)
    draws = posterior.sample(jax.random.PRNGKey(4), 5)
    assert jax.tree.structure(draws) == jax.tree.structure(params)
    assert all(leaf.shape[0] == 5 for leaf in jax.tree.leaves(draws))
    store.save(tmp_path / "p.npz", [posterior, posterior])
    loaded = combine([store.load(tmp_path / "p.npz", params)])
    again = loaded.draws(jax.random.PRNGKey(5))
    first = posterior.draws(jax.random.PRNGKey(5))
    assert again.num_chains == 2 * first.num_chains
    assert again.num_samples == first.num_samples >= 1


def stored_run(run_dir) -> dict[str, np.ndarray]:
    """Every array a run stored: each kept unit's posterior and the last state."""
    rundir = RunDir(run_dir)
    out = {f"{u}/{k}": v for u, arrays in stored_units(rundir).items() for k, v in arrays.items()}
    out.update({f"state/{k}": v for k, v in storage.load_arrays(rundir.state_file).items()})
    return out


# HMC's adaptive modes: the run is interrupted during burn-in (in a slow window of Stan's
# schedule), so the resumed run must carry the adaptation's state (mass matrix, Welford windows,
# ChEES's optimiser) bit for bit.
ADAPTING = dict(num_iterations=12, num_burn_in=10)
RESUME_CASES = [(name, {}) for name in sorted(METHODS)] + [
    ("hmc", dict(ADAPTING, adapt="mass")),
    ("hmc", dict(ADAPTING, adapt="chees", num_chains=2)),
]


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        case(n, e, id=n + "".join(f"-{v}" for k, v in e.items() if k == "adapt"))
        for n, e in RESUME_CASES
    ],
)
def test_method_runs_resumes_bit_for_bit_and_evaluates(name, extra, tmp_path):
    # Through the one driver: an interrupted run, resumed, stores exactly what the
    # uninterrupted run stores, and bnnkit evaluate reads it like any other.
    module = METHODS[name]
    settings = dict(ROWS[name][0], **extra)
    # MC dropout refuses a network without dropout (at a step size its MLP takes); every
    # other method runs the linear model.
    model = "mlp_regression_small_dropout" if name == "dropout" else "linear"
    if name == "dropout":
        settings["init_step_size"] = 1e-5
    problem = ProblemConfig("yacht_0", model, noise_std=0.5)
    if module.Config.PROBLEM_FROM_SOURCE:
        runs.run(
            problem,
            sgd.Config(init_step_size=1e-4, num_epochs=2, batch_size=32),
            tmp_path / "source",
            progress=False,
        )
        settings[module.Config.SOURCE_FLAG.lstrip("-").replace("-", "_")] = str(tmp_path / "source")
        problem = None
    config = module.Config(**settings)
    full = runs.run(problem, config, tmp_path / "full", progress=False)
    assert full.num_units >= 2, "the row must make a run of at least two units"

    def interrupt(unit, log):
        if unit == full.num_units // 2 - 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.run(problem, config, tmp_path / "part", progress=False, on_unit=interrupt)
    runs.run(problem, config, tmp_path / "part", resume=True, progress=False)
    whole, resumed = stored_run(tmp_path / "full"), stored_run(tmp_path / "part")
    assert sorted(whole) == sorted(resumed) and any(k.startswith("state/") for k in whole)
    for key in whole:
        np.testing.assert_array_equal(whole[key], resumed[key], err_msg=key)
    result = evaluate(tmp_path / "full")
    assert np.isfinite(result["test"]["rmse"]) and np.isfinite(result["test"]["nll"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, row in ROWS.items() if row[2] is not None))
def test_sampler_recovers_the_conjugate_posterior(name):
    # Every mean and covariance entry within a Bonferroni-corrected number of MCSE, with the
    # MCSE from the chains' own ESS (family-wise error 1e-3; tests/mcmc_checks.py).
    module = METHODS[name]
    model, lp, batch, mean, cov = conjugate_problem()
    eig = np.linalg.eigvalsh(cov)
    config = module.Config(**ROWS[name][2](float(np.sqrt(eig.min())), float(np.sqrt(eig.max()))))
    method = module.build(lp, config)
    num_chains = 4

    def one_chain(key):
        k_init, k_run = jax.random.split(key)
        state = method.init(k_init, model.init(k_init, batch.x[:1]), batch)

        def body(state, k):
            state, _ = method.step(k, state, batch)
            return state, method.position(state)

        _, positions = jax.lax.scan(body, state, jax.random.split(k_run, config.num_iterations))
        return jax.tree.map(lambda p: p[config.num_burn_in :], positions)

    positions = jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.PRNGKey(2), num_chains))
    assert_gaussian_moments(linear_draws(positions), mean, cov, name)
