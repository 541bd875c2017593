"""The log-posterior convention: prior + (N/|B|)·likelihood sum, divided by T, once."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bnnkit import likelihoods, models, priors
from bnnkit.log_posterior import LogPosterior
from bnnkit.types import Batch


@pytest.fixture
def setup():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(30, 4)), jnp.float32)
    y = jnp.asarray(rng.normal(size=30), jnp.float32)
    model = models.get("mlp_regression_small", num_outputs=2)
    params = model.init(jax.random.PRNGKey(0), x[:1])
    return model, params, Batch(x, y)


def test_gaussian_prior_matches_scipy():
    rng = np.random.default_rng(1)
    params = {"a": rng.normal(size=(3, 2)), "b": rng.normal(size=5)}
    lam = 4.0
    expected = sum(stats.norm.logpdf(v, scale=1 / np.sqrt(lam)).sum() for v in params.values())
    assert float(priors.Gaussian(lam).log_prob(params)) == pytest.approx(expected, rel=1e-6)


def test_likelihoods_match_scipy():
    out = jnp.array([[0.3, -1.0], [1.5, 2.0]])
    y = jnp.array([0.0, 1.0])
    het = likelihoods.Gaussian()
    std = np.log1p(np.exp(np.array([-1.0, 2.0]))) + 1e-6
    np.testing.assert_allclose(
        het.log_prob(out, y), stats.norm.logpdf([0.0, 1.0], [0.3, 1.5], std), rtol=1e-5
    )
    fixed = likelihoods.Gaussian(noise_std=0.5)
    np.testing.assert_allclose(
        fixed.log_prob(out[:, :1], y), stats.norm.logpdf([0.0, 1.0], [0.3, 1.5], 0.5), rtol=1e-5
    )
    logits = jnp.array([[1.0, 2.0, 0.5]])
    cat = likelihoods.Categorical(num_classes=3)
    expected = np.log(np.exp(2.0) / np.exp([1.0, 2.0, 0.5]).sum())
    np.testing.assert_allclose(cat.log_prob(logits, jnp.array([1])), [expected], rtol=1e-6)


def test_full_batch_value_is_prior_plus_sum_over_temperature(setup):
    model, params, batch = setup
    lik, prior = likelihoods.Gaussian(), priors.Gaussian(2.0)
    total_ll = float(jnp.sum(lik.log_prob(model.apply(params, batch.x), batch.y)))
    for t in (1.0, 0.1):
        lp = LogPosterior(model.apply, lik, prior, num_data=30, temperature=t)
        expected = (float(prior.log_prob(params)) + total_ll) / t
        assert float(lp(params, batch)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_minibatch_estimate_is_unbiased_over_an_epoch(setup):
    model, params, batch = setup
    lp = LogPosterior(model.apply, likelihoods.Gaussian(), priors.Gaussian(1.0), num_data=30)
    grad = jax.grad(lp)
    full = grad(params, batch)
    parts = [
        grad(params, Batch(batch.x[i : i + 10], batch.y[i : i + 10])) for i in range(0, 30, 10)
    ]
    mean = jax.tree.map(lambda *g: sum(g) / 3, *parts)
    for a, b in zip(jax.tree.leaves(mean), jax.tree.leaves(full), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_chunked_equals_unchunked(setup):
    model, params, batch = setup
    kwargs = dict(likelihood=likelihoods.Gaussian(), prior=priors.Gaussian(1.0), num_data=30)
    plain = LogPosterior(model.apply, **kwargs)
    chunked = LogPosterior(model.apply, chunk_size=7, **kwargs)  # 30 = 4*7 + 2: padding is masked
    v1, g1 = jax.value_and_grad(plain)(params, batch)
    v2, g2 = jax.value_and_grad(chunked)(params, batch)
    assert float(v2) == pytest.approx(float(v1), rel=1e-5)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
