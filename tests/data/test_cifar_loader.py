"""CIFAR-10 / CIFAR-100 binary records (tar.gz and extracted folder), and the JPEG proxy."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

import bnnkit.data as data
from bnnkit.data.cifar import parse_records
from bnnkit.errors import ConfigError


def _records(images: np.ndarray, labels: list[np.ndarray]) -> bytes:
    # one record: label byte(s), then the R, G, B 32x32 planes row-major
    planes = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    label_cols = np.stack(labels, axis=1).astype(np.uint8)
    return np.concatenate([label_cols, planes], axis=1).tobytes()


def _batch(n: int, seed: int, classes: int = 10):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, classes, n).astype(np.uint8),
    )


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def test_record_layout():
    image = np.zeros((1, 32, 32, 3), np.uint8)
    image[0, 1, 2, 0], image[0, 3, 4, 2] = 7, 9
    raw = _records(image, [np.array([6])])
    assert len(raw) == 1 + 3072 and raw[0] == 6
    assert raw[1 + 1 * 32 + 2] == 7 and raw[1 + 2048 + 3 * 32 + 4] == 9
    images, labels = parse_records(raw, 1)
    assert labels.tolist() == [6]
    np.testing.assert_array_equal(images, image)
    with pytest.raises(ConfigError, match="whole number"):
        parse_records(raw[:-1], 1)


def test_cifar10_tar_gz(tmp_path):
    batches = [_batch(3, i) for i in range(6)]
    (tmp_path / "cifar10").mkdir()
    with tarfile.open(tmp_path / "cifar10" / "cifar-10-binary.tar.gz", "w:gz") as tar:
        for i in range(5):
            _add(
                tar,
                f"cifar-10-batches-bin/data_batch_{i + 1}.bin",
                _records(batches[i][0], [batches[i][1]]),
            )
        _add(tar, "cifar-10-batches-bin/test_batch.bin", _records(batches[5][0], [batches[5][1]]))
        _add(tar, "cifar-10-batches-bin/batches.meta.txt", b"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n")
    ds = data.load("cifar10", data_dir=tmp_path, subset_train_to=14)
    np.testing.assert_array_equal(ds.x_train, np.concatenate([b[0] for b in batches[:5]])[:14])
    np.testing.assert_array_equal(ds.y_train, np.concatenate([b[1] for b in batches[:5]])[:14])
    np.testing.assert_array_equal(ds.x_test, batches[5][0])
    assert ds.x_train.dtype == np.uint8 and ds.info["class_names"][9] == "j"
    np.testing.assert_allclose(ds.input_normalization.mean, np.array([0.49, 0.48, 0.44]) * 255)
    np.testing.assert_allclose(ds.input_normalization.std, [51.0] * 3)


def test_cifar100_folder_uses_fine_label(tmp_path):
    folder = tmp_path / "cifar100" / "cifar-100-binary"
    folder.mkdir(parents=True)
    x, fine = _batch(4, 0, classes=100)
    coarse = (fine // 5).astype(np.uint8)
    (folder / "train.bin").write_bytes(_records(x, [coarse, fine]))
    (folder / "test.bin").write_bytes(_records(x[:2], [coarse[:2], fine[:2]]))
    ds = data.load("cifar100", data_dir=tmp_path)
    np.testing.assert_array_equal(ds.y_train, fine)
    np.testing.assert_array_equal(ds.x_test, x[:2])
    assert ds.num_classes == 100


def test_missing_archive_message(tmp_path):
    with pytest.raises(ConfigError, match=r"cifar-10-binary\.tar\.gz .*not found: put it in"):
        data.load("cifar10", data_dir=tmp_path)


@pytest.mark.slow
def test_real_jpeg_proxy_pipeline(real_data_dir):
    if not (real_data_dir / "cifar10_jpeg_proxy").is_dir():
        pytest.skip("no CIFAR-10 JPEG proxy in BNNKIT_DATA_DIR")
    ds = data.load("cifar10_proxy", data_dir=real_data_dir, subset_train_to=200)
    assert ds.x_train.shape == (200, 32, 32, 3) and ds.x_train.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(ds.y_train), [20] * 10)
    assert ds.x_test.shape == (10_000, 32, 32, 3)
    np.testing.assert_array_equal(np.bincount(ds.y_test), [1000] * 10)
    mean = ds.x_test.reshape(-1, 3).mean(0) / 255
    np.testing.assert_allclose(mean, [0.4941, 0.4851, 0.4504], atol=2e-3)
