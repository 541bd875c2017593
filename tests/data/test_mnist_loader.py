"""MNIST / Fashion-MNIST: IDX and Keras-npz fixtures in the published format, then real files."""

from __future__ import annotations

import gzip
import hashlib

import numpy as np
import pytest

import bnnkit.data as data
from bnnkit.data import mnist
from bnnkit.data.idx import parse_idx, read_idx
from bnnkit.errors import ConfigError


def _idx_bytes(array: np.ndarray) -> bytes:
    # magic: two zero bytes, type 0x08 (unsigned byte), number of dimensions; then sizes.
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape
    )
    return header + array.astype(np.uint8).tobytes()


def _fake(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n, np.uint8)


def write_idx_folder(folder, n_train=12, n_test=5, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    x_train, y_train = _fake(n_train, 0)
    x_test, y_test = _fake(n_test, 1)
    arrays = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    for key, stem in mnist.IDX_FILES.items():
        raw = _idx_bytes(arrays[key])
        if gz:
            with gzip.open(folder / f"{stem}.gz", "wb") as handle:
                handle.write(raw)
        else:
            (folder / stem).write_bytes(raw)
    return arrays


def test_idx_header_layout():
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = _idx_bytes(images)
    assert raw[:4] == b"\x00\x00\x08\x03" and len(raw) == 16 + 24  # 16-byte image header
    np.testing.assert_array_equal(parse_idx(raw), images)
    labels = _idx_bytes(np.array([1, 2, 3], np.uint8))
    assert len(labels) == 8 + 3  # 8-byte label header
    with pytest.raises(ConfigError, match="shape"):
        parse_idx(raw[:-1])
    with pytest.raises(ConfigError, match="not an IDX"):
        parse_idx(b"\x01" + raw[1:])


@pytest.mark.parametrize("gz", [True, False])
def test_idx_files_load(tmp_path, gz):
    arrays = write_idx_folder(tmp_path / "mnist", gz=gz)
    ds = data.load("mnist", data_dir=tmp_path)
    assert ds.x_train.shape == (12, 28, 28, 1) and ds.x_train.dtype == np.uint8
    np.testing.assert_array_equal(ds.x_train[..., 0], arrays["x_train"])
    np.testing.assert_array_equal(ds.y_test, arrays["y_test"])
    assert ds.y_train.dtype == np.int32 and ds.num_classes == 10
    np.testing.assert_allclose(ds.input_normalization.mean, [0.1307 * 255])
    np.testing.assert_allclose(ds.input_normalization.std, [0.3081 * 255])
    assert ds.info["class_names"][3] == "3"


def test_keras_npz_layout_and_options(tmp_path):
    x_train, y_train = _fake(20, 2)
    x_test, y_test = _fake(4, 3)
    (tmp_path / "fashion_mnist").mkdir()
    np.savez(
        tmp_path / "fashion_mnist" / "fashion_mnist.npz",
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
    )
    ds = data.load(
        "fashion_mnist",
        data_dir=tmp_path,
        subset_train_to=5,
        validation_size=6,
        normalization="blundell",
    )
    np.testing.assert_array_equal(ds.x_train[..., 0], x_train[:5])
    x_val, y_val = ds.info["validation"]
    np.testing.assert_array_equal(x_val[..., 0], x_train[14:])
    np.testing.assert_array_equal(y_val, y_train[14:])
    assert float(ds.input_normalization.std[0]) == pytest.approx(126.0)
    assert float(ds.input_normalization.mean[0]) == 0.0
    assert ds.info["class_names"][9] == "Ankle boot"


def test_bad_options_and_missing_files(tmp_path):
    write_idx_folder(tmp_path / "mnist")
    with pytest.raises(ConfigError, match="subset_train_to 50"):
        data.load("mnist", data_dir=tmp_path, subset_train_to=50)
    with pytest.raises(ConfigError, match="normalization 'blundel'"):
        data.load("mnist", data_dir=tmp_path, normalization="blundel")
    with pytest.raises(ConfigError, match="option 'colour'"):
        data.load("mnist", data_dir=tmp_path, colour=True)
    with pytest.raises(ConfigError, match=r"put fashion_mnist\.npz .* in .*fashion_mnist/$"):
        data.load("fashion_mnist", data_dir=tmp_path)


@pytest.mark.slow
def test_real_mnist(real_data_dir):
    ds = data.load("mnist", data_dir=real_data_dir)
    assert (ds.num_train, ds.x_test.shape[0]) == (60_000, 10_000)
    assert ds.x_train.dtype == np.uint8 and ds.input_shape == (28, 28, 1)
    np.testing.assert_array_equal(
        np.bincount(ds.y_train), [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    )
    np.testing.assert_array_equal(
        np.bincount(ds.y_test), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    )
    first = ds.x_train[0, ..., 0]
    assert hashlib.sha256(first.tobytes()).hexdigest() == (
        "23ceaef5eb61f0e70d64ac18fdf0f60df3d5971cf30bbadac7b6ebf07f782d2c"
    )
    assert int(ds.y_train[0]) == 5


@pytest.mark.slow
def test_real_fashion_mnist(real_data_dir):
    ds = data.load("fashion_mnist", data_dir=real_data_dir, subset_train_to=1000)
    assert ds.num_train == 1000 and ds.x_test.shape == (10_000, 28, 28, 1)
    full = read_idx(real_data_dir / "fashion_mnist" / "train-labels-idx1-ubyte.gz")
    assert full.shape == (60_000,)
    np.testing.assert_array_equal(np.bincount(full), [6000] * 10)
    np.testing.assert_array_equal(np.bincount(ds.y_test), [1000] * 10)
