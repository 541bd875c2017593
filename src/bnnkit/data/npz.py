"""A user's own data as an ``.npz`` file holding x_train, y_train, x_test, y_test."""

from __future__ import annotations

import os
import zipfile

import numpy as np

from bnnkit.data.dataset import Dataset, standardize
from bnnkit.errors import ConfigError

REQUIRED = ("x_train", "y_train", "x_test", "y_test")
#: Largest class label: labels are int32 on the device (and a class is one network output).
MAX_LABEL = 2**31 - 1


def _inputs(x: np.ndarray) -> np.ndarray:
    # Integer inputs (token ids, raw pixels) keep their dtype; the model decides how to read them.
    return x if np.issubdtype(x.dtype, np.integer) else x.astype(np.float32)


def _read(path: str) -> dict[str, np.ndarray]:
    """The four arrays of an npz file; anything else (an .npy, a truncated or empty file,
    pickled objects) is refused in one line."""
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ConfigError(f"dataset file {path!r} is a single .npy array, not an .npz "
                              f"archive; allowed: an .npz with {', '.join(REQUIRED)}")
        with archive:
            missing = [k for k in REQUIRED if k not in archive.files]
            if missing:
                raise ConfigError(
                    f"dataset file {path!r} lacks {', '.join(missing)}; it must hold "
                    f"{', '.join(REQUIRED)}"
                )
            return {k: np.asarray(archive[k]) for k in REQUIRED}
    except ConfigError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise ConfigError(
            f"dataset file {path!r} is not a readable .npz without pickles "
            f"({type(err).__name__}: {' '.join(str(err).split())})"
        ) from None


def _check_targets(where: str, y_train: np.ndarray, y_test: np.ndarray) -> None:
    """Integer labels: classes 0..K-1 of the training set, in both splits; reals: reals."""
    train_int = np.issubdtype(y_train.dtype, np.integer)
    if train_int != np.issubdtype(y_test.dtype, np.integer):
        raise ConfigError(
            f"{where}: y_train has dtype {y_train.dtype} but y_test {y_test.dtype}; allowed: "
            "integer class labels in both, or real targets in both")
    if not train_int:
        return
    low = min(int(y_train.min()), int(y_test.min()))
    if low < 0:
        raise ConfigError(f"{where}: class label {low} is negative; allowed: 0..K-1")
    top = int(y_train.max())
    if top > MAX_LABEL:
        raise ConfigError(f"{where}: class label {top} in y_train; allowed: 0..{MAX_LABEL}")
    if int(y_test.max()) > top:
        raise ConfigError(
            f"{where}: y_test holds class {int(y_test.max())}, which the training labels "
            f"(0..{top}) do not have; allowed: test labels among the training classes")


def load(path: str | os.PathLike, *, standardize_data: bool = False) -> Dataset:
    """Load ``x_train, y_train, x_test, y_test`` from an npz file, used exactly as given.

    Integer targets make a classification task (classes ``0..max``), float targets a regression
    task with a single output. Nothing is standardised unless ``standardize_data`` is set.

    Raises:
        ConfigError: missing file or array, pickled object arrays, mismatched lengths, NaN/inf.

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/my_data.npz"
        >>> rng = np.random.default_rng(0)
        >>> np.savez(path, x_train=rng.normal(size=(8, 3)), y_train=np.arange(8) % 2,
        ...          x_test=rng.normal(size=(4, 3)), y_test=np.arange(4) % 2)
        >>> ds = load(path, standardize_data=True)
        >>> ds.task, ds.num_classes, ds.x_train.shape
        ('classification', 2, (8, 3))
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConfigError(f"dataset file {path!r} does not exist")
    return from_arrays(_read(path), name=path, where=repr(path), info={"source": path},
                       standardize_data=standardize_data)


def from_arrays(arrays: dict[str, np.ndarray], *, name: str, where: str, info: dict,
                standardize_data: bool = False) -> Dataset:
    """A dataset from the arrays ``x_train, y_train, x_test, y_test``, checked as a user's
    file is (:func:`load`): the same rules and one-line refusals, each starting with ``where``.

    Args:
        arrays: the four arrays (others are ignored).
        name: the dataset's name.
        where: how messages name the source (``"'my_data.npz'"``).
        info: the dataset's provenance.
        standardize_data: standardise with training statistics.

    Raises:
        ConfigError: as :func:`load`.
    """
    arrays = {k: np.asarray(arrays[k]) for k in REQUIRED}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim == 0 or y.ndim == 0:
            bad = f"x_{split}" if x.ndim == 0 else f"y_{split}"
            raise ConfigError(f"{where}: {bad} is a single number (shape ()); allowed: "
                              "one row per example")
        if x.shape[0] == 0:
            raise ConfigError(f"{where}: x_{split} has 0 rows; allowed: at least 1")
        if x.shape[0] != y.shape[0]:
            raise ConfigError(
                f"{where}: x_{split} has {x.shape[0]} rows but y_{split} has {y.shape[0]}"
            )
        if y.ndim == 2 and y.shape[1] == 1:
            arrays[f"y_{split}"] = y[:, 0]
        elif y.ndim != 1:
            raise ConfigError(
                f"{where}: y_{split} has shape {y.shape}; allowed: (N,) or (N, 1)"
            )
    if arrays["x_train"].ndim == 1:
        arrays["x_train"] = arrays["x_train"][:, None]
    if arrays["x_test"].ndim == 1:
        arrays["x_test"] = arrays["x_test"][:, None]
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise ConfigError(
            f"{where}: x_train rows have shape {arrays['x_train'].shape[1:]} but x_test rows "
            f"have {arrays['x_test'].shape[1:]}"
        )
    for key, value in arrays.items():
        if not (np.issubdtype(value.dtype, np.integer) or np.issubdtype(value.dtype, np.floating)):
            raise ConfigError(f"{where}: {key} has dtype {value.dtype}; allowed: integers or "
                              "real numbers")
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            bad = int(np.sum(~np.isfinite(value)))
            raise ConfigError(f"{where}: {key} holds {bad} NaN or infinite values")
    _check_targets(where, arrays["y_train"], arrays["y_test"])

    # Integer targets are class labels; anything else is a real-valued regression target.
    classification = np.issubdtype(arrays["y_train"].dtype, np.integer)
    num_classes = None
    if classification:
        num_classes = int(arrays["y_train"].max()) + 1
    target_dtype = np.int32 if classification else np.float32
    dataset = Dataset(
        name=name,
        task="classification" if classification else "regression",
        x_train=_inputs(arrays["x_train"]),
        y_train=arrays["y_train"].astype(target_dtype),
        x_test=_inputs(arrays["x_test"]),
        y_test=arrays["y_test"].astype(target_dtype),
        num_classes=num_classes,
        info=info,
    )
    return standardize(dataset) if standardize_data else dataset
