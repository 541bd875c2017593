"""CIFAR-10-C .npy files: severity windows, labels, errors; the real files when present."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit.data import cifar10_c
from bnnkit.errors import ConfigError


def test_severity_windows(tmp_path):
    folder = tmp_path / "cifar10_c" / "CIFAR-10-C"
    folder.mkdir(parents=True)
    images = np.repeat(np.arange(5, dtype=np.uint8), 3)[:, None, None, None]
    images = np.broadcast_to(images, (15, 32, 32, 3)).copy()  # severity s -> pixel value s - 1
    np.save(folder / "fog.npy", images)
    np.save(folder / "labels.npy", np.tile(np.array([3, 1, 4], np.uint8), 5))
    x, y = cifar10_c.load("fog", 4, data_dir=tmp_path)
    assert x.shape == (3, 32, 32, 3) and x.dtype == np.uint8 and int(x.max()) == 3
    np.testing.assert_array_equal(y, [3, 1, 4])
    with pytest.raises(ConfigError, match=r"snow\.npy not found"):
        cifar10_c.load("snow", 1, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="severity 0"):
        cifar10_c.load("fog", 0, data_dir=tmp_path)


def test_missing_folder_message(tmp_path):
    with pytest.raises(ConfigError, match="put the extracted CIFAR-10-C/ folder"):
        cifar10_c.load("fog", 1, data_dir=tmp_path)


@pytest.mark.slow
def test_real_cifar10_c(real_data_dir):
    if cifar10_c.find(real_data_dir) is None:
        pytest.skip("no CIFAR-10-C in BNNKIT_DATA_DIR")
    x, y = cifar10_c.load("gaussian_noise", 5, data_dir=real_data_dir)
    assert x.shape == (10_000, 32, 32, 3) and x.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(y), [1000] * 10)
