"""A linear-Gaussian log posterior small enough for the examples of the methods' docstrings.

``y = w·x + b + ε``, ``ε ~ N(0, noise_std²)``, every weight under ``N(0, 1/weight_decay)``:
the conjugate problem whose exact posterior the samplers' tests check against, built from the
same parts as every problem (:mod:`bnnkit.models`' ``linear``, :mod:`bnnkit.likelihoods`,
:mod:`bnnkit.priors`).

Example:
    >>> import jax, jax.numpy as jnp
    >>> model, lp = linear_log_posterior(num_data=16)
    >>> params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 2)))
    >>> lp.num_data, sorted(params["params"]["Dense_0"])
    (16, ['bias', 'kernel'])
"""

from __future__ import annotations

from typing import Any

from bnnkit import likelihoods, models, priors
from bnnkit.log_posterior import LogPosterior


def linear_log_posterior(
    num_data: int, *, noise_std: float = 1.0, weight_decay: float = 1.0
) -> tuple[Any, LogPosterior]:
    """The ``linear`` model with one output and its log posterior on ``num_data`` examples.

    Returns:
        ``(model, log_posterior)``: the Flax module (its ``init`` makes the parameters) and
        the log posterior of its parameters.
    """
    model = models.get("linear", num_outputs=1)
    likelihood = likelihoods.Gaussian(noise_std=noise_std)
    return model, LogPosterior(
        model.apply, likelihood, priors.Gaussian(weight_decay), num_data=num_data
    )
