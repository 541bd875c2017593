"""Fully factorised Gaussian posterior ``q(θ) = Π_j N(θ_j; μ_j, σ_j²)`` (mean-field VI).

Stored in a VI run's ``state.npz`` as the variational parameters ``mean/...`` (μ) and ``rho/...``
(ρ, with ``σ = softplus(ρ) = log(1 + e^ρ)``), one leading axis per trained member. ``bnnkit
evaluate`` reads it through :func:`load_run_posterior`, which draws the run's
``vi_ensemble_size`` samples with a key fixed by the run's seed, so repeated evaluations agree.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import io
from bnnkit.errors import ConfigError
from bnnkit.posterior.samples import Samples

Params = Any

#: The PRNG stream of evaluation draws (training uses 0: init, 1: noise, 2: data order).
EVAL_STREAM = 3
DEFAULT_ENSEMBLE_SIZE = 20


def standard_normal_like(key: jax.Array, tree: Params, num: int) -> Params:
    """``num`` standard normal draws shaped like ``tree``, leaves stacked ``(num, ...)``.

    One flat draw for all parameters, then split: one RNG call instead of one per leaf, which
    is most of the cost of a Bayes-by-Backprop step beyond the gradient itself.
    """
    leaves, treedef = jax.tree.flatten(tree)
    sizes = [int(np.prod(leaf.shape)) for leaf in leaves]
    flat = jax.random.normal(key, (num, sum(sizes)), leaves[0].dtype)
    parts, start = [], 0
    for size, leaf in zip(sizes, leaves, strict=True):
        parts.append(flat[:, start:start + size].reshape((num, *leaf.shape)))
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
class DiagGaussian:
    """A diagonal Gaussian over a params pytree.

    Attributes:
        mean: μ, shaped like the network's parameters.
        std: σ > 0, same structure.

    Example:
        >>> q = DiagGaussian({"w": jnp.zeros(3)}, {"w": jnp.ones(3)})
        >>> q.sample(jax.random.PRNGKey(0), 5)["w"].shape
        (5, 3)
        >>> DiagGaussian.from_rho({"w": jnp.zeros(1)}, {"w": jnp.zeros(1)}).std["w"]  # log 2
        Array([0.6931472], dtype=float32)
    """

    mean: Params
    std: Params

    @classmethod
    def from_rho(cls, mean: Params, rho: Params) -> DiagGaussian:
        """From the unconstrained parameterisation ``σ = softplus(ρ)``."""
        return cls(mean, jax.tree.map(softplus, rho))

    def sample(self, key: jax.Array, n: int) -> Params:
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


def load_members(problem, rundir: io.RunDir) -> DiagGaussian:
    """The stored q of every member of a VI run: leaves ``(members, ...)``.

    Raises:
        ConfigError: the run has not written its state yet.
    """
    if not rundir.state_file.is_file():
        raise ConfigError(f"run {str(rundir.path)!r} has no stored variational state yet")
    arrays = io.load_arrays(rundir.state_file)
    template = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    mean = io.unflatten_tree(template, arrays, prefix="mean/")
    rho = io.unflatten_tree(template, arrays, prefix="rho/")
    return DiagGaussian.from_rho(jax.tree.map(jnp.asarray, mean), jax.tree.map(jnp.asarray, rho))


def member(q: DiagGaussian, m: int) -> DiagGaussian:
    """Member ``m`` of a stack of posteriors (leading axis)."""
    return DiagGaussian(jax.tree.map(lambda a: a[m], q.mean), jax.tree.map(lambda a: a[m], q.std))


def load_run_posterior(record: dict, problem, rundir: io.RunDir) -> Samples:
    """``vi_ensemble_size`` draws per member, as Samples ``(members, n, ...)``.

    Registered in :data:`bnnkit.posterior.loaders.LOADERS` as ``"diag_gaussian"``.
    """
    n = int(record.get("method_config", {}).get("vi_ensemble_size", DEFAULT_ENSEMBLE_SIZE))
    if n < 1:
        raise ConfigError(f"--vi-ensemble-size {n} must be >= 1")
    q = load_members(problem, rundir)
    num_members = jax.tree.leaves(q.mean)[0].shape[0]
    key = jax.random.fold_in(jax.random.PRNGKey(record.get("train", {}).get("seed", 0)),
                             EVAL_STREAM)
    draws = [member(q, m).sample(jax.random.fold_in(key, m), n) for m in range(num_members)]
    return Samples(jax.tree.map(lambda *a: jnp.stack(a), *draws))
