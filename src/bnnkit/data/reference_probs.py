"""Released HMC predictive probabilities to score a run against, as the NeurIPS 2021 BDL
competition did (Izmailov et al. 2021, "What Are Bayesian Neural Network Posteriors Really
Like?").

A reference file is a text table with one row per test point and one column per class,
``p[i, k] = p_HMC(y_i = k | x_i, D)``, whitespace-delimited as ``numpy.savetxt`` writes it (a
comma-delimited copy is read too). Two are in the catalog:

==============  ===========  ==========================================================
``cifar10_hmc``  10,000 x 10  CIFAR-10 test set in TensorFlow Datasets order
``imdb_hmc``     25,000 x 2   IMDB test set in Keras ``load_data`` order (num_words 20,000,
                              maxlen 100)
==============  ===========  ==========================================================

A catalog file is read from ``<data dir>/<name>/probs.csv`` (``$BNNKIT_DATA_DIR``) or downloaded
into the cache, and in both cases checked against its pinned sha256
(:data:`bnnkit.data.sources.REMOTES`). Any other path is read unchecked. Either way the table
must be finite, non-negative and each row must sum to 1 (see :func:`read`).

Rows are matched to test points by position only: the scores mean something only when the run's
test set is in the file's order (see :data:`REFERENCES`).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bnnkit.data import fetch
from bnnkit.data.sources import REMOTES
from bnnkit.errors import ConfigError

FILENAME = "probs.csv"

#: A probability table's rows may differ from 1 by this much. Averages of float32 softmax rows
#: are within ~1e-6 of 1; files printed with 4 decimals round each of C entries by up to 5e-5
#: (5e-4 for 10 classes). 1e-3 accepts both and still refuses logits, percentages or counts.
ROW_SUM_ATOL = 1e-3


class Reference(NamedTuple):
    """One released reference file.

    Attributes:
        name: catalog name (also the folder under the data directory).
        dataset: the bnnkit dataset whose test set it scores.
        shape: (test points, classes).
        order: which test-set order its rows follow.
        bnnkit_order: whether ``bnnkit.data.load(dataset)`` presents the test set in that order.
    """

    name: str
    dataset: str
    shape: tuple[int, int]
    order: str
    bnnkit_order: str


REFERENCES: dict[str, Reference] = {
    "cifar10_hmc": Reference(
        "cifar10_hmc",
        "cifar10",
        (10_000, 10),
        "TensorFlow Datasets cifar10 test split order (not the order of test_batch.bin)",
        "differs: bnnkit reads test_batch.bin in file order, so the rows do not match bnnkit's "
        "cifar10 test images",
    ),
    "imdb_hmc": Reference(
        "imdb_hmc",
        "imdb",
        (25_000, 2),
        "Keras imdb.load_data test order (seed 113), num_words 20,000, maxlen 100",
        "matches with bnnkit's imdb defaults (num_words 20,000, maxlen 100): bnnkit reproduces "
        "Keras' shuffle of the test set",
    ),
}


def read(
    path: str | os.PathLike, *, shape: tuple[int, int] | None = None, what: str | None = None
) -> np.ndarray:
    """Read and check a probability table (rows: test points, columns: classes).

    Args:
        path: a whitespace- or comma-delimited text file of numbers.
        shape: the (rows, classes) it must have, if known.
        what: how to name the file in errors (default its path).

    Returns:
        float64 array (N, C) with ``C >= 2``, finite, ``>= 0``, rows summing to 1 within
        :data:`ROW_SUM_ATOL`.

    Raises:
        ConfigError: unreadable, not a table of numbers, wrong shape or not probabilities; the
            message names the file and, for a shape, both shapes.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "probs.csv"
        >>> _ = path.write_text("0.25 0.75\\n1.0 0.0\\n")
        >>> read(path).tolist()
        [[0.25, 0.75], [1.0, 0.0]]
    """
    name = what or repr(os.fspath(path))
    try:
        with open(path, encoding="ascii") as handle:
            first = handle.readline()
            handle.seek(0)
            with warnings.catch_warnings():  # an empty file is refused below, not warned about
                warnings.simplefilter("ignore", UserWarning)
                table = np.loadtxt(
                    handle, dtype=np.float64, ndmin=2, delimiter="," if "," in first else None
                )
    except OSError as err:
        raise ConfigError(f"{name} cannot be read: {err.strerror or err}") from None
    except ValueError as err:  # non-ASCII bytes, a word among the numbers, ragged rows
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(
            f"{name} is not a table of probabilities (one row per test point, one "
            f"column per class): {reason}"
        ) from None
    if table.size == 0:
        raise ConfigError(
            f"{name} is empty; allowed: one row per test point and one column per class"
        )
    if table.shape[1] < 2:
        raise ConfigError(
            f"{name} has shape {table.shape}; allowed: one row per test point and "
            "one column per class, at least 2 classes"
        )
    if shape is not None and table.shape != tuple(shape):
        raise ConfigError(
            f"{name} has shape {table.shape}, expected {tuple(shape)} (test points, classes)"
        )
    if not np.all(np.isfinite(table)):
        row = int(np.argwhere(~np.isfinite(table))[0, 0])
        raise ConfigError(f"{name} has a value that is not finite in row {row + 1}")
    if np.any(table < 0):
        row = int(np.argwhere(table < 0)[0, 0])
        raise ConfigError(f"{name} has a negative probability in row {row + 1}")
    off = np.abs(table.sum(axis=1) - 1.0)
    if np.any(off > ROW_SUM_ATOL):
        row = int(np.argmax(off > ROW_SUM_ATOL))
        raise ConfigError(
            f"{name}: row {row + 1} sums to {table[row].sum():.6g}; allowed: rows "
            f"summing to 1 (within {ROW_SUM_ATOL:g})"
        )
    return table


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def locate(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """The verified file of a catalog reference: from the data directory, or downloaded.

    Raises:
        ConfigError: unknown name; the file missing from the data directory; offline (one line
            saying where to put it); or a file whose sha256 is not the pinned one.
    """
    if name not in REFERENCES:
        raise ConfigError(
            f"unknown reference {name!r}; allowed: {', '.join(REFERENCES)} or a file path"
        )
    remote = REMOTES[name][0]
    path = fetch.locate(name, [remote.filename], data_dir=data_dir, remotes=REMOTES[name])
    # A download was checked by pooch; a copy put in the data directory (or left in the cache)
    # is checked here, since scores against the wrong file would look just as plausible.
    expected = remote.known_hash.split(":", 1)[1]
    found = _sha256(path)
    if found != expected:
        raise ConfigError(
            f"checksum mismatch for {path}: sha256 {found}, expected {expected} "
            f"(the {name} file of {remote.urls[0]}); to use this file anyway, "
            "pass its path instead of the name"
        )
    return path


def load(
    source: str | os.PathLike, data_dir: str | os.PathLike | None = None
) -> tuple[np.ndarray, dict[str, str]]:
    """A reference's probabilities and a description of them, by catalog name or file path.

    Args:
        source: ``"cifar10_hmc"``, ``"imdb_hmc"`` or the path of a probability table.
        data_dir: folder holding ``<name>/probs.csv`` (default ``$BNNKIT_DATA_DIR``).

    Returns:
        ``(probs (N, C), info)``; ``info`` has ``source`` and ``file``, and for catalog
        references also ``order`` and ``bnnkit_order`` (see :class:`Reference`).

    Raises:
        ConfigError: see :func:`locate` and :func:`read`.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "mine.txt"
        >>> _ = path.write_text("0.5 0.5\\n")
        >>> probs, info = load(path)
        >>> probs.shape, sorted(info)
        ((1, 2), ['file', 'source'])
    """
    text = os.fspath(source)
    if text in REFERENCES:
        ref = REFERENCES[text]
        path = locate(text, data_dir)
        probs = read(path, shape=ref.shape, what=f"reference {text} ({path})")
        return probs, {
            "source": text,
            "file": str(path),
            "order": ref.order,
            "bnnkit_order": ref.bnnkit_order,
        }
    if not os.path.isfile(text):
        raise ConfigError(
            f"--reference-probs {text!r} is neither a file nor a released "
            f"reference; allowed: {', '.join(REFERENCES)} or a file path"
        )
    return read(text, what=f"--reference-probs {text!r}"), {"source": text, "file": text}
