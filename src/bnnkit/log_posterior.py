"""The one place where prior, likelihood, data size and temperature meet.

Convention, used by every method in the toolkit:

    log p_T(θ | D) = [ log p(θ) + Σ_{i=1..N} log p(y_i | x_i, θ) ] / T

On a minibatch B the sum is replaced by its unbiased estimate ``(N/|B|) Σ_{i∈B}``. With
``chunk_size`` set, the sum over a large batch is accumulated chunk by chunk under
``jax.checkpoint``, so the memory of a full-batch gradient is that of one chunk.

Temperature enters in exactly one function, :meth:`LogPosterior.temper`. Methods that need the
pieces separately (VI's complexity cost, Laplace's curvature and evidence) take them from here,
already tempered: :meth:`LogPosterior.tempered_log_likelihood`,
:meth:`LogPosterior.tempered_log_prior` and the curvature weight
:meth:`LogPosterior.tempered_data_weight`; none of them divides by T itself.

A network with randomness of its own (dropout; ``stochastic=True``, see
:mod:`bnnkit.models.registry`) gets the ``key`` given to :meth:`LogPosterior.__call__` and the
log likelihood, one draw for the whole batch (each chunk of a chunked sum folds in its index);
without a key, or for a network without randomness, the key is not passed on and the log
posterior is the deterministic one.

θ is a *position*: the network's flax variables ``{"params": ...}`` plus, when the prior needs
them, ``{"prior": ...}`` (latent log-variances of hierarchical priors) and
``{"noise": {"log_std": u}}`` (an inferred regression noise std σ₀ = eᵘ). The prior scores the
whole position; the network sees only its own variables, and the likelihood takes σ₀ from the
position when it is there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError
from bnnkit.types import Batch, Key, Params

__all__ = ["LATENT_COLLECTIONS", "LogPosterior", "network_variables"]

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


@dataclasses.dataclass(frozen=True)
class LogPosterior:
    """Tempered log posterior of a network's parameters.

    Attributes:
        apply: ``apply(variables, x) -> outputs`` of the network; it gets the position
            without its latent collections (and ``key=`` when ``stochastic``).
        likelihood: has ``log_prob(outputs, y)`` per example; with a ``noise`` collection in
            the position, its ``noise_std`` is replaced by ``exp(position["noise"]["log_std"])``.
        prior: has ``log_prob(position)``.
        num_data: N, the size of the whole training set (scales minibatch sums).
        temperature: T > 0; T = 1 is the Bayes posterior, T < 1 a "cold" one.
        chunk_size: if set, evaluate the likelihood in chunks of this many examples.
        stochastic: the network draws randomness (dropout) from a key,
            ``apply(variables, x, *, key)``; a ``key`` given to the log likelihood is passed
            on to it, and only then.
        dropout_rate: p with which a dropout network drops each input of every weight layer
            (its model's ``dropout_rate``; 0 without dropout). The density does not depend on
            it; MC dropout's objective (:mod:`bnnkit.inference.dropout`) reads it.

    Example:
        >>> from bnnkit import likelihoods, models, priors
        >>> model = models.get("linear", num_outputs=1)
        >>> x, y = jnp.ones((8, 3)), jnp.zeros(8)
        >>> lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=1.0),
        ...                   priors.Gaussian(1.0), num_data=8, temperature=0.5)
        >>> params = model.init(jax.random.PRNGKey(0), x[:1])
        >>> value, grad = jax.value_and_grad(lp)(params, Batch(x, y))
        >>> bool(jnp.isclose(value, lp.tempered_log_prior(params)
        ...                  + lp.tempered_log_likelihood(params, Batch(x, y))))
        True
    """

    apply: Callable[[Params, jax.Array], jax.Array]
    likelihood: Any
    prior: Any
    num_data: int
    temperature: float = 1.0
    chunk_size: int | None = None
    stochastic: bool = False
    dropout_rate: float = 0.0

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
        return dataclasses.replace(self.likelihood, noise_std=jnp.exp(params["noise"]["log_std"]))

    def outputs(self, params: Params, x: jax.Array, key: Key | None = None) -> jax.Array:
        """The network's outputs at a position; ``key`` reaches a stochastic network only."""
        if self.stochastic and key is not None:
            return self.apply(network_variables(params), x, key=key)
        return self.apply(network_variables(params), x)

    def log_likelihood(self, params: Params, batch: Batch, *, key: Key | None = None) -> jax.Array:
        """``Σ_{i∈B} log p(y_i | x_i, θ)`` over the batch, untempered and unscaled; ``key``
        draws a stochastic network's randomness (else it runs deterministically)."""
        n = batch.x.shape[0]
        if self.chunk_size is None or n <= self.chunk_size:
            outputs = self.outputs(params, batch.x, key)
            return jnp.sum(self.likelihood_for(params).log_prob(outputs, batch.y))
        if self.stochastic and key is not None:
            return self._chunked_log_likelihood(params, batch, key)
        return self._chunked_log_likelihood(params, batch)

    def _chunked_log_likelihood(
        self, params: Params, batch: Batch, key: Key | None = None
    ) -> jax.Array:
        n, c = batch.x.shape[0], self.chunk_size
        num_chunks = -(-n // c)
        pad = num_chunks * c - n

        def chunks(a: jax.Array) -> jax.Array:
            a = jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1))
            return a.reshape((num_chunks, c, *a.shape[1:]))

        mask = chunks(jnp.ones((n,), bool))

        @jax.checkpoint  # recompute activations in the backward pass: memory of one chunk
        def chunk_sum(params, x, y, m, k=None):
            outputs = self.outputs(params, x, k)
            ll = self.likelihood_for(params).log_prob(outputs, y)
            return jnp.sum(jnp.where(m, ll, 0.0))

        def body(total, chunk):
            return total + chunk_sum(params, *chunk), None

        zero = jnp.zeros((), jnp.result_type(*jax.tree.leaves(params)))
        xs = (chunks(batch.x), chunks(batch.y), mask)
        if key is not None:  # chunk j draws with fold_in(key, j)
            xs = (*xs, jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(num_chunks)))
        total, _ = jax.lax.scan(body, zero, xs)
        return total

    @property
    def is_tempered(self) -> bool:
        """Whether T ≠ 1, so that tempering changes a term at all (methods skip work if not)."""
        return self.temperature != 1.0

    def temper(self, value: Any) -> Any:
        """``value / T``: the one place where the temperature is applied.

        Example:
            >>> LogPosterior(None, None, None, num_data=1, temperature=0.5).temper(3.0)
            6.0
        """
        return value / self.temperature

    def data_weight(self, batch_size: int) -> float:
        """``N / |B|``: the weight that makes a batch's sum an unbiased full-data estimate."""
        return self.num_data / batch_size

    def tempered_data_weight(self, batch_size: int) -> float:
        """``(N/|B|) / T``: the weight of one example's log likelihood (and of its curvature,
        e.g. a GGN term) in the tempered log posterior."""
        return self.temper(self.data_weight(batch_size))

    def tempered_log_prior(self, params: Params) -> jax.Array:
        """``log p(θ) / T``."""
        return self.temper(self.log_prior(params))

    def tempered_log_likelihood(
        self, params: Params, batch: Batch, *, key: Key | None = None
    ) -> jax.Array:
        """``(N/|B|) Σ_{i∈B} log p(y_i | x_i, θ) / T``."""
        return self.tempered_data_weight(batch.x.shape[0]) * self.log_likelihood(
            params, batch, key=key
        )

    def __call__(self, params: Params, batch: Batch, *, key: Key | None = None) -> jax.Array:
        """``[log p(θ) + (N/|B|) Σ_{i∈B} log p(y_i | x_i, θ)] / T``; ``key`` draws a
        stochastic network's randomness (:meth:`log_likelihood`)."""
        scale = self.data_weight(batch.x.shape[0])
        return self.temper(
            self.log_prior(params) + scale * self.log_likelihood(params, batch, key=key)
        )
