"""``until`` on a problem already built (``Problem.from_arrays`` with a Flax module):
the driver hands the built problem to every block and to the verdict, built once, never
rebuilt from its settings."""

from __future__ import annotations

import numpy as np
import pytest

import bnnkit
import user_models
from bnnkit.inference import hmc
from bnnkit.problem import DATA_FILE, Problem
from bnnkit.runs import RunDir


def arrays_problem() -> Problem:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    y = (np.sin(x[:, 0]) + 0.1 * rng.normal(size=40)).astype(np.float32)
    return Problem.from_arrays(
        x[:30], y[:30], x[30:], y[30:], model=user_models.TinyMLP(width=4), noise_std=0.5
    )


def config(**changes) -> hmc.Config:
    return hmc.Config(
        step_size=1e-2,
        trajectory_len=0.05,
        num_iterations=8,
        num_burn_in=2,
        num_chains=2,
        seed=1,
        **changes,
    )


@pytest.mark.slow
def test_until_runs_on_a_problem_built_from_arrays(tmp_path):
    problem = arrays_problem()
    path = tmp_path / "run"
    # A budget that has ended at once: the first block stops after its first iteration.
    result = bnnkit.run(problem, config(until="certified", max_time=1e-9), path, progress=False)
    assert [b["iterations"] for b in result.until_converged["blocks"]] == [1]
    assert result.status == "stopped" and (path / DATA_FILE).is_file()
    # The whole first block, then a resume whose verdict reads the kept draws back with the
    # problem as given (6 kept per chain are enough to judge).
    bnnkit.run(problem, config(), path, resume=True, progress=False)
    resumed = bnnkit.run(
        problem, config(until="certified", max_time=1e-9), path, resume=True, progress=False
    )
    blocks = resumed.until_converged["blocks"]
    assert [b["iterations"] for b in blocks] == [8]
    assert blocks[0]["verdict"] is not None and resumed.until_converged["verdict"] is not None
    assert RunDir(path).read_record()["until_converged"]["blocks"] == blocks
