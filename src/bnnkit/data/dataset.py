"""The in-memory dataset every loader returns."""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

Task = Literal["regression", "classification"]


@dataclasses.dataclass(frozen=True)
class Standardizer:
    """An affine map ``z = (v - mean) / std`` fitted on training data only.

    Attributes:
        mean: per-column mean of the training data.
        std: per-column standard deviation of the training data (columns with zero spread get 1).
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, values: np.ndarray) -> Standardizer:
        mean = values.mean(axis=0)
        std = values.std(axis=0)
        # A constant column carries no information; dividing by zero would make NaN.
        std = np.where(std > 0, std, 1.0)
        return cls(mean=np.asarray(mean, np.float64), std=np.asarray(std, np.float64))

    def apply(self, values: np.ndarray) -> np.ndarray:
        return (values - self.mean) / self.std

    def invert(self, values: np.ndarray) -> np.ndarray:
        return values * self.std + self.mean


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Train and test arrays plus what is needed to report metrics in original units.

    Regression targets are 1-D float arrays; classification targets are 1-D integer labels.

    Attributes:
        name: the name it was loaded by (``yacht_2``, a file path, ...).
        task: ``"regression"`` or ``"classification"``.
        x_train, y_train, x_test, y_test: the arrays, already standardised where ``x_scaler`` /
            ``y_scaler`` are set.
        num_classes: number of classes for classification, ``None`` for regression.
        x_scaler: the input standardisation that was applied, if any.
        y_scaler: the target standardisation that was applied, if any (regression only); metrics
            undo it so that RMSE and NLL are in the original units.
        input_normalization: a per-channel normalisation still *to be applied* on the device to
            each batch of raw stored inputs (images stay uint8 in host memory); ``None`` when the
            stored inputs are already model-ready.
        info: free-form provenance (source, split index, licence).
    """

    name: str
    task: Task
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int | None = None
    x_scaler: Standardizer | None = None
    y_scaler: Standardizer | None = None
    input_normalization: Standardizer | None = None
    info: dict = dataclasses.field(default_factory=dict)

    @property
    def num_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x_train.shape[1:])

    @property
    def target_scale(self) -> float:
        """Factor that maps a standardised target difference back to original units."""
        return 1.0 if self.y_scaler is None else float(np.squeeze(self.y_scaler.std))

    @property
    def target_shift(self) -> float:
        return 0.0 if self.y_scaler is None else float(np.squeeze(self.y_scaler.mean))

    @property
    def y_test_original(self) -> np.ndarray:
        """Test targets in the units of the source file."""
        if self.task == "classification":
            return self.y_test
        return self.y_test * self.target_scale + self.target_shift


def standardize(dataset: Dataset) -> Dataset:
    """Standardise inputs (and regression targets) with training statistics only.

    Example:
        >>> raw = Dataset("toy", "regression", x_train=np.array([[1.0], [3.0]]),
        ...               y_train=np.array([10.0, 20.0]), x_test=np.array([[5.0]]),
        ...               y_test=np.array([30.0]))
        >>> ds = standardize(raw)  # x: mean 2, std 1; y: mean 15, std 5
        >>> ds.x_train[:, 0], ds.x_test[:, 0], ds.y_test
        (array([-1.,  1.], dtype=float32), array([3.], dtype=float32), array([3.], dtype=float32))
        >>> ds.y_test_original  # back in the units of the source
        array([30.], dtype=float32)
    """
    x_scaler = Standardizer.fit(dataset.x_train)
    changes: dict = {
        "x_train": x_scaler.apply(dataset.x_train).astype(np.float32),
        "x_test": x_scaler.apply(dataset.x_test).astype(np.float32),
        "x_scaler": x_scaler,
    }
    if dataset.task == "regression":
        y_scaler = Standardizer.fit(dataset.y_train)
        changes.update(
            y_train=y_scaler.apply(dataset.y_train).astype(np.float32),
            y_test=y_scaler.apply(dataset.y_test).astype(np.float32),
            y_scaler=y_scaler,
        )
    return dataclasses.replace(dataset, **changes)
