"""MC dropout: the prior-implied weight decay is E_q[log p(W)] exactly, the step follows its
key's masks, and a run on a dropout model stores, resumes and evaluates T stochastic passes."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors, runs, storage
from bnnkit.evaluation import evaluate
from bnnkit.inference import dropout
from bnnkit.inference.base import model_key
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior.mc_dropout import MCDropout
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs import RunDir
from bnnkit.runs.stored import load_run


def tiny_lp(prior, rate: float) -> LogPosterior:
    model = models.get("mlp_regression_small_dropout", num_outputs=1, dropout_rate=rate)
    return LogPosterior(
        model.apply,
        likelihoods.Gaussian(noise_std=1.0),
        prior,
        num_data=8,
        stochastic=True,
        dropout_rate=rate,
    )


@pytest.mark.parametrize(
    "prior", [priors.Gaussian(3.0), priors.make("laplace:scale=0.5")], ids=["gaussian", "laplace"]
)
@pytest.mark.parametrize("rate", [0.2, 0.5])
def test_expected_log_prior_is_the_average_over_every_mask(prior, rate):
    # q(W_i) = M_i diag(z_i): every row of every kernel is M's (probability 1 − p) or 0, with
    # M = K/(1 − p). With 2 + 3 rows there are 32 masks; their probability-weighted average of
    # log p(W) is E_q[log p(W)] exactly, to float rounding (float64 here).
    with jax.enable_x64(True):
        lp = tiny_lp(prior, rate)
        rng = np.random.default_rng(0)
        params = {
            "params": {
                "Dense_0": {
                    "kernel": jnp.asarray(rng.normal(size=(2, 3))),
                    "bias": jnp.asarray(rng.normal(size=3)),
                },
                "Dense_1": {
                    "kernel": jnp.asarray(rng.normal(size=(3, 1))),
                    "bias": jnp.asarray(rng.normal(size=1)),
                },
            }
        }
        total = 0.0
        for z in itertools.product([0, 1], repeat=5):
            masks = {"Dense_0": np.asarray(z[:2], float), "Dense_1": np.asarray(z[2:], float)}
            w = jax.tree.map(lambda a: a, params)  # new containers, same leaves
            for layer, mask in masks.items():
                kernel = params["params"][layer]["kernel"]
                w["params"][layer]["kernel"] = kernel * mask[:, None] / (1 - rate)
            prob = (1 - rate) ** sum(z) * rate ** (5 - sum(z))
            total += prob * float(lp.log_prior(w))
        np.testing.assert_allclose(float(dropout.expected_log_prior(lp, params)), total, rtol=1e-12)


def test_gaussian_prior_gives_the_papers_weight_decay():
    # λ/(2(1 − p)) ‖K‖² on the stored kernels, λ/2 ‖b‖² on the biases.
    lam, rate = 3.0, 0.25
    lp = tiny_lp(priors.Gaussian(lam), rate)
    params = models.get("mlp_regression_small", 1).init(jax.random.PRNGKey(0), jnp.ones((1, 2)))
    kernels = sum(float(jnp.sum(params["params"][k]["kernel"] ** 2)) for k in params["params"])
    biases = sum(float(jnp.sum(params["params"][k]["bias"] ** 2)) for k in params["params"])
    grad = jax.grad(lambda p: dropout.expected_log_prior(lp, p))(params)
    for layer in params["params"]:
        np.testing.assert_allclose(
            grad["params"][layer]["kernel"],
            -lam / (1 - rate) * params["params"][layer]["kernel"],
            rtol=1e-5,
        )
        np.testing.assert_allclose(
            grad["params"][layer]["bias"],
            -lam * params["params"][layer]["bias"],
            rtol=1e-5,
            atol=1e-7,
        )
    difference = float(dropout.expected_log_prior(lp, params) - lp.log_prior(params))
    assert difference == pytest.approx(-lam / 2 * (1 / (1 - rate) - 1) * kernels, rel=1e-4)
    assert biases >= 0  # the biases' term is the prior's own: it cancels in the difference


def test_step_takes_the_gradient_of_its_keys_masks():
    problem = build(
        ProblemConfig("yacht_0", "mlp_regression_small_dropout", noise_std=0.5, dropout_rate=0.3)
    )
    lp, batch = problem.log_posterior, problem.train_batch()
    eta = 1e-5
    method = dropout.build(
        lp, dropout.Config(init_step_size=eta, num_epochs=1, batch_size=32, momentum_decay=0.0)
    )
    state = method.init(None, problem.init_params(jax.random.PRNGKey(0)), None)
    key = jax.random.PRNGKey(5)
    new, info = method.step(key, state, batch)

    def objective(p, k):
        return lp.temper(dropout.expected_log_prior(lp, p)) + lp.tempered_log_likelihood(
            p, batch, key=k
        )

    keyed = jax.grad(objective)(state.position, model_key(key))
    for before, after, g in zip(
        jax.tree.leaves(state.position),
        jax.tree.leaves(new.position),
        jax.tree.leaves(keyed),
        strict=True,
    ):
        # θ₁ = θ₀ + η g up to float32 rounding of θ₀ (|θ| ulp / η relative to |g|).
        np.testing.assert_allclose(
            (after - before) / eta, g, rtol=2e-2, atol=2e-3 * np.max(np.abs(g))
        )
    other = method.step(jax.random.PRNGKey(6), state, batch)[0]
    assert not np.allclose(jax.tree.leaves(other.position)[0], jax.tree.leaves(new.position)[0])
    assert float(info.log_posterior) == pytest.approx(
        float(objective(state.position, model_key(key)))
    )


def test_run_on_a_dropout_model_resumes_and_evaluates_t_passes(tmp_path):
    problem = ProblemConfig(
        "yacht_0", "mlp_regression_small_dropout", noise_std=0.5, dropout_rate=0.2
    )
    config = dropout.Config(init_step_size=1e-5, num_epochs=3, batch_size=32, num_passes=6)
    runs.run(problem, config, tmp_path / "full", progress=False)

    def interrupt(unit, log):
        if unit == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.run(problem, config, tmp_path / "part", progress=False, on_unit=interrupt)
    runs.run(problem, config, tmp_path / "part", resume=True, progress=False)
    a = storage.load_arrays(RunDir(tmp_path / "full").state_file)
    b = storage.load_arrays(RunDir(tmp_path / "part").state_file)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)

    _, _, posterior, _ = load_run(tmp_path / "full", network=True)
    member = posterior  # one member, one kept unit: the approximation itself
    assert isinstance(member, MCDropout) and member.dropout_rate == 0.2
    assert member.num_draws == 6
    result = evaluate(tmp_path / "full")
    assert result["num_samples_per_chain"] == 6 and np.isfinite(result["test"]["nll"])
    # The six passes of the same weights differ: each drew its own masks.
    means = storage.load_arrays(tmp_path / "full" / "predictions" / "test.npz")["means"]
    assert means.shape[0] == 6 and not np.allclose(means[0], means[1])
    assert evaluate(tmp_path / "full")["test"] == result["test"]  # the evaluation key is fixed
