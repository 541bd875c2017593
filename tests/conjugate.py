"""The conjugate Bayesian linear regression posterior that full-batch samplers must recover."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from bnnkit import likelihoods, models, priors
from bnnkit.log_posterior import LogPosterior
from bnnkit.types import Batch


def conjugate_problem(feature_scales=(1.0, 1.0, 1.0)):
    """A linear model with Gaussian noise and prior, and its exact posterior over (w, b).

    Args:
        feature_scales: multiply the three covariates by these (unstandardised covariates give
            posterior scales spread over orders of magnitude).

    Returns:
        ``(model, log_posterior, batch, mean, covariance)``.
    """
    rng = np.random.default_rng(0)
    n, d, noise, weight_decay = 40, 3, 0.5, 2.0
    x = rng.normal(size=(n, d))
    y = (x @ np.array([1.0, -0.5, 0.25]) + 0.3 + noise * rng.normal(size=n)).astype(np.float32)
    x = (x * np.asarray(feature_scales)).astype(np.float32)
    model = models.get("linear", num_outputs=1)
    lp = LogPosterior(
        model.apply, likelihoods.Gaussian(noise_std=noise), priors.Gaussian(weight_decay), n
    )
    # Exact posterior over z = (w, b): precision λI + XᵀX/σ², mean Λ⁻¹Xᵀy/σ².
    xa = np.concatenate([x, np.ones((n, 1))], axis=1).astype(np.float64)
    precision = weight_decay * np.eye(d + 1) + xa.T @ xa / noise**2
    mean = np.linalg.solve(precision, xa.T @ y / noise**2)
    return model, lp, Batch(jnp.asarray(x), jnp.asarray(y)), mean, np.linalg.inv(precision)


def linear_draws(positions) -> np.ndarray:
    """(chains, samples, 4) float64 draws of (w, b) from the linear model's stacked params."""
    dense = positions["params"]["Dense_0"]
    return np.concatenate(
        [np.asarray(dense["kernel"])[..., 0], np.asarray(dense["bias"])], -1
    ).astype(np.float64)
