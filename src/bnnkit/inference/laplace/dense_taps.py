"""Inputs and output gradients of a network's Dense layers, read through flax interception.

For a Dense layer ``s = a W + b`` applied once per example, the gradient of any scalar
``c(θ)`` with respect to ``W`` is the outer product ``a ⊗ ∂c/∂s``. So with the layer inputs
``a_i`` and the pre-activation gradients ``g_i = ∂c_i/∂s_i`` of every example, per-example
gradients never have to be formed:

    Σ_i (∂c_i/∂W)²  = Σ_i a_i² ⊗ g_i²            (diagonal GGN)
    Σ_i ∂c_i/∂W̃ ⊗ ∂c_i/∂W̃ ≈ Σ_i ã_i ã_iᵀ ⊗ Σ_i g_i g_iᵀ / N   (KFAC, ã = [a; 1])

The taps work on any flax model without changing it: ``flax.linen.intercept_methods`` records
each ``nn.Dense.__call__`` input and adds a zero perturbation ``ε`` to its output, and the
gradient with respect to ``ε`` is ``g``. A network qualifies when every parameter belongs to a
Dense layer that is called exactly once, on a ``(batch, features)`` input; others (convolutions,
recurrent cells, weight sharing) use the generic per-example path of
:mod:`~bnnkit.inference.laplace.ggn`.

Example:
    >>> from bnnkit.models.mlp import MLP
    >>> net = MLP(hidden=(5,), num_outputs=3)
    >>> x = jax.random.normal(jax.random.PRNGKey(0), (8, 4))
    >>> params = net.init(jax.random.PRNGKey(1), x)
    >>> calls = dense_calls(net.apply, params, x[:2])
    >>> [call.path for call in calls], is_dense_network(calls, params)
    ([('Dense_0',), ('Dense_1',)], True)
    >>> ones = lambda outputs: jnp.ones((1, *outputs.shape))  # R = 1 cotangent per example
    >>> outputs, inputs, grads = taps(net.apply, params, x, ones)
    >>> inputs[("Dense_1",)].shape, grads[("Dense_1",)].shape  # a (N, in), g (R, N, out)
    ((8, 5), (1, 8, 3))
    >>> bool((grads[("Dense_1",)] == 1).all())  # the output layer's g is the cotangent itself
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from bnnkit.param_blocks import Path
from bnnkit.types import Params


@dataclasses.dataclass(frozen=True)
class DenseCall:
    """One call of a Dense layer: where its parameters live and the shapes it saw.

    Attributes:
        path: module path inside ``params["params"]`` (``("Dense_1",)``).
        in_shape: shape of its input, batch axis included.
        out_shape: shape of its output.
        dtype: dtype of its output.
    """

    path: Path
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    dtype: Any


def _is_dense_call(context) -> bool:
    return isinstance(context.module, nn.Dense) and context.method_name == "__call__"


def dense_calls(apply: Callable, params: Params, x: jax.Array) -> list[DenseCall]:
    """The Dense layer calls of ``apply(params, x)``, in the order they run (shapes only)."""
    calls: list[DenseCall] = []

    def interceptor(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        if _is_dense_call(context):
            calls.append(
                DenseCall(
                    tuple(context.module.scope.path),
                    tuple(args[0].shape),
                    tuple(out.shape),
                    out.dtype,
                )
            )
        return out

    def run(params, x):
        with nn.intercept_methods(interceptor):
            return apply(params, x)

    jax.eval_shape(run, params, x)
    return calls


def layer_params(params: Params, path: Path) -> dict:
    """The ``{"kernel": ..., "bias": ...}`` dict of the layer at ``path``."""
    node = params["params"]
    for name in path:
        node = node[name]
    return node


def is_dense_network(calls: list[DenseCall], params: Params) -> bool:
    """Whether every parameter is a kernel or bias of a Dense layer called once on 2-D input."""
    if not isinstance(params, dict) or set(params) != {"params"}:
        return False
    paths = [c.path for c in calls]
    if len(set(paths)) != len(paths) or any(len(c.in_shape) != 2 for c in calls):
        return False
    covered = set()
    for path in paths:
        node = layer_params(params, path)
        if not set(node) <= {"kernel", "bias"} or "kernel" not in node:
            return False
        covered |= {(*path, name) for name in node}
    leaves = {
        tuple(str(getattr(k, "key", k)) for k in p)[1:]
        for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]
    }
    return leaves == covered


def taps(
    apply: Callable,
    params: Params,
    x: jax.Array,
    cotangents: Callable[[jax.Array], jax.Array],
    layers: Collection[Path] | None = None,
) -> tuple[jax.Array, dict[Path, jax.Array], dict[Path, jax.Array]]:
    """Outputs, Dense inputs and pre-activation gradients for a batch of cotangents.

    Args:
        apply: ``(params, x) -> outputs`` of shape (N, O).
        params: network parameters.
        x: a batch of N inputs.
        cotangents: ``outputs -> C`` of shape (R, N, O); row r of example i is the output
            cotangent whose pre-activation gradient is wanted (e.g. columns of the square root
            of the output Hessian, or unit vectors for Jacobian rows).
        layers: the Dense layer paths to tap (default: all).

    Returns:
        ``(outputs, inputs, grads)``: ``inputs[path]`` is (N, in), ``grads[path]`` is
        (R, N, out) with ``grads[path][r, i] = C[r, i] · ∂f(x_i)/∂s_i``.
    """
    calls = [c for c in dense_calls(apply, params, x) if layers is None or c.path in layers]
    eps = {c.path: jnp.zeros(c.out_shape, c.dtype) for c in calls}

    def perturbed(eps):
        inputs = {}

        def interceptor(next_fun, args, kwargs, context):
            path = tuple(context.module.scope.path)
            if _is_dense_call(context) and path in eps:
                inputs[path] = args[0]
                return next_fun(*args, **kwargs) + eps[path]
            return next_fun(*args, **kwargs)

        with nn.intercept_methods(interceptor):
            out = apply(params, x)
        return out, inputs

    outputs, vjp, inputs = jax.vjp(perturbed, eps, has_aux=True)
    (grads,) = jax.vmap(vjp)(cotangents(outputs))
    inputs = {path: jax.lax.stop_gradient(a) for path, a in inputs.items()}
    return outputs, inputs, grads
