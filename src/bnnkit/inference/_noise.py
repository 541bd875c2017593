"""Noise for every parameter at every step: one flat draw, split into the pytree's leaves.

One draw for all parameters is far cheaper (and faster to compile) than one RNG call per leaf.
Two distributions, both with mean 0 and identity covariance:

- :func:`normal_like`: ξ ~ N(0, I) from JAX's default (threefry) generator;
- :func:`rademacher_like`: ξ_j = ±1 with probability ½ each, 32 signs per threefry word.

Drawing a normal for each of ~5·10⁵ weights costs more than a minibatch gradient of a
784-400-400-10 MLP on CPU; Rademacher signs cost about a tenth of it. For SGLD/SGHMC the noise
only has to have the right first two moments: the Euler scheme with two-point increments of
matching mean and variance (the *simplified weak Euler scheme*, Kloeden & Platen 1992, §14.1)
has the same weak order 1 as with Gaussian increments, i.e. the same O(η) bias of expectations,
and the sum of many small steps is Gaussian by the central limit theorem. On a Gaussian target
the stationary mean and covariance are exactly those of Gaussian noise (they depend on the noise
covariance only), which ``tests/test_sgmcmc_exact.py`` checks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnnkit.types import Params

NOISES = ("gaussian", "rademacher")


def _split_flat(flat: jax.Array, tree: Params) -> Params:
    leaves, treedef = jax.tree.flatten(tree)
    parts, start = [], 0
    for leaf in leaves:
        parts.append(flat[start:start + leaf.size].reshape(leaf.shape).astype(leaf.dtype))
        start += leaf.size
    return treedef.unflatten(parts)


def _size(tree: Params) -> int:
    return sum(leaf.size for leaf in jax.tree.leaves(tree))


def normal_like(key: jax.Array, tree: Params) -> Params:
    """Standard normal noise shaped like ``tree``, from one draw.

    Example:
        >>> xi = normal_like(jax.random.PRNGKey(0), {"w": jnp.zeros((2, 3))})
        >>> xi["w"].shape
        (2, 3)
    """
    dtype = jax.tree.leaves(tree)[0].dtype
    return _split_flat(jax.random.normal(key, (_size(tree),), dtype), tree)


def rademacher_like(key: jax.Array, tree: Params) -> Params:
    """Random signs ±1 shaped like ``tree``: 32 from each 32-bit word of one draw.

    Each sign is one bit of a threefry word, written straight into the sign bit of 1.0.

    Example:
        >>> xi = rademacher_like(jax.random.PRNGKey(0), {"w": jnp.zeros(5)})
        >>> sorted(set(xi["w"].tolist())) in ([-1.0, 1.0], [-1.0], [1.0])
        True
    """
    n = _size(tree)
    words = jax.random.bits(key, (-(-n // 32), 1), jnp.uint32)
    shifted = words << jnp.arange(32, dtype=jnp.uint32)[None, :]
    one_with_sign = (shifted & jnp.uint32(0x80000000)) | jnp.uint32(0x3F800000)
    signs = jax.lax.bitcast_convert_type(one_with_sign, jnp.float32).reshape(-1)[:n]
    return _split_flat(signs, tree)


DRAWS = {"gaussian": normal_like, "rademacher": rademacher_like}
