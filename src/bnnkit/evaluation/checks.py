"""The refusals of an evaluation, each made before the work it would spoil.

An evaluation reads a run, may read a second one, a table of reference probabilities or another
dataset, and writes files into the run; each of these can be wrong in a way only found out late
(after the predictive, which is the cost). So every option and path is checked here, one line
naming the argument, what was given and what is allowed, before anything is computed; the same
checks serve the commands that take a reference run or an output file. Each refusal is an
:class:`~bnnkit.errors.ArgumentError`: it names the Python parameter, and the command line
words it with the flag the value came from.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from bnnkit import posthoc, storage
from bnnkit.errors import ArgumentError, ConfigError
from bnnkit.runs import RunDir
from bnnkit.runs.placement import check_outside_runs
from bnnkit.runs.stored import kept_samples


def check_options(
    corruption: str | None,
    severity: int | None,
    reference_probs: Any,
    conformal: float | None,
    where: str = "bnnkit.evaluate",
) -> None:
    """Refuse options of :func:`bnnkit.evaluate` that do not go together, or a miscoverage
    level outside (0, 1).

    Raises:
        ArgumentError: the first such option, in one line.

    Example:
        >>> check_options("gaussian_noise", None, None, None)
        Traceback (most recent call last):
        bnnkit.errors.ArgumentError: bnnkit.evaluate: severity is None; allowed: a severity \
from 1 to 5 whenever a corruption is given
    """
    if corruption is not None and severity is None:
        allowed = "a severity from 1 to 5 whenever a corruption is given"
        raise ArgumentError(where, "severity", None, allowed)
    if severity is not None and corruption is None:
        allowed = "a corruption's name whenever a severity is given"
        raise ArgumentError(where, "corruption", None, allowed)
    if reference_probs is not None and corruption is not None:
        raise ArgumentError(
            where,
            "corruption",
            f"{corruption!r} beside reference probabilities",
            "no corruption: reference probabilities score the predictions on the clean test set",
        )
    if conformal is not None:
        posthoc.check_alpha(conformal, where)


def check_reference(
    reference: str | os.PathLike, dataset: str, *, where: str = "", argument: str = "reference"
) -> None:
    """Refuse, before anything runs, a reference that is no run, an unreadable one, or one on
    another dataset (its test set would not be this run's).

    Raises:
        ArgumentError: naming the argument, the reference and what is allowed.
    """
    path = os.fspath(reference)
    on_dataset = f"a run directory on dataset {dataset!r}"
    if not os.path.isdir(path):
        raise ArgumentError(where, argument, f"{path!r} does not exist", on_dataset)
    rundir = RunDir(path)
    record = rundir.read_record()
    theirs = (record.get("problem") or {}).get("dataset")
    if theirs != dataset:
        raise ArgumentError(where, argument, f"{path!r} is a run on dataset {theirs!r}", on_dataset)
    try:
        samples = kept_samples(rundir, record)
    except ConfigError as err:
        given = f"{path!r} cannot be read ({err})"
        raise ArgumentError(where, argument, given, on_dataset) from None
    if not samples:
        given = f"{path!r} has no kept samples yet"
        raise ArgumentError(where, argument, given, "a run with samples")


def check_writable_folder(path: str | os.PathLike, what: str) -> None:
    """Refuse a folder that this user cannot write into, before the work that writes there.

    Raises:
        ConfigError: naming the folder.
    """
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write the {what} into {os.fspath(path)!r}: this user may not write there"
        )


def check_out_file(
    out: str | os.PathLike, suffix: str, what: str, *, where: str = "", argument: str = "out"
) -> None:
    """Refuse an output file that cannot become a new file, before any work that writes it.

    Args:
        out: the path given.
        suffix: the file ending named as allowed (``".npz"``, ``".nc"``).
        what: what is written, for the message (``"samples"``).
        where: the entry point that was called, for the message (empty for a command).
        argument: the parameter (and the command line's destination) ``out`` came from.

    Raises:
        ArgumentError: an empty path, a directory, a missing output folder, a path inside a
            run directory. ConfigError: an unwritable output folder or a symbolic link.

    Example:
        >>> check_out_file("", ".npz", "samples", where="bnnkit.export_samples")
        Traceback (most recent call last):
        bnnkit.errors.ArgumentError: bnnkit.export_samples: out='' names no file; allowed: a \
file path ending in .npz
    """
    out = os.fspath(out)
    allowed = f"a file path ending in {suffix}"
    if not out.strip():
        raise ArgumentError(where, argument, f"{out!r} names no file", allowed)
    if os.path.isdir(out):
        raise ArgumentError(where, argument, f"{out!r} is a directory", allowed)
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ArgumentError(
            where, argument, f"{out!r} is in a folder that does not exist ({parent!r})", allowed
        )
    check_outside_runs(out, argument, where)
    storage.refuse_link(out)
    check_writable_folder(parent, what)


def check_reference_probs(
    probs: np.ndarray, dataset, source: str, where: str = "bnnkit.evaluate"
) -> None:
    """Refuse a reference table that does not have one row per test point and one column per
    class of ``dataset``.

    Raises:
        ArgumentError: one line naming both shapes.
    """
    if dataset.task != "classification":
        raise ArgumentError(
            where,
            "reference_probs",
            f"{source} for {dataset.name!r}, a {dataset.task} dataset",
            "reference probabilities for a classification run",
        )
    expected = (int(np.shape(dataset.y_test)[0]), int(dataset.num_classes))
    if tuple(probs.shape) != expected:
        raise ArgumentError(
            where,
            "reference_probs",
            f"{source} has shape {probs.shape[0]} x {probs.shape[1]}",
            f"a table for the test set of {dataset.name!r}: {expected[0]} x {expected[1]} "
            "(test points x classes)",
        )


def check_images(dataset, value: Any, where: str, argument: str = "corruption") -> None:
    """Refuse a dataset whose test inputs are not uint8 images (N, H, W, C): corruptions apply
    to images only.

    Args:
        dataset: the run's dataset.
        value: what ``argument`` was given (a corruption's name, a run's path).
        where: the entry point that was called, for the message.
        argument: the parameter (and the command line's destination) ``value`` came from.

    Raises:
        ArgumentError: one line naming the argument, the dataset and its inputs' shape and
            dtype.
    """
    x = dataset.x_test
    if np.dtype(x.dtype) != np.uint8 or np.ndim(x) != 4:
        raise ArgumentError(
            where,
            argument,
            f"{value!r} on {dataset.name!r}, whose test inputs are {tuple(np.shape(x))} "
            f"{np.dtype(x.dtype)}",
            "a run on an image dataset (uint8 test inputs, N x H x W x C): corruptions apply "
            "to images",
        )
