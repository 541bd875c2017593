"""Fully factorised Gaussian posterior ``q(θ) = Π_j N(θ_j; μ_j, σ_j²)`` (mean-field VI).

A VI run stores one per member (``bnnkit.posterior.store``: ``mean/...`` and ``std/...``
arrays); ``bnnkit evaluate`` averages the predictions of ``num_draws`` weight samples from it,
drawn with a key fixed by the run's seed, so repeated evaluations agree.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import storage
from bnnkit.posterior.samples import DrawnFromSample
from bnnkit.types import Key, Params


def standard_normal_like(key: Key, tree: Params, num: int) -> Params:
    """``num`` standard normal draws shaped like ``tree``, leaves stacked ``(num, ...)``.

    One flat draw for all parameters, then split: one RNG call instead of one per leaf, which
    is most of the cost of a Bayes-by-Backprop step beyond the gradient itself.
    """
    leaves, treedef = jax.tree.flatten(tree)
    sizes = [int(np.prod(leaf.shape)) for leaf in leaves]
    flat = jax.random.normal(key, (num, sum(sizes)), leaves[0].dtype)
    parts, start = [], 0
    for size, leaf in zip(sizes, leaves, strict=True):
        parts.append(flat[:, start : start + size].reshape((num, *leaf.shape)))
        start += size
    return treedef.unflatten(parts)


@jax.custom_jvp
def softplus(x: jax.Array) -> jax.Array:
    """``log(1 + eˣ)``, computed stably as ``max(x, 0) + log1p(e^{−|x|})``.

    Its derivative, the logistic sigmoid, reuses the same ``e^{−|x|}``: one exponential per
    element for value and gradient (``jax.nn.softplus`` takes two), which is measurable when σ
    of half a million weights is recomputed at every Bayes-by-Backprop step.

    Example:
        >>> float(softplus(jnp.float32(0.0)))  # log 2
        0.6931...
    """
    return jnp.maximum(x, 0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    e = jnp.exp(-jnp.abs(x))
    sigmoid = jnp.where(x >= 0, 1.0, e) / (1.0 + e)
    return jnp.maximum(x, 0) + jnp.log1p(e), sigmoid * dx


def inverse_softplus(x: jax.Array | float) -> jax.Array:
    """ρ with ``softplus(ρ) = x`` for ``x > 0``, stable for small and large ``x``."""
    x = jnp.asarray(x)
    return x + jnp.log(-jnp.expm1(-x))


@dataclasses.dataclass(frozen=True)
class DiagGaussian(DrawnFromSample):
    """A diagonal Gaussian over a params pytree.

    Attributes:
        mean: μ, shaped like the network's parameters.
        std: σ > 0, same structure.
        num_draws: weight samples a Bayesian model average over q uses (``draws``).

    Example:
        >>> q = DiagGaussian({"w": jnp.zeros(3)}, {"w": jnp.ones(3)})
        >>> q.sample(jax.random.PRNGKey(0), 5)["w"].shape
        (5, 3)
        >>> DiagGaussian.from_rho({"w": jnp.zeros(1)}, {"w": jnp.zeros(1)}).std["w"]  # log 2
        Array([0.6931472], dtype=float32)
    """

    mean: Params
    std: Params
    num_draws: int | None = None

    kind: ClassVar[str] = "diag_gaussian"

    @classmethod
    def from_rho(cls, mean: Params, rho: Params, num_draws: int | None = None) -> DiagGaussian:
        """From the unconstrained parameterisation ``σ = softplus(ρ)``."""
        return cls(mean, jax.tree.map(softplus, rho), num_draws)

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws ``μ + σ ⊙ ε``, ``ε ~ N(0, I)``, stacked ``(n, ...)``."""
        eps = standard_normal_like(key, self.mean, n)
        return jax.tree.map(lambda m, s, e: m + s * e, self.mean, self.std, eps)

    @property
    def signal_to_noise(self) -> Params:
        """``|μ| / σ`` per parameter (Blundell et al. 2015, Sec. 5.1)."""
        return jax.tree.map(lambda m, s: jnp.abs(m) / s, self.mean, self.std)

    def entropy(self) -> jax.Array:
        """``H[q] = Σ_j log σ_j + ½ d (1 + log 2π)``."""
        leaves = jax.tree.leaves(self.std)
        d = sum(leaf.size for leaf in leaves)
        return sum(jnp.sum(jnp.log(s)) for s in leaves) + 0.5 * d * (1.0 + jnp.log(2 * jnp.pi))

    # --- storage (bnnkit.posterior.store) ---

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            **storage.flatten_tree(self.mean, "mean/"),
            **storage.flatten_tree(self.std, "std/"),
        }

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> DiagGaussian:
        mean = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, "mean/"))
        std = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, "std/"))
        return cls(mean, std, meta.get("num_draws"))
