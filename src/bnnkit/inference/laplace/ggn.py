"""Generalised Gauss-Newton (GGN) curvature of the log likelihood, summed over a batch.

For outputs ``f_i = f(x_i; θ)`` and ``H_i = −∇²_f log p(y_i | f_i)`` (the Hessian in output
space), the GGN is

    G = Σ_i J_iᵀ H_i J_i,     J_i = ∂f_i/∂θ   (O × P).

Writing ``H_i = L_i L_iᵀ`` (:func:`output_hessian_sqrt`), every piece is a sum of squares of
vector-Jacobian products ``L_i[:, r]ᵀ J_i``, one per column r:

- :func:`ggn_diag`: ``diag G``, over all parameters;
- :func:`ggn_block`: the full ``G`` over one layer's parameters (the last layer);
- :func:`kfac_factors`: Kronecker factors ``A = Σ ã ãᵀ`` and ``B = Σ g gᵀ`` per Dense layer.

Output-space Hessians (all PSD, so G is PSD):

- Gaussian, fixed σ: ``H = 1/σ²``.
- Gaussian, heteroscedastic (outputs μ and ρ, ``σ = softplus(ρ) + 10⁻⁶``): the Fisher
  information ``diag(1/σ², 2 sigmoid(ρ)²/σ²)``; the exact Hessian in ρ can be negative away
  from the data's fit, the Fisher never is.
- Categorical: ``H = diag(p) − p pᵀ`` with ``p = softmax(f)``, factored exactly as
  ``L = diag(√p) − p √pᵀ`` (no sampling).
- Any other likelihood: the Hessian of ``−log_prob`` in the outputs by autodiff, with negative
  eigenvalues set to zero.

The same products give the predictive's covariance in output space, ``J Σ Jᵀ`` for each
structure's posterior covariance Σ (:mod:`~bnnkit.inference.laplace.output_covariance`).

Memory is bounded whatever the batch: examples are processed ``micro`` at a time under
``lax.scan``, with ``micro`` chosen so that the per-example products held at once stay below
``max_elements`` numbers. Networks made only of Dense layers use
:mod:`~bnnkit.inference.laplace.dense_taps` (layer inputs and pre-activation gradients) instead
of per-example gradients, which makes the diagonal as cheap as a few backward passes.

Example:
    >>> from bnnkit.likelihoods import Categorical
    >>> from bnnkit.models.mlp import MLP
    >>> net, likelihood = MLP(hidden=(5,), num_outputs=3), Categorical(num_classes=3)
    >>> batch = Batch(jax.random.normal(jax.random.PRNGKey(0), (8, 4)), jnp.arange(8) % 3)
    >>> params = net.init(jax.random.PRNGKey(1), batch.x)
    >>> diag = ggn_diag(net.apply, likelihood, params, batch)
    >>> G = ggn_block(net.apply, likelihood, params, batch, ("params", "Dense_1"))  # 18 × 18
    >>> bool(jnp.allclose(jnp.diag(G), ravel_pytree(diag["params"]["Dense_1"])[0], rtol=1e-5))
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit.errors import ConfigError
from bnnkit.inference.laplace import dense_taps
from bnnkit.param_blocks import Path, get_block, replace_block
from bnnkit.types import Batch, Params

#: Numbers held at once by per-example products inside one compiled step (64 MiB in float32).
MAX_ELEMENTS = 2**24


# --- output-space Hessians ----------------------------------------------------------------------


def output_hessian_sqrt(likelihood: Any, outputs: jax.Array, y: jax.Array) -> jax.Array:
    """A factor ``L`` (N, O, R) of the output-space Hessian: ``L_i L_iᵀ = −∇²_f log p(y_i|f_i)``.

    Example:
        >>> from bnnkit.likelihoods import Gaussian
        >>> output_hessian_sqrt(Gaussian(noise_std=0.5), jnp.zeros((3, 1)), jnp.zeros(3))[0]
        Array([[2.]], dtype=float32)
    """
    name = getattr(likelihood, "name", None)
    if name == "gaussian" and getattr(likelihood, "noise_std", None) is not None:
        return jnp.full((*outputs.shape[:-1], 1, 1), 1.0 / likelihood.noise_std, outputs.dtype)
    if name == "gaussian" and outputs.shape[-1] == 2:
        _, std = likelihood.mean_std(outputs)
        diag = jnp.stack([1.0 / std, math.sqrt(2.0) * jax.nn.sigmoid(outputs[..., 1]) / std], -1)
        return jax.vmap(jnp.diag)(diag)
    if name == "categorical":
        p = jax.nn.softmax(outputs, axis=-1)
        sqrt_p = jnp.sqrt(p)
        eye = jnp.eye(outputs.shape[-1], dtype=outputs.dtype)
        return eye * sqrt_p[:, None, :] - p[:, :, None] * sqrt_p[:, None, :]

    def factor(f, yi):
        h = jax.hessian(lambda f: -likelihood.log_prob(f[None], yi[None])[0])(f)
        w, v = jnp.linalg.eigh(0.5 * (h + h.T))
        return v * jnp.sqrt(jnp.clip(w, 0.0))

    return jax.vmap(factor)(outputs, y)


# --- batching -----------------------------------------------------------------------------------


def micro_size(n: int, per_example: int, max_elements: int = MAX_ELEMENTS) -> int:
    """Examples per micro-batch so that ``micro * per_example <= max_elements`` (at least 1)."""
    return int(max(1, min(n, max_elements // max(per_example, 1))))


def _scan_sum(fn: Callable, x: jax.Array, y: jax.Array, micro: int) -> Any:
    """``Σ fn(x_b, y_b, w_b)`` over micro-batches; ``w`` is 1 for real examples, 0 for padding."""
    n = x.shape[0]
    if n <= micro:
        return fn(x, y, jnp.ones((n,)))
    num = -(-n // micro)
    pad = num * micro - n

    def split(a):
        # Padding repeats the last example (with weight 0), so it is always a valid input.
        a = jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]) if pad else a
        return a.reshape((num, micro, *a.shape[1:]))

    w = jnp.concatenate([jnp.ones((n,)), jnp.zeros((pad,))]).reshape((num, micro))
    xs, ys = split(x), split(y)
    first = jax.eval_shape(fn, xs[0], ys[0], w[0])
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), first)

    def body(total, chunk):
        return jax.tree.map(jnp.add, total, fn(*chunk)), None

    total, _ = jax.lax.scan(body, zero, (xs, ys, w))
    return total


def _map(fn: Callable, x: jax.Array, micro: int) -> jax.Array:
    """``fn`` per example, vectorised ``micro`` examples at a time."""
    return jax.lax.map(fn, x, batch_size=micro) if x.shape[0] > micro else jax.vmap(fn)(x)


def _per_example(apply: Callable, params: Params, x: jax.Array) -> tuple[jax.Array, Callable]:
    out, vjp = jax.vjp(lambda p: apply(p, x[None])[0], params)
    return out, lambda c: vjp(c)[0]


# --- layers -------------------------------------------------------------------------------------


def last_dense_path(apply: Callable, params: Params, x: jax.Array, model: str = "model") -> Path:
    """Path (``("params", "Dense_2")``) of the last Dense layer the network calls.

    Raises:
        ConfigError: the network has no Dense layer, or calls its last one more than once.
    """
    calls = dense_taps.dense_calls(apply, params, x)
    if not calls:
        raise ConfigError(f"model {model!r} has no Dense layer; --structure last_layer needs one")
    last = calls[-1].path
    if sum(c.path == last for c in calls) != 1:
        raise ConfigError(
            f"model {model!r} reuses its last Dense layer; --structure last_layer "
            "needs a final Dense layer called once"
        )
    return ("params", *last)


def dense_network_calls(
    apply: Callable, params: Params, x: jax.Array
) -> list[dense_taps.DenseCall] | None:
    """The Dense calls when every parameter is in a Dense layer called once, else ``None``."""
    calls = dense_taps.dense_calls(apply, params, x)
    return calls if dense_taps.is_dense_network(calls, params) else None


# --- GGN pieces ---------------------------------------------------------------------------------


def _cotangent_fn(likelihood, y: jax.Array, w: jax.Array) -> Callable:
    def cotangents(outputs):
        L = output_hessian_sqrt(likelihood, outputs, y)
        L = L * w[:, None, None].astype(L.dtype)
        return jnp.moveaxis(L, -1, 0)  # (R, N, O)

    return cotangents


def ggn_diag(
    apply: Callable,
    likelihood: Any,
    params: Params,
    batch: Batch,
    *,
    max_elements: int = MAX_ELEMENTS,
) -> Params:
    """``diag Σ_i J_iᵀ H_i J_i`` over the batch, shaped like ``params``.

    Example:
        >>> from bnnkit import likelihoods, models
        >>> model = models.get("linear", num_outputs=1)
        >>> x = jnp.array([[1.0, 2.0], [3.0, 0.0]])
        >>> params = model.init(jax.random.PRNGKey(0), x)
        >>> noise = likelihoods.Gaussian(noise_std=1.0)
        >>> diag = ggn_diag(model.apply, noise, params, Batch(x, jnp.zeros(2)))["params"]
        >>> diag["Dense_0"]["kernel"][:, 0].tolist(), diag["Dense_0"]["bias"].tolist()  # Σ x², N
        ([10.0, 4.0], [2.0])
    """
    n = batch.x.shape[0]
    num_out = jax.eval_shape(apply, params, batch.x[:1]).shape[-1]
    calls = dense_network_calls(apply, params, batch.x[:1])
    if calls is not None:
        width = sum(c.in_shape[-1] + 2 * num_out * c.out_shape[-1] for c in calls)

        def fast(x, y, w):
            _, inputs, grads = dense_taps.taps(apply, params, x, _cotangent_fn(likelihood, y, w))
            out = jax.tree.map(jnp.zeros_like, params)
            for c in calls:
                s = jnp.sum(jnp.square(grads[c.path]), axis=0)  # (N, out): Σ_r g²
                layer = {"kernel": jnp.square(inputs[c.path]).T @ s}
                if "bias" in dense_taps.layer_params(params, c.path):
                    layer["bias"] = jnp.sum(s, axis=0)
                out = replace_block(out, ("params", *c.path), layer)
            return out

        return _scan_sum(fast, batch.x, batch.y, micro_size(n, width, max_elements))

    num_params = sum(leaf.size for leaf in jax.tree.leaves(params))

    def generic(x, y, w):
        def one(xi, yi, wi):
            out, vjp = _per_example(apply, params, xi)
            L = output_hessian_sqrt(likelihood, out[None], yi[None])[0] * wi.astype(out.dtype)
            rows = jax.vmap(vjp)(L.T)
            return jax.tree.map(lambda r: jnp.sum(jnp.square(r), axis=0), rows)

        return jax.tree.map(lambda a: jnp.sum(a, axis=0), jax.vmap(one)(x, y, w))

    return _scan_sum(generic, batch.x, batch.y, micro_size(n, num_out * num_params, max_elements))


def dense_block_call(
    apply: Callable, params: Params, x: jax.Array, path: Path
) -> dense_taps.DenseCall | None:
    """The call of the Dense layer at ``path`` if it is called once on 2-D input, else ``None``."""
    calls = [c for c in dense_taps.dense_calls(apply, params, x) if ("params", *c.path) == path]
    layer = get_block(params, path)
    if (
        len(calls) != 1
        or len(calls[0].in_shape) != 2
        or "kernel" not in layer
        or not set(layer) <= {"kernel", "bias"}
    ):
        return None
    return calls[0]


def kron_order(params: Params, path: Path) -> np.ndarray:
    """For each entry of ``[kernel; bias]`` (row-major), its index in ``ravel_pytree`` of the
    layer, so that ``M_ravel = M_kron[inv][:, inv]`` with ``inv = argsort(kron_order)``."""
    layer = get_block(params, path)
    leaves, treedef = jax.tree.flatten(layer)
    starts = np.cumsum([0] + [leaf.size for leaf in leaves])
    index = treedef.unflatten(
        [
            np.arange(start, start + leaf.size).reshape(leaf.shape)
            for start, leaf in zip(starts, leaves, strict=False)
        ]
    )
    rows = [index["kernel"]] + ([index["bias"][None]] if "bias" in layer else [])
    return np.concatenate(rows).ravel()


def ggn_block(
    apply: Callable,
    likelihood: Any,
    params: Params,
    batch: Batch,
    path: Path,
    *,
    max_elements: int = MAX_ELEMENTS,
) -> jax.Array:
    """The full GGN over the parameters at ``path``, ordered as ``ravel_pytree`` of that block.

    For a Dense layer ``s = ã W̃`` called once, the Jacobian rows are ``ã_i ⊗ g_ir`` and the
    block is ``Σ_i (ã_i ã_iᵀ) ⊗ (Σ_r g_ir g_irᵀ)``, formed without per-example Jacobians;
    any other block uses per-example vector-Jacobian products.

    Example:
        >>> from bnnkit import likelihoods, models
        >>> model = models.get("linear", num_outputs=1)
        >>> x = jnp.array([[1.0, 2.0], [3.0, 0.0]])
        >>> params = model.init(jax.random.PRNGKey(0), x)
        >>> noise = likelihoods.Gaussian(noise_std=1.0)
        >>> G = ggn_block(model.apply, noise, params, Batch(x, jnp.zeros(2)), ("params", "Dense_0"))
        >>> G.tolist()  # Σ_i ã_i ã_iᵀ with ã = [1; x] (bias first, as ravel_pytree orders them)
        [[2.0, 4.0, 2.0], [4.0, 10.0, 2.0], [2.0, 2.0, 4.0]]
    """
    block, unravel = ravel_pytree(get_block(params, path))
    call = dense_block_call(apply, params, batch.x[:1], path)
    if call is not None:
        order = np.argsort(kron_order(params, path))
        num_in = block.size // call.out_shape[-1]
        width = num_in * call.out_shape[-1] ** 2 + call.in_shape[-1]

        def fast(x, y, w):
            _, inputs, grads = dense_taps.taps(
                apply, params, x, _cotangent_fn(likelihood, y, w), layers=[call.path]
            )
            a = augmented_inputs(inputs[call.path], params, path[1:])  # (N, D)
            g = grads[call.path]  # (R, N, O)
            n, d = a.shape
            o = g.shape[-1]
            # Σ_r g gᵀ per example is symmetric: only its upper triangle is multiplied out.
            rows, cols = np.triu_indices(o)
            m = jnp.einsum("rnk,rnl->nkl", g, g)[:, rows, cols]  # (N, T)
            am = (a[:, :, None] * m[:, None]).reshape((n, d * rows.size))
            tri = (a.T @ am).reshape((d, d, rows.size))  # [d, e, t] = Σ_n a_d a_e m_t
            G = (
                jnp.zeros((d, d, o, o), tri.dtype)
                .at[:, :, rows, cols]
                .set(tri)
                .at[:, :, cols, rows]
                .set(tri)
            )
            return G.transpose((0, 2, 1, 3)).reshape((d * o, d * o))

        G = _scan_sum(fast, batch.x, batch.y, micro_size(batch.x.shape[0], width, max_elements))
        return G[order][:, order]

    def block_apply(flat, x):
        return apply(replace_block(params, path, unravel(flat)), x)

    num_out = jax.eval_shape(apply, params, batch.x[:1]).shape[-1]

    def fn(x, y, w):
        def one(xi, yi, wi):
            out, vjp = _per_example(block_apply, block, xi)
            L = output_hessian_sqrt(likelihood, out[None], yi[None])[0] * wi.astype(out.dtype)
            return jax.vmap(vjp)(L.T)  # (R, P_B)

        rows = jax.vmap(one)(x, y, w)
        rows = rows.reshape((-1, rows.shape[-1]))
        return rows.T @ rows

    return _scan_sum(
        fn, batch.x, batch.y, micro_size(batch.x.shape[0], num_out * block.size, max_elements)
    )


def kfac_factors(
    apply: Callable,
    likelihood: Any,
    params: Params,
    batch: Batch,
    *,
    max_elements: int = MAX_ELEMENTS,
    model: str = "model",
) -> dict[str, tuple[jax.Array, jax.Array]]:
    """Per Dense layer, ``(A, B) = (Σ_i ã_i ã_iᵀ, Σ_i Σ_r g_ir g_irᵀ)`` over the batch.

    ``ã = [a; 1]`` when the layer has a bias. The layer's GGN block is approximated by
    ``N · (A/n) ⊗ (B/n)`` for n examples seen (Martens & Grosse 2015), with parameters ordered
    as the rows of ``[kernel; bias]``, row-major. Keys are the layer paths joined by "/".

    Raises:
        ConfigError: a parameter outside Dense layers, or a Dense layer called more than once.
    """
    calls = dense_network_calls(apply, params, batch.x[:1])
    if calls is None:
        raise ConfigError(
            f"--structure kfac needs a network of Dense layers each applied once; "
            f"model {model!r} has other layers or shares weights"
        )
    num_out = jax.eval_shape(apply, params, batch.x[:1]).shape[-1]
    width = sum(c.in_shape[-1] + 2 * num_out * c.out_shape[-1] for c in calls)

    def fn(x, y, w):
        _, inputs, grads = dense_taps.taps(apply, params, x, _cotangent_fn(likelihood, y, w))
        out = {}
        for c in calls:
            a = augmented_inputs(inputs[c.path], params, c.path)
            a = a * w[:, None].astype(a.dtype)
            g = grads[c.path].reshape((-1, grads[c.path].shape[-1]))
            out["/".join(c.path)] = (a.T @ a, g.T @ g)
        return out

    return _scan_sum(fn, batch.x, batch.y, micro_size(batch.x.shape[0], width, max_elements))


def augmented_inputs(a: jax.Array, params: Params, path: Path) -> jax.Array:
    """``[a, 1]`` for a layer with a bias (rows of ``[kernel; bias]``), else ``a``."""
    if "bias" in dense_taps.layer_params(params, path):
        return jnp.concatenate([a, jnp.ones((a.shape[0], 1), a.dtype)], axis=1)
    return a


# --- output covariances of the linearised network -----------------------------------------------
