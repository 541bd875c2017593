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
    for name in (
        "mnist",
        "fashion_mnist",
        "cifar10",
        "cifar100",
        "imdb",
        "cifar10_c",
        "yacht",
        "protein",
    ):
        assert f"\n{name} " in out
    assert max(len(line) for line in out.splitlines()) <= 100, out
    text = " ".join(out.split())  # paths and licences wrap at spaces onto their own lines
    assert f"DATA: {tmp_path} (--data-dir" in text  # the data folder, named once
    assert "files: DATA/cifar10_jpeg_proxy/cifar10_jpeg_q75_proxy.npz" in text
    assert "files: no: put its files in DATA/mnist/" in text
    assert "60,000" in text and "bundled with bnnkit" in text


def test_grid_falls_back_to_an_available_image_dataset(tmp_path, capsys):
    folder = tmp_path / "mnist"
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.savez(
        folder / "mnist.npz",
        x_train=np.zeros((2, 28, 28), np.uint8),
        y_train=np.zeros(2, np.uint8),
        x_test=rng.integers(0, 255, (2, 28, 28), dtype=np.uint8),
        y_test=np.zeros(2, np.uint8),
    )
    out = tmp_path / "grid.png"
    assert (
        _run(["--data-dir", str(tmp_path), "--show-corruptions", "cifar10", "--out", str(out)]) == 0
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "mnist test image 0; cifar10 not available locally" in capsys.readouterr().out


def test_grid_without_any_images(tmp_path):
    with pytest.raises(ConfigError, match="no image dataset available locally"):
        _run(["--data-dir", str(tmp_path), "--show-corruptions", "cifar10"])


def test_grid_title_sits_above_the_column_titles():
    import matplotlib.pyplot as plt

    from bnnkit.report.corruption_grid import grid_figure

    image = np.full((8, 8, 3), 128, np.uint8)
    fig = grid_figure(image, "mnist test image 0; cifar10 not available locally", seed=0)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        title = fig._suptitle.get_window_extent(renderer)
        column_titles = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
        assert len(column_titles) == 6
        # display coordinates grow upwards: the whole suptitle is above every column title
        assert all(title.y0 >= box.y1 for box in column_titles), (title, column_titles)
        assert title.y1 <= fig.bbox.y1  # and still on the figure
    finally:
        plt.close(fig)
