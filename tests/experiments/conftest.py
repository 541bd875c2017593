"""A short multi-chain HMC run on a tiny image dataset, for the analyses of stored runs."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit.cli import main


def image_data(folder, seed: int) -> str:
    """40 random dark 8×8 grayscale images (pixels 0..3: small inputs keep a linear model's
    probabilities off 0 and 1, so every test prediction has an R-hat; a saturated one is
    constant and has none), the label whether the left half is brighter."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=(40, 8, 8, 1), dtype=np.uint8)
    y = (x[:, :, :4].mean((1, 2, 3)) > x[:, :, 4:].mean((1, 2, 3))).astype(np.int64)
    path = folder / f"images{seed}.npz"
    np.savez(path, x_train=x[:32], y_train=y[:32], x_test=x[32:], y_test=y[32:])
    return str(path)


@pytest.fixture(scope="session")
def make_image_data():
    """:func:`image_data`, for tests that need a second image dataset."""
    return image_data


@pytest.fixture(scope="session")
def image_hmc_run(tmp_path_factory):
    """Two chains of eight kept HMC samples of a linear classifier on 8×8 images."""
    folder = tmp_path_factory.mktemp("images")
    run_dir = folder / "hmc"
    assert (
        main(
            [
                "hmc",
                "--dataset",
                image_data(folder, 0),
                "--model",
                "linear",
                "--weight-decay",
                "10",
                "--step-size",
                "1e-2",
                "--trajectory-len",
                "0.1",
                "--num-iterations",
                "8",
                "--num-burn-in",
                "0",
                "--num-chains",
                "2",
                "--dir",
                str(run_dir),
                "--no-progress",
                "--no-evaluate",
            ]
        )
        == 0
    )
    return run_dir


@pytest.fixture(scope="session")
def image_sgd_run(image_hmc_run, tmp_path_factory):
    """Two SGD epochs on the HMC run's images: one chain of one sample."""
    from bnnkit.runs import RunDir

    run_dir = tmp_path_factory.mktemp("images_sgd") / "sgd"
    assert (
        main(
            [
                "sgd",
                "--dataset",
                RunDir(image_hmc_run).read_record()["problem"]["dataset"],
                "--model",
                "linear",
                "--init-step-size",
                "1e-3",
                "--num-epochs",
                "2",
                "--batch-size",
                "8",
                "--dir",
                str(run_dir),
                "--no-progress",
                "--no-evaluate",
            ]
        )
        == 0
    )
    return run_dir
