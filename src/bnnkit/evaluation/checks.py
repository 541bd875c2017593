"""The refusals of an evaluation, each made before the work it would spoil.

An evaluation reads a run, may read a second one, a table of reference probabilities or another
dataset, and writes files into the run; each of these can be wrong in a way only found out late
(after the predictive, which is the cost). So every option and path is checked here, one line
naming the flag, what was given and what is allowed, before anything is computed; the same
checks serve the commands that take a reference run or an ``--out`` file.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from bnnkit import posthoc, storage
from bnnkit.errors import ConfigError
from bnnkit.runs import RunDir
from bnnkit.runs.placement import check_outside_runs
from bnnkit.runs.stored import kept_samples


def check_options(
    corruption: str | None,
    severity: int | None,
    reference_probs: Any,
    conformal: float | None,
) -> None:
    """Refuse options of :func:`bnnkit.evaluate` that do not go together, or a miscoverage
    level outside (0, 1).

    Raises:
        ConfigError: the first such option, in one line.
    """
    if (corruption is None) != (severity is None):
        raise ConfigError("--corruption and --severity go together")
    if reference_probs is not None and corruption is not None:
        raise ConfigError(
            "--reference-probs scores predictions on the clean test set; it does "
            "not go with --corruption"
        )
    if conformal is not None:
        posthoc.check_alpha(conformal)


def check_reference(
    reference: str | os.PathLike, dataset: str, *, flag: str = "--reference"
) -> None:
    """Refuse, before anything runs, a reference that is no run, an unreadable one, or one on
    another dataset (its test set would not be this run's).

    Raises:
        ConfigError: naming the flag, the reference and what is allowed.
    """
    path = os.fspath(reference)
    if not os.path.isdir(path):
        raise ConfigError(
            f"{flag} {path!r} does not exist; allowed: a run directory on dataset {dataset!r}"
        )
    rundir = RunDir(path)
    record = rundir.read_record()
    theirs = (record.get("problem") or {}).get("dataset")
    if theirs != dataset:
        raise ConfigError(
            f"{flag} {path!r} is a run on dataset {theirs!r}; allowed: a run on dataset {dataset!r}"
        )
    try:
        samples = kept_samples(rundir, record)
    except ConfigError as err:
        raise ConfigError(f"{flag}: {err}") from None
    if not samples:
        raise ConfigError(f"{flag} {path!r} has no kept samples yet; allowed: a run with samples")


def check_writable_folder(path: str | os.PathLike, what: str) -> None:
    """Refuse a folder that this user cannot write into, before the work that writes there.

    Raises:
        ConfigError: naming the folder.
    """
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write the {what} into {os.fspath(path)!r}: this user may not write there"
        )


def check_out_file(out: str | os.PathLike, suffix: str, what: str) -> None:
    """Refuse an ``--out`` that cannot become a new file, before any work that writes it.

    Args:
        out: the path given to ``--out``.
        suffix: the file ending named as allowed (``".npz"``, ``".nc"``).
        what: what is written, for the message (``"samples"``).

    Raises:
        ConfigError: an empty path, a directory, a missing or unwritable output folder, a path
            inside a run directory, or a symbolic link.
    """
    out = os.fspath(out)
    if not out.strip():
        raise ConfigError(f"--out '' names no file; allowed: a path ending in {suffix}")
    if os.path.isdir(out):
        raise ConfigError(f"--out {out!r} is a directory; allowed: a file path ending in {suffix}")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ConfigError(f"--out {out!r}: output folder {parent!r} does not exist")
    check_outside_runs(out, "--out")
    storage.refuse_link(out)
    check_writable_folder(parent, what)


def check_reference_probs(probs: np.ndarray, dataset, source: str) -> None:
    """Refuse a reference table that does not have one row per test point and one column per
    class of ``dataset``.

    Raises:
        ConfigError: one line naming both shapes.
    """
    if dataset.task != "classification":
        raise ConfigError(
            f"--reference-probs applies to classification runs; {dataset.name!r} "
            f"is a {dataset.task} dataset"
        )
    expected = (int(np.shape(dataset.y_test)[0]), int(dataset.num_classes))
    if tuple(probs.shape) != expected:
        raise ConfigError(
            f"--reference-probs {source} has shape {probs.shape[0]} x {probs.shape[1]} but the "
            f"test set of {dataset.name!r} is {expected[0]} x {expected[1]} (test points x "
            "classes); allowed: a reference for this test set"
        )


def check_images(dataset, flag: str = "--corruption") -> None:
    """Refuse a dataset whose test inputs are not uint8 images (N, H, W, C): corruptions apply
    to images only.

    Raises:
        ConfigError: one line naming ``flag``, the dataset and its inputs' shape and dtype.
    """
    x = dataset.x_test
    if np.dtype(x.dtype) != np.uint8 or np.ndim(x) != 4:
        raise ConfigError(
            f"{flag} applies to image datasets; {dataset.name!r} has test inputs of shape "
            f"{tuple(np.shape(x))} and dtype {np.dtype(x.dtype)}"
        )
