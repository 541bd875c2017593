"""A short HMC run on yacht to compare other methods' predictives with."""

from __future__ import annotations

import pytest

from bnnkit.cli import main

PROBLEM = ["--dataset", "yacht_0", "--model", "mlp_regression_small", "--noise-std", "0.35"]


@pytest.fixture(scope="module")
def hmc_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("hmc") / "run"
    assert (
        main(
            [
                "hmc",
                *PROBLEM,
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.05",
                "--num-iterations",
                "12",
                "--num-burn-in",
                "4",
                "--num-chains",
                "2",
                "--dir",
                str(d),
                "--no-progress",
                "--no-evaluate",
            ]
        )
        == 0
    )
    return d
