"""Hierarchical priors: Gaussian weights whose variances are latent variables with a prior.

Two families, both with an inverse-gamma hyperprior ``v ~ InvGamma(a, b)``
(``p(v) = bᵃ/Γ(a) v^{-a-1} e^{-b/v}``):

- ``hierarchical``: one variance per leaf (per layer's kernel, per layer's bias),
  ``w_i | v ~ N(0, v)``;
- ``ard``: automatic relevance determination, one variance per input unit of a kernel shaped
  ``(..., fan_in, fan_out)`` (row ``j`` of a dense kernel, input channel ``j`` of a
  convolution), ``w_{..j k} | v_j ~ N(0, v_j)``; a 1-D leaf gets a single variance.

Parameterisation: the latent stored in the position is ``u = log v``, unconstrained and
*centred* (the weights themselves are the network's weights, not whitened copies), so every
method sees ordinary network parameters plus a few log-variances. The density of u carries the
log-Jacobian of ``v = eᵘ``:

    log p(u) = log InvGamma(eᵘ; a, b) + u = a log b - log Γ(a) - a u - b e^{-u}

and ``log p(w, u) = Σ_i log N(w_i; 0, eᵘ) + log p(u)``. Integrating u out gives each weight the
marginal Student-t with ν = 2a and scale √(b/a). The latent starts at the mode of p(u),
``u = log(b/a)``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from bnnkit.priors.constraints import POSITIVE, CheckedFamily, Param
from bnnkit.priors.families import StudentT


@dataclasses.dataclass(frozen=True)
class _InverseGammaVariances(CheckedFamily):
    concentration: float
    scale: float
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("concentration", POSITIVE, required=True),
        Param("scale", POSITIVE, required=True),
    )

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        raise NotImplementedError

    def _expand(self, u: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        """Log-variances broadcast against a leaf of ``shape``."""
        raise NotImplementedError

    def latent_log_prob(self, u: jax.Array) -> jax.Array:
        """``log p(u)`` per element, Jacobian of ``v = eᵘ`` included."""
        a, b = self.concentration, self.scale
        return a * math.log(b) - gammaln(a) - a * u - b * jnp.exp(-u)

    def init_latent(self, shape: tuple[int, ...], dtype: Any) -> jax.Array:
        """The mode of p(u): ``u = log(b/a)``."""
        value = math.log(self.scale / self.concentration)
        return jnp.full(self.latent_shape(shape), value, dtype)

    def sample_latent(self, key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
        # v = b / G with G ~ Gamma(a, 1) is InvGamma(a, b); log G is drawn directly, which
        # stays finite for small a where G itself underflows.
        log_g = jax.random.loggamma(key, self.concentration, self.latent_shape(shape), dtype)
        return math.log(self.scale) - log_g

    def leaf_log_prob(self, w: jax.Array, u: jax.Array) -> jax.Array:
        u_w = self._expand(u, w.shape)
        # log N(w; 0, eᵘ) written without exp-then-log, so it stays exact for very small v.
        conditional = -0.5 * (jnp.square(w) * jnp.exp(-u_w) + u_w + math.log(2 * math.pi))
        return jnp.sum(conditional) + jnp.sum(self.latent_log_prob(u))

    def leaf_sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any) -> tuple:
        k_latent, k_weight = jax.random.split(key)
        u = self.sample_latent(k_latent, shape, dtype)
        std = jnp.exp(0.5 * self._expand(u, shape))
        return std * jax.random.normal(k_weight, shape, dtype), u

    def marginal(self) -> StudentT:
        """The distribution of one weight with its variance integrated out."""
        return StudentT(df=2 * self.concentration, scale=math.sqrt(self.scale / self.concentration))

    def gaussian_std(self, shape: tuple[int, ...]) -> None:
        del shape
        return None

    def for_shape(self, shape: tuple[int, ...]):
        del shape
        return self


@dataclasses.dataclass(frozen=True)
class InverseGammaNormal(_InverseGammaVariances):
    """One variance per leaf: ``v ~ InvGamma(a, b)``, ``w_i | v ~ N(0, v)``; latent ``log v``.

    Example:
        >>> prior = InverseGammaNormal(concentration=2.0, scale=2.0)
        >>> prior.latent_shape((50, 10)), prior.marginal()
        ((), StudentT(df=4.0, scale=1.0))
    """

    name: ClassVar[str] = "hierarchical"

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        del shape
        return ()

    def _expand(self, u: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        del shape
        return u


@dataclasses.dataclass(frozen=True)
class ARD(_InverseGammaVariances):
    """One variance per input unit: ``v_j ~ InvGamma(a, b)``, ``w_{..j k} | v_j ~ N(0, v_j)``.

    A large posterior v_j keeps input j relevant; a small one switches it off (MacKay 1994,
    Neal 1996). Latent: ``log v``, shaped ``(fan_in,)`` for a kernel ``(..., fan_in, fan_out)``.

    Example:
        >>> ARD(concentration=2.0, scale=2.0).latent_shape((3, 3, 16, 32))
        (16,)
    """

    name: ClassVar[str] = "ard"

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (shape[-2],) if len(shape) >= 2 else ()

    def _expand(self, u: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        return u[:, None] if len(shape) >= 2 else u


HIERARCHICAL = (InverseGammaNormal, ARD)
