"""UCI data with regenerated standard splits, and a user's own npz files."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit import data
from bnnkit.data import npz, uci
from bnnkit.errors import ConfigError


@pytest.mark.parametrize("name", sorted(uci.UCI_DATASETS))
def test_regenerated_splits_equal_the_published_ones(name, shared_data_dir):
    reference = np.load(shared_data_dir / "uci" / name / "splits.npz")
    table = uci.load_table(name)
    num_features, num_splits, _ = uci.UCI_DATASETS[name]
    train, test = uci.standard_splits(table.shape[0], num_splits)
    np.testing.assert_array_equal(train, reference["index_train"])
    np.testing.assert_array_equal(test, reference["index_test"])
    assert int(reference["index_target"]) == num_features
    np.testing.assert_array_equal(reference["index_features"], np.arange(num_features))


@pytest.mark.parametrize("name", sorted(uci.UCI_DATASETS))
def test_splits_partition_the_rows(name):
    table = uci.load_table(name)
    _, num_splits, _ = uci.UCI_DATASETS[name]
    train, test = uci.standard_splits(table.shape[0], num_splits)
    assert train.shape[0] == num_splits
    for tr, te in zip(train, test, strict=True):
        np.testing.assert_array_equal(np.sort(np.concatenate([tr, te])), np.arange(len(table)))


def test_uci_standardised_with_training_statistics_only():
    ds = data.load("yacht_3")
    raw = data.load("yacht_3", standardize_data=False)
    np.testing.assert_allclose(ds.x_train.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(ds.y_train.mean(), 0.0, atol=1e-5)
    # The test set is mapped with the training statistics, so it is not itself centred...
    np.testing.assert_allclose(
        ds.x_test, (raw.x_test - raw.x_train.mean(0)) / raw.x_train.std(0), rtol=1e-4, atol=1e-5
    )
    # ...and targets come back in original units.
    np.testing.assert_allclose(ds.y_test_original, raw.y_test, rtol=1e-5)
    assert ds.x_train.shape == (277, 6) and ds.x_test.shape == (31, 6)
    assert data.load("protein_4").num_train == 41157


@pytest.mark.parametrize("bad", ["yacht_20", "protein_5", "yacht_-1"])
def test_split_out_of_range(bad):
    with pytest.raises(ConfigError, match="out of range"):
        data.load(bad)


def test_unknown_dataset():
    with pytest.raises(ConfigError, match="unknown dataset 'nope'"):
        data.load("nope")


def write(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def test_user_npz_used_exactly_as_given(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(5.0, 3.0, size=(10, 2))
    path = write(tmp_path / "d.npz", x_train=x, y_train=x[:, 0] * 2, x_test=x[:3], y_test=x[:3, 0])
    ds = data.load(path)
    assert ds.task == "regression" and ds.x_scaler is None
    np.testing.assert_allclose(ds.x_train, x.astype(np.float32))
    stdz = data.load(path, standardize_data=True)
    np.testing.assert_allclose(stdz.x_train.mean(0), 0.0, atol=1e-5)
    labels = write(
        tmp_path / "c.npz",
        x_train=x,
        y_train=np.array([0, 1] * 5),
        x_test=x[:2],
        y_test=np.array([1, 0]),
    )
    cls = data.load(labels)
    assert cls.task == "classification" and cls.num_classes == 2
    # A test label the training set never shows has no output of the network to score it.
    unseen = write(
        tmp_path / "u.npz",
        x_train=x,
        y_train=np.array([0, 1] * 5),
        x_test=x[:2],
        y_test=np.array([2, 0]),
    )
    with pytest.raises(ConfigError, match="y_test holds class 2"):
        data.load(unseen)


def test_user_npz_errors(tmp_path):
    x = np.zeros((4, 2))
    with pytest.raises(ConfigError, match="lacks y_test"):
        npz.load(write(tmp_path / "a.npz", x_train=x, y_train=x[:, 0], x_test=x))
    bad = x.copy()
    bad[1, 1] = np.nan
    with pytest.raises(ConfigError, match="x_train holds 1 NaN"):
        npz.load(write(tmp_path / "b.npz", x_train=bad, y_train=x[:, 0], x_test=x, y_test=x[:, 0]))
    obj = np.array([np.zeros(2), np.zeros(3)], dtype=object)
    np.savez(tmp_path / "c.npz", x_train=obj, y_train=x[:2, 0], x_test=x, y_test=x[:, 0])
    with pytest.raises(ConfigError, match="without pickles"):
        npz.load(tmp_path / "c.npz")
    with pytest.raises(ConfigError, match="does not exist"):
        npz.load(tmp_path / "missing.npz")
