"""A run's test figures against predictors that learn nothing, or only a line, from the inputs.

A network can finish without error and still not have fitted: the paper's SGD recipe moved to
yacht (``--init-step-size 3e-7``, 500 epochs) ends closer to predicting the training mean than to
what a fitted network reaches there, and worse than a straight line through the inputs. This
module computes the bars and the one warning line :func:`bnnkit.evaluation.evaluate` stores
under ``"baseline"`` and the commands print after their table.

The bars, from the training set only and scored on the test set like the model:

- regression, the constant predictor: every test point gets ``N(ȳ, s²)``, ȳ and s the mean and
  standard deviation of the training targets (original units), so
  ``RMSE_0 = sqrt(mean_i (y_i − ȳ)²)`` and ``NLL_0 = −mean_i log N(y_i | ȳ, s²)``;
- regression on real-valued inputs, least squares: ``ŷ = [x, 1] w`` with w the least-squares
  fit to the training set, ``RMSE_lin`` its test RMSE (computed where it is cheap and
  determined: at least twice as many training examples as coefficients, and at most
  :data:`MAX_LEAST_SQUARES_ENTRIES` entries in its design matrix);
- classification, the training class frequencies: every test point gets the frequencies π as
  its probabilities, so ``accuracy_0`` is the share of test labels equal to the training
  majority class and ``NLL_0 = −mean_i log π_{y_i}``.

The rule (:func:`poor_fit`): a fit is poor, and gets one warning, when

- regression: ``RMSE ≥ RMSE_0``, or ``RMSE > 1.1 · RMSE_lin`` (:data:`LEAST_SQUARES_MARGIN`),
  or ``NLL ≥ NLL_0``;
- classification: ``accuracy < accuracy_0``, or ``NLL ≥ NLL_0``.

Why these and not a fraction of the constant predictor's RMSE: how far below ``RMSE_0`` a good
fit lands depends on how noisy the data are, not on the fit alone. On wine-quality-red the best
published networks, and least squares, sit about as far below ``RMSE_0`` as the under-trained
yacht run above; a rule such as ``RMSE > 0.5 · RMSE_0`` would warn on every good wine fit and
give advice that cannot help. Least squares on the same inputs knows
how much a line explains on these data: a network that does worse than that line, by more
than the 10 % left for test-set noise where the data are close to linear, has not fitted what a
network is there for. The NLL comparisons need no margin: the
constant predictor's density is the least a predictive that has learnt anything beats, and a
model that does not has either not fitted or put its spread in the wrong place. Accuracy ties
with the majority class are not flagged: on imbalanced data a calibrated model may name the
majority class everywhere and still have learnt its probabilities, which the NLL then shows.
Classification has no linear bar (a logistic fit is iterative, not a cheap closed form).

Example:
    >>> y_train = np.array([0.0, 2.0, 4.0]); y_test = np.array([1.0, 3.0])
    >>> bars = constant_predictor("regression", y_train, y_test)
    >>> round(bars["rmse"], 3)  # the training mean, 2, is 1 away from each test target
    1.0
    >>> poor_fit({"rmse": 1.2, "nll": 1.0}, {"constant": bars}, "sgd")[:60]
    'test RMSE 1.2 is no better than predicting the training mean'
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bnnkit.metrics.predictive import nll_categorical

#: A network whose test RMSE is above this multiple of least squares' is flagged (see the
#: module docstring): the 10 % left for test-set noise on data close to linear.
LEAST_SQUARES_MARGIN = 1.1
#: The largest design matrix (examples x coefficients) least squares is computed for; beyond
#: it (images, long feature vectors) the bar is left out rather than made expensive.
MAX_LEAST_SQUARES_ENTRIES = 10_000_000

#: The likely cause of a poor mean or top-1 prediction, by the method that made the run.
FIT_CAUSES = {
    **dict.fromkeys(
        ("sgd", "ensemble", "swag", "dropout", "ivon", "vi"),
        "the optimiser has likely not fitted the network: a step size too small "
        "(or too large) or too few epochs",
    ),
    "sgmcmc": "the sampler has likely not reached the posterior's bulk: a step size too small "
    "(or too large) or too few epochs of burn-in",
    "laplace": "the MAP run it is fitted around has likely not fitted the network: a step size "
    "too small (or too large) or too few epochs there",
    **dict.fromkeys(
        ("hmc", "nuts", "mclmc", "reference"),
        "the chains have likely not left their start: too few burn-in iterations "
        "for their step size",
    ),
}
#: The cause for a method not in :data:`FIT_CAUSES`.
FIT_CAUSE = "the run has likely not fitted the network: a step size or a run length too small"
#: The likely cause when the mean fits but the predictive density is no better than the bar's.
SPREAD_CAUSES = {
    "regression": "its predictive spread does not match its errors: a fixed noise std or a "
    "temperature far from what the data need, or too short a fit",
    "classification": "its probabilities are overconfident for its errors: a cold temperature, "
    "or too short a fit",
}


def constant_predictor(task: str, y_train: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """The test figures of the predictor that ignores the inputs (see the module docstring).

    Args:
        task: ``"regression"`` or ``"classification"``.
        y_train: the training targets, in original units (regression) or class labels.
        y_test: the test targets, likewise.

    Returns:
        Regression: ``rmse`` and ``nll`` of ``N(ȳ, s²)`` (``nll`` is ``None`` when the training
        targets are all equal, s = 0). Classification: ``accuracy`` of the training majority
        class and ``nll`` of the training class frequencies (a class never seen in training
        gets probability 1e-12, as in :func:`~bnnkit.metrics.predictive.nll_categorical`).

    Example:
        >>> constant_predictor("classification", np.array([0, 0, 0, 1]), np.array([0, 1]))
        {'accuracy': 0.5, 'nll': 0.8369882167858358}
    """
    if task == "classification":
        labels = np.asarray(y_train).astype(int)
        test = np.asarray(y_test).astype(int)
        classes = int(max(labels.max(), test.max())) + 1
        freq = np.bincount(labels, minlength=classes) / labels.size
        return {
            "accuracy": float(np.mean(test == np.argmax(freq))),
            "nll": nll_categorical(np.broadcast_to(freq, (test.size, classes)), test),
        }
    y_train = np.asarray(y_train, np.float64)
    y_test = np.asarray(y_test, np.float64)
    mean, std = float(y_train.mean()), float(y_train.std())
    rmse = float(np.sqrt(np.mean((y_test - mean) ** 2)))
    if std == 0.0:
        return {"rmse": rmse, "nll": None}
    z = (y_test - mean) / std
    nll = float(np.mean(0.5 * z**2 + math.log(std) + 0.5 * math.log(2 * math.pi)))
    return {"rmse": rmse, "nll": nll}


def least_squares_rmse(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray
) -> float | None:
    """Test RMSE of the least-squares line ``[x, 1] w`` fitted to the training set.

    Returns:
        The RMSE, or ``None`` where the bar is left out: inputs that are not real numbers
        (token ids), fewer than twice as many training examples as coefficients (the fit
        would interpolate), or a design matrix above :data:`MAX_LEAST_SQUARES_ENTRIES`.

    Example:
        >>> x = np.arange(8.0)[:, None]
        >>> least_squares_rmse(x[:6], 2 * x[:6, 0] + 1, x[6:], 2 * x[6:, 0] + 1) < 1e-9
        True
    """
    x_train, x_test = np.asarray(x_train), np.asarray(x_test)
    if not np.issubdtype(x_train.dtype, np.floating) or x_train.ndim < 2:
        return None
    n = x_train.shape[0]
    coefficients = int(np.prod(x_train.shape[1:])) + 1
    if n < 2 * coefficients or n * coefficients > MAX_LEAST_SQUARES_ENTRIES:
        return None

    def design(x):
        x = np.asarray(x, np.float64).reshape(x.shape[0], -1)
        return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)

    w = np.linalg.lstsq(design(x_train), np.asarray(y_train, np.float64), rcond=None)[0]
    return float(np.sqrt(np.mean((design(x_test) @ w - np.asarray(y_test, np.float64)) ** 2)))


def of_dataset(dataset) -> dict[str, Any] | None:
    """The bars of a :class:`~bnnkit.data.dataset.Dataset`, in the units metrics are in.

    Returns:
        ``{"constant": ..., "least_squares": {"rmse": ...}}`` (the second for regression on
        real-valued inputs where it is computed), or ``None`` for targets that are not one
        number or label per example.
    """
    y_train = np.asarray(dataset.y_train)
    if y_train.ndim != 1 or y_train.size == 0:
        return None
    y_test = np.asarray(dataset.y_test_original)
    if dataset.task == "classification":
        return {"constant": constant_predictor("classification", y_train, y_test)}
    y_train = y_train.astype(np.float64) * dataset.target_scale + dataset.target_shift
    bars: dict[str, Any] = {"constant": constant_predictor("regression", y_train, y_test)}
    line = least_squares_rmse(dataset.x_train, y_train, dataset.x_test, y_test)
    if line is not None:
        bars["least_squares"] = {"rmse": line}
    return bars


def poor_fit(test: dict[str, float], bars: dict[str, Any], method: str | None) -> str | None:
    """The warning line for test figures that fail the rule of the module docstring.

    Args:
        test: the run's test metrics (:func:`~bnnkit.metrics.predictive.metrics_for`).
        bars: :func:`of_dataset`'s result.
        method: the method that made the run (``record["method"]``), for the likely cause.

    Returns:
        One line naming the failing figure, the bar's and the likely cause; ``None`` for a fit
        that passes. Where several fail, the mean's (RMSE, accuracy) is named first.

    Example:
        >>> bars = {"constant": {"rmse": 15.0, "nll": 4.0}, "least_squares": {"rmse": 9.0}}
        >>> print(poor_fit({"rmse": 11.0, "nll": 3.5}, bars, "sgd"))  # doctest: +ELLIPSIS
        test RMSE 11 is worse than least squares on the inputs (9; the training mean gives 15): \
the optimiser ...
        >>> poor_fit({"rmse": 0.5, "nll": 0.1}, bars, "sgd") is None
        True
    """
    const = bars["constant"]
    fit = FIT_CAUSES.get(method or "", FIT_CAUSE)
    if "accuracy" in const:
        spread = SPREAD_CAUSES["classification"]
        if test["accuracy"] < const["accuracy"]:
            return (
                f"test accuracy {test['accuracy']:.4g} is below always naming the training "
                f"majority class ({const['accuracy']:.4g}): {fit}"
            )
        if test["nll"] >= const["nll"]:
            return (
                f"test NLL {test['nll']:.4g} is no better than the training class "
                f"frequencies' ({const['nll']:.4g}): {spread}"
            )
        return None
    spread = SPREAD_CAUSES["regression"]
    rmse = test["rmse"]
    if not rmse < const["rmse"]:  # NaN included
        return (
            f"test RMSE {rmse:.4g} is no better than predicting the training mean "
            f"({const['rmse']:.4g}): {fit}"
        )
    line = (bars.get("least_squares") or {}).get("rmse")
    if line is not None and rmse > LEAST_SQUARES_MARGIN * line:
        return (
            f"test RMSE {rmse:.4g} is worse than least squares on the inputs ({line:.4g}; "
            f"the training mean gives {const['rmse']:.4g}): {fit}"
        )
    if const["nll"] is not None and not test["nll"] < const["nll"]:
        return (
            f"test NLL {test['nll']:.4g} is no better than a Gaussian at the training "
            f"mean and std ({const['nll']:.4g}): {spread}"
        )
    return None
