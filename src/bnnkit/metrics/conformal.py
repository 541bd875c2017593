"""Split conformal prediction (Vovk et al. 2005; Angelopoulos & Bates 2023): prediction sets
and intervals with a finite-sample coverage guarantee, from a held-out calibration set.

With scores ``s_1..s_n`` of the n held-out points (the run's ``--validation-size`` examples,
never trained on) and level α, the threshold is the ``⌈(n + 1)(1 − α)⌉``-th smallest score
(``+∞`` when that exceeds n); a new point's set holds every label whose score is at most it.
For exchangeable data, ``P(y ∈ C(x)) ≥ 1 − α``.

- Classification, the LAC score (least ambiguous set-valued classifier, Sadinle et al. 2019):
  ``s = 1 − p̄(y | x)``, so ``C(x) = {k : p̄(k | x) ≥ 1 − q̂}``. Of the sets with the coverage
  guarantee it has the smallest expected size; APS (Romano et al. 2020) adapts sizes to each
  point's difficulty but needs randomised sets for exact coverage, so LAC is used.
- Regression, the normalised residual ``s = |y − μ(x)| / σ(x)`` of the predictive mixture's
  mean μ and standard deviation ``σ² = mean_s(σ_s² + μ_s²) − μ²``, so
  ``C(x) = [μ − q̂ σ, μ + q̂ σ]``: intervals that widen where the model is less certain
  (``|y − μ|`` alone would give every point the same width).

Example:
    >>> quantile(np.arange(1.0, 10.0), alpha=0.2)  # ⌈10 · 0.8⌉ = 8th of 9 scores
    8.0
    >>> quantile(np.arange(1.0, 10.0), alpha=0.05)  # ⌈9.5⌉ = 10 > 9: every label
    inf
"""

from __future__ import annotations

import math

import numpy as np

CLASSIFICATION_SCORE = "lac"
REGRESSION_SCORE = "normalized_residual"


def quantile(scores: np.ndarray, alpha: float) -> float:
    """The ``⌈(n + 1)(1 − α)⌉``-th smallest of the n scores (``inf`` beyond n)."""
    scores = np.sort(np.asarray(scores, np.float64))
    n = scores.size
    k = math.ceil((n + 1) * (1 - alpha))
    return float("inf") if k > n else float(scores[k - 1])


def predictive_mean_std(means: np.ndarray, stds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the mixture ``(1/S) Σ_s N(μ_s, σ_s²)`` per point."""
    means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
    mean = means.mean(axis=0)
    var = np.mean(stds**2 + means**2, axis=0) - mean**2
    return mean, np.sqrt(np.clip(var, 0.0, None))


def scores(prediction, targets: np.ndarray) -> np.ndarray:
    """The conformity score of each (point, target): LAC or the normalised residual."""
    targets = np.asarray(targets)
    if prediction.task == "classification":
        probs = np.asarray(prediction.probs, np.float64)
        return 1.0 - probs[np.arange(len(targets)), targets.astype(int)]
    mean, std = predictive_mean_std(prediction.means, prediction.stds)
    return np.abs(targets - mean) / std


def evaluate(
    calibration, calibration_targets: np.ndarray, test, test_targets: np.ndarray, alpha: float
) -> dict[str, float | str | int]:
    """Fit the threshold on the calibration predictions, then the test coverage and the mean
    set size (classification) or interval width in the targets' units (regression).

    Args:
        calibration, test: :class:`bnnkit.predict.Prediction` on the held-out and test points.
        calibration_targets, test_targets: their labels or targets (original units).
        alpha: the miscoverage level α in (0, 1).
    """
    q = quantile(scores(calibration, calibration_targets), alpha)
    out: dict[str, float | str | int] = {
        "alpha": alpha,
        "calibration_size": len(calibration_targets),
        "quantile": q,
    }
    covered = scores(test, test_targets) <= q
    out["coverage"] = float(np.mean(covered))
    if test.task == "classification":
        sets = 1.0 - np.asarray(test.probs, np.float64) <= q
        out.update(score=CLASSIFICATION_SCORE, mean_set_size=float(sets.sum(axis=1).mean()))
    else:
        _, std = predictive_mean_std(test.means, test.stds)
        out.update(score=REGRESSION_SCORE, mean_width=float(np.mean(2 * q * std)))
    return out
