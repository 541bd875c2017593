"""Signal-to-noise and magnitude pruning of a mean-field posterior."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit.errors import ConfigError
from bnnkit.experiments import pruning
from bnnkit.models.mlp import MLP
from bnnkit.posterior.diag_gaussian import DiagGaussian

FRACTIONS = [0.0, 0.25, 0.5, 0.75, 0.95, 0.98]


def mlp_posterior(seed=0):
    # 10-60-10 MLP: kernels of 600 + 600 = 1200 weights, so every fraction is a whole number.
    model = MLP(hidden=(60,), num_outputs=10)
    params = model.init(jax.random.PRNGKey(seed), jnp.zeros((1, 10)))
    rng = np.random.default_rng(seed)
    std = jax.tree.map(lambda p: jnp.asarray(rng.uniform(0.01, 1.0, p.shape), p.dtype), params)
    return model, DiagGaussian(params, std)


def kernels(tree):
    return [a for a in jax.tree.leaves(tree) if np.ndim(a) >= 2]


def biases(tree):
    return [a for a in jax.tree.leaves(tree) if np.ndim(a) < 2]


def test_pruning_nothing_leaves_predictions_unchanged():
    model, q = mlp_posterior()
    for criterion in pruning.CRITERIA:
        mask = pruning.keep_mask(q, 0.0, criterion)
        pruned = pruning.apply_mask(q.mean, mask)
        x = jax.random.normal(jax.random.PRNGKey(1), (32, 10))
        np.testing.assert_array_equal(model.apply(pruned, x), model.apply(q.mean, x))


@pytest.mark.parametrize("criterion", pruning.CRITERIA)
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_exactly_the_fraction_of_weights_is_zero(fraction, criterion):
    _, q = mlp_posterior()
    mask = pruning.keep_mask(q, fraction, criterion)
    pruned = pruning.apply_mask(q.mean, mask)
    num_weights = sum(a.size for a in kernels(q.mean))
    assert num_weights == 1200
    zeros = sum(int(np.sum(np.asarray(a) == 0)) for a in kernels(pruned))
    assert zeros == round(fraction * num_weights)
    # Biases are left alone; nothing else changed.
    for a, b in zip(biases(pruned), biases(q.mean), strict=True):
        np.testing.assert_array_equal(a, b)
    # The removed weights are the lowest-scoring ones.
    score = pruning.scores(q, criterion)
    kept = np.concatenate(
        [np.asarray(s)[np.asarray(m)] for s, m in zip(kernels(score), kernels(mask), strict=True)]
    )
    removed = np.concatenate(
        [np.asarray(s)[~np.asarray(m)] for s, m in zip(kernels(score), kernels(mask), strict=True)]
    )
    if removed.size:
        assert removed.max() <= kept.min()


def test_snr_and_magnitude_differ_and_biases_can_be_included():
    _, q = mlp_posterior()
    snr = pruning.keep_mask(q, 0.5, "snr")
    mag = pruning.keep_mask(q, 0.5, "magnitude")
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(snr), jax.tree.leaves(mag), strict=True)
    )
    with_b = pruning.keep_mask(q, 0.5, "snr", include_biases=True)
    total = sum(a.size for a in jax.tree.leaves(q.mean))
    assert sum(int(np.sum(~np.asarray(m))) for m in jax.tree.leaves(with_b)) == round(total / 2)
    assert pruning.log_snr_db(q).size == 1200


@pytest.mark.parametrize("fraction", [1.0, -0.1, 1.5, float("nan")])
def test_fraction_outside_unit_interval_is_refused(fraction):
    _, q = mlp_posterior()
    with pytest.raises(ConfigError, match=r"pruning fraction .* out of range; allowed: 0 <="):
        pruning.keep_mask(q, fraction)
