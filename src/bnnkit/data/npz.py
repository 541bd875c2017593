"""A user's own data as an ``.npz`` file holding x_train, y_train, x_test, y_test.

A user's file can change under a run made on it, or be named by a path relative to a folder
the run is later read from. So its :func:`fingerprint` (the resolved absolute path and the
sha256 of its bytes) is part of the dataset's ``info``, which a run records in ``run.json``;
whoever reads the run back loads the data from that path and refuses, in one line saying what
changed, a file that is missing or whose bytes differ (:func:`recorded_file`,
:func:`same_data`). Runs recorded before fingerprints existed are read as before.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.data.dataset import Dataset, standardize
from bnnkit.errors import ConfigError

REQUIRED = ("x_train", "y_train", "x_test", "y_test")
#: Largest class label: labels are int32 on the device (and a class is one network output).
MAX_LABEL = 2**31 - 1
#: Largest real value a data file may hold: real arrays are kept as float32.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _inputs(x: np.ndarray) -> np.ndarray:
    # Integer inputs (token ids, raw pixels) keep their dtype; the model decides how to read them.
    return x if np.issubdtype(x.dtype, np.integer) else x.astype(np.float32)


def fingerprint(path: str | os.PathLike) -> dict[str, str]:
    """A data file's identity: its resolved absolute path and the sha256 of its bytes.

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/d.npz"
        >>> np.savez(path, a=np.zeros(1))
        >>> sorted(fingerprint(path)), len(fingerprint(path)["sha256"])
        (['file', 'sha256'], 64)
    """
    return {"file": os.path.realpath(path), "sha256": storage.file_sha256(path)}


def _short(digest: str) -> str:
    return f"{digest[:12]}…"


def recorded_file(info: Mapping[str, Any], given: str) -> str:
    """The file to read a run's user data from: the one its fingerprint names, checked.

    Args:
        info: the run's recorded dataset (``run.json``'s ``dataset``).
        given: the dataset as the run was given it (``--dataset``), returned for a run
            without a fingerprint (a registry dataset, or a run of an older bnnkit).

    Raises:
        ConfigError: the recorded file is gone, or its bytes are not those the run was made on.
    """
    file, digest = info.get("file"), info.get("sha256")
    if not isinstance(file, str) or not isinstance(digest, str):
        return given
    if not os.path.isfile(file):
        raise ConfigError(
            f"the run's data file {file!r} (--dataset {given!r}) no longer "
            "exists; allowed: the file the run was made on, at that path"
        )
    now = storage.file_sha256(file)
    if now != digest:
        raise ConfigError(
            f"the run's data file {file!r} changed since the run was made on it "
            f"(sha256 {_short(digest)} then, {_short(now)} now); allowed: the "
            "data the run was made on"
        )
    return file


def same_data(recorded: Mapping[str, Any], given: Mapping[str, Any], flag: str) -> bool:
    """Whether the data given now (its dataset ``info``) is the file a run recorded.

    Returns:
        ``True`` when both carry a file's fingerprint and the bytes are the same (wherever the
        file now is); ``False`` when either has none (nothing to compare: a registry dataset,
        or arrays in memory, whose ``sha256`` is in the dataset's name that the settings
        compare).

    Raises:
        ConfigError: both carry one and the bytes differ, naming both files.
    """
    old, new = recorded.get("sha256"), given.get("sha256")
    if not all(isinstance(v, str) for v in (old, new, recorded.get("file"), given.get("file"))):
        return False
    if old != new:
        raise ConfigError(
            f"{flag} {given.get('file')!r} (sha256 {_short(new)}) is not the data "
            f"the run was made on ({recorded.get('file')!r}, sha256 "
            f"{_short(old)}); allowed: the same data"
        )
    return True


def _read(path: str) -> dict[str, np.ndarray]:
    """The four arrays of an npz file; anything else (an .npy, a truncated or empty file,
    pickled objects, a header that claims more than the file holds) is refused in one line."""
    try:
        arrays = storage.read_npz(path, REQUIRED)
    except ValueError as err:
        if "single .npy" in str(err):
            raise ConfigError(
                f"dataset file {path!r} is a single .npy array, not an .npz "
                f"archive; allowed: an .npz with {', '.join(REQUIRED)}"
            ) from None
        raise ConfigError(
            f"dataset file {path!r} is not a readable .npz without pickles "
            f"({type(err).__name__}: {' '.join(str(err).split())})"
        ) from None
    except (OSError, EOFError, zipfile.BadZipFile) as err:
        raise ConfigError(
            f"dataset file {path!r} is not a readable .npz without pickles "
            f"({type(err).__name__}: {' '.join(str(err).split())})"
        ) from None
    missing = [k for k in REQUIRED if k not in arrays]
    if missing:
        raise ConfigError(
            f"dataset file {path!r} lacks {', '.join(missing)}; it must hold {', '.join(REQUIRED)}"
        )
    return arrays


def _check_targets(where: str, y_train: np.ndarray, y_test: np.ndarray) -> None:
    """Integer labels: classes 0..K-1 of the training set, in both splits; reals: reals."""
    train_int = np.issubdtype(y_train.dtype, np.integer)
    if train_int != np.issubdtype(y_test.dtype, np.integer):
        raise ConfigError(
            f"{where}: y_train has dtype {y_train.dtype} but y_test {y_test.dtype}; allowed: "
            "integer class labels in both, or real targets in both"
        )
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
            f"(0..{top}) do not have; allowed: test labels among the training classes"
        )


def _check_shapes(arrays: dict[str, np.ndarray], where: str) -> None:
    """One row per example in both splits, targets made 1-D and inputs at least 2-D (in
    place), and rows of one shape with at least one feature."""
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim == 0 or y.ndim == 0:
            bad = f"x_{split}" if x.ndim == 0 else f"y_{split}"
            raise ConfigError(
                f"{where}: {bad} is a single number (shape ()); allowed: one row per example"
            )
        if x.shape[0] == 0:
            raise ConfigError(f"{where}: x_{split} has 0 rows; allowed: at least 1")
        if x.shape[0] != y.shape[0]:
            raise ConfigError(
                f"{where}: x_{split} has {x.shape[0]} rows but y_{split} has {y.shape[0]}"
            )
        if y.ndim == 2 and y.shape[1] == 1:
            arrays[f"y_{split}"] = y[:, 0]
        elif y.ndim != 1:
            raise ConfigError(f"{where}: y_{split} has shape {y.shape}; allowed: (N,) or (N, 1)")
    if arrays["x_train"].ndim == 1:
        arrays["x_train"] = arrays["x_train"][:, None]
    if arrays["x_test"].ndim == 1:
        arrays["x_test"] = arrays["x_test"][:, None]
    if 0 in arrays["x_train"].shape[1:]:
        raise ConfigError(
            f"{where}: x_train has shape {arrays['x_train'].shape}, 0 features "
            "per example; allowed: at least 1"
        )
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise ConfigError(
            f"{where}: x_train rows have shape {arrays['x_train'].shape[1:]} but x_test rows "
            f"have {arrays['x_test'].shape[1:]}"
        )


def _check_values(arrays: dict[str, np.ndarray], where: str) -> None:
    """Integers or reals, every real finite and within float32's range."""
    for key, value in arrays.items():
        if not (np.issubdtype(value.dtype, np.integer) or np.issubdtype(value.dtype, np.floating)):
            raise ConfigError(
                f"{where}: {key} has dtype {value.dtype}; allowed: integers or real numbers"
            )
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            bad = int(np.sum(~np.isfinite(value)))
            raise ConfigError(f"{where}: {key} holds {bad} NaN or infinite values")
        if np.issubdtype(value.dtype, np.floating) and value.size:
            # Real arrays are kept as float32: a larger value would become inf.
            largest = float(np.max(np.abs(value)))
            if largest > FLOAT32_MAX:
                raise ConfigError(
                    f"{where}: {key} holds {largest:.3g}, beyond float32's "
                    f"range, in which bnnkit keeps data; allowed: |value| <= "
                    f"{FLOAT32_MAX:.3g}"
                )


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
    return from_arrays(
        _read(path),
        name=path,
        where=repr(path),
        info={"source": path, **fingerprint(path)},
        standardize_data=standardize_data,
    )


def from_arrays(
    arrays: dict[str, np.ndarray],
    *,
    name: str,
    where: str,
    info: dict,
    standardize_data: bool = False,
) -> Dataset:
    """A dataset from the arrays ``x_train, y_train, x_test, y_test``, checked as a user's
    file is (:func:`load`): the same rules and one-line refusals, each starting with ``where``.

    Args:
        arrays: the four arrays (others are ignored).
        name: the dataset's name.
        where: how messages name the source (``"'my_data.npz'"``).
        info: the dataset's provenance: for a file its :func:`fingerprint`, for arrays in
            memory their ``sha256`` (:func:`bnnkit.problem.arrays_sha256`), the field a run
            records and checks in either case.
        standardize_data: standardise with training statistics.

    Raises:
        ConfigError: as :func:`load`.
    """
    arrays = {k: np.asarray(arrays[k]) for k in REQUIRED}
    _check_shapes(arrays, where)
    _check_values(arrays, where)
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
