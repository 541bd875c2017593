"""SWAG's diagonal plus low-rank Gaussian: its sampler has exactly the stated covariance."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit.posterior.low_rank_gaussian import LowRankGaussian


def posterior(rank: int, dtype) -> LowRankGaussian:
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    mean = {
        "a": jax.random.normal(keys[0], (3, 2), dtype),
        "b": jax.random.normal(keys[1], (4,), dtype),
    }
    var = {
        "a": jnp.exp(jax.random.normal(keys[2], (3, 2), dtype)),
        "b": jnp.exp(jax.random.normal(keys[3], (4,), dtype)),
    }
    dev = {
        "a": jax.random.normal(keys[4], (rank, 3, 2), dtype),
        "b": jax.random.normal(keys[5], (rank, 4), dtype),
    }
    return LowRankGaussian(mean, var, dev, num_draws=5)


def flat(tree) -> jax.Array:
    return jnp.concatenate(
        [leaf.reshape(leaf.shape[0], -1) for leaf in jax.tree.leaves(tree)], axis=1
    )


# Higher ranks differentiate a larger transform: with the slow checks.
@pytest.mark.parametrize(
    "rank", [1, 2, *(pytest.param(rank, marks=pytest.mark.slow) for rank in (5, 20))]
)
def test_sampler_covariance_is_half_diag_plus_low_rank(rank):
    # The sampler is affine in its standard normal noise, θ = μ + A z, so its covariance is
    # A Aᵀ exactly; A is the Jacobian of transform. In float64 each entry of A Aᵀ sums K + 1
    # products, so it may differ from ½(diag(v) + D Dᵀ/(K − 1)) by at most (K + 3) ε Σ_k
    # |A_ik A_jk| (ε the float64 unit roundoff), which is the bound checked.
    with jax.enable_x64(True):
        q = posterior(rank, jnp.float64)
        d = 10

        def draw(z):
            z_diag = jax.tree.unflatten(
                jax.tree.structure(q.mean), [z[None, :6].reshape(1, 3, 2), z[None, 6:d]]
            )
            return flat(q.transform(z_diag, z[None, d:]))[0]

        A = np.asarray(jax.jacfwd(draw)(jnp.zeros(d + rank, jnp.float64)))
        got = A @ A.T
        want = q.covariance()
        v = np.concatenate([np.asarray(a).ravel() for a in jax.tree.leaves(q.diag_var)])
        D = np.asarray(flat(q.deviations))
        by_hand = 0.5 * (np.diag(v) + (D.T @ D / (rank - 1) if rank >= 2 else 0.0))
        np.testing.assert_array_equal(want, by_hand)
        bound = (rank + 3) * np.finfo(np.float64).eps * (np.abs(A) @ np.abs(A).T)
        assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)
        # The draws are that map applied to standard normal noise: centred at μ.
        draws = flat(q.sample(jax.random.PRNGKey(1), 4))
        assert draws.shape == (4, d) and np.all(np.isfinite(np.asarray(draws)))
        np.testing.assert_array_equal(
            np.asarray(draw(jnp.zeros(d + rank, jnp.float64))),
            np.asarray(flat(jax.tree.map(lambda m: m[None], q.mean)))[0],
        )


def test_sample_uses_transform_of_standard_normal_noise():
    q = posterior(4, jnp.float32)
    key = jax.random.PRNGKey(3)
    k1, k2 = jax.random.split(key)
    from bnnkit.posterior.diag_gaussian import standard_normal_like

    expected = q.transform(
        standard_normal_like(k1, q.mean, 7), jax.random.normal(k2, (7, 4), jnp.float32)
    )
    for a, b in zip(jax.tree.leaves(q.sample(key, 7)), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(a, b)
