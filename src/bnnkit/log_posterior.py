"""The one place where prior, likelihood, data size and temperature meet.

Convention, used by every method in the toolkit:

    log p_T(θ | D) = [ log p(θ) + Σ_{i=1..N} log p(y_i | x_i, θ) ] / T

On a minibatch B the sum is replaced by its unbiased estimate ``(N/|B|) Σ_{i∈B}``. With
``chunk_size`` set, the sum over a large batch is accumulated chunk by chunk under
``jax.checkpoint``, so the memory of a full-batch gradient is that of one chunk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError

Params = Any


class Batch(NamedTuple):
    """Inputs and targets; the full training set for HMC, a minibatch otherwise."""

    x: jax.Array
    y: jax.Array


@dataclasses.dataclass(frozen=True)
class LogPosterior:
    """Tempered log posterior of a network's parameters.

    Attributes:
        apply: ``apply(params, x) -> outputs`` of the network.
        likelihood: has ``log_prob(outputs, y)`` per example.
        prior: has ``log_prob(params)``.
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

    def log_likelihood(self, params: Params, batch: Batch) -> jax.Array:
        """``Σ_{i∈B} log p(y_i | x_i, θ)`` over the batch, untempered and unscaled."""
        n = batch.x.shape[0]
        if self.chunk_size is None or n <= self.chunk_size:
            return jnp.sum(self.likelihood.log_prob(self.apply(params, batch.x), batch.y))
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
            ll = self.likelihood.log_prob(self.apply(params, x), y)
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
