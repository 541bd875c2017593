"""``benchmarks/half_step.py`` on a small finished MCLMC run: it continues the run's chains from
their stored state (the state's shapes and the tuned step read back), counts the gradients it
spends exactly, and is a deterministic function of its seed."""

from __future__ import annotations

import math

import pytest

from bnnkit import runs
from bnnkit.inference import mclmc
from bnnkit.problem import ProblemConfig

PROBLEM = ProblemConfig("yacht_0", "linear", noise_std=0.35)
CONFIG = mclmc.Config(num_iterations=60, num_burn_in=20, num_chains=2, seed=3)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = tmp_path_factory.mktemp("half_step") / "run"
    runs.run(PROBLEM, CONFIG, path, progress=False)
    return path


@pytest.mark.slow  # three continuations compiled three times: about a minute on 2 cores
def test_it_continues_the_chains_at_half_their_step(finished, benchmark_script):
    half_step = benchmark_script("half_step")
    found = half_step.check(finished, iterations=12, seed=0)
    steps = 10  # MCLMC's default transitions per unadjusted iteration
    assert found["chains"] == 2 and len(found["step_size"]) == 2
    assert all(s > 0 for s in found["step_size"])
    assert found["gradients"] == {
        "half": 2 * 12 * mclmc.GRADIENTS_PER_STEP * 2 * steps,
        "floor": 2 * 2 * 12 * mclmc.GRADIENTS_PER_STEP * steps,
        "reference_chains": 2 * 60 * mclmc.GRADIENTS_PER_STEP * steps,
    }
    assert found["floor_w1"] > 0 and all(math.isfinite(w) and w > 0 for w in found["half_w1"])
    again = half_step.check(finished, iterations=12, seed=0)
    assert (again["floor_w1"], again["half_w1"]) == (found["floor_w1"], found["half_w1"])
    other = half_step.check(finished, iterations=12, seed=1)
    assert other["half_w1"] != found["half_w1"]


def test_a_run_of_another_sampler_is_refused(tmp_path, benchmark_script):
    half_step = benchmark_script("half_step")
    (tmp_path / "run.json").write_text('{"method": "hmc", "method_config": {}}')
    with pytest.raises(SystemExit, match="not a run of unadjusted MCLMC"):
        half_step.check(tmp_path, iterations=2, seed=0)
