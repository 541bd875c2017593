"""A tiny two-chain HMC run on 8×8 images, with a convergence report and a shift table of it."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit.cli import main


@pytest.fixture(scope="session")
def report_inputs(tmp_path_factory):
    """(run, convergence folder, shift folder): a linear classifier's 2 chains x 4 kept HMC
    samples on 40 dark uint8 images (the shift corrupts images), the label whether the left
    half is brighter."""
    folder = tmp_path_factory.mktemp("report_inputs")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(40, 8, 8, 1), dtype=np.uint8)
    y = (x[:, :, :4].mean((1, 2, 3)) > x[:, :, 4:].mean((1, 2, 3))).astype(np.int64)
    data = folder / "images.npz"
    np.savez(data, x_train=x[:32], y_train=y[:32], x_test=x[32:], y_test=y[32:])
    run, conv, shift = folder / "hmc", folder / "convergence", folder / "shift"
    assert (
        main(
            [
                "hmc",
                "--dataset",
                str(data),
                "--model",
                "linear",
                "--weight-decay",
                "10",
                "--step-size",
                "1e-2",
                "--trajectory-len",
                "0.1",
                "--num-iterations",
                "4",
                "--num-burn-in",
                "0",
                "--num-chains",
                "2",
                "--dir",
                str(run),
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["convergence", str(run), "--out", str(conv), "--bins", "5"]) == 0
    assert (
        main(
            [
                "shift",
                str(run),
                "--out",
                str(shift),
                "--corruptions",
                "gaussian_noise",
                "--severities",
                "1",
                "3",
                "--no-progress",
            ]
        )
        == 0
    )
    return run, conv, shift
