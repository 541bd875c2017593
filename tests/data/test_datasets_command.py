"""``bnnkit datasets``: the listing and the corruption grid."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from bnnkit.commands import datasets as command
from bnnkit.errors import ConfigError


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.COMMAND.run(parser.parse_args(argv))


def test_listing_shows_every_dataset_and_local_files(tmp_path, capsys):
    (tmp_path / "cifar10_jpeg_proxy").mkdir()
    (tmp_path / "cifar10_jpeg_proxy" / "cifar10_jpeg_q75_proxy.npz").write_bytes(b"")
    assert _run(["--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("mnist", "fashion_mnist", "cifar10", "cifar100", "imdb", "cifar10_c", "yacht",
                 "protein"):
        assert f"\n{name} " in out
    assert "cifar10_jpeg_q75_proxy.npz" in out
    assert f"no: put its files in {tmp_path}/mnist/" in out
    assert "60,000" in out and "bundled with bnnkit" in out


def test_grid_falls_back_to_an_available_image_dataset(tmp_path, capsys):
    folder = tmp_path / "mnist"
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.savez(folder / "mnist.npz", x_train=np.zeros((2, 28, 28), np.uint8),
             y_train=np.zeros(2, np.uint8),
             x_test=rng.integers(0, 255, (2, 28, 28), dtype=np.uint8),
             y_test=np.zeros(2, np.uint8))
    out = tmp_path / "grid.png"
    assert _run(["--data-dir", str(tmp_path), "--show-corruptions", "cifar10", "--out",
                 str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "mnist test image 0; cifar10 not available locally" in capsys.readouterr().out


def test_grid_without_any_images(tmp_path):
    with pytest.raises(ConfigError, match="no image dataset available locally"):
        _run(["--data-dir", str(tmp_path), "--show-corruptions", "cifar10"])
