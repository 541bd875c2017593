"""Laplace approximation around a MAP estimate, on the one method interface.

``init`` holds θ* (the MAP) and empty curvature; each ``step`` adds the GGN of one chunk of the
training data (so the whole training set is seen in bounded memory, a chunk per step);
``posterior`` adds the prior's curvature (or an isotropic Gaussian one, optionally chosen by
the marginal likelihood), tempers by T and returns a :mod:`bnnkit.posterior.laplace` object
with ``sample(key, n)``::

    Λ = (G + Λ_prior) / T,    G = (N / n) Σ_{i seen} J_iᵀ H_i J_i

The ``N / n`` factor makes a pass over a subset an unbiased estimate; one pass over all N
examples gives the exact sum. Steps never change θ*.

Example:
    >>> method = build(log_posterior, "last_layer", prior_precision="auto")  # doctest: +SKIP
    >>> state = method.init(key, map_params, chunks[0])  # doctest: +SKIP
    >>> for chunk in chunks:  # doctest: +SKIP
    ...     state, info = jax.jit(method.step)(key, state, chunk)
    >>> posterior = method.posterior(jax.tree.map(lambda a: a[None], state))  # doctest: +SKIP
    >>> draws = posterior.sample(key, 30)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import curvature
from bnnkit.errors import ConfigError
from bnnkit.inference.base import Method
from bnnkit.log_posterior import LATENT_COLLECTIONS, Batch, network_variables
from bnnkit.posterior import laplace as laplace_posterior

Params = Any


class LaplaceState(NamedTuple):
    """θ*, the GGN summed over the examples seen so far, and what the posterior needs.

    Attributes:
        position: θ*, never changed.
        curvature: the summed GGN: a params-shaped diagonal, a last-layer matrix, or
            ``{layer: (A, B)}`` Kronecker factor sums.
        log_likelihood: ``Σ log p(y_i | x_i, θ*)`` over the examples seen.
        num_seen: how many examples were seen.
        example: one input, from which the network's layers are read.
    """

    position: Params
    curvature: Any
    log_likelihood: jax.Array
    num_seen: jax.Array
    example: jax.Array


class LaplaceInfo(NamedTuple):
    """Log likelihood of the chunk at θ* and its size."""

    log_likelihood: jax.Array
    num_examples: jax.Array


def build(
    log_posterior,
    structure: str = "diag",
    prior_precision: float | str | None = None,
    *,
    max_elements: int = curvature.MAX_ELEMENTS,
    model: str = "model",
) -> Method:
    """A Laplace approximation as ``init``/``step``/``posterior``.

    Args:
        log_posterior: a :class:`bnnkit.log_posterior.LogPosterior` (apply, likelihood, prior,
            num_data N, temperature T).
        structure: ``"diag"`` (all weights), ``"last_layer"`` (full, last Dense layer) or
            ``"kfac"`` (Kronecker-factored, Dense networks).
        prior_precision: ``None`` to use the prior's own curvature; a number α for the
            isotropic Gaussian ``N(0, α⁻¹ I)``; ``"auto"`` to choose α by the Laplace marginal
            likelihood.
        max_elements: bound on the per-example products held at once in a step.
        model: the model's name, for error messages.

    Raises:
        ConfigError: unknown structure or bad prior precision.
    """
    if structure not in laplace_posterior.STRUCTURES:
        raise ConfigError(f"unknown structure {structure!r}; allowed: "
                          f"{', '.join(laplace_posterior.STRUCTURES)}")
    prior_precision = laplace_posterior.check_prior_precision(prior_precision)
    apply = log_posterior.apply

    def last_layer(position, example):
        return curvature.last_dense_path(apply, network_variables(position), example, model)

    def batch_curvature(position, batch: Batch, example):
        # The GGN is over the network's variables; the likelihood is the one at the position
        # (with its inferred noise std, if any).
        params = network_variables(position)
        likelihood = log_posterior.likelihood_for(position)
        if structure == "diag":
            return curvature.ggn_diag(apply, likelihood, params, batch, max_elements=max_elements)
        if structure == "last_layer":
            return curvature.ggn_block(apply, likelihood, params, batch,
                                       last_layer(params, example), max_elements=max_elements)
        return curvature.kfac_factors(apply, likelihood, params, batch,
                                      max_elements=max_elements, model=model)

    def init(key: jax.Array, params: Params, batch: Batch) -> LaplaceState:
        del key
        if batch is None:
            raise ConfigError("the Laplace method needs a batch at init to read the network")
        example = batch.x[:1]
        shapes = jax.eval_shape(batch_curvature, params, Batch(batch.x[:1], batch.y[:1]),
                                example)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        dtype = jax.tree.leaves(params)[0].dtype
        return LaplaceState(params, zeros, jnp.zeros((), dtype), jnp.zeros((), jnp.int32),
                            example)

    def step(key: jax.Array, state: LaplaceState, batch: Batch):
        del key
        position = state.position
        ggn = batch_curvature(position, batch, state.example)
        ll = jnp.sum(log_posterior.likelihood_for(position).log_prob(
            apply(network_variables(position), batch.x), batch.y))
        n = jnp.asarray(batch.x.shape[0], jnp.int32)
        new = LaplaceState(position, jax.tree.map(jnp.add, state.curvature, ggn),
                           state.log_likelihood + ll.astype(state.log_likelihood.dtype),
                           state.num_seen + n, state.example)
        return new, LaplaceInfo(ll, n)

    def posterior(kept: LaplaceState) -> laplace_posterior.LaplacePosterior:
        state = jax.tree.map(lambda a: a[-1], kept)
        seen = int(state.num_seen)
        if seen < 1:
            raise ConfigError("no data seen: run at least one step before the posterior")
        scale = log_posterior.num_data / seen
        path = None
        if structure == "kfac":
            ggn = {name: (np.asarray(A, np.float64) / seen, np.asarray(B, np.float64) * scale)
                   for name, (A, B) in state.curvature.items()}
        else:
            ggn = jax.tree.map(lambda a: np.asarray(a, np.float64) * scale, state.curvature)
            if structure == "last_layer":
                path = last_layer(state.position, state.example)
            else:
                ggn = _position_ggn(state.position, ggn, log_posterior)
        post = laplace_posterior.make_posterior(
            structure, state.position, ggn, log_prior=log_posterior.log_prior,
            prior_precision=prior_precision, temperature=log_posterior.temperature,
            log_likelihood=float(state.log_likelihood) * scale, path=path,
        )
        damping = laplace_posterior.Damping(**post.info["damping"])
        if damping.num_lifted:
            warnings.warn(damping.message(post.info["num_params"]), RuntimeWarning, stacklevel=2)
        return post

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.position)


def _position_ggn(position: Params, network_ggn: Params, log_posterior) -> Params:
    """The diagonal GGN over a whole position from the one over the network's variables.

    A prior's latent scales do not enter the likelihood (zero GGN). An inferred Gaussian noise
    std ``σ₀ = eᵘ`` gets its Fisher information, 2 per example: ``2N``.
    """
    if not (isinstance(position, dict) and any(k in position for k in LATENT_COLLECTIONS)):
        return network_ggn
    full = {k: jax.tree.map(lambda a: np.zeros(np.shape(a)), v) for k, v in position.items()}
    full.update(network_ggn)
    if "noise" in position:
        full["noise"] = jax.tree.map(lambda a: np.full(np.shape(a), 2.0 * log_posterior.num_data),
                                     position["noise"])
    return full
