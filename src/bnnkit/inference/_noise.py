"""Noise for every parameter at every step: one flat draw, split into the pytree's leaves.

SGLD/SGHMC, IVON and Bayes by Backprop draw a noise value for every parameter at every step,
which on CPU is a large share of a step's cost (figures in ``docs/performance.md``, "Minibatch
methods' step noise"). One draw for all parameters is far cheaper (and faster to compile) than
one RNG call per leaf. Two distributions, both with mean 0 and identity covariance:

- :func:`normal_like`: ξ ~ N(0, I), exact (:func:`standard_normal`: Box–Muller on threefry bits);
- :func:`rademacher_like`: ξ_j = ±1 with probability ½ each, 32 signs per threefry word.

``jax.random.normal`` turns threefry's bits into normals by ``√2 erfinv(u)``.
:func:`standard_normal` takes the same bits (one 32-bit word per normal) and transforms them
with Box–Muller, whose ``log``/``√`` are shared by two normals and whose angle needs only
polynomials (no ``erfinv``, no library ``sin``/``cos`` with their range reduction); the
threefry bits, which both pay, are most of the cost (``benchmarks/normal_draws.py`` compares
generators and transforms). Rademacher signs need one bit per value instead of a word, so
they are much cheaper still. For SGLD/SGHMC the noise only has to
have the right first two moments: the Euler scheme with two-point increments of matching mean
and variance (the *simplified weak Euler scheme*, Kloeden & Platen 1992, §14.1) has the same
weak order 1 as with Gaussian increments, i.e. the same O(η) bias of expectations,
and the sum of many small steps is Gaussian by the central limit theorem. On a Gaussian target
the stationary mean and covariance are exactly those of Gaussian noise (they depend on the noise
covariance only), which ``tests/inference/test_sgmcmc_exact.py`` checks.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from bnnkit.types import Params

NOISES = ("gaussian", "rademacher")
#: Which transform of which bits gives the Gaussian noise; stored with each run, so a run whose
#: noise came from another generator is not resumed as if it were the same stream.
GENERATOR = "box-muller-threefry"


def _split_flat(flat: jax.Array, tree: Params) -> Params:
    leaves, treedef = jax.tree.flatten(tree)
    parts, start = [], 0
    for leaf in leaves:
        parts.append(flat[start : start + leaf.size].reshape(leaf.shape).astype(leaf.dtype))
        start += leaf.size
    return treedef.unflatten(parts)


def _size(tree: Params) -> int:
    return sum(leaf.size for leaf in jax.tree.leaves(tree))


# Taylor coefficients of sin(x)/x and cos(x) in x², to x¹³ and x¹⁴: on [0, π/2] the first term
# left out is below 7e-10, far under float32's half ulp (3e-8), so the polynomials are as exact
# as a library sin/cos after rounding to float32.
_SIN = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(7))
_COS = tuple((-1) ** k / math.factorial(2 * k) for k in range(8))


def _horner(coefficients: tuple[float, ...], x2: jax.Array) -> jax.Array:
    out = jnp.full_like(x2, coefficients[-1])
    for c in coefficients[-2::-1]:
        out = out * x2 + c
    return out


def _sign_bit(word: jax.Array, bit: int) -> jax.Array:
    """Bit ``bit`` of ``word`` moved to the float32 sign position (0x80000000 or 0)."""
    return ((word >> bit) & jnp.uint32(1)) << 31


def standard_normal(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Exact N(0, 1) float32 draws: Box–Muller on one threefry word per normal.

    Each pair of words ``(a, b)`` gives two independent normals

        r = √(−2 log u),  u = (a + ½) 2⁻³² ∈ (0, 1]
        (z₁, z₂) = (±r cos φ, ±r sin φ),  φ = (π/2) v,  v ∈ [0, 1) from b's top 23 bits,

    with the two signs from two low bits of ``b``, independent of ``v``. Since ``(r cos θ,
    r sin θ)`` with θ ~ U[0, 2π) is N(0, I₂) (Box & Muller 1958), and a uniform quadrant with
    a uniform angle inside it is a uniform θ, the pair is exactly N(0, I₂) up to the float32
    rounding of its inputs. u uses all 32 bits of ``a``, so ``|z|`` reaches 6.7
    (``jax.random.normal``'s 23-bit uniforms stop at 5.3); ``cos`` and ``sin`` on [0, π/2] are
    polynomials (see ``_SIN``, ``_COS``). The draws are a pure function of the threefry
    ``key``, as with ``jax.random.normal`` (whose values they do not reproduce).

    Example:
        >>> z = standard_normal(jax.random.PRNGKey(0), (3, 2))
        >>> z.shape, z.dtype
        ((3, 2), dtype('float32'))
    """
    n = math.prod(shape)
    half = -(-n // 2)
    words = jax.random.bits(key, (2, half), jnp.uint32)
    a, b = words[0], words[1]
    u = (a.astype(jnp.float32) + 0.5) * (2.0**-32)  # rounds to 1.0 at the top: r = 0, finite
    r = jnp.sqrt(-2.0 * jnp.log(u))
    mantissa = (b >> 9) | jnp.uint32(0x3F800000)  # 1 + v with v ∈ [0, 1) on a 2⁻²³ grid
    x = (jax.lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0) * (jnp.pi / 2)
    x2 = x * x
    cos, sin = r * _horner(_COS, x2), r * x * _horner(_SIN, x2)

    def with_sign(value, bit):
        flipped = jax.lax.bitcast_convert_type(value, jnp.uint32) ^ _sign_bit(b, bit)
        return jax.lax.bitcast_convert_type(flipped, jnp.float32)

    z = jnp.concatenate([with_sign(cos, 0), with_sign(sin, 1)])
    return z[:n].reshape(shape)


def normal_like(key: jax.Array, tree: Params) -> Params:
    """Standard normal noise shaped like ``tree``, from one draw of :func:`standard_normal`.

    Example:
        >>> xi = normal_like(jax.random.PRNGKey(0), {"w": jnp.zeros((2, 3))})
        >>> xi["w"].shape
        (2, 3)
    """
    return _split_flat(standard_normal(key, (_size(tree),)), tree)


def stacked_normal_like(key: jax.Array, tree: Params, num: int) -> Params:
    """``num`` standard normal draws shaped like ``tree``, leaves stacked ``(num, ...)``.

    One flat :func:`standard_normal` draw for all parameters and samples, then split.

    Example:
        >>> eps = stacked_normal_like(jax.random.PRNGKey(0), {"w": jnp.zeros((2, 3))}, 4)
        >>> eps["w"].shape
        (4, 2, 3)
    """
    leaves, treedef = jax.tree.flatten(tree)
    sizes = [leaf.size for leaf in leaves]
    flat = standard_normal(key, (num, sum(sizes)))
    parts, start = [], 0
    for size, leaf in zip(sizes, leaves, strict=True):
        parts.append(flat[:, start : start + size].reshape((num, *leaf.shape)).astype(leaf.dtype))
        start += size
    return treedef.unflatten(parts)


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
