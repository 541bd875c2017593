"""Out-of-distribution detection from a classifier's predictive (Hendrycks & Gimpel 2017).

Two scores per input, higher meaning "more likely out of distribution", from the model average
``p̄ = (1/S) Σ_s p_s`` over posterior draws:

    predictive entropy   H[p̄] = −Σ_k p̄_k log p̄_k                 (total uncertainty)
    mutual information   I = H[p̄] − (1/S) Σ_s H[p_s]              (epistemic part: the draws
                                                                   disagree; 0 for one draw)

and two measures of how well a score separates the OOD inputs (positives) from the test inputs
of the training distribution (negatives): the area under the ROC curve (the probability that
a random OOD input scores above a random in-distribution one, ties counting ½), and the false
positive rate at 95 % true positive rate: the share of in-distribution inputs scoring at or
above the largest threshold that still flags 95 % of the OOD inputs.

Example:
    >>> auroc(np.array([0.1, 0.2, 0.3]), np.array([0.25, 0.9]))  # 5 of 6 pairs ordered
    0.8333...
    >>> fpr_at_tpr(np.array([0.1, 0.2, 0.3]), np.array([0.25, 0.9]))  # threshold 0.25
    0.3333...
"""

from __future__ import annotations

import math

import numpy as np

#: The true positive rate at which the false positive rate is reported.
TPR = 0.95


def entropy(probs: np.ndarray, axis: int = -1) -> np.ndarray:
    """``−Σ_k p_k log p_k`` (0 log 0 = 0)."""
    p = np.asarray(probs, np.float64)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def auroc(in_scores: np.ndarray, out_scores: np.ndarray) -> float:
    """Area under the ROC curve of ``out_scores`` (positives) against ``in_scores``: the
    Mann–Whitney statistic ``P(s_out > s_in) + ½ P(s_out = s_in)`` from average ranks."""
    # Imported here: scipy.stats takes most of a second to import, and every command's
    # start imports this module.
    from scipy import stats

    in_scores, out_scores = np.ravel(in_scores), np.ravel(out_scores)
    ranks = stats.rankdata(np.concatenate([in_scores, out_scores]))
    n_in, n_out = in_scores.size, out_scores.size
    u = ranks[n_in:].sum() - n_out * (n_out + 1) / 2
    return float(u / (n_in * n_out))


def fpr_at_tpr(in_scores: np.ndarray, out_scores: np.ndarray, tpr: float = TPR) -> float:
    """The share of ``in_scores`` at or above the largest threshold t with
    ``mean(out_scores ≥ t) ≥ tpr``."""
    ordered = np.sort(np.ravel(out_scores))[::-1]
    threshold = ordered[math.ceil(tpr * ordered.size) - 1]
    return float(np.mean(np.ravel(in_scores) >= threshold))


def scores(prediction) -> dict[str, np.ndarray]:
    """The entropy and mutual-information scores of a classification
    :class:`bnnkit.predict.Prediction` (which carries the draws' mean entropy)."""
    total = entropy(prediction.probs)
    return {
        "entropy": total,
        "mutual_information": np.clip(total - prediction.expected_entropy, 0.0, None),
    }


def detection(in_prediction, out_prediction) -> dict[str, dict[str, float]]:
    """AUROC and FPR at 95 % TPR of each score, OOD inputs as positives."""
    mine, theirs = scores(in_prediction), scores(out_prediction)
    return {
        name: {
            "auroc": auroc(mine[name], theirs[name]),
            "fpr_at_95_tpr": fpr_at_tpr(mine[name], theirs[name]),
        }
        for name in mine
    }
