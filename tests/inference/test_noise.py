"""The step noise of VI and SGLD/SGHMC: exact N(0, 1) draws, reproducible from their keys."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bnnkit.inference import _noise

# Every check below is a standardised deviation; |Z| > 5 happens by chance with probability
# 6e-7 per comparison for a correct generator.
Z = 5.0
N = 1_000_000


@pytest.fixture(scope="module")
def draws() -> np.ndarray:
    return np.asarray(_noise.standard_normal(jax.random.PRNGKey(7), (N,)), np.float64)


def test_moments_match_the_standard_normal(draws):
    # Sample moments of n iid N(0,1) draws: mean sd 1/√n, variance sd √(2/n), third moment
    # sd √(15/n) (Var z³ = E z⁶ = 15), fourth moment sd √(96/n) (Var z⁴ = 105 − 9).
    n = draws.size
    for power, exact, var in ((1, 0.0, 1.0), (2, 1.0, 2.0), (3, 0.0, 15.0), (4, 3.0, 96.0)):
        found = np.mean(draws**power)
        assert abs(found - exact) < Z * np.sqrt(var / n), (power, found)


def test_kolmogorov_smirnov_and_tails(draws):
    # KS: √n D is asymptotically Kolmogorov-distributed; P(√n D > 1.95) = 0.001.
    d = stats.kstest(draws, "norm").statistic
    assert np.sqrt(draws.size) * d < 1.95, d
    # Tail frequencies beyond 2, 3, 4 σ are binomial: sd √(p(1−p)/n).
    for t in (2.0, 3.0, 4.0):
        p = 2 * stats.norm.sf(t)
        found = np.mean(np.abs(draws) > t)
        assert abs(found - p) < Z * np.sqrt(p * (1 - p) / draws.size), (t, found, p)
    # Each normal uses 32 bits for the radius: the range reaches past jax's 5.3.
    assert np.abs(draws).max() > 4.5


def test_the_two_normals_of_a_pair_are_independent(draws):
    # The cos and sin halves share r: for an exact pair, z₁ and z₂ and their squares are
    # uncorrelated (Var(z₁²) = 2, so corr of squares has sd ≈ 1/√h as for the plain one).
    h = N // 2
    cos, sin = draws[:h], draws[h:]
    assert abs(np.corrcoef(cos, sin)[0, 1]) < Z / np.sqrt(h)
    assert abs(np.corrcoef(cos**2, sin**2)[0, 1]) < Z / np.sqrt(h)
    # The four quadrants are equally likely.
    counts = np.histogram2d(np.sign(cos), np.sign(sin), bins=2)[0].ravel()
    assert np.all(np.abs(counts - h / 4) < Z * np.sqrt(h * 3 / 16)), counts


def test_draws_are_a_pure_function_of_the_key():
    key = jax.random.PRNGKey(3)
    draw = jax.jit(_noise.standard_normal, static_argnums=1)
    a = draw(key, (5, 7))
    np.testing.assert_array_equal(a, draw(key, (5, 7)))  # a run's jitted step: bit-exact
    assert not np.allclose(a, draw(jax.random.PRNGKey(4), (5, 7)))
    # Under vmap (ensembles, chains) each key gives its own draws, those of the key alone
    # (up to how the compiler contracts multiply-adds in each program: float32 rounding).
    keys = jax.random.split(key, 3)
    batched = jax.jit(jax.vmap(lambda k: _noise.standard_normal(k, (5, 7))))(keys)
    for k, b in zip(keys, batched, strict=True):
        np.testing.assert_allclose(b, draw(k, (5, 7)), rtol=1e-5, atol=1e-6)


def test_normal_like_fills_a_tree_in_its_dtypes():
    tree = {"a": jnp.zeros((3, 2)), "b": jnp.zeros(5)}
    key = jax.random.PRNGKey(0)
    xi = jax.jit(_noise.normal_like)(key, tree)
    assert xi["a"].shape == (3, 2) and xi["b"].shape == (5,)
    eps = jax.jit(_noise.stacked_normal_like, static_argnums=2)(key, tree, 4)
    assert eps["a"].shape == (4, 3, 2) and eps["b"].dtype == jnp.float32
    # The stacked samples are one flat draw: sample s is row s of it.
    flat = jax.jit(_noise.standard_normal, static_argnums=1)(key, (4, 11))
    np.testing.assert_array_equal(eps["b"][2], flat[2, 6:])
