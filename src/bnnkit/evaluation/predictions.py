"""What an evaluation's measures run over: a run's draws, its predictive at given inputs, its
weights as one array, and the test images under a corruption.

Approximate posteriors (VI, Laplace) are evaluated through draws taken with the run's fixed
evaluation key (:func:`bnnkit.runs.evaluation_key`), so repeated evaluations, and every
experiment that reads a run through these functions, agree draw for draw.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from bnnkit import problem as problem_lib
from bnnkit.data import corruptions
from bnnkit.errors import ConfigError
from bnnkit.evaluation.checks import check_images
from bnnkit.posterior import Samples
from bnnkit.predict import Prediction, posterior_predictive
from bnnkit.runs import evaluation_key


def _seed(record: dict) -> int:
    return int(record.get("method_config", {}).get("seed", record.get("seed", 0)))


def run_samples(record: dict, posterior: Any) -> Samples:
    """The samples a run's model average runs over: its own, or draws of its approximation
    with the run's evaluation key."""
    return posterior.draws(evaluation_key(_seed(record)))


def run_prediction(
    record: dict, problem: problem_lib.Problem, posterior: Any, x: np.ndarray
) -> Prediction:
    """The run's predictive at ``x`` (see :func:`bnnkit.predict.posterior_predictive`)."""
    return posterior_predictive(problem, posterior, x, evaluation_key(_seed(record)))


def weight_draws(samples: Samples) -> np.ndarray:
    """Every parameter of every sample as one array (chains, samples, parameters), the leaves
    in tree order: the weight space the diagnostics run over."""
    leaves = [
        np.asarray(leaf).reshape((*leaf.shape[:2], -1)) for leaf in jax.tree.leaves(samples.params)
    ]
    return np.concatenate(leaves, axis=-1)


def corrupted_inputs(
    dataset, corruption: str, severity: int, seed: int = 0, count: int | None = None
) -> np.ndarray:
    """The test images of ``dataset`` (its first ``count``, default all) under one corruption at
    one severity (1-5).

    Raises:
        ConfigError: the dataset's inputs are not uint8 images, or an unknown corruption or
            severity.
    """
    check_images(dataset, corruption, "")
    x = np.asarray(dataset.x_test)[:count]
    if corruption not in corruptions.CORRUPTIONS:
        raise ConfigError(
            f"unknown corruption {corruption!r}; allowed: {', '.join(corruptions.CORRUPTIONS)}"
        )
    if severity not in corruptions.SEVERITIES:
        raise ConfigError(f"severity {severity} out of range: allowed 1..5")
    return corruptions.corrupt(x, corruption, severity, seed=seed)
