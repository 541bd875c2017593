"""The linearised predictive's covariance in output space, ``J Σ Jᵀ`` per input, for each
structure of a Laplace posterior's covariance Σ: diagonal, one block (the last layer) and
Kronecker-factored; in the bounded memory of :mod:`~bnnkit.inference.laplace.ggn`, whose
per-example pieces (Jacobian-vector products, Dense layer taps) it shares.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bnnkit.inference.laplace import dense_taps
from bnnkit.inference.laplace.ggn import (
    MAX_ELEMENTS,
    _map,
    _per_example,
    augmented_inputs,
    dense_block_call,
    dense_network_calls,
    kron_order,
    micro_size,
)
from bnnkit.param_blocks import Path, get_block, replace_block
from bnnkit.types import Params


def _unit_cotangents(outputs: jax.Array) -> jax.Array:
    num_out = outputs.shape[-1]
    return jnp.broadcast_to(
        jnp.eye(num_out, dtype=outputs.dtype)[:, None, :], (num_out, *outputs.shape)
    )


def diag_output_covariance(
    apply: Callable,
    params: Params,
    x: jax.Array,
    variance: Params,
    *,
    max_elements: int = MAX_ELEMENTS,
) -> tuple[jax.Array, jax.Array]:
    """Outputs ``f(x; θ)`` (N, O) and ``J Σ Jᵀ`` (N, O, O) for ``Σ = diag(variance)``."""
    n = x.shape[0]
    calls = dense_network_calls(apply, params, x[:1])
    num_out = jax.eval_shape(apply, params, x[:1]).shape[-1]
    if calls is not None:
        width = sum(c.in_shape[-1] + 2 * num_out * c.out_shape[-1] for c in calls)

        def fast(xb):
            out, inputs, grads = dense_taps.taps(apply, params, xb, _unit_cotangents)
            cov = jnp.zeros((xb.shape[0], num_out, num_out), out.dtype)
            for c in calls:
                var = dense_taps.layer_params(variance, c.path)
                g = grads[c.path]  # (O, N, out)
                weight = jnp.square(inputs[c.path]) @ var["kernel"]  # (N, out)
                if "bias" in var:
                    weight = weight + var["bias"]
                cov = cov + jnp.einsum("nk,rnk,snk->nrs", weight, g, g)
            return out, cov

        return _batched(fast, x, micro_size(n, width, max_elements))

    num_params = sum(leaf.size for leaf in jax.tree.leaves(params))

    def one(xi):
        out, vjp = _per_example(apply, params, xi)
        rows = jax.vmap(vjp)(jnp.eye(num_out, dtype=out.dtype))
        cov = sum(
            jnp.einsum("r...,s...,...->rs", r, r, v)
            for r, v in zip(jax.tree.leaves(rows), jax.tree.leaves(variance), strict=True)
        )
        return out, cov

    return _map(one, x, micro_size(n, num_out * num_params, max_elements))


def block_output_covariance(
    apply: Callable,
    params: Params,
    x: jax.Array,
    path: Path,
    sqrt_cov: jax.Array,
    *,
    max_elements: int = MAX_ELEMENTS,
) -> tuple[jax.Array, jax.Array]:
    """Outputs and ``J_B S Sᵀ J_Bᵀ`` (N, O, O) for a covariance ``S Sᵀ`` over the block.

    ``S`` is indexed as ``ravel_pytree`` of the block. For a Dense layer called once the rows
    of ``J_B S`` are ``(ã ⊗ g_r)ᵀ S``, contracted over the layer's inputs first.
    """
    block, unravel = ravel_pytree(get_block(params, path))
    call = dense_block_call(apply, params, x[:1], path)
    if call is not None:
        out_dim = call.out_shape[-1]
        s_kron = sqrt_cov[kron_order(params, path)]
        s_kron = s_kron.reshape((block.size // out_dim, out_dim, sqrt_cov.shape[-1]))
        num_out = jax.eval_shape(apply, params, x[:1]).shape[-1]

        def fast(xb):
            out, inputs, grads = dense_taps.taps(
                apply, params, xb, _unit_cotangents, layers=[call.path]
            )
            a = augmented_inputs(inputs[call.path], params, path[1:])
            t = jnp.einsum("nd,dkp->nkp", a, s_kron)
            rows = jnp.einsum("rnk,nkp->nrp", grads[call.path], t)
            return out, jnp.einsum("nrp,nsp->nrs", rows, rows)

        width = (out_dim + num_out) * sqrt_cov.shape[-1] + call.in_shape[-1]
        return _batched(fast, x, micro_size(x.shape[0], width, max_elements))

    def block_apply(flat, x):
        return apply(replace_block(params, path, unravel(flat)), x)

    num_out = jax.eval_shape(apply, params, x[:1]).shape[-1]

    def one(xi):
        out, vjp = _per_example(block_apply, block, xi)
        rows = jax.vmap(vjp)(jnp.eye(num_out, dtype=out.dtype)) @ sqrt_cov  # (O, P_B)
        return out, rows @ rows.T

    return _map(one, x, micro_size(x.shape[0], 2 * num_out * block.size, max_elements))


def kfac_output_covariance(
    apply: Callable,
    params: Params,
    x: jax.Array,
    layers: dict[str, tuple[jax.Array, jax.Array, jax.Array]],
    *,
    max_elements: int = MAX_ELEMENTS,
) -> tuple[jax.Array, jax.Array]:
    """Outputs and ``J Σ Jᵀ`` for Kronecker-factored blocks ``(U_A ⊗ U_B) diag(1/e) (...)ᵀ``.

    ``layers[key] = (U_A, U_B, e)`` with ``e`` of shape (in[+1], out): the eigenvectors of both
    factors and the eigenvalues of the layer's posterior precision.
    """
    calls = dense_network_calls(apply, params, x[:1])
    num_out = jax.eval_shape(apply, params, x[:1]).shape[-1]
    width = sum(c.in_shape[-1] + 2 * num_out * c.out_shape[-1] for c in calls)

    def fn(xb):
        out, inputs, grads = dense_taps.taps(apply, params, xb, _unit_cotangents)
        cov = jnp.zeros((xb.shape[0], num_out, num_out), out.dtype)
        for c in calls:
            ua, ub, e = layers["/".join(c.path)]
            alpha = augmented_inputs(inputs[c.path], params, c.path) @ ua  # (N, in+1)
            beta = jnp.einsum("rnk,kj->rnj", grads[c.path], ub)  # (O, N, out)
            cov = cov + jnp.einsum("ni,rnj,snj,ij->nrs", jnp.square(alpha), beta, beta, 1.0 / e)
        return out, cov

    return _batched(fn, x, micro_size(x.shape[0], width, max_elements))


def _batched(fn: Callable, x: jax.Array, micro: int) -> tuple[jax.Array, jax.Array]:
    """``fn`` on micro-batches of ``x``, results concatenated along the batch axis."""
    n = x.shape[0]
    if n <= micro:
        return fn(x)
    num = -(-n // micro)
    pad = num * micro - n
    xp = jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]) if pad else x
    out = jax.lax.map(fn, xp.reshape((num, micro, *x.shape[1:])))
    return jax.tree.map(lambda a: a.reshape((-1, *a.shape[2:]))[:n], out)
