"""The dropout variants of the MLPs and LeNet-5: same parameters, the plain network without a
key, dropout of rate p on the input of every layer with one."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bnnkit import models
from bnnkit.errors import ConfigError
from bnnkit.models.mlp import MLP
from bnnkit.models.registry import DEFAULT_DROPOUT_RATE
from bnnkit.problem import ProblemConfig, build

# LeNet-5's convolutions, applied op by op here, take the longest to compile: a slow check.
PAIRS = [
    ("mlp_regression_small", (8, 6)),
    ("mlp_regression", (8, 6)),
    ("mlp_classification", (8, 12)),
    pytest.param("lenet5", (8, 28, 28, 1), marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("plain", "shape"), PAIRS)
def test_dropout_variant_is_the_plain_network_without_a_key(plain, shape):
    variant = models.get(f"{plain}_dropout", num_outputs=3)
    base = models.get(plain, num_outputs=3)
    assert variant.stochastic and variant.dropout_rate == DEFAULT_DROPOUT_RATE
    assert not base.stochastic and base.dropout_rate == 0.0
    x = jax.random.normal(jax.random.PRNGKey(0), shape)
    params = base.init(jax.random.PRNGKey(1), x[:1])
    same = variant.init(jax.random.PRNGKey(1), x[:1])
    assert jax.tree.structure(params) == jax.tree.structure(same)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(same), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(variant.apply(params, x), base.apply(params, x))
    noisy = variant.apply(params, x, key=jax.random.PRNGKey(2))
    assert not np.allclose(noisy, base.apply(params, x))
    np.testing.assert_array_equal(noisy, variant.apply(params, x, key=jax.random.PRNGKey(2)))


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_every_input_is_dropped_with_probability_p_and_kept_ones_scaled(rate):
    # A linear layer with the identity kernel shows its dropped inputs: output z/(1 − p) with
    # z ~ Bernoulli(1 − p). The number dropped among n inputs is Binomial(n, p); it must lie
    # within 4.9 standard deviations (two-sided 1e-6).
    d, batch = 50, 40
    net = MLP(hidden=(), num_outputs=d, dropout_rate=rate)
    params = {"params": {"Dense_0": {"kernel": jnp.eye(d), "bias": jnp.zeros(d)}}}
    out = np.asarray(
        net.apply(
            params,
            jnp.ones((batch, d)),
            deterministic=False,
            rngs={"dropout": jax.random.PRNGKey(0)},
        )
    )
    kept = out[out != 0]
    np.testing.assert_allclose(kept, 1 / (1 - rate), rtol=1e-6)
    n = out.size
    dropped = int(np.sum(out == 0))
    assert abs(dropped - n * rate) < stats.norm.ppf(1 - 5e-7) * np.sqrt(n * rate * (1 - rate))
    # Per example and input: different masks for different examples.
    assert not np.all(out[0] == out[1])


def test_rate_zero_is_the_plain_network_even_with_a_key():
    model = models.get("mlp_classification_dropout", num_outputs=3, dropout_rate=0.0)
    plain = models.get("mlp_classification", num_outputs=3)
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 12))
    params = plain.init(jax.random.PRNGKey(1), x[:1])
    np.testing.assert_array_equal(
        model.apply(params, x, key=jax.random.PRNGKey(2)), plain.apply(params, x)
    )


def test_problem_takes_the_rate_and_refuses_it_for_a_model_without_dropout():
    problem = build(
        ProblemConfig("yacht_0", "mlp_regression_small_dropout", noise_std=0.5, dropout_rate=0.25)
    )
    assert problem.log_posterior.stochastic and problem.log_posterior.dropout_rate == 0.25
    default = build(ProblemConfig("yacht_0", "mlp_regression_small_dropout", noise_std=0.5))
    assert default.log_posterior.dropout_rate == DEFAULT_DROPOUT_RATE
    plain = build(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.5))
    assert plain.log_posterior.dropout_rate == 0.0 and not plain.log_posterior.stochastic
    with pytest.raises(ConfigError, match=r"--dropout-rate 0\.2 applies to a model with dropout"):
        build(ProblemConfig("yacht_0", "mlp_regression_small", dropout_rate=0.2))
    with pytest.raises(ConfigError, match="dropout-rate"):
        ProblemConfig("yacht_0", "mlp_regression_small_dropout", dropout_rate=1.0)
