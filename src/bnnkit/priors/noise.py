"""Priors on the observation noise std σ₀ of a regression likelihood, when σ₀ is inferred.

The position then holds ``{"noise": {"log_std": u}}`` with ``σ₀ = eᵘ``, unconstrained, and the
prior is evaluated on u with the log-Jacobian of the exponential:

    log p(u) = log p_σ(eᵘ) + u

=================  ===============================  ==========================  ==============
family             density p_σ(σ)                   parameters                  initial σ₀
=================  ===============================  ==========================  ==============
``gamma``          Gamma(a, rate r)                 ``concentration``, ``rate``  a / r
``half_normal``    2 N(σ; 0, s²), σ > 0             ``scale``                    s
``lognormal``      log σ ~ N(μ, s²)                 ``loc``, ``scale``           e^μ
=================  ===============================  ==========================  ==============

The initial value is the mode of p(u), a typical σ₀ under the prior (for ``gamma`` with
a < 1 the mode of p_σ itself is 0, which u cannot reach).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.scipy import stats

from bnnkit.priors.constraints import POSITIVE, REAL, CheckedFamily, Param


class NoiseFamily(CheckedFamily):
    """Shared interface: density on σ₀ and on its logarithm (mixin)."""

    def log_prob(self, std: jax.Array) -> jax.Array:
        """``log p_σ(σ)`` per element, σ > 0."""
        raise NotImplementedError

    def sample(self, key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = jnp.float32):
        """Draws of σ₀."""
        raise NotImplementedError

    def sample_log_std(
        self, key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = jnp.float32
    ) -> jax.Array:
        """Draws of u = log σ₀."""
        return jnp.log(self.sample(key, shape, dtype))

    def init_log_std(self) -> float:
        """The mode of p(u), u = log σ₀."""
        raise NotImplementedError

    def log_std_log_prob(self, u: jax.Array) -> jax.Array:
        """``log p(u) = log p_σ(eᵘ) + u``."""
        return self.log_prob(jnp.exp(u)) + u


@dataclasses.dataclass(frozen=True)
class Gamma(NoiseFamily):
    """σ₀ ~ Gamma(a, r) with rate r: ``log p(σ) = a log r - log Γ(a) + (a-1) log σ - r σ``.

    Example:
        >>> Gamma(concentration=0.5, rate=1.0).init_log_std() == math.log(0.5)
        True
    """

    concentration: float
    rate: float
    name: ClassVar[str] = "gamma"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("concentration", POSITIVE, required=True),
        Param("rate", POSITIVE, required=True),
    )

    def log_prob(self, std: jax.Array) -> jax.Array:
        return stats.gamma.logpdf(std, self.concentration, scale=1.0 / self.rate)

    def sample(self, key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = jnp.float32):
        return jax.random.gamma(key, self.concentration, shape, dtype) / self.rate

    def sample_log_std(
        self, key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = jnp.float32
    ) -> jax.Array:
        # log G drawn directly: G itself underflows to 0 for small a.
        return jax.random.loggamma(key, self.concentration, shape, dtype) - math.log(self.rate)

    def init_log_std(self) -> float:
        return math.log(self.concentration / self.rate)


@dataclasses.dataclass(frozen=True)
class HalfNormal(NoiseFamily):
    """σ₀ = |ε|, ε ~ N(0, s²): ``log p(σ) = log 2 + log N(σ; 0, s²)``.

    Example:
        >>> HalfNormal(scale=0.5).init_log_std() == math.log(0.5)
        True
    """

    scale: float
    name: ClassVar[str] = "half_normal"
    PARAMS: ClassVar[tuple[Param, ...]] = (Param("scale", POSITIVE, required=True),)

    def log_prob(self, std: jax.Array) -> jax.Array:
        return math.log(2.0) + stats.norm.logpdf(std, 0.0, self.scale)

    def sample(self, key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = jnp.float32):
        return self.scale * jnp.abs(jax.random.normal(key, shape, dtype))

    def init_log_std(self) -> float:
        return math.log(self.scale)


@dataclasses.dataclass(frozen=True)
class LogNormal(NoiseFamily):
    """log σ₀ ~ N(μ, s²): ``log p(σ) = log N(log σ; μ, s²) - log σ``.

    Example:
        >>> LogNormal(loc=-1.0, scale=0.5).init_log_std()
        -1.0
    """

    loc: float
    scale: float
    name: ClassVar[str] = "lognormal"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("loc", REAL, required=True),
        Param("scale", POSITIVE, required=True),
    )

    def log_prob(self, std: jax.Array) -> jax.Array:
        log_std = jnp.log(std)
        return stats.norm.logpdf(log_std, self.loc, self.scale) - log_std

    def log_std_log_prob(self, u: jax.Array) -> jax.Array:
        # Exactly Gaussian in u: skip the exp/log round trip.
        return stats.norm.logpdf(u, self.loc, self.scale)

    def sample(self, key: jax.Array, shape: tuple[int, ...] = (), dtype: Any = jnp.float32):
        return jnp.exp(self.loc + self.scale * jax.random.normal(key, shape, dtype))

    def init_log_std(self) -> float:
        return float(self.loc)


NOISE = (Gamma, HalfNormal, LogNormal)
