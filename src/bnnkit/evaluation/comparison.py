"""How close a run's predictive is to a reference: another run's predictive (e.g. HMC's), or a
released table of reference probabilities.

Classification is scored as the NeurIPS 2021 BDL competition scored it (agreement of the top
classes and total variation of the probabilities); regression by the RMSE between the two
predictive means and the mean over test points of the Wasserstein-1 distance between the
predictive draws (the competition's "W2", which scipy's ``wasserstein_distance`` computes as
W₁; :mod:`bnnkit.metrics.predictive`).

Beside every comparison stands its noise floor (:func:`noise_floor`): the same scores between
two independent halves of the reference's own chains. A method closer to the reference than
that is as close as the reference can tell.
"""

from __future__ import annotations

import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.metrics import halves
from bnnkit.metrics.predictive import agreement, predictive_wasserstein_1, rmse, total_variation
from bnnkit.predict import Prediction


def compare(prediction: Prediction, reference: Prediction) -> dict[str, float]:
    """How close a predictive is to a reference one (e.g. HMC's)."""
    if prediction.task != reference.task:
        raise ConfigError("the reference run is for another task")
    if prediction.task == "classification":
        if prediction.probs.shape != reference.probs.shape:
            raise ConfigError(
                f"reference predictions have shape {reference.probs.shape}, expected "
                f"{prediction.probs.shape}: the runs use different test sets"
            )
        return compare_probs(prediction.probs, reference.probs)
    if prediction.mean.shape != reference.mean.shape:
        raise ConfigError("the reference run uses a different test set")
    return {
        "rmse_to_reference_mean": rmse(prediction.mean, reference.mean),
        "wasserstein_1": predictive_wasserstein_1(prediction, reference),
    }


def compare_probs(probs: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """The NeurIPS 2021 BDL competition's scores of ``probs`` against ``reference`` (N, C).

    ``agreement = mean_i [argmax_k p_ik = argmax_k q_ik]`` and
    ``total_variation = mean_i ½ Σ_k |p_ik − q_ik|``.

    Example:
        >>> p = np.array([[0.9, 0.1], [0.4, 0.6]])
        >>> q = np.array([[0.7, 0.3], [0.8, 0.2]])
        >>> {k: round(v, 3) for k, v in compare_probs(p, q).items()}
        {'agreement': 0.5, 'total_variation': 0.3}
    """
    return {
        "agreement": agreement(probs, reference),
        "total_variation": total_variation(probs, reference),
    }


def noise_floor(prediction: Prediction, reference: Prediction, y: np.ndarray) -> dict[str, object]:
    """The reference's own half-to-half distance: the noise floor of a comparison with it.

    The reference's chains are cut into two halves (:func:`bnnkit.metrics.halves.split_chains`)
    and the model average of one half is scored against the other's as :func:`compare` scores
    a method against the reference, with the same estimators; no method can be told closer to
    the reference than this. Beside them, the difference of the halves' test LPDs
    (``lpd_difference``) and the method's own test LPD minus the reference's
    (``method_lpd_difference``).

    Args:
        prediction: the method's predictive at the test inputs.
        reference: the reference's, at the same inputs.
        y: the test targets (original units) or labels.

    Returns:
        ``chains`` (the halves), the keys of :func:`compare`, ``lpd_difference`` and
        ``method_lpd_difference``; or, for a reference of one chain, only a ``note``.
    """
    found = halves.averages(reference)
    if found is None:
        return {"note": "the reference has one chain: no two halves to compare"}
    whole, a, b = found

    def as_prediction(average: halves.Average) -> Prediction:
        return Prediction(average.task, probs=average.probs, means=average.means, stds=average.stds)

    mine = halves.of_prediction(prediction, whole.points)
    return {
        "chains": halves.split_chains(reference.per_sample.shape[0]),
        **compare(as_prediction(a), as_prediction(b)),
        "lpd_difference": a.lpd(y) - b.lpd(y),
        "method_lpd_difference": mine.lpd(y) - whole.lpd(y),
    }
