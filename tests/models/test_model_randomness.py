"""The model-randomness contract, with a small MLP with dropout registered for these tests only.

``model.apply(params, x, key=key)`` draws the model's randomness from ``key``; without a key the
model is deterministic. The log posterior passes a key on, and minibatch methods give it
``model_key(step_key)``; the predictive gives each posterior draw its own key; full-batch
samplers give none. A model without randomness ignores keys, so nothing changes for it.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import models, runs, storage
from bnnkit.evaluation import evaluate
from bnnkit.inference import hmc, sgd, sgmcmc, vi
from bnnkit.inference.base import model_key
from bnnkit.models.registry import ModelSpec
from bnnkit.posterior import Samples
from bnnkit.predict import predict
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs import RunDir

NAME = "dropout_mlp_under_test"


class DropoutMLP(nn.Module):
    """``x -> Dense(16) -> ReLU -> Dropout(0.5) -> Dense(num_outputs)``."""

    num_outputs: int

    @nn.compact
    def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
        x = nn.relu(nn.Dense(16)(x.reshape((x.shape[0], -1))))
        x = nn.Dropout(0.5, deterministic=deterministic)(x)
        return nn.Dense(self.num_outputs)(x)


@pytest.fixture
def dropout_model(monkeypatch):
    """The dropout MLP in the model registry for one test."""
    monkeypatch.setitem(
        models.MODELS,
        NAME,
        ModelSpec(
            make=lambda n: DropoutMLP(n),
            tasks=("regression", "classification"),
            input_rank=None,
            description="an MLP with dropout, for tests",
            stochastic=True,
        ),
    )
    return NAME


def differ(a, b) -> bool:
    return any(
        not np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


K1, K2 = jax.random.PRNGKey(11), jax.random.PRNGKey(12)


def test_model_apply_draws_from_its_key_only(dropout_model):
    model = models.get(dropout_model, num_outputs=2)
    assert model.stochastic
    x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
    params = model.init(jax.random.PRNGKey(1), x[:1])
    plain = model.apply(params, x)
    # No key: the deterministic mode, the network without dropout.
    np.testing.assert_array_equal(plain, DropoutMLP(2).apply(params, x, deterministic=True))
    np.testing.assert_array_equal(plain, model.apply(params, x))
    # A key: dropout drawn from it, the same for the same key, other for another.
    np.testing.assert_array_equal(
        model.apply(params, x, key=K1),
        DropoutMLP(2).apply(params, x, deterministic=False, rngs={"dropout": K1}),
    )
    assert differ(model.apply(params, x, key=K1), plain)
    assert differ(model.apply(params, x, key=K1), model.apply(params, x, key=K2))
    np.testing.assert_array_equal(model.apply(params, x, key=K1), model.apply(params, x, key=K1))


def test_a_model_without_randomness_ignores_keys():
    model = models.get("mlp_regression_small", num_outputs=2)
    assert not model.stochastic
    x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
    params = model.init(jax.random.PRNGKey(1), x[:1])
    np.testing.assert_array_equal(model.apply(params, x, key=K1), model.apply(params, x))


@pytest.mark.parametrize("chunk_size", [None, 100])
def test_log_posterior_passes_the_key_on(dropout_model, chunk_size):
    problem = build(ProblemConfig("yacht_0", dropout_model, noise_std=0.5, chunk_size=chunk_size))
    lp, batch = problem.log_posterior, problem.train_batch()
    assert lp.stochastic and (chunk_size is None or batch.x.shape[0] > chunk_size)
    params = problem.init_params(jax.random.PRNGKey(0))
    # Without a key: the deterministic network's log posterior, computed here by hand.
    norm, x = problem.dataset.input_normalization, batch.x
    if norm is not None:
        x = (x - jnp.asarray(norm.mean, x.dtype)) / jnp.asarray(norm.std, x.dtype)
    outputs = DropoutMLP(1).apply(params, x, deterministic=True)
    by_hand = lp.temper(lp.log_prior(params) + jnp.sum(lp.likelihood.log_prob(outputs, batch.y)))
    np.testing.assert_allclose(lp(params, batch), by_hand, rtol=1e-5)
    # With a key: dropout in every example's pass (every chunk's too), other keys, other values.
    assert float(lp(params, batch, key=K1)) != float(lp(params, batch))
    assert float(lp(params, batch, key=K1)) != float(lp(params, batch, key=K2))
    assert float(lp(params, batch, key=K1)) == float(lp(params, batch, key=K1))


def implied_gradient_error(before, after, eta, grad) -> float:
    """max |(θ₁ − θ₀)/η − g| / max |g| over the leaves: how far the step is from θ₀ + η g."""
    return max(
        float(np.max(np.abs((a - p) / eta - g)) / np.max(np.abs(g)))
        for p, a, g in zip(
            jax.tree.leaves(before), jax.tree.leaves(after), jax.tree.leaves(grad), strict=True
        )
    )


def test_sgd_gives_the_model_its_step_key(dropout_model):
    problem = build(ProblemConfig("yacht_0", dropout_model, noise_std=0.5))
    lp, batch = problem.log_posterior, problem.train_batch()
    eta = 1e-5
    method = sgd.build(lp, sgd.Config(init_step_size=eta, num_epochs=1, batch_size=32))
    state = method.init(None, problem.init_params(jax.random.PRNGKey(0)), None)
    # The first heavy-ball step is θ₁ = θ₀ + η ∇ log p(θ₀ | B), so (θ₁ − θ₀)/η is the gradient
    # the step used, up to float32 rounding of θ₀ + η g: |θ| ulp / η ≈ 1e-7 / 1e-5 of
    # max |g| ~ 1e2, about 1e-4 relative; 1e-3 allows for that. The gradient of the pass
    # keyed by model_key(K1) matches, that of another key or of no key is off by tens of %.
    one, _ = method.step(K1, state, batch)
    keyed = jax.grad(lp)(state.position, batch, key=model_key(K1))
    assert implied_gradient_error(state.position, one.position, eta, keyed) < 1e-3
    for other in (
        jax.grad(lp)(state.position, batch, key=model_key(K2)),
        jax.grad(lp)(state.position, batch),
    ):
        assert implied_gradient_error(state.position, one.position, eta, other) > 0.1
    assert differ(one.position, method.step(K2, state, batch)[0].position)
    assert not differ(one.position, method.step(K1, state, batch)[0].position)
    # A step called without a key takes the deterministic network's gradient.
    plain, _ = method.step(None, state, batch)
    assert (
        implied_gradient_error(
            state.position, plain.position, eta, jax.grad(lp)(state.position, batch)
        )
        < 1e-3
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "method_of",
    [
        lambda lp: sgmcmc.build(
            lp, sgmcmc.Config(init_step_size=1e-6, num_epochs=1, batch_size=32)
        ),
        lambda lp: vi.build(
            lp, vi.Config(init_step_size=1e-3, num_epochs=1, batch_size=32, vi_num_samples=2)
        ),
    ],
    ids=["sgmcmc", "vi"],
)
def test_other_minibatch_methods_draw_the_model_from_their_step_key(dropout_model, method_of):
    # The same step on the same model with and without randomness: with it, the step's result
    # depends on dropout too, so it differs from the deterministic network's step.
    problem = build(ProblemConfig("yacht_0", dropout_model, noise_std=0.5))
    batch = problem.train_batch()
    params = problem.init_params(jax.random.PRNGKey(0))
    stochastic = method_of(problem.log_posterior)
    deterministic = method_of(dataclasses.replace(problem.log_posterior, stochastic=False))
    state = stochastic.init(None, params, batch)
    assert differ(stochastic.step(K1, state, batch)[0], deterministic.step(K1, state, batch)[0])
    assert not differ(stochastic.step(K1, state, batch)[0], stochastic.step(K1, state, batch)[0])


def test_full_batch_samplers_run_the_deterministic_mode(dropout_model):
    problem = build(ProblemConfig("yacht_0", dropout_model, noise_std=0.5))
    lp, batch = problem.log_posterior, problem.train_batch()
    method = hmc.build(lp, hmc.Config(step_size=1e-4, trajectory_len=1e-3, num_iterations=2))
    params = problem.init_params(jax.random.PRNGKey(0))
    state = method.init(K1, params, batch)
    np.testing.assert_allclose(state.logdensity, lp(params, batch), rtol=1e-6)
    new, _ = method.step(K2, state, batch)
    np.testing.assert_allclose(new.logdensity, lp(new.position, batch), rtol=1e-6)


def test_predictive_gives_every_draw_its_own_key(dropout_model):
    problem = build(ProblemConfig("yacht_0", dropout_model, noise_std=0.5))
    params = problem.init_params(jax.random.PRNGKey(0))
    # Three identical draws: any difference between their passes is the model's randomness.
    samples = Samples.from_single_chain(jax.tree.map(lambda a: jnp.stack([a] * 3), params))
    x = problem.dataset.x_test
    plain = predict(problem, samples, x)
    assert not differ(plain.means[0], plain.means[1])  # no key: deterministic, all equal
    keyed = predict(problem, samples, x, key=K1)
    assert differ(keyed.means[0], keyed.means[1]) and differ(keyed.means[1], keyed.means[2])
    assert differ(keyed.means, predict(problem, samples, x, key=K2).means)
    assert not differ(keyed.means, predict(problem, samples, x, key=K1).means)
    # Each chunk of the inputs draws anew: the same inputs twice, in two chunks.
    twice = predict(problem, samples, np.concatenate([x, x]), key=K1, test_chunk=len(x))
    assert differ(twice.means[:, : len(x)], twice.means[:, len(x) :])


def test_predictive_of_a_model_without_randomness_ignores_keys():
    problem = build(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.5))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    samples = Samples.from_single_chain(jax.vmap(problem.init_params)(keys))
    x = problem.dataset.x_test
    plain, keyed = predict(problem, samples, x), predict(problem, samples, x, key=K1)
    np.testing.assert_array_equal(plain.means, keyed.means)
    np.testing.assert_array_equal(plain.stds, keyed.stds)


def test_sgd_run_on_a_stochastic_model_resumes_bit_for_bit_and_evaluates(dropout_model, tmp_path):
    problem = ProblemConfig("yacht_0", dropout_model, noise_std=0.5)
    config = sgd.Config(init_step_size=1e-5, num_epochs=3, batch_size=32)
    runs.run(problem, config, tmp_path / "full", progress=False)

    def interrupt(unit, log):
        if unit == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.run(problem, config, tmp_path / "part", progress=False, on_unit=interrupt)
    runs.run(problem, config, tmp_path / "part", resume=True, progress=False)
    whole, part = RunDir(tmp_path / "full"), RunDir(tmp_path / "part")
    a, b = storage.load_arrays(whole.state_file), storage.load_arrays(part.state_file)
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    first = evaluate(tmp_path / "full")["test"]
    assert np.isfinite(first["rmse"]) and np.isfinite(first["nll"])
    assert evaluate(tmp_path / "full")["test"] == first  # the evaluation key is the run's
