"""Curvature of the log prior at a point, by autodiff of the prior's own ``log_prob``.

A Laplace approximation adds ``−∇² log p(θ*)`` to the likelihood's GGN. It is taken from the
prior's ``log_prob`` over the whole position (weights, and the latent scales of hierarchical
priors), so every prior works, Gaussian or not:

- :func:`diag_curvature`: ``−diag ∇² log p(θ*)``, leaf by leaf. When a leaf's own block of the
  Hessian is diagonal (every elementwise family: Gaussian, Laplace, Student-t, scale mixtures;
  and the weights of a hierarchical prior, which given their latent scale are independent),
  one Hessian-vector product with the leaf's all-ones vector gives that diagonal exactly. This
  is checked with a second product, against a random ±1 vector z on the leaf
  (``H z = z ∘ H 1`` holds for every z only when the block is diagonal). A leaf that fails the
  check (a prior coupling the weights within one leaf) gets its diagonal exactly from
  Hessian-vector products with unit vectors: one per coordinate of that leaf, slower but exact.
  Couplings between leaves (weights and their latent scale) are left out, as the diagonal
  structure leaves them out.
- :func:`block_curvature`: the full ``−∇² log p`` restricted to one layer, any prior.

The curvature of a non-Gaussian prior can be zero (Laplace away from 0) or negative (Student-t
in its tails); :mod:`~bnnkit.inference.laplace.evidence` damps a posterior precision that is
not positive definite.

Example:
    >>> from bnnkit.priors import make
    >>> position = {"params": {"Dense_0": {"kernel": jnp.array([[0.0], [1.0]])}}}
    >>> curvature, diagonal = diag_curvature(make("student_t:df=3,scale=0.1").log_prob, position)
    >>> curvature["params"]["Dense_0"]["kernel"][:, 0].tolist(), diagonal  # 4 / 0.03 at 0
    ([133.333, -3.657], True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bnnkit.param_blocks import Path, get_block, replace_block
from bnnkit.types import Params

#: Unit vectors per batch when a leaf's diagonal is computed one coordinate at a time.
UNIT_BATCH = 256


def diag_curvature(
    log_prior: Callable[[Params], jax.Array],
    params: Params,
    *,
    key: jax.Array | None = None,
    rtol: float = 1e-5,
) -> tuple[Params, bool]:
    """``−diag ∇² log p(θ)`` shaped like ``params``, and whether every leaf's block was diagonal.

    Args:
        log_prior: ``params -> log p(params)``.
        params: the point (the MAP), a position.
        key: for the ±1 probes of the check (fixed by default).
        rtol: relative tolerance of that check.

    Example:
        >>> from bnnkit.priors import Gaussian
        >>> c, diagonal = diag_curvature(Gaussian(2.0).log_prob, {"w": jnp.ones(3)})
        >>> c["w"].tolist(), diagonal
        ([2.0, 2.0, 2.0], True)
    """
    key = jax.random.PRNGKey(0) if key is None else key
    # A closure, not a static argument: a prior holding arrays need not be hashable.
    h_ones, diagonal = jax.jit(lambda p, k: _leaf_diagonals(log_prior, p, k, rtol))(params, key)
    leaves, treedef = jax.tree.flatten(params)
    out = []
    for i, (h, ok) in enumerate(zip(h_ones, diagonal, strict=True)):
        out.append(-h if bool(ok) else -_exact_leaf_diagonal(log_prior, leaves, treedef, i))
    return treedef.unflatten(out), all(bool(ok) for ok in diagonal)


def _leaf_diagonals(log_prior, params, key, rtol):
    """Per leaf L: ``(H 1_L)_L``, and whether ``(H z_L)_L = z_L ∘ (H 1_L)_L``."""
    leaves, treedef = jax.tree.flatten(params)
    grad = jax.grad(log_prior)

    def hvp_leaf(i, v):
        tangent = treedef.unflatten(
            [v if j == i else jnp.zeros_like(leaf) for j, leaf in enumerate(leaves)]
        )
        return jax.tree.leaves(jax.jvp(grad, (params,), (tangent,))[1])[i]

    h_ones, diagonal = [], []
    for i, leaf in enumerate(leaves):
        z = jax.random.rademacher(jax.random.fold_in(key, i), leaf.shape, leaf.dtype)
        h1, hz = hvp_leaf(i, jnp.ones_like(leaf)), hvp_leaf(i, z)
        scale = jnp.max(jnp.abs(h1)) + jnp.max(jnp.abs(hz))
        diagonal.append(jnp.all(jnp.abs(hz - z * h1) <= rtol * scale + jnp.finfo(h1.dtype).tiny))
        h_ones.append(h1)
    return h_ones, diagonal


def _exact_leaf_diagonal(log_prior: Callable, leaves: list, treedef: Any, i: int) -> jax.Array:
    leaf = leaves[i]
    size = leaf.size

    def log_prior_leaf(flat):
        return log_prior(
            treedef.unflatten(
                [flat.reshape(leaf.shape) if j == i else other for j, other in enumerate(leaves)]
            )
        )

    @jax.jit
    def diag_of(start):
        idx = start + jnp.arange(UNIT_BATCH)
        units = jax.nn.one_hot(idx, size, dtype=leaf.dtype)
        flat = leaf.ravel()
        rows = jax.vmap(lambda u: jax.jvp(jax.grad(log_prior_leaf), (flat,), (u,))[1])(units)
        return jnp.take_along_axis(rows, jnp.clip(idx, 0, size - 1)[:, None], axis=1)[:, 0]

    parts = [diag_of(start) for start in range(0, size, UNIT_BATCH)]
    return jnp.concatenate(parts)[:size].reshape(leaf.shape)


def block_curvature(
    log_prior: Callable[[Params], jax.Array], params: Params, path: Path
) -> jax.Array:
    """``−∇² log p`` over the parameters at ``path`` (others held fixed), ordered as
    ``ravel_pytree`` of that block.

    Example:
        >>> from bnnkit.priors import Gaussian
        >>> block_curvature(Gaussian(3.0).log_prob, {"a": {"w": jnp.ones(2)}}, ("a",)).tolist()
        [[3.0, 0.0], [0.0, 3.0]]
    """
    block, unravel = ravel_pytree(get_block(params, path))

    def log_prior_block(flat):
        return log_prior(replace_block(params, path, unravel(flat)))

    return -jax.jit(jax.hessian(log_prior_block))(block)
