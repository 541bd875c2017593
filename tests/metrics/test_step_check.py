"""Level 0 of unadjusted MCLMC measured by continuing the chains at half their step
(bnnkit.runs.step_check, bnnkit.metrics.numerics.step_bias).

The rule is checked on figures built by hand (a bias beyond the Monte Carlo floor by more than
the halves' distance fails level 0 softly, within it passes it despite spikes, and a bulk above
its target still fails hard); the measurement end to end on the linear model of yacht split 0
with the noise fixed, whose posterior is Gaussian: tuned MCLMC's bias there is far below the
Monte Carlo error of segments a quarter of the run long (the half-step segment lies as far
from the two at the run's step as they lie from each other, to within their spread), so its
level 0 passes measured, and the figures are a pure function of the stored run.
"""

import pytest

from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.metrics import numerics
from bnnkit.metrics.findings import THRESHOLDS, Finding
from bnnkit.metrics.levels import level, verdict
from bnnkit.runs import step_check

CONFIG = {"energy_var_end": 0.1}


def kept_lines(spiking: int, chains: int = 2, iterations: int = 100) -> list[dict]:
    """Log lines of kept iterations at the energy target, ``spiking`` of them spikes."""
    spike = 2 * THRESHOLDS.spike_factor * CONFIG["energy_var_end"]
    return [
        {
            "divergent": [False] * chains,
            "energy_var": [spike if i < spiking else 0.1] * chains,
            "num_retried": [0] * chains,
        }
        for i in range(iterations)
    ]


def measured(half_step: float, floor: float, halves: float) -> dict:
    return {
        "distance": "wasserstein_1",
        "half_step": half_step,
        "floor": floor,
        "halves": halves,
        "draws": 25,
        "gradients": 8000,
        "chain_gradients": 28000,
    }


def test_measured_bias_replaces_the_spike_count():
    many = int(THRESHOLDS.max_spike_share * 100) + 5  # past the share the count allows
    counted = numerics.numerics(kept_lines(many), "mclmc", CONFIG)
    assert counted.status == "fail" and counted.soft and "spikes" in counted.problems[0]
    # Within the floor plus the halves' distance: passes, the spikes still in its figures.
    within = numerics.numerics(kept_lines(many), "mclmc", CONFIG, measured(0.05, 0.04, 0.02))
    assert within.status == "pass" and max(within.figures["spike_share"]) > 0.05
    assert within.figures["measured"]["half_step"] == 0.05
    # Beyond them: fails softly, as spikes did, saying by how much.
    beyond = numerics.numerics(kept_lines(0), "mclmc", CONFIG, measured(0.09, 0.04, 0.02))
    assert beyond.status == "fail" and beyond.soft
    assert "bias" in beyond.problems[0] and "0.05 beyond" in beyond.problems[0]


def test_a_bulk_above_its_target_fails_hard_measured_or_not():
    lines = kept_lines(0)
    for line in lines:
        line["energy_var"] = [10 * THRESHOLDS.max_energy_ratio * 0.1] * 2
    found = numerics.numerics(lines, "mclmc", CONFIG, measured(0.01, 0.04, 0.02))
    assert found.status == "fail" and not found.soft


def test_the_continuation_runs_only_where_it_decides_the_verdict():
    passed, spikes = Finding("pass"), Finding("fail", ("spikes",), soft=True)
    hard = Finding("fail", ("bulk",))
    assert step_check.decides(verdict({"L0": passed, "L1": passed, "L2": passed, "L3": passed}))
    assert step_check.decides(verdict({"L0": spikes, "L1": passed, "L2": passed, "L3": passed}))
    assert not step_check.decides(verdict({"L0": hard, "L1": passed, "L2": passed, "L3": passed}))
    assert not step_check.decides(verdict({"L0": spikes, "L1": spikes, "L2": passed}))
    assert step_check.applies({"method": "mclmc", "method_config": {"adjusted": False}})
    assert not step_check.applies({"method": "mclmc", "method_config": {"adjusted": True}})
    assert not step_check.applies({"method": "hmc", "method_config": {}})


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("step") / "run"
    argv = ["mclmc", "--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.35"]
    argv += ["--num-chains", "2", "--num-iterations", "600", "--num-burn-in", "200"]
    assert main([*argv, "--dir", str(folder), "--no-progress"]) == 0
    return folder


@pytest.mark.slow
def test_a_tuned_chain_on_a_gaussian_posterior_passes_level_0_measured(linear_run):
    levels = evaluate(linear_run, write=False)["levels"]
    # 400 kept draws per chain are enough for every other level on this posterior, so the
    # continuation decides level 0 (were one of them to fail, this test would say so here).
    assert levels["failed"] == [], levels["problems"]
    found = levels["L0"]["figures"]["measured"]
    assert found["draws"] == 100  # a quarter of the kept draws
    # Three segments of 100 draws, the half-step one at twice the steps: 4 x 100 x 2 chains x
    # 10 steps x 2 gradients.
    assert found["gradients"] == 4 * 100 * 2 * 10 * 2
    assert found["chain_gradients"] == 600 * 2 * 10 * 2
    assert found["half_step"] - found["floor"] <= found["halves"]
    assert "at half the step" in level("L0").row(levels["L0"]["figures"])  # the report's row
    # Drawn from the run's own key: evaluated again, the same figures.
    assert evaluate(linear_run, write=False)["levels"]["L0"]["figures"]["measured"] == found


@pytest.mark.slow
def test_a_run_whose_state_is_not_its_last_is_judged_by_counting(linear_run, tmp_path):
    import shutil

    from bnnkit.runs.directory import RunDir

    copy = tmp_path / "run"
    shutil.copytree(linear_run, copy)
    RunDir(copy).state_file.unlink()
    levels = evaluate(copy, write=False)["levels"]
    assert levels["L0"]["figures"]["measured"] is None
