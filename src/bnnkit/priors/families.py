"""Element-wise prior densities: every weight of a leaf drawn i.i.d. from one distribution.

Each family gives the per-element ``log_prob(x)`` and ``sample(key, shape, dtype)``, its
``mean`` and ``variance``, and the leaf-level interface that :class:`~bnnkit.priors.joint.
JointPrior` uses for every family, hierarchical ones included:

- ``latent_shape(shape)``: ``None`` here (no latent variables);
- ``leaf_log_prob(w, latent)``: ``Σ_i log p(w_i)`` over the leaf;
- ``leaf_sample(key, shape, dtype)``: ``(w, None)``.

Densities (all centred at 0 except the general mixture's components):

=================  ======================================  ==============================
family             density p(w)                            parameters
=================  ======================================  ==============================
``gaussian``       N(0, σ²), σ² = 1/λ                      ``scale`` σ or ``weight_decay`` λ
``fanin_gaussian`` N(0, σ²/fan_in), fan_in = ∏ shape[:-1]  ``scale`` σ (default 1)
``scale_mixture``  π N(0, σ₁²) + (1-π) N(0, σ₂²)           ``pi``, ``sigma1``, ``sigma2``
``mixture``        Σ_k π_k N(μ_k, σ_k²)                     ``weights``, ``scales``, ``locs``
``logistic``       e^{-w/s} / (s (1 + e^{-w/s})²)           ``scale`` s (default 1)
``laplace``        e^{-|w|/b} / 2b                          ``scale`` b (default 1)
``student_t``      t_ν(w / s) / s                           ``df`` ν, ``scale`` s (default 1)
=================  ======================================  ==============================
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.scipy import stats
from jax.scipy.special import logsumexp

from bnnkit.errors import ConfigError
from bnnkit.priors.constraints import (
    POSITIVE,
    POSITIVE_LIST,
    REAL_LIST,
    SIMPLEX,
    UNIT_INTERVAL,
    CheckedFamily,
    Param,
)


class Elementwise(CheckedFamily):
    """Leaf-level interface for families without latent variables (mixin)."""

    def log_prob(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        raise NotImplementedError

    def for_shape(self, shape: tuple[int, ...]) -> Elementwise:
        """The family a leaf of this shape gets (only ``fanin_gaussian`` depends on it)."""
        del shape
        return self

    def latent_shape(self, shape: tuple[int, ...]) -> None:
        del shape
        return None

    def leaf_log_prob(self, w: jax.Array, latent: Any = None) -> jax.Array:
        del latent
        return jnp.sum(self.log_prob(w))

    def leaf_sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any) -> tuple:
        return self.sample(key, shape, dtype), None

    def gaussian_std(self, shape: tuple[int, ...]) -> float | None:
        """σ of the leaf's Gaussian, for closed-form KL; ``None`` if the family is not one."""
        del shape
        return None


@dataclasses.dataclass(frozen=True)
class Normal(Elementwise):
    """Gaussian N(0, σ²); as a whole-network prior, weight decay λ = 1/σ².

    ``log p(w) = -w²/2σ² - log σ - ½ log 2π``

    Example:
        >>> round(float(Normal(scale=2.0).log_prob(jnp.array(0.0))), 4)
        -1.6121
    """

    scale: float
    name: ClassVar[str] = "gaussian"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("scale", POSITIVE),
        Param("weight_decay", POSITIVE),
    )

    @classmethod
    def from_values(cls, values: dict[str, Any], *, weight_decay: float = 1.0) -> Normal:
        if "scale" in values and "weight_decay" in values:
            raise ConfigError(
                "prior 'gaussian' takes scale or weight_decay, not both; allowed: scale > 0 "
                "or weight_decay > 0 (variance 1/weight_decay)"
            )
        if "scale" in values:
            return cls(values["scale"])
        return cls(1.0 / math.sqrt(values.get("weight_decay", weight_decay)))

    @property
    def mean(self) -> float:
        return 0.0

    @property
    def variance(self) -> float:
        return self.scale**2

    def log_prob(self, x: jax.Array) -> jax.Array:
        return stats.norm.logpdf(x, 0.0, self.scale)

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        return self.scale * jax.random.normal(key, shape, dtype)

    def gaussian_std(self, shape: tuple[int, ...]) -> float:
        del shape
        return self.scale


def fan_in(shape: tuple[int, ...]) -> int:
    """Inputs per output unit of a kernel shaped ``(..., fan_in, fan_out)``: ``∏ shape[:-1]``.

    A bias (1-D) or scalar has fan-in 1.

    Example:
        >>> fan_in((3, 3, 16, 32)), fan_in((50,))
        (144, 1)
    """
    return math.prod(shape[:-1])


@dataclasses.dataclass(frozen=True)
class FanInNormal(Elementwise):
    """N(0, σ²/fan_in): the scaling under which a wide layer's outputs keep their variance.

    With this prior on every layer of an MLP of width H, the output at any input is a sum of H
    independent terms of variance O(1/H), which tends to a Gaussian process as H grows
    (Neal 1996). Biases (fan-in 1) get N(0, σ²).

    Example:
        >>> FanInNormal(scale=2.0).for_shape((100, 10))
        Normal(scale=0.2)
    """

    scale: float = 1.0
    name: ClassVar[str] = "fanin_gaussian"
    PARAMS: ClassVar[tuple[Param, ...]] = (Param("scale", POSITIVE, 1.0),)

    def for_shape(self, shape: tuple[int, ...]) -> Normal:
        return Normal(self.scale / math.sqrt(fan_in(shape)))

    def log_prob(self, x: jax.Array) -> jax.Array:
        """Per-element density, with the fan-in read from ``x.shape`` (``x`` is a whole leaf)."""
        return self.for_shape(x.shape).log_prob(x)

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        return self.for_shape(shape).sample(key, shape, dtype)

    def gaussian_std(self, shape: tuple[int, ...]) -> float:
        return self.for_shape(shape).scale


@dataclasses.dataclass(frozen=True)
class ScaleMixture(Elementwise):
    """Blundell et al.'s (2015) spike-and-slab-like scale mixture.

    ``p(w) = π N(w; 0, σ₁²) + (1-π) N(w; 0, σ₂²)``, variance ``π σ₁² + (1-π) σ₂²``.

    Example:
        >>> ScaleMixture(pi=0.5, sigma1=1.0, sigma2=0.0025).variance
        0.500003125
    """

    pi: float
    sigma1: float
    sigma2: float
    name: ClassVar[str] = "scale_mixture"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("pi", UNIT_INTERVAL, required=True),
        Param("sigma1", POSITIVE, required=True),
        Param("sigma2", POSITIVE, required=True),
    )

    @property
    def mean(self) -> float:
        return 0.0

    @property
    def variance(self) -> float:
        return self.pi * self.sigma1**2 + (1 - self.pi) * self.sigma2**2

    def log_prob(self, x: jax.Array) -> jax.Array:
        return jnp.logaddexp(
            math.log(self.pi) + stats.norm.logpdf(x, 0.0, self.sigma1),
            math.log1p(-self.pi) + stats.norm.logpdf(x, 0.0, self.sigma2),
        )

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        k_component, k_normal = jax.random.split(key)
        first = jax.random.bernoulli(k_component, self.pi, shape)
        scale = jnp.where(first, self.sigma1, self.sigma2).astype(dtype)
        return scale * jax.random.normal(k_normal, shape, dtype)


@dataclasses.dataclass(frozen=True)
class GaussianMixture(Elementwise):
    """K-component Gaussian mixture ``Σ_k π_k N(μ_k, σ_k²)`` (``locs`` default to 0).

    Mean ``Σ π_k μ_k``; variance ``Σ π_k (σ_k² + μ_k²) - mean²``.

    Example:
        >>> GaussianMixture(weights=(0.5, 0.5), scales=(1.0, 1.0), locs=(-1.0, 1.0)).variance
        2.0
    """

    weights: tuple[float, ...]
    scales: tuple[float, ...]
    locs: tuple[float, ...] | None = None
    name: ClassVar[str] = "mixture"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("weights", SIMPLEX, required=True),
        Param("scales", POSITIVE_LIST, required=True),
        Param("locs", REAL_LIST),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.locs is None:
            object.__setattr__(self, "locs", (0.0,) * len(self.weights))
        if not len(self.weights) == len(self.scales) == len(self.locs):
            raise ConfigError(
                f"prior 'mixture': weights, scales and locs have {len(self.weights)}, "
                f"{len(self.scales)} and {len(self.locs)} entries; allowed: one per component"
            )

    @property
    def mean(self) -> float:
        return sum(w * m for w, m in zip(self.weights, self.locs, strict=True))

    @property
    def variance(self) -> float:
        second = sum(
            w * (s**2 + m**2) for w, s, m in zip(self.weights, self.scales, self.locs, strict=True)
        )
        return second - self.mean**2

    def log_prob(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)[..., None]
        log_w = jnp.log(jnp.asarray(self.weights, x.dtype))
        per_component = stats.norm.logpdf(
            x, jnp.asarray(self.locs, x.dtype), jnp.asarray(self.scales, x.dtype)
        )
        return logsumexp(log_w + per_component, axis=-1)

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        k_component, k_normal = jax.random.split(key)
        log_w = jnp.log(jnp.asarray(self.weights, jnp.float32))
        k = jax.random.categorical(k_component, log_w, shape=shape)
        locs, scales = jnp.asarray(self.locs, dtype), jnp.asarray(self.scales, dtype)
        return locs[k] + scales[k] * jax.random.normal(k_normal, shape, dtype)


@dataclasses.dataclass(frozen=True)
class CentredScale(Elementwise):
    """A standard density centred at 0, stretched by ``scale`` s: ``p(w) = f(w/s) / s``.

    Subclasses name ``density`` (a ``jax.scipy.stats`` module with ``logpdf(x, loc, scale)``)
    and ``standard_draw`` (the ``jax.random`` sampler of ``f``); draws are ``s`` times a
    standard draw.

    Example:
        >>> Laplace(scale=2.0).mean
        0.0
    """

    scale: float = 1.0
    PARAMS: ClassVar[tuple[Param, ...]] = (Param("scale", POSITIVE, 1.0),)
    density: ClassVar[Any]
    standard_draw: ClassVar[Any]

    @property
    def mean(self) -> float:
        return 0.0

    def log_prob(self, x: jax.Array) -> jax.Array:
        return self.density.logpdf(x, 0.0, self.scale)

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        return self.scale * self.standard_draw(key, shape, dtype)


@dataclasses.dataclass(frozen=True)
class Logistic(CentredScale):
    """Logistic with scale s: variance ``π² s² / 3``.

    Example:
        >>> round(float(Logistic(scale=1.0).log_prob(jnp.array(0.0))), 4)  # log 1/4
        -1.3863
    """

    name: ClassVar[str] = "logistic"
    density: ClassVar[Any] = stats.logistic
    standard_draw: ClassVar[Any] = staticmethod(jax.random.logistic)

    @property
    def variance(self) -> float:
        return math.pi**2 * self.scale**2 / 3


@dataclasses.dataclass(frozen=True)
class Laplace(CentredScale):
    """Laplace with scale b: ``log p(w) = -|w|/b - log 2b``, variance ``2b²``.

    Example:
        >>> Laplace(scale=0.5).variance
        0.5
    """

    name: ClassVar[str] = "laplace"
    density: ClassVar[Any] = stats.laplace
    standard_draw: ClassVar[Any] = staticmethod(jax.random.laplace)

    @property
    def variance(self) -> float:
        return 2 * self.scale**2


@dataclasses.dataclass(frozen=True)
class StudentT(Elementwise):
    """Student-t with ν degrees of freedom and scale s: variance ``s² ν/(ν-2)`` for ν > 2.

    Example:
        >>> StudentT(df=3.0, scale=0.1).variance
        0.030000000000000006
    """

    df: float
    scale: float = 1.0
    name: ClassVar[str] = "student_t"
    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("df", POSITIVE, required=True),
        Param("scale", POSITIVE, 1.0),
    )

    @property
    def mean(self) -> float:
        return 0.0 if self.df > 1 else math.nan

    @property
    def variance(self) -> float:
        if self.df <= 1:
            return math.nan
        return self.scale**2 * self.df / (self.df - 2) if self.df > 2 else math.inf

    def log_prob(self, x: jax.Array) -> jax.Array:
        return stats.t.logpdf(x, self.df, 0.0, self.scale)

    def sample(self, key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32):
        return self.scale * jax.random.t(key, self.df, shape, dtype)


def gaussian_kl(mean: jax.Array, std: jax.Array, prior_std: float) -> jax.Array:
    """``Σ KL(N(mean, std²) || N(0, prior_std²))`` over the elements.

    Per element, ``log(σ_p/σ_q) + (σ_q² + μ_q²)/(2σ_p²) - ½``.

    Example:
        >>> float(gaussian_kl(jnp.zeros(3), jnp.ones(3), 1.0))
        0.0
    """
    ratio = jnp.square(std / prior_std)
    return 0.5 * jnp.sum(ratio + jnp.square(mean / prior_std) - 1.0 - jnp.log(ratio))


ELEMENTWISE = (Normal, FanInNormal, ScaleMixture, GaussianMixture, Logistic, Laplace, StudentT)
