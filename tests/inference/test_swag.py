"""SWAG: its moments against the exact stationary moments of constant-step SGD on conjugate
Bayesian linear regression, and its collection and MultiSWAG through the run driver."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import runs
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate
from bnnkit.inference import swag
from bnnkit.metrics import diagnostics
from bnnkit.posterior.low_rank_gaussian import LowRankGaussian
from bnnkit.problem import ProblemConfig
from bnnkit.runs.stored import load_run
from bnnkit.types import Batch
from conjugate import conjugate_problem, linear_draws
from mcmc_checks import z_threshold

NOISE, WEIGHT_DECAY = 0.5, 2.0  # those of tests/conjugate.py


def stationary_moments(x: np.ndarray, y: np.ndarray, eta: float, batch: int):
    """Mean and covariance of SGD ``θ ← θ − η ĝ(θ)`` at stationarity, for the minibatch
    gradient ``ĝ`` of ``U(θ) = −log p(θ | D)`` on b examples drawn without replacement.

    With ``x̃_i = (x_i, 1)``, ``M_i = x̃_i x̃_iᵀ/σ²``, ``c_i = x̃_i y_i/σ²`` and
    ``r_i(θ) = M_i θ − c_i``, the full gradient is ``A θ − c`` with ``A = λI + Σ_i M_i``; the
    minibatch one adds noise of covariance ``κ S(θ)``, ``S(θ) = (1/N) Σ_i (r_i − r̄)(r_i − r̄)ᵀ``
    and ``κ = N²(N − b)/(b(N − 1))`` (sampling without replacement). The update is linear, so
    the stationary mean is the MAP ``μ = A⁻¹ c`` (the posterior mean) and, with ``P = I − ηA``,
    the covariance solves the Lyapunov equation

        Σ = P Σ Pᵀ + η² κ E[S(θ)],   E[S(θ)] = S(μ) + (1/N) Σ_i (M_i − M̄) Σ (M_i − M̄)ᵀ,

    a linear system in ``vec Σ`` (``vec(Q Σ Qᵀ) = (Q ⊗ Q) vec Σ``).
    """
    n, d = x.shape[0], x.shape[1] + 1
    xa = np.concatenate([x, np.ones((n, 1))], axis=1).astype(np.float64)
    M = np.einsum("ni,nj->nij", xa, xa) / NOISE**2
    c = xa * y[:, None].astype(np.float64) / NOISE**2
    A = WEIGHT_DECAY * np.eye(d) + M.sum(0)
    mu = np.linalg.solve(A, c.sum(0))
    kappa = n**2 * (n - batch) / (batch * (n - 1))
    r = M @ mu - c
    S_mu = np.cov(r.T, bias=True)
    Q = M - M.mean(0)
    P = np.eye(d) - eta * A
    lhs = np.eye(d * d) - np.kron(P, P) - eta**2 * kappa / n * sum(np.kron(q, q) for q in Q)
    sigma = np.linalg.solve(lhs, eta**2 * kappa * S_mu.reshape(-1)).reshape(d, d)
    return mu, 0.5 * (sigma + sigma.T)


def test_lyapunov_solution_is_stationary():
    # The covariance found solves its own equation (a check of the algebra above, in exact
    # linear algebra: float64 rounding only).
    _, _, batch, _, _ = conjugate_problem()
    x, y = np.asarray(batch.x), np.asarray(batch.y)
    mu, sigma = stationary_moments(x, y, 2e-3, 10)
    xa = np.concatenate([x, np.ones((len(x), 1))], axis=1).astype(np.float64)
    M = np.einsum("ni,nj->nij", xa, xa) / NOISE**2
    A = WEIGHT_DECAY * np.eye(4) + M.sum(0)
    P = np.eye(4) - 2e-3 * A
    kappa = 40**2 * 30 / (10 * 39)
    r = M @ mu - xa * y[:, None] / NOISE**2
    Q = M - M.mean(0)
    expected_S = np.cov(r.T, bias=True) + sum(q @ sigma @ q.T for q in Q) / 40
    np.testing.assert_allclose(
        sigma, P @ sigma @ P.T + 2e-3**2 * kappa * expected_S, rtol=1e-10, atol=1e-14
    )
    assert np.all(np.linalg.eigvalsh(sigma) > 0)


@pytest.mark.slow
def test_swag_moments_match_the_stationary_moments_of_constant_step_sgd():
    model, lp, data, _, _ = conjugate_problem()
    n, b, eta, every = lp.num_data, 10, 2e-3, 2
    x, y = np.asarray(data.x), np.asarray(data.y)
    mu, sigma = stationary_moments(x, y, eta, b)
    burn_epochs, epochs, rank, replicates = 50, 2550, 500, 4
    steps_per_epoch = n // b
    config = swag.Config(
        init_step_size=eta,
        swag_step_size=eta,
        num_epochs=epochs,
        batch_size=b,
        momentum_decay=0.0,
        num_burn_in=burn_epochs,
        collect_every=every,
        max_rank=rank,
    )
    method = swag.build(lp, config)
    total = epochs * steps_per_epoch
    burn = burn_epochs * steps_per_epoch
    num_collected = (total - burn) // every

    def replicate(key):
        k_init, k_run = jax.random.split(key)
        state = method.init(None, model.init(k_init, data.x[:1]), None)

        def body(state, k):  # b examples without replacement, independently at each step
            idx = jax.random.choice(k, n, (b,), replace=False)
            state, _ = method.step(None, state, Batch(data.x[idx], data.y[idx]))
            return state, state.position

        state, positions = jax.lax.scan(body, state, jax.random.split(k_run, total))
        return state, positions

    states, positions = jax.jit(jax.vmap(replicate))(
        jax.random.split(jax.random.PRNGKey(0), replicates)
    )
    # The iterates SWAG collected: after update t (from 1) with t > B and (t − B) mod c = 0.
    kept = np.arange(burn + every, total + 1, every) - 1
    iterates = linear_draws(jax.tree.map(lambda p: p[:, kept], positions))  # (R, n, 4)
    assert iterates.shape == (replicates, num_collected, 4)
    assert np.all(np.asarray(states.num_collected) == num_collected)

    def flat(tree):
        d = tree["params"]["Dense_0"]
        return np.concatenate([np.asarray(d["kernel"])[..., 0], np.asarray(d["bias"])], -1).astype(
            np.float64
        )

    # 1. SWAG's statistics are those of the iterates it collected (float32 rounding of
    #    Welford's update over n terms: relative 1e-4 is far above it and far below the
    #    sampling error checked in 2).
    swag_mean, swag_var = flat(states.mean), flat(states.m2) / num_collected
    np.testing.assert_allclose(swag_mean, iterates.mean(1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(swag_var, iterates.var(1), rtol=1e-3, atol=1e-9)
    posterior = method.posterior(jax.tree.map(lambda a: a[0][None], states))
    assert isinstance(posterior, LowRankGaussian) and posterior.rank == rank
    dev = np.concatenate(
        [
            np.asarray(posterior.deviations["params"]["Dense_0"]["kernel"])[..., 0],
            np.asarray(posterior.deviations["params"]["Dense_0"]["bias"]),
        ],
        -1,
    )
    # The ring buffer holds the last K deviations θ_i − θ̄_i (running mean after θ_i); the
    # float32 running mean carries rounding of order √n ε |θ̄| ≈ 5e-6 after n = 5000 updates,
    # so 5e-5 absolute (1/1000 of the deviations' scale) allows for it.
    running = np.cumsum(iterates[0], 0) / np.arange(1, num_collected + 1)[:, None]
    last = (iterates[0] - running)[-rank:]
    slots = (np.arange(num_collected - rank, num_collected)) % rank
    np.testing.assert_allclose(dev[slots], last, rtol=0, atol=5e-5)

    # 2. Against the exact stationary moments, within z Monte Carlo standard errors, the MCSE
    #    from the iterates' own ESS across the replicates (their autocorrelation included);
    #    z is Bonferroni-corrected over the 4 means, 4 variances and 10 covariance entries of
    #    the low-rank part (family-wise error 1e-3).
    z = z_threshold(4 + 4 + 10)

    def check(estimate, draws, truth, label):
        ess = diagnostics.ess(draws)
        mcse = draws.std(axis=(0, 1)) / np.sqrt(ess)
        err = np.abs(estimate - truth) / mcse
        assert np.all(err < z), f"{label}: {estimate} vs {truth}, {err} MCSE (allowed {z:.2f})"
        return mcse

    mcse = check(swag_mean.mean(0), iterates, mu, "SWAG mean")
    # ... and the MCSE is small: the check is strict (under 2 % of the stationary std).
    assert np.all(mcse < 0.02 * np.sqrt(np.diag(sigma)))
    centred = iterates - mu
    mcse = check(swag_var.mean(0), centred**2, np.diag(sigma), "SWAG diagonal variance")
    assert np.all(mcse < 0.03 * np.diag(sigma))  # a variance off by 15 % would fail
    # The low-rank part D Dᵀ/(K − 1) estimates Σ from the last K deviations.
    iu = np.triu_indices(4)
    low_rank = []
    for r in range(replicates):
        q = method.posterior(jax.tree.map(lambda a, r=r: a[r][None], states))
        d = np.concatenate(
            [
                np.asarray(q.deviations["params"]["Dense_0"]["kernel"])[..., 0],
                np.asarray(q.deviations["params"]["Dense_0"]["bias"]),
            ],
            -1,
        )
        low_rank.append((d.T @ d / (rank - 1))[iu])
    tail = centred[:, -rank:]
    check(
        np.mean(low_rank, 0),
        tail[..., iu[0]] * tail[..., iu[1]],
        sigma[iu],
        "SWAG low-rank covariance",
    )


def test_swag_refuses_settings_that_collect_fewer_than_two_iterates():
    _, lp, _, _, _ = conjugate_problem()
    config = swag.Config(init_step_size=1e-3, num_epochs=3, batch_size=40, num_burn_in=2)
    with pytest.raises(ConfigError, match="collect 1 iterate"):
        swag.build(lp, config)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        (dict(num_burn_in=4), "must be smaller than --num-epochs 4"),
        (dict(num_burn_in=1, step_size_schedule="cyclical"), "needs --cycle-length"),
        (dict(num_burn_in=1, step_size_schedule="cyclical", cycle_length=4), "does not fit"),
        (dict(num_burn_in=1, cycle_length=2), "applies to --step-size-schedule cyclical only"),
        (
            dict(num_burn_in=1, step_size_schedule="cyclical", cycle_length=1, swag_step_size=1e-3),
            "applies to --step-size-schedule constant only",
        ),
        (dict(num_burn_in=1, max_rank=1), "max-rank"),
    ],
)
def test_config_refuses(kw, fragment):
    with pytest.raises(ConfigError, match=fragment):
        swag.Config(init_step_size=1e-3, num_epochs=4, batch_size=8, **kw)


def test_cyclical_schedule_collects_at_the_end_of_every_cycle():
    config = swag.Config(
        init_step_size=1e-2,
        num_epochs=7,
        batch_size=8,
        num_burn_in=1,
        step_size_schedule="cyclical",
        cycle_length=2,
    )
    burn, every = config.collection_steps(steps_per_epoch=5)
    assert (burn, every) == (5, 10)
    schedule = config.schedule(5)
    # The iterate after update t = B + k c is collected; its step (update t − 1) is the
    # cycle's last, smallest one.
    ends = [burn + k * every - 1 for k in (1, 2, 3)]
    for t in ends:
        cycle = [float(schedule(u)) for u in range(t - every + 1, t + 1)]
        assert float(schedule(t)) == min(cycle) < 0.03 * 1e-2  # ½(1 + cos(0.9π)) = 0.024
    assert all(float(schedule(t + 1)) == pytest.approx(1e-2) for t in ends)


def test_multiswag_runs_members_and_evaluates(tmp_path):
    problem = ProblemConfig("yacht_0", "linear", noise_std=0.5)
    config = swag.Config(
        init_step_size=1e-4,
        num_epochs=3,
        batch_size=32,
        num_burn_in=1,
        collect_every=2,
        max_rank=4,
        num_members=3,
        swag_num_draws=5,
    )
    runs.run(problem, config, tmp_path / "run", progress=False)
    _, _, posterior, _ = load_run(tmp_path / "run", network=True)
    # Three members, each its own Gaussian with rank min(collected, K) = 4.
    assert len(posterior.components) == 3
    assert all(isinstance(q, LowRankGaussian) and q.rank == 4 for q in posterior.components)
    means = [
        np.concatenate([np.ravel(a) for a in jax.tree.leaves(q.mean)]) for q in posterior.components
    ]
    assert not np.allclose(means[0], means[1])  # own initialisation and data order
    result = evaluate(tmp_path / "run")
    assert result["num_chains"] == 3 and result["num_samples_per_chain"] == 5
    assert result["independent_draws"] and np.isfinite(result["test"]["nll"])
    assert jnp.isfinite(result["test"]["rmse"])
