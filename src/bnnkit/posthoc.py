"""Post-hoc decisions on a stored run's predictive: temperature scaling and split conformal
prediction on its held-out validation set, and out-of-distribution detection against another
dataset. :func:`bnnkit.evaluation.evaluate` calls these (``--calibrate``, ``--conformal ALPHA``,
``--ood DATASET``); the metrics themselves are in :mod:`bnnkit.metrics.recalibration`,
:mod:`bnnkit.metrics.conformal` and :mod:`bnnkit.metrics.ood`.

The validation set is what the loaders carve from the end of the training set when a run is
made with ``--validation-size N`` (before ``--subset-train-to``, so MNIST's first 160 images
stay the training set and the validation images come from the end of the 60 000): the method
never sees it. Only its size is stored (in ``run.json``'s problem); rebuilding the problem
carves the same examples again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bnnkit import data
from bnnkit.errors import ArgumentError, ConfigError
from bnnkit.metrics import conformal, ood, recalibration
from bnnkit.metrics.predictive import metrics_for


def has_validation(problem) -> bool:
    """Whether the run held out part of its training set for validation."""
    held_out = problem.dataset.info.get("validation")
    return held_out is not None and len(held_out[1]) > 0


def validation_set(problem, asked_by: str) -> tuple[np.ndarray, np.ndarray]:
    """The run's held-out ``(x, y)``, targets in original units.

    Args:
        problem: the run's problem.
        asked_by: what needs the held-out data, for the message (``"calibrate=True"``).

    Raises:
        ConfigError: the run was made without a validation set.
    """
    if not has_validation(problem):
        raise ConfigError(
            f"{asked_by} fits on held-out data, and this run was trained on all of its "
            "training set; allowed: a run made with a validation size N (the last N "
            "training examples held out)"
        )
    x, y = problem.dataset.info["validation"]
    y = np.asarray(y)
    if problem.dataset.task == "regression":
        y = y * problem.dataset.target_scale + problem.dataset.target_shift
    return np.asarray(x), y


def check_alpha(alpha: float, where: str = "", argument: str = "conformal") -> None:
    """Refuse a miscoverage level outside (0, 1).

    Raises:
        ArgumentError: naming the value and the allowed range.

    Example:
        >>> check_alpha(1.5, "bnnkit.evaluate")
        Traceback (most recent call last):
        bnnkit.errors.ArgumentError: bnnkit.evaluate: conformal=1.5 is outside (0, 1); allowed: \
a miscoverage level α in (0, 1), e.g. 0.1 for 90 % coverage
    """
    if not (np.isfinite(alpha) and 0 < alpha < 1):
        raise ArgumentError(
            where,
            argument,
            f"{alpha} is outside (0, 1)",
            "a miscoverage level α in (0, 1), e.g. 0.1 for 90 % coverage",
        )


def _finite(value: float) -> float | None:
    # JSON has no infinity: an unbounded threshold (too few held-out points) is null.
    return float(value) if np.isfinite(value) else None


def temperature_scaling(validation, y_val: np.ndarray, test, y_test: np.ndarray) -> dict[str, Any]:
    """The fitted temperature (classification) or stretch (regression) and the test metrics
    under it."""
    value = recalibration.fit(validation, y_val)
    name = "temperature" if test.task == "classification" else "std_scale"
    return {
        name: value,
        "validation_size": len(y_val),
        "test": metrics_for(recalibration.apply(test, value), y_test),
    }


def split_conformal(
    validation, y_val: np.ndarray, test, y_test: np.ndarray, alpha: float
) -> dict[str, Any]:
    """Split conformal sets or intervals at level ``alpha``, scored on the test set."""
    result = conformal.evaluate(validation, y_val, test, y_test, alpha)
    result["quantile"] = _finite(result["quantile"])
    return result


def ood_inputs(problem, name: str, where: str = "bnnkit.evaluate") -> np.ndarray:
    """The test inputs of dataset ``name``, as this run's model takes them.

    Images stay raw (the run's on-device normalisation applies to them as to its own); inputs
    a loader standardised are mapped back to raw units and through the run's standardisation.

    Raises:
        ConfigError: a regression run, or inputs of another shape or kind.
    """
    if problem.dataset.task != "classification":
        raise ArgumentError(
            where,
            "ood",
            f"{name!r} for {problem.dataset.name!r}, a regression dataset",
            "another dataset for a classifier (it scores the predictive entropy)",
        )
    options = {} if problem.config.data_dir is None else {"data_dir": problem.config.data_dir}
    other = data.load(name, **options)
    x = np.asarray(other.x_test)
    mine = problem.dataset
    if tuple(x.shape[1:]) != mine.input_shape or (
        np.issubdtype(x.dtype, np.integer) != np.issubdtype(mine.x_test.dtype, np.integer)
    ):
        raise ArgumentError(
            where,
            "ood",
            f"{name!r} has test inputs {tuple(x.shape[1:])} {x.dtype}",
            f"a dataset with inputs of this run's shape and kind ({mine.input_shape} "
            f"{mine.x_test.dtype})",
        )
    if other.x_scaler is not None:
        x = other.x_scaler.invert(x)
    if mine.x_scaler is not None:
        x = mine.x_scaler.apply(x)
    return x.astype(mine.x_test.dtype)


def ood_detection(
    test, predict: Callable[[np.ndarray], Any], x: np.ndarray, name: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """AUROC and FPR at 95 % TPR of entropy and mutual information, this run's test inputs
    against the inputs ``x`` of dataset ``name`` (:func:`ood_inputs`), and the scores (for
    the histograms)."""
    out = predict(x)
    mine, theirs = ood.scores(test), ood.scores(out)
    result = {
        "dataset": name,
        "num_in": len(test.probs),
        "num_out": len(x),
        **ood.detection(test, out),
    }
    arrays = {
        **{f"in_{k}": v for k, v in mine.items()},
        **{f"out_{k}": v for k, v in theirs.items()},
    }
    return result, arrays
