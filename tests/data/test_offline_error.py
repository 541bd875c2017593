"""Offline, a dataset that must be downloaded: one line naming every accepted file, and where.

The network is replaced by a downloader that always fails, as pooch does without one.
"""

from __future__ import annotations

import logging

import pooch
import pytest

from bnnkit.cli import main
from bnnkit.data import mnist
from bnnkit.data.sources import REMOTES


@pytest.fixture
def no_network(monkeypatch):
    tried = []

    def retrieve(url, **kwargs):
        tried.append(url)
        pooch.get_logger().info("Downloading data from %r", url)  # what pooch says first
        kwargs["path"].mkdir(parents=True, exist_ok=True)  # pooch makes the folder first
        raise ConnectionError(f"cannot reach {url}")

    monkeypatch.setattr(pooch, "retrieve", retrieve)
    return tried


@pytest.mark.parametrize(
    "dataset, files",
    [
        ("mnist", ["mnist.npz", *(f"{stem}.gz" for stem in mnist.IDX_FILES.values())]),
        ("fashion_mnist", [r.filename for r in REMOTES["fashion_mnist"]]),
        ("cifar10", ["cifar-10-binary.tar.gz", "cifar-10-batches-bin"]),
    ],
)
def test_offline_error_names_every_file_and_leaves_nothing(
    dataset, files, offline_env, no_network, tmp_path, capsys, caplog
):
    caplog.set_level(logging.INFO)
    run_dir = tmp_path / "run"
    code = main(
        [
            "sgd",
            "--dataset",
            dataset,
            "--model",
            "mlp_classification",
            "--init-step-size",
            "1e-3",
            "--num-epochs",
            "1",
            "--batch-size",
            "8",
            "--no-progress",
            "--dir",
            str(run_dir),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("bnnkit: error: ")
    for name in files:
        assert name in err, name
    assert f"<data dir>/{dataset}/" in err and "BNNKIT_DATA_DIR" in err
    assert no_network  # it did try
    assert not [r for r in caplog.records if r.name == "pooch" and r.levelno < logging.WARNING]
    assert not offline_env.exists()  # no empty cache folder left behind
    assert not run_dir.exists()
