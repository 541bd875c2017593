"""Temperature scaling of a predictive, fitted on held-out data (Guo et al. 2017).

Classification: the model average's probabilities are sharpened or flattened by one
temperature τ > 0, ``p_τ(k | x) ∝ p̄(k | x)^{1/τ}`` (softmax of ``log p̄ / τ``), which keeps
every argmax, so accuracy is unchanged. Regression: the predictive, a mixture of Gaussians, is
stretched about its mean ``m(x)`` by one factor s > 0 (``y ↦ m + s (y − m)``: component means
``m + s (μ_s − m)``, stds ``s σ_s``), which keeps the mean, so RMSE is unchanged. Either
parameter minimises the negative log likelihood of a validation set the method never saw
(``--validation-size``), by bounded scalar minimisation over its logarithm in
``[LOG_BOUND⁻¹, LOG_BOUND]`` (scipy's ``minimize_scalar``).

Example:
    >>> from bnnkit.predict import Prediction
    >>> overconfident = Prediction("classification", probs=np.array([[0.99, 0.01]] * 4))
    >>> tau = fit(overconfident, np.array([0, 0, 0, 1]))
    >>> round(tau, 3), apply(overconfident, tau).probs[0].round(2).tolist()  # τ = ln 99 / ln 3
    (4.183, [0.75, 0.25])
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize

from bnnkit.metrics.predictive import nll_categorical, nll_gaussian_mixture

#: τ (or s) is searched in [1/LOG_BOUND, LOG_BOUND].
LOG_BOUND = 100.0


def tempered_probs(probs: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(log p / τ)`` row by row (probabilities 0 stay 0)."""
    logp = np.log(np.clip(np.asarray(probs, np.float64), 1e-300, None)) / temperature
    logp -= logp.max(axis=-1, keepdims=True)
    p = np.exp(logp)
    return p / p.sum(axis=-1, keepdims=True)


def stretched(means: np.ndarray, stds: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The mixture ``(1/S) Σ_s N(μ_s, σ_s²)`` stretched by ``scale`` about its mean."""
    means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
    centre = means.mean(axis=0, keepdims=True)
    return centre + scale * (means - centre), scale * stds


def apply(prediction, value: float):
    """``prediction`` (a :class:`bnnkit.predict.Prediction`) at temperature (classification)
    or stretch (regression) ``value``."""
    if prediction.task == "classification":
        return dataclasses.replace(prediction, probs=tempered_probs(prediction.probs, value))
    means, stds = stretched(prediction.means, prediction.stds, value)
    return dataclasses.replace(prediction, means=means, stds=stds)


def fit(prediction, targets: np.ndarray) -> float:
    """The τ (classification) or s (regression) that minimises the NLL of ``targets``
    (original units) under ``prediction``."""
    targets = np.asarray(targets)

    def nll(log_value: float) -> float:
        moved = apply(prediction, math.exp(log_value))
        if prediction.task == "classification":
            return nll_categorical(moved.probs, targets)
        return nll_gaussian_mixture(moved.means, moved.stds, targets)

    bound = math.log(LOG_BOUND)
    found = optimize.minimize_scalar(
        nll, bounds=(-bound, bound), method="bounded", options={"xatol": 1e-6}
    )
    return float(math.exp(found.x))
