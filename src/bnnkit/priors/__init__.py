"""Priors over a network's position: weights, hierarchical prior scales, noise std.

``make`` builds a prior from specs (``"laplace:scale=0.1"``, see :mod:`bnnkit.priors.spec`);
``parse`` checks one spec. Every prior has

- ``log_prob(position) -> scalar``: the joint log density of the weights and of the prior's
  own latent variables (log parameterisations with their Jacobians), the form every method
  (HMC, SGD, SGMCMC, VI's Monte Carlo KL, Laplace) uses;
- ``sample(key, like) -> position``: a draw of everything from the prior;
- ``init_latents(like) -> dict``: the extra collections of a position (``{}`` when none);
- ``family_for(path)``: the family of one parameter (``"Dense_0/kernel"``);
- ``has_closed_form_kl`` and ``kl_closed_form(mean, std)`` for Gaussian families.

``Gaussian(weight_decay=λ)`` is the default, N(0, 1/λ) on every weight and bias.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit import models
    >>> prior = make("student_t:df=3,scale=0.1", bias="gaussian:scale=1")
    >>> prior.family_for("Dense_0/kernel"), prior.family_for("Dense_0/bias")
    (StudentT(df=3.0, scale=0.1), Normal(scale=1.0))
    >>> position = models.get("linear", num_outputs=1).init(jax.random.PRNGKey(0), jnp.ones((1, 2)))
    >>> prior.init_latents(position), bool(jnp.isfinite(prior.log_prob(position)))
    ({}, True)
"""

from bnnkit.priors.families import (
    FanInNormal,
    GaussianMixture,
    Laplace,
    Logistic,
    Normal,
    ScaleMixture,
    StudentT,
    fan_in,
)
from bnnkit.priors.hierarchical import ARD, InverseGammaNormal
from bnnkit.priors.isotropic import Gaussian
from bnnkit.priors.joint import JointPrior, Prior, make
from bnnkit.priors.noise import Gamma, HalfNormal, LogNormal
from bnnkit.priors.spec import (
    LayerRule,
    Spec,
    families,
    load_toml,
    parse,
    parse_layer_rule,
)

__all__ = [
    "ARD",
    "FanInNormal",
    "Gamma",
    "Gaussian",
    "GaussianMixture",
    "HalfNormal",
    "InverseGammaNormal",
    "JointPrior",
    "Laplace",
    "LayerRule",
    "LogNormal",
    "Logistic",
    "Normal",
    "Prior",
    "ScaleMixture",
    "Spec",
    "StudentT",
    "families",
    "fan_in",
    "load_toml",
    "make",
    "parse",
    "parse_layer_rule",
]
