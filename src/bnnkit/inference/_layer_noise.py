"""Bayes by Backprop's weight noise moved into the dense layers: local reparameterisation, Flipout.

Three unbiased estimators of the gradient of the same expected log likelihood
``E_q[Σ_n log p(y_n | x_n, W)]`` under the mean-field ``q(W) = Π N(μ, σ²)``; they differ only in
how the noise is shared between the examples of a minibatch:

- ``weights`` (Blundell et al. 2015): one ``W = μ + σ ⊙ ε`` for the whole minibatch, one normal
  per weight per step.
- ``local_reparam`` (Kingma, Salimans & Welling 2015): for a dense layer ``b = x W + c`` with
  independent Gaussian weights, each example's pre-activation is exactly Gaussian,
  ``b ~ N(x μ_W + μ_c, x² σ_W² + σ_c²)`` per unit, so it is drawn directly,

      b = x μ_W + μ_c + √(x² σ_W² + σ_c²) ⊙ ε,   ε ~ N(0, I) per example and unit.

  Every example gets its own weights (lower variance per step) and the step needs only
  ``batch × units`` normals instead of one per weight. Exact for dense layers applied once to
  a ``(batch, features)`` input; for a convolution or a layer shared across positions the
  outputs of one example share weights and are not independent, so those are refused.
- ``flipout`` (Wen et al. 2018): one shared perturbation ``ΔW = σ_W ⊙ ε`` and per-example
  random signs ``s`` (inputs) and ``r`` (outputs):

      b = x μ_W + μ_c + ((x ⊙ s) ΔW + Δc) ⊙ r.

  Example n sees ``W_n = μ + ΔW ⊙ (s_n r_nᵀ)``; since ε is symmetric, ``ε ⊙ (s_n r_nᵀ)`` is
  N(0, I) again, so each ``W_n`` is a reparameterised draw from q, and the examples' noises are
  decorrelated. It still draws one normal per weight and adds a matrix product per layer.

Both replace each ``flax.linen.Dense`` call of the network through
:func:`flax.linen.intercept_methods`, so any model built from dense layers works unchanged; a
model with parameters outside such layers is refused with a :class:`~bnnkit.errors.ConfigError`
(:func:`check_network`).
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError
from bnnkit.inference._noise import rademacher_like, standard_normal
from bnnkit.types import Key, Params

ESTIMATORS = ("weights", "local_reparam", "flipout")


def _leaf(tree: Params, path: tuple[str, ...]) -> Params:
    for name in path:
        tree = tree[name]
    return tree


def _safe_sqrt(v: jax.Array) -> jax.Array:
    # √v with a finite gradient where v = 0 (a zero input to a layer without bias): there the
    # pre-activation has no noise, and d√v/dσ = x σ / √v is 0, not 0/0.
    positive = v > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, v, 1.0)), 0.0)


def _dense_modules(network_params: Params) -> set[tuple[str, ...]]:
    """Paths of the modules that own parameters (the parents of the leaves)."""
    paths = set()
    for keypath, _ in jax.tree_util.tree_flatten_with_path(network_params)[0]:
        paths.add(tuple(str(getattr(k, "key", k)) for k in keypath[:-1]))
    return paths


def noisy_apply(
    apply: Callable[[Params, jax.Array], jax.Array],
    estimator: str,
    std: Params,
    key: Key,
    eps: Params | None = None,
    seen: list | None = None,
):
    """``apply`` with every dense layer's output drawn by ``estimator``.

    Args:
        apply: the network's ``apply(variables, x)``; the variables it is called with are μ.
        estimator: ``"local_reparam"`` or ``"flipout"``.
        std: σ of the network's variables (``{"params": ...}``), the same structure as μ.
        key: the step's key of the per-example noise (layer i folds in i).
        eps: ``flipout`` only: the standard normal ε of ``ΔW = σ ⊙ ε``, shaped like ``std``.
        seen: if given, each intercepted layer's path is appended to it.

    Returns:
        ``(variables, x, *, key=None) -> outputs``, to be called inside the traced step.

    Example:
        >>> from bnnkit import models
        >>> model = models.get("linear", num_outputs=2)
        >>> mu = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
        >>> std = jax.tree.map(lambda a: jnp.full_like(a, 0.1), mu)
        >>> f = noisy_apply(model.apply, "local_reparam", std, jax.random.PRNGKey(1))
        >>> f(mu, jnp.ones((4, 3))).shape
        (4, 2)
    """
    counter = [0]

    def dense(module: nn.Dense, x: jax.Array) -> jax.Array:
        path = tuple(module.path)
        if x.ndim != 2:
            raise ConfigError(
                f"--vi-estimator {estimator} needs dense layers on (batch, "
                f"features) inputs; layer {'/'.join(path)} gets shape {x.shape}"
            )
        if seen is not None:
            seen.append(path)
        mu = module.variables["params"]
        sigma = _leaf(std["params"], path)
        layer_key = jax.random.fold_in(key, counter[0])
        counter[0] += 1
        mean_out = jnp.dot(x, mu["kernel"].astype(x.dtype), precision=module.precision)
        if module.use_bias:
            mean_out = mean_out + mu["bias"]
        if estimator == "local_reparam":
            var = jnp.dot(x * x, jnp.square(sigma["kernel"]), precision=module.precision)
            if module.use_bias:
                var = var + jnp.square(sigma["bias"])
            noise = standard_normal(layer_key, mean_out.shape).astype(mean_out.dtype)
            return mean_out + _safe_sqrt(var) * noise
        e = _leaf(eps["params"], path)
        signs = rademacher_like(layer_key, {"s": x, "r": mean_out})
        delta = jnp.dot(x * signs["s"], sigma["kernel"] * e["kernel"], precision=module.precision)
        if module.use_bias:
            delta = delta + sigma["bias"] * e["bias"]
        return mean_out + delta * signs["r"]

    def interceptor(next_fun, args, kwargs, context):
        if context.method_name == "__call__" and isinstance(context.module, nn.Dense):
            (x,) = args
            return dense(context.module, x)
        return next_fun(*args, **kwargs)

    def wrapped(variables: Params, x: jax.Array, *, key: Key | None = None) -> jax.Array:
        with nn.intercept_methods(interceptor):  # a stochastic network's key passes through
            return apply(variables, x) if key is None else apply(variables, x, key=key)

    return wrapped


def check_network(apply, estimator: str, variables: Params, x: jax.Array) -> None:
    """Refuse a network that ``estimator`` cannot run exactly, by tracing it once.

    Every module that owns parameters must be a ``flax.linen.Dense`` called exactly once on a
    ``(batch, features)`` input.

    Raises:
        ConfigError: the first layer that is not.
    """
    seen: list[tuple[str, ...]] = []
    std = jax.tree.map(jnp.ones_like, variables)
    eps = std if estimator == "flipout" else None
    f = noisy_apply(apply, estimator, std, jax.random.PRNGKey(0), eps, seen)
    jax.eval_shape(f, variables, x)
    owners = _dense_modules(variables["params"])
    reused = sorted({p for p in seen if seen.count(p) > 1})
    if reused:
        raise ConfigError(
            f"--vi-estimator {estimator} needs each dense layer applied once; "
            f"{'/'.join(reused[0])} is shared"
        )
    others = sorted(owners - set(seen))
    if others:
        raise ConfigError(
            f"--vi-estimator {estimator} supports networks of dense layers only; "
            f"the parameters of {'/'.join(others[0])} are in another layer type "
            "(use --vi-estimator weights)"
        )
