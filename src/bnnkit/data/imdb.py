"""IMDB movie-review sentiment as integer token sequences (Keras preprocessing), as in bnn_hmc.

bnn_hmc (after Wenzel et al. 2020) uses ``keras.datasets.imdb.load_data(num_words=20000)``, keeps
the first 20,000 training reviews for training and the last 5,000 for validation, and pads every
review with ``pad_sequences(maxlen=100)``. This module reproduces that without TensorFlow:

1. reviews are shuffled as Keras does: ``rng = RandomState(113)``; the train index permutation is
   ``rng.shuffle(arange(25000))``, then the test permutation with the same generator;
2. every review gets the start token 1 and word indices are shifted by ``index_from = 3``;
3. tokens ``>= num_words`` become the out-of-vocabulary token 2;
4. ``pad_sequences`` defaults: reviews longer than ``maxlen`` keep their *last* ``maxlen`` tokens
   (``truncating="pre"``), shorter ones are left-padded with 0 (``padding="pre"``).

Accepted files in ``<data dir>/imdb/``:

- ``imdb.npz``, the Keras file (object arrays of raw word-index lists). It is read only after its
  sha256 matched the one pinned by Keras, through :mod:`bnnkit.data.restricted_npz`;
- a pickle-free file ``imdb_*.npz`` with ``x_{train,test}_tokens`` (int16, all reviews
  concatenated), ``x_{train,test}_lengths`` and ``y_{train,test}``, holding reviews *after* steps
  1-2 (e.g. the first reviews of ``load_data`` output). Steps 3-4 are applied to it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bnnkit.data import fetch, splits
from bnnkit.data.dataset import Dataset
from bnnkit.data.restricted_npz import load_object_npz
from bnnkit.data.sources import LICENCES, REMOTES
from bnnkit.errors import ConfigError

KERAS_FILE = "imdb.npz"
SEED, START, OOV, INDEX_FROM, PAD = 113, 1, 2, 3, 0
NUM_WORDS, MAXLEN, NUM_TRAIN = 20_000, 100, 20_000


def pad_sequences(sequences: Sequence[np.ndarray], maxlen: int) -> np.ndarray:
    """Keras ``pad_sequences`` with its defaults (pre-padding with 0, pre-truncation), int32.

    Example:
        >>> pad_sequences([np.array([5, 6, 7]), np.array([8])], maxlen=2)
        array([[6, 7],
               [0, 8]], dtype=int32)
    """
    out = np.full((len(sequences), maxlen), PAD, np.int32)
    for row, seq in enumerate(sequences):
        tail = np.asarray(seq)[-maxlen:] if len(seq) else np.zeros(0, np.int32)
        if len(tail):
            out[row, maxlen - len(tail) :] = tail
    return out


def keras_order(num_train: int, num_test: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """The permutations ``keras.datasets.imdb.load_data`` applies to train, then test."""
    rng = np.random.RandomState(seed)
    train = np.arange(num_train)
    rng.shuffle(train)
    test = np.arange(num_test)
    rng.shuffle(test)
    return train, test


def _from_keras_file(
    path: Path,
) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray], np.ndarray]:
    arrays = load_object_npz(path, REMOTES["imdb"][0].known_hash)
    try:
        x_train, y_train, x_test, y_test = (
            arrays[k] for k in ("x_train", "y_train", "x_test", "y_test")
        )
    except KeyError as err:
        raise ConfigError(
            f"{str(path)!r} lacks {err}; it must hold x_train, y_train, x_test, y_test"
        ) from None
    order_train, order_test = keras_order(len(x_train), len(x_test))

    def shifted(reviews: np.ndarray, order: np.ndarray) -> list[np.ndarray]:
        return [
            np.concatenate([[START], np.asarray(reviews[i], np.int64) + INDEX_FROM]) for i in order
        ]

    return (
        shifted(x_train, order_train),
        np.asarray(y_train)[order_train],
        shifted(x_test, order_test),
        np.asarray(y_test)[order_test],
    )


def _from_token_file(
    path: Path,
) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray], np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            parts = {k: archive[k] for k in archive.files}
        out = []
        for split in ("train", "test"):
            tokens, lengths = parts[f"x_{split}_tokens"], parts[f"x_{split}_lengths"]
            if int(lengths.sum()) != tokens.size:
                raise ConfigError(
                    f"{str(path)!r}: x_{split}_lengths sum to {lengths.sum()} but "
                    f"x_{split}_tokens holds {tokens.size}"
                )
            out += [np.split(tokens, np.cumsum(lengths)[:-1]), parts[f"y_{split}"]]
    except (KeyError, ValueError, OSError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(
            f"{str(path)!r} is not an IMDB token file with x_*_tokens, x_*_lengths, y_*: {err}"
        ) from None
    return out[0], out[1], out[2], out[3]


def _find(data_dir: str | os.PathLike | None) -> Path:
    root = fetch.data_root(data_dir)
    for base in [root] if root is not None else [fetch.cache_root()]:
        folder = base / "imdb"
        if (folder / KERAS_FILE).is_file():
            return folder / KERAS_FILE
        tokens = sorted(p for p in folder.glob("imdb_*.npz")) if folder.is_dir() else []
        if tokens:
            return tokens[0]
    return fetch.locate(
        "imdb",
        [KERAS_FILE],
        data_dir=data_dir,
        what=f"{KERAS_FILE} (Keras) or an imdb_*.npz token file",
    )


def load(
    name: str = "imdb",
    *,
    data_dir: str | os.PathLike | None = None,
    subset_train_to: int | None = None,
    validation_size: int | None = None,
    num_words: int = NUM_WORDS,
    maxlen: int = MAXLEN,
) -> Dataset:
    """Load IMDB reviews as (N, maxlen) int32 token ids, preprocessed as in bnn_hmc.

    Args:
        name: ``"imdb"``.
        data_dir: folder holding ``imdb/`` (default ``$BNNKIT_DATA_DIR``, else the cache).
        subset_train_to: keep the first N training reviews (after the validation split).
        validation_size: reviews carved from the end of train; default: everything after the
            first 20,000 (5,000 for the full dataset, as bnn_hmc); 0 for none.
        num_words: vocabulary size; token ids ``>= num_words`` become 2 (out of vocabulary).
        maxlen: sequence length after padding/truncation.

    Returns:
        A classification Dataset with 2 classes; ``info["vocabulary_size"] = num_words``.

    Raises:
        ConfigError: missing file, checksum mismatch, malformed file or bad options.

    Example:
        (Needs the Keras ``imdb.npz``, which doctests do not download.)

        >>> ds = load()  # doctest: +SKIP
        >>> ds.x_train.shape, ds.info["validation"][0].shape, ds.x_test.shape  # doctest: +SKIP
        ((20000, 100), (5000, 100), (25000, 100))
    """
    if name != "imdb":
        raise ConfigError(f"unknown dataset {name!r}; allowed: imdb")
    if num_words < 3 or maxlen < 1:
        raise ConfigError(
            f"num_words {num_words} / maxlen {maxlen} too small; allowed: "
            f"num_words >= 3, maxlen >= 1"
        )
    path = _find(data_dir)
    reader = _from_keras_file if path.name == KERAS_FILE else _from_token_file
    x_train, y_train, x_test, y_test = reader(path)

    def prepare(reviews: list[np.ndarray]) -> np.ndarray:
        padded = pad_sequences(reviews, maxlen)
        return np.where(padded >= num_words, OOV, padded).astype(np.int32)

    if validation_size is None:
        validation_size = max(0, len(x_train) - NUM_TRAIN)
    dataset = Dataset(
        name=name,
        task="classification",
        x_train=prepare(x_train),
        y_train=np.asarray(y_train).astype(np.int32),
        x_test=prepare(x_test),
        y_test=np.asarray(y_test).astype(np.int32),
        num_classes=2,
        info={
            "source": str(path),
            "licence": LICENCES["imdb"],
            "vocabulary_size": num_words,
            "maxlen": maxlen,
            "normalization": None,
            "class_names": ["negative", "positive"],
            "preprocessing": "keras load_data(seed=113, start_char=1, oov_char=2, "
            "index_from=3) + pad_sequences(pre, pre)",
        },
    )
    return splits.carve(dataset, subset_train_to=subset_train_to, validation_size=validation_size)
