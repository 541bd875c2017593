"""The one place where prior, likelihood, data size and temperature meet.

Convention, used by every method in the toolkit:

    log p_T(θ | D) = [ log p(θ) + Σ_{i=1..N} log p(y_i | x_i, θ) ] / T

On a minibatch B the sum is replaced by its unbiased estimate ``(N/|B|) Σ_{i∈B}``. With
``chunk_size`` set, the sum over a large batch is accumulated chunk by chunk under
``jax.checkpoint``, so the memory of a full-batch gradient is that of one chunk.

θ is a *position*: the network's flax variables ``{"params": ...}`` plus, when the prior needs
them, ``{"prior": ...}`` (latent log-variances of hierarchical priors) and
``{"noise": {"log_std": u}}`` (an inferred regression noise std σ₀ = eᵘ). The prior scores the
whole position; the network sees only its own variables, and the likelihood takes σ₀ from the
position when it is there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError

Params = Any

# Collections of a position that belong to the prior, not to the network.
LATENT_COLLECTIONS = ("prior", "noise")


def network_variables(position: Params) -> Params:
    """The variables the network takes: the position without its latent collections.

    Example:
        >>> network_variables({"params": 1, "noise": {"log_std": 0.0}})
        {'params': 1}
    """
    if isinstance(position, Mapping) and any(k in position for k in LATENT_COLLECTIONS):
        return {k: v for k, v in position.items() if k not in LATENT_COLLECTIONS}
    return position


class Batch(NamedTuple):
    """Inputs and targets; the full training set for HMC, a minibatch otherwise."""

    x: jax.Array
    y: jax.Array


@dataclasses.dataclass(frozen=True)
class LogPosterior:
    """Tempered log posterior of a network's parameters.

    Attributes:
        apply: ``apply(variables, x) -> outputs`` of the network; it gets the position
            without its latent collections.
        likelihood: has ``log_prob(outputs, y)`` per example; with a ``noise`` collection in
            the position, its ``noise_std`` is replaced by ``exp(position["noise"]["log_std"])``.
        prior: has ``log_prob(position)``.
        num_data: N, the size of the whole training set (scales minibatch sums).
        temperature: T > 0; T = 1 is the Bayes posterior, T < 1 a "cold" one.
        chunk_size: if set, evaluate the likelihood in chunks of this many examples.

    Example:
        >>> lp = LogPosterior(model.apply, likelihood, prior, num_data=len(x))  # doctest: +SKIP
        >>> value, grad = jax.value_and_grad(lp)(params, Batch(x, y))  # doctest: +SKIP
    """

    apply: Callable[[Params, jax.Array], jax.Array]
    likelihood: Any
    prior: Any
    num_data: int
    temperature: float = 1.0
    chunk_size: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ConfigError(f"temperature {self.temperature} must be > 0")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ConfigError(f"chunk size {self.chunk_size} must be >= 1")

    def log_prior(self, params: Params) -> jax.Array:
        """``log p(θ)``, untempered."""
        return self.prior.log_prob(params)

    def likelihood_for(self, params: Params) -> Any:
        """The likelihood at a position: its noise std read from ``noise`` when inferred."""
        if not (isinstance(params, Mapping) and "noise" in params):
            return self.likelihood
        return dataclasses.replace(self.likelihood,
                                   noise_std=jnp.exp(params["noise"]["log_std"]))

    def log_likelihood(self, params: Params, batch: Batch) -> jax.Array:
        """``Σ_{i∈B} log p(y_i | x_i, θ)`` over the batch, untempered and unscaled."""
        n = batch.x.shape[0]
        if self.chunk_size is None or n <= self.chunk_size:
            outputs = self.apply(network_variables(params), batch.x)
            return jnp.sum(self.likelihood_for(params).log_prob(outputs, batch.y))
        return self._chunked_log_likelihood(params, batch)

    def _chunked_log_likelihood(self, params: Params, batch: Batch) -> jax.Array:
        n, c = batch.x.shape[0], self.chunk_size
        num_chunks = -(-n // c)
        pad = num_chunks * c - n

        def chunks(a: jax.Array) -> jax.Array:
            a = jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1))
            return a.reshape((num_chunks, c, *a.shape[1:]))

        mask = chunks(jnp.ones((n,), bool))

        @jax.checkpoint  # recompute activations in the backward pass: memory of one chunk
        def chunk_sum(params, x, y, m):
            outputs = self.apply(network_variables(params), x)
            ll = self.likelihood_for(params).log_prob(outputs, y)
            return jnp.sum(jnp.where(m, ll, 0.0))

        def body(total, chunk):
            return total + chunk_sum(params, *chunk), None

        zero = jnp.zeros((), jnp.result_type(*jax.tree.leaves(params)))
        total, _ = jax.lax.scan(body, zero, (chunks(batch.x), chunks(batch.y), mask))
        return total

    def __call__(self, params: Params, batch: Batch) -> jax.Array:
        """``[log p(θ) + (N/|B|) Σ_{i∈B} log p(y_i | x_i, θ)] / T``."""
        scale = self.num_data / batch.x.shape[0]
        return (self.log_prior(params) + scale * self.log_likelihood(params, batch)) / (
            self.temperature
        )
