"""A run's Gaussian noise stream is resumed only by the generator that drew it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bnnkit import runs
from bnnkit.errors import ConfigError
from bnnkit.inference import _noise, sgmcmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs.provenance import settings_digest


@pytest.fixture(scope="module")
def problem(tmp_path_factory) -> ProblemConfig:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)
    path = tmp_path_factory.mktemp("data") / "linear.npz"
    np.savez(path, x_train=x[:32], y_train=y[:32], x_test=x[32:], y_test=y[32:])
    return ProblemConfig(dataset=str(path), model="linear", noise_std=1.0)


def config(num_epochs: int, noise: str) -> sgmcmc.Config:
    return sgmcmc.Config(
        init_step_size=1e-4, num_epochs=num_epochs, batch_size=8, seed=1, noise=noise
    )


def as_stored_by_an_older_version(run: Path) -> None:
    record = json.loads((run / "run.json").read_text())
    assert record["gaussian_noise"] == _noise.GENERATOR
    del record["gaussian_noise"]
    record["settings_sha256"] = settings_digest(record)
    (run / "run.json").write_text(json.dumps(record))


class CrashError(Exception):
    pass


def crash(unit: int, log: dict) -> None:
    raise CrashError


def test_gaussian_noise_of_another_generator_is_not_resumed(problem, tmp_path):
    for noise in ("gaussian", "rademacher"):
        with pytest.raises(CrashError):  # cut off after its first epoch
            runs.run(problem, config(2, noise), tmp_path / noise, progress=False, on_unit=crash)
        as_stored_by_an_older_version(tmp_path / noise)
    with pytest.raises(ConfigError, match=r"drew its Gaussian noise with .jax\.random\.normal."):
        runs.run(problem, config(2, "gaussian"), tmp_path / "gaussian", resume=True, progress=False)
    # Random signs never came from the Gaussian generator: that run continues.
    result = runs.run(
        problem, config(2, "rademacher"), tmp_path / "rademacher", resume=True, progress=False
    )
    assert result.record["status"] == "finished"
