"""Predictive metrics, in the units of the original data.

Classification (``probs`` are (N, K) predictive probabilities, ``labels`` (N,)):

    accuracy  = mean[ argmax_k p_ik == y_i ]
    NLL       = -mean[ log p_{i, y_i} ]
    ECE       = Σ_b (|B_b|/N) · | acc(B_b) - conf(B_b) |   over equal-width confidence bins
    Brier     = mean_i Σ_k (p_ik - [y_i = k])²   (Brier 1950; 0 is perfect, 2 the worst)

Regression with a mixture of S Gaussians per point (means μ_si, stds σ_si):

    RMSE = sqrt(mean[(ȳ_i - y_i)²]),  ȳ_i = mean_s μ_si
    NLL  = -mean_i log( (1/S) Σ_s N(y_i | μ_si, σ_si²) )

Comparison of two predictive distributions p, q (approximate-inference competition definitions):

    agreement = mean[ argmax p_i == argmax q_i ]
    TV        = ½ · mean_i Σ_k |p_ik - q_ik|
    W1        = mean_i W₁(p_i, q_i)   (regression: per test point, between predictive samples)

The competition (Wilson et al. 2022, "Evaluating Approximate Inference in Bayesian Deep
Learning") called its regression score "W2", but computed it with
``scipy.stats.wasserstein_distance``, which is the Wasserstein-1 distance; :func:`wasserstein_1`
is that same W₁.
"""

from __future__ import annotations

import math

import numpy as np


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(a - top), axis=axis))


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy.

    Example:
        >>> accuracy(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([0, 0]))
        0.5
    """
    return float(np.mean(np.argmax(probs, axis=-1) == labels))


def nll_categorical(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-12) -> float:
    """Mean negative log predictive probability of the true class."""
    p = np.take_along_axis(np.asarray(probs, np.float64), labels[:, None].astype(int), axis=1)
    return float(-np.mean(np.log(np.clip(p[:, 0], eps, None))))


def calibration_bins(probs: np.ndarray, labels: np.ndarray, num_bins: int = 15) -> dict[str, list]:
    """The reliability diagram's bins: top-1 confidence cut into ``num_bins`` equal-width
    bins ``B_b = (b/M, (b+1)/M]`` (M = ``num_bins``), each with its share of points, mean
    confidence and accuracy; :func:`ece` is computed from them.

        n_b    = |B_b|,   Σ_b n_b = N
        conf_b = (1/n_b) Σ_{i∈B_b} max_k p_ik
        acc_b  = (1/n_b) Σ_{i∈B_b} [argmax_k p_ik = y_i]
        ECE    = Σ_b (n_b / N) · |acc_b − conf_b|

    Returns:
        JSON-serialisable lists: ``edges`` (M + 1), and per bin ``counts`` (n_b),
        ``confidence`` (conf_b) and ``accuracy`` (acc_b), the last two ``None`` for an
        empty bin.

    Example:
        >>> bins = calibration_bins(np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]),
        ...                         np.array([0, 0, 0]), num_bins=2)
        >>> bins["counts"], bins["accuracy"]
        ([0, 3], [None, 0.6666666666666666])
    """
    probs = np.asarray(probs, np.float64)
    confidence = probs.max(axis=-1)
    correct = (probs.argmax(axis=-1) == labels).astype(np.float64)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    # Bins are (lo, hi]; a confidence of exactly 0 cannot occur for a distribution over K classes.
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)
    counts, conf, acc = [], [], []
    for b in range(num_bins):
        in_bin = index == b
        counts.append(int(in_bin.sum()))
        # An empty bin has no mean: None (JSON null) rather than NaN, which JSON cannot hold.
        conf.append(float(confidence[in_bin].mean()) if in_bin.any() else None)
        acc.append(float(correct[in_bin].mean()) if in_bin.any() else None)
    return {"edges": edges.tolist(), "counts": counts, "confidence": conf, "accuracy": acc}


def ece_from_bins(bins: dict[str, list]) -> float:
    """``Σ_b (n_b/N) |acc_b − conf_b|`` of :func:`calibration_bins`' bins (0 for no points).

    Example:
        >>> ece_from_bins({"counts": [1, 3], "confidence": [0.5, 0.9], "accuracy": [1.0, 0.6]})
        0.35
    """
    total = sum(bins["counts"])
    ece_ = 0.0
    for n, conf, acc in zip(bins["counts"], bins["confidence"], bins["accuracy"], strict=True):
        if n:
            ece_ += n / total * abs(acc - conf)
    return float(ece_)


def ece(probs: np.ndarray, labels: np.ndarray, num_bins: int = 15) -> float:
    """Expected calibration error with ``num_bins`` equal-width bins on the top-1 confidence
    (:func:`calibration_bins`).

    Example:
        >>> ece(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([0, 0]), num_bins=10)
        0.45
    """
    return ece_from_bins(calibration_bins(probs, labels, num_bins))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Brier score ``mean_i Σ_k (p_ik − [y_i = k])²``.

    Example:
        >>> brier(np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([0, 1]))
        0.25
    """
    probs = np.asarray(probs, np.float64)
    onehot = np.eye(probs.shape[-1])[np.asarray(labels, int)]
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=-1)))


def rmse(mean: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(mean, np.float64) - targets) ** 2)))


def nll_gaussian_mixture(means: np.ndarray, stds: np.ndarray, targets: np.ndarray) -> float:
    """Mean NLL of ``targets`` (N,) under an equal-weight mixture of Gaussians (S, N)."""
    means = np.asarray(means, np.float64)
    stds = np.asarray(stds, np.float64)
    z = (targets[None, :] - means) / stds
    log_dens = -0.5 * z**2 - np.log(stds) - 0.5 * math.log(2 * math.pi)
    log_mix = _logsumexp(log_dens, axis=0) - math.log(means.shape[0])
    return float(-np.mean(log_mix))


def nll_gaussian_mixture_binned(
    means: np.ndarray, stds: np.ndarray, targets: np.ndarray, width: float = 1.0
) -> float:
    r"""Mean NLL of integer-valued ``targets`` as outcomes: the mixture's mass on their bins.

    A target recorded as a whole number (a wine's quality score of 3 to 8) is an outcome,
    not a point of a continuum; its probability under the equal mixture of Gaussians (S, N) is
    the mass of the bin of ``width`` around it,

    .. math:: P(y_i) = \frac1S \sum_s \Bigl[\Phi\Bigl(\frac{y_i + w/2 - \mu_{si}}{\sigma_{si}}
              \Bigr) - \Phi\Bigl(\frac{y_i - w/2 - \mu_{si}}{\sigma_{si}}\Bigr)\Bigr].

    Unlike the density of :func:`nll_gaussian_mixture`, it cannot exceed 1: a predictive that
    piles its density onto the integer it predicts gains nothing beyond certainty, so it
    compares models on what they say about the outcome, not on how narrow a spike they put
    on a grid. Masses below 1e-300 count as 1e-300.

    Example:
        >>> round(nll_gaussian_mixture_binned(np.full((1, 1), 5.0), np.full((1, 1), 1e-3),
        ...                                   np.array([5.0])), 6)  # certain of the score 5
        0.0
        >>> round(nll_gaussian_mixture(np.full((1, 1), 5.0), np.full((1, 1), 1e-3),
        ...                            np.array([5.0])), 2)  # a density, unbounded
        -5.99
    """
    from scipy.special import log_ndtr

    means = np.asarray(means, np.float64)
    stds = np.asarray(stds, np.float64)
    upper = (targets[None, :] + 0.5 * width - means) / stds
    lower = (targets[None, :] - 0.5 * width - means) / stds
    # log(Φ(u) − Φ(l)) = log Φ(u) + log(1 − exp(log Φ(l) − log Φ(u))), stable in the left tail;
    # the right tail by symmetry, Φ(u) − Φ(l) = Φ(−l) − Φ(−u).
    right = lower > 0
    hi = np.where(right, -lower, upper)
    lo = np.where(right, -upper, lower)
    log_hi, log_lo = log_ndtr(hi), log_ndtr(lo)
    with np.errstate(divide="ignore"):
        log_mass = log_hi + np.log1p(-np.exp(np.minimum(log_lo - log_hi, 0.0)))
    log_mix = _logsumexp(np.maximum(log_mass, math.log(1e-300)), axis=0) - math.log(means.shape[0])
    return float(-np.mean(log_mix))


def agreement(p: np.ndarray, q: np.ndarray) -> float:
    """Fraction of points whose top-1 class is the same under ``p`` and ``q``."""
    return float(np.mean(np.argmax(p, axis=-1) == np.argmax(q, axis=-1)))


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """Mean total-variation distance ``½ Σ_k |p_k - q_k|`` between predictive distributions."""
    return float(np.mean(0.5 * np.sum(np.abs(np.asarray(p) - np.asarray(q)), axis=-1)))


#: Draws per test point from each predictive for :func:`wasserstein_1`.
W1_DRAWS = 1000


def mixture_draws(
    means: np.ndarray, stds: np.ndarray, num: int, rng: np.random.Generator
) -> np.ndarray:
    """``num`` draws per point from the equal mixture ``(1/S) Σ_s N(μ_si, σ_si²)``: (N, num).

    Each draw picks a component uniformly, then adds its Gaussian noise.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> mixture_draws(np.zeros((3, 2)), np.ones((3, 2)), 5, rng).shape
        (2, 5)
    """
    means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
    s, n = means.shape
    which = rng.integers(0, s, size=(n, num))
    cols = np.arange(n)[:, None]
    return means[which, cols] + stds[which, cols] * rng.standard_normal((n, num))


def wasserstein_1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the Wasserstein-1 distance between the empirical distributions of ``a`` and
    ``b`` (N, M) with M draws each: ``mean_j |a_(j) − b_(j)|`` over the sorted draws, which is
    ``scipy.stats.wasserstein_distance(a_i, b_i)`` for equal numbers of draws.

    Example:
        >>> wasserstein_1(np.array([[0.0, 1.0]]), np.array([[2.0, 3.0]]))
        array([2.])
    """
    a, b = np.sort(np.asarray(a, np.float64), axis=-1), np.sort(np.asarray(b, np.float64), axis=-1)
    if a.shape != b.shape:
        raise ValueError(f"draws of shapes {a.shape} and {b.shape}: need the same (N, M)")
    return np.mean(np.abs(a - b), axis=-1)


def predictive_wasserstein_1(prediction, reference, seed: int = 0, num: int = W1_DRAWS) -> float:
    """Mean over test points of W₁ between two regression predictives (mixtures of Gaussians,
    :class:`bnnkit.predict.Prediction`), each represented by ``num`` draws per point taken
    with ``numpy.random.default_rng(seed)`` (the competition's "W2"; see the module)."""
    rng = np.random.default_rng(seed)
    mine = mixture_draws(prediction.means, prediction.stds, num, rng)
    theirs = mixture_draws(reference.means, reference.stds, num, rng)
    return float(np.mean(wasserstein_1(mine, theirs)))


def metrics_for(prediction, targets: np.ndarray) -> dict[str, float]:
    """Predictive metrics of a :class:`bnnkit.predict.Prediction` against targets (original
    units): accuracy, NLL, ECE and Brier score, or RMSE and NLL.

    Example:
        >>> from bnnkit.predict import Prediction
        >>> p = Prediction("classification", probs=np.array([[0.9, 0.1], [0.2, 0.8]]))
        >>> metrics_for(p, np.array([0, 0]))["accuracy"]
        0.5
    """
    if prediction.task == "classification":
        return {
            "accuracy": accuracy(prediction.probs, targets),
            "nll": nll_categorical(prediction.probs, targets),
            "ece": ece(prediction.probs, targets),
            "brier": brier(prediction.probs, targets),
        }
    return {
        "rmse": rmse(prediction.mean, targets),
        "nll": nll_gaussian_mixture(prediction.means, prediction.stds, targets),
    }
