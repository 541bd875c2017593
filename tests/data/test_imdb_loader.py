"""IMDB: the Keras object-array npz (checksum + restricted unpickler) and the token layout."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import bnnkit.data as data
from bnnkit.data import imdb, sources
from bnnkit.errors import ConfigError


def _object_array(rows: list[list[int]]) -> np.ndarray:
    out = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        out[i] = row
    return out


def _write_keras_imdb(folder, n_train=6, n_test=4, seed=0):
    rng = np.random.default_rng(seed)
    x_train = [list(rng.integers(1, 30, rng.integers(1, 9))) for _ in range(n_train)]
    x_test = [list(rng.integers(1, 30, rng.integers(1, 9))) for _ in range(n_test)]
    x_train = [[int(v) for v in r] for r in x_train]
    x_test = [[int(v) for v in r] for r in x_test]
    y_train, y_test = np.arange(n_train) % 2, np.arange(n_test) % 2
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "imdb.npz"
    # object arrays as in the Keras file (pickled members): only ever written here, in a test
    np.savez(
        path,
        x_train=_object_array(x_train),
        y_train=y_train,
        x_test=_object_array(x_test),
        y_test=y_test,
        allow_pickle=True,
    )
    return path, x_train, y_train, x_test, y_test


def _expected(reviews, order, num_words, maxlen):
    out = []
    for i in order:
        seq = [1] + [w + 3 for w in reviews[i]]
        seq = [w if w < num_words else 2 for w in seq][-maxlen:]
        out.append([0] * (maxlen - len(seq)) + seq)
    return np.array(out)


def test_keras_file_needs_matching_checksum(tmp_path):
    _write_keras_imdb(tmp_path / "imdb")
    with pytest.raises(ConfigError, match=r"checksum mismatch .*refusing to unpickle"):
        data.load("imdb", data_dir=tmp_path)


def test_keras_preprocessing(tmp_path, monkeypatch):
    path, x_train, y_train, x_test, y_test = _write_keras_imdb(tmp_path / "imdb")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setitem(
        sources.REMOTES, "imdb", (sources.Remote("imdb.npz", ("unused",), f"sha256:{digest}"),)
    )
    ds = data.load("imdb", data_dir=tmp_path, num_words=20, maxlen=5, validation_size=2)
    rng = np.random.RandomState(113)  # Keras: shuffle train, then test, with one generator
    order_train = np.arange(6)
    rng.shuffle(order_train)
    order_test = np.arange(4)
    rng.shuffle(order_test)
    full = _expected(x_train, order_train, 20, 5)
    np.testing.assert_array_equal(ds.x_train, full[:4])
    np.testing.assert_array_equal(ds.info["validation"][0], full[4:])
    np.testing.assert_array_equal(ds.y_train, y_train[order_train][:4])
    np.testing.assert_array_equal(ds.x_test, _expected(x_test, order_test, 20, 5))
    np.testing.assert_array_equal(ds.y_test, y_test[order_test])
    assert ds.x_train.dtype == np.int32 and ds.num_classes == 2


def test_pad_sequences_keeps_last_tokens():
    padded = imdb.pad_sequences([np.arange(1, 8), np.array([9])], maxlen=4)
    np.testing.assert_array_equal(padded, [[4, 5, 6, 7], [0, 0, 0, 9]])


def test_token_layout(tmp_path):
    folder = tmp_path / "imdb"
    folder.mkdir()
    reviews = [[1, 14, 22, 600], [1, 5], [1, 7, 8, 9, 10, 11]]
    np.savez(
        folder / "imdb_small_subset.npz",
        x_train_tokens=np.concatenate(reviews).astype(np.int16),
        x_train_lengths=np.array([4, 2, 6], np.int32),
        y_train=np.array([1, 0, 1], np.int8),
        x_test_tokens=np.array([1, 3], np.int16),
        x_test_lengths=np.array([2], np.int32),
        y_test=np.array([0], np.int8),
    )
    ds = data.load("imdb", data_dir=tmp_path, num_words=500, maxlen=4, subset_train_to=2)
    np.testing.assert_array_equal(ds.x_train, [[1, 14, 22, 2], [0, 0, 1, 5]])
    np.testing.assert_array_equal(ds.x_test, [[0, 0, 1, 3]])
    assert "validation" not in ds.info


@pytest.mark.slow
def test_real_imdb_subset(real_data_dir):
    ds = data.load("imdb", data_dir=real_data_dir)
    if ds.info["source"].endswith("imdb.npz"):  # the full Keras file
        assert (ds.num_train, ds.info["validation"][0].shape[0], ds.x_test.shape[0]) == (
            20_000,
            5_000,
            25_000,
        )
        return
    assert ds.x_train.shape == (5_000, 100) and ds.x_test.shape == (1_000, 100)
    np.testing.assert_array_equal(np.bincount(ds.y_train), [2454, 2546])
    np.testing.assert_array_equal(np.bincount(ds.y_test), [526, 474])
    # the first review of keras load_data: 218 tokens starting 1, 14, 22, 16, 43; the last 100
    # are kept; in the 500-word subset every id is < 500
    assert ds.x_train[0, -1] == 32 and ds.x_train[0, 0] != 0
    assert int(ds.x_train.max()) < 500
