"""The pure parts of ``benchmarks/reference_profile.py``: how a reference's log lines, stage
spans and compilation events become its phase table. Nothing here is timed."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
COMPILE = "/jax/core/compile/backend_compile_duration"
TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"


@pytest.fixture(scope="module")
def profile(benchmark_script):
    return benchmark_script("reference_profile")


def child(events, spans, launched=100.0, ready=101.5):
    return {"launched": launched, "ready": ready, "events": events, "spans": spans}


def test_examples_in_its_docstrings(profile):
    assert doctest.testmod(profile, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def test_overlapping_spans_count_once(profile):
    spans = [(0.0, 4.0), (1.0, 2.0), (3.0, 5.0), (7.0, 8.0), (6.0, 6.0)]
    assert profile.union_seconds(spans) == 6.0
    assert profile.union_seconds(spans, within=(4.5, 7.5)) == 1.0
    assert profile.union_seconds([]) == 0.0


def test_phases_add_up_to_the_wall_time(profile):
    events = [
        [TRACE, 102.0, 103.0, "jit(one)"],
        [LOWER, 103.0, 103.5, "jit(one)"],
        [COMPILE, 103.5, 106.0, "jit(one)"],
        [TRACE, 104.0, 105.0, "jit(nested)"],  # within a compilation: counted there only
        [COMPILE, 110.0, 118.0, "jit(step_all)"],
        [COMPILE, 131.0, 131.5, "jit(predict)"],
    ]
    spans = {"ensemble": [102.0, 109.0], "chains": [109.0, 130.0], "evaluate": [130.0, 132.0]}
    iterations = {"tuning": 6.0, "kept": 3.0, "writes": 1.0}
    table = profile.phase_table(33.0, child(events, spans), iterations)
    assert list(table) == list(profile.PHASES)
    assert table["start"] == 1.5
    assert table["compile"] == 2.5 + 8.0 + 0.5
    assert table["trace and lower"] == 1.5
    assert table["ensemble"] == 7.0 - 4.0
    assert table["chains' set-up and checkpoints"] == 21.0 - 8.0 - 10.0
    assert table["evaluation"] == 2.0 - 0.5
    assert sum(table.values()) == pytest.approx(33.0, rel=1e-12)  # float rounding only
    rest = 33.0 - (1.5 + 11.0 + 1.5 + 3.0 + 6.0 + 3.0 + 1.0 + 3.0 + 1.5)
    assert table["the rest"] == pytest.approx(rest, abs=1e-12)


def test_a_reference_stopped_before_evaluating_has_no_evaluation(profile):
    spans = {"ensemble": [101.5, 102.0], "chains": [102.0, 104.0]}
    iterations = {"tuning": 1.0, "kept": 0.0, "writes": 0.0}
    table = profile.phase_table(3.0, child([], spans), iterations)
    assert table["evaluation"] == 0.0
    assert table["chains' set-up and checkpoints"] == 1.0


def test_logged_writes_are_taken_as_measured(profile):
    log = [{"burn_in": True, "seconds": s} for s in (20.0, 0.04, 0.05, 0.04, 0.04)]
    log += [
        {"burn_in": False, "seconds": s, "write_seconds": w}
        for s, w in ((0.5, 0.3), (0.06, 0.02), (0.07, 0.03))
    ]
    times = profile.iteration_times(log)
    assert not times["writes_estimated"]
    assert times["writes"] == pytest.approx(0.35, abs=1e-9)
    # Less their writes the kept iterations took 0.2, 0.04, 0.04: the first is counted at
    # their median, its excess being compilation.
    assert times["kept"] == pytest.approx(0.04 * 3, abs=1e-9)
    assert times["tuning"] == pytest.approx(0.04 * 4 + 0.05, abs=1e-9)
    assert (times["num_tuning"], times["num_kept"]) == (5, 3)
    assert times["first_tuning"] == 20.0


def test_writes_are_estimated_from_the_medians_without_a_logged_time(profile):
    log = [{"burn_in": True, "seconds": s} for s in (30.0, 0.04, 0.04, 0.05, 0.04)]
    log += [{"burn_in": False, "seconds": s} for s in (0.09, 0.1, 0.09, 0.08)]
    times = profile.iteration_times(log)
    assert times["writes_estimated"]
    assert times["median_tuning"] == 0.04 and times["median_kept"] == 0.09
    assert times["writes"] == pytest.approx((0.09 - 0.04) * 4, abs=1e-9)
    assert times["kept"] == pytest.approx(0.09 * 2 + 0.1 + 0.08 - 0.2, abs=1e-9)
    # Kept iterations no slower than tuning ones: no writing time to estimate.
    faster = [{"burn_in": True, "seconds": 0.05}, {"burn_in": False, "seconds": 0.04}]
    assert profile.iteration_times(faster)["writes"] == 0.0


def test_ratios_and_the_printed_table(profile):
    table = dict.fromkeys(profile.PHASES, 1.0)
    table["compile"] = 4.0
    iterations = {
        "tuning": 1.0,
        "kept": 1.0,
        "writes": 1.0,
        "writes_estimated": True,
        "num_tuning": 500,
        "num_kept": 200,
        "median_tuning": 0.03,
        "median_kept": 0.036,
        "first_tuning": 20.0,
        "first_kept": 0.05,
    }
    floor = {"seconds": 0.01, "kept_seconds": 0.012, "gradients_per_chain": 20, "chains": 8}
    floor.update(devices=2, split="chains")
    gradients = {"tuning": 20, "kept": 24}
    ratios = profile.ratios(table, 13.0, iterations, floor)
    assert ratios["tuning_iteration_over_floor"] == pytest.approx(3.0)
    assert ratios["kept_iteration_over_floor"] == pytest.approx(3.0)
    assert ratios["kept_over_tuning_iteration"] == pytest.approx(1.2)
    assert ratios["compile_over_wall"] == pytest.approx(4 / 13)
    assert sum(ratios["shares"].values()) == pytest.approx(1.0)
    result = {
        "cpu": "a CPU",
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [2.0, 1.0, 1.0],
        "command": "reference --dataset yacht_0",
        "wall": 13.0,
        "phases": table,
        "iterations": iterations,
        "gradients_per_iteration": gradients,
        "floor": floor,
        "ratios": ratios,
        "compilations": 3,
        "largest": [["jit(step_all)", 3.0]],
    }
    text = profile.printed(result)
    assert "| writes of kept draws (estimated) | 1.0 | 8 % |" in text
    assert "| compile | 4.0 | 31 % |" in text
    assert "tuning iteration / floor 3.0x; kept iteration / floor 3.0x" in text
    assert "gradients per iteration of a chain: 20 tuning, 24 kept" in text
    iterations["writes_estimated"] = False
    assert "(estimated)" not in profile.printed(result)


def test_gradients_per_iteration(profile):
    from bnnkit.inference import mclmc

    per_step = mclmc.GRADIENTS_PER_STEP
    assert profile.gradients_per_iteration("mclmc", {"steps_per_iteration": 4}, []) == {
        "tuning": 4 * per_step,
        "kept": 4 * per_step,
    }
    default = mclmc.DEFAULT_STEPS_PER_ITERATION[False] * per_step
    assert profile.gradients_per_iteration("mclmc", {"steps_per_iteration": None}, [])["kept"] == (
        default
    )
    with pytest.raises(SystemExit, match="adjusted"):
        profile.gradients_per_iteration("mclmc", {"adjusted": True}, [])
    # One chain logs a number; several, one per chain, and the longest sets the pace.
    log = [{"burn_in": True, "num_leapfrog": n} for n in (12, [3, 30], [8, 10])]
    log += [{"burn_in": False, "num_leapfrog": n} for n in ([16, 16], [16, 15])]
    assert profile.gradients_per_iteration("hmc", {}, log) == {"tuning": 12, "kept": 16}
