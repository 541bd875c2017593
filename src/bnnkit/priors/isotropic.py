"""The isotropic Gaussian prior of weight decay, the toolkit's default.

Weight decay λ means the isotropic Gaussian prior ``θ ~ N(0, 1/λ)`` on every weight and bias, as
in bnn_hmc (``prior_var = 1 / weight_decay``):

    log p(θ) = -½ λ ‖θ‖² + ½ d log(λ / 2π)

where d is the number of parameters.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError
from bnnkit.priors.constraints import format_value
from bnnkit.priors.families import Normal, gaussian_kl
from bnnkit.types import Params


@dataclasses.dataclass(frozen=True)
class Gaussian:
    """Isotropic Gaussian prior with precision ``weight_decay``.

    It has no latent variables, so it applies to every leaf of whatever tree it is given.

    Example:
        >>> prior = Gaussian(weight_decay=1.0)
        >>> float(prior.log_prob({"w": jnp.zeros(2)}))  # = log N(0; 0, 1) * 2
        -1.837877
    """

    weight_decay: float

    def __post_init__(self) -> None:
        if not (self.weight_decay > 0 and math.isfinite(self.weight_decay)):
            raise ConfigError(f"weight decay {self.weight_decay} must be a finite number > 0")

    @property
    def name(self) -> str:
        return "gaussian"

    def __str__(self) -> str:
        return f"gaussian:weight_decay={format_value(self.weight_decay)}"

    def family_for(self, path: str) -> Normal:
        """The family of every parameter: N(0, 1/λ)."""
        del path
        return Normal(1.0 / math.sqrt(self.weight_decay))

    def log_prob(self, params: Params) -> jax.Array:
        leaves = jax.tree.leaves(params)
        sq = sum(jnp.sum(jnp.square(leaf)) for leaf in leaves)
        size = sum(leaf.size for leaf in leaves)
        return -0.5 * self.weight_decay * sq + 0.5 * size * jnp.log(
            self.weight_decay / (2 * jnp.pi)
        )

    def sample(self, key: jax.Array, like: Params) -> Params:
        """Draw parameters shaped like ``like`` from the prior."""
        leaves, treedef = jax.tree.flatten(like)
        keys = jax.random.split(key, len(leaves))
        std = 1.0 / math.sqrt(self.weight_decay)
        draws = [
            std * jax.random.normal(k, leaf.shape, leaf.dtype)
            for k, leaf in zip(keys, leaves, strict=True)
        ]
        return treedef.unflatten(draws)

    def init_latents(self, like: Params) -> dict:
        """No latent variables."""
        del like
        return {}

    @property
    def has_closed_form_kl(self) -> bool:
        return True

    def kl_closed_form(self, mean: Params, std: Params) -> jax.Array:
        """``KL(N(mean, std²) || N(0, 1/λ))`` summed over every leaf."""
        prior_std = 1.0 / math.sqrt(self.weight_decay)
        return sum(
            (
                gaussian_kl(m, s, prior_std)
                for m, s in zip(jax.tree.leaves(mean), jax.tree.leaves(std), strict=True)
            ),
            jnp.zeros(()),
        )
