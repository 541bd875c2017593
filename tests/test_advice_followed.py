"""The pure parts of ``benchmarks/advice_followed.py``: which printed changes it follows, with
which flags, and how a change's splits are tallied. Nothing here runs a reference."""

from __future__ import annotations

import doctest

import pytest


@pytest.fixture(scope="module")
def advice(benchmark_script):
    return benchmark_script("advice_followed")


def test_examples_in_its_docstrings(advice):
    assert doctest.testmod(advice).failed == 0


def test_the_printed_changes_are_followed(advice):
    # As the reference's verdict records them: the advice lines print only the command's
    # settings (no energy_var_end, burn-in or start folder of its own).
    levels = {
        "failed": ["L0", "L1"],
        "advice": [
            "a Metropolis-adjusted sampler: sampler nuts (a step whose energy error spikes "
            "is rejected)",
            "shorter steps: a longer num_tuning (the energy-variance target was 0.1)",
            "more draws: a longer num_tuning or a larger num_samples",
        ],
        "L0": {
            "remedies": [
                {"helps": "a Metropolis-adjusted sampler"},
                {"helps": "shorter steps"},
            ]
        },
        "L1": {"remedies": [{"helps": "more draws"}]},
    }
    found = advice.printed_changes(levels)
    assert found == {
        "sampler nuts": ["L0"],
        "a longer num_tuning": ["L0", "L1"],
        "a larger num_samples": ["L1"],
    }
    assert [advice.flags_for(change) for change in found] == [
        ["--sampler", "nuts"],
        ["--num-tuning", "1000"],
        ["--num-samples", "400"],
    ]


def test_a_change_passes_when_it_helps_on_half_its_splits(advice):
    helped = {"printed_by": ["L0"], "helped": True, "raised_verdict": True}
    not_helped = {"printed_by": ["L0"], "helped": False, "raised_verdict": False}
    results = {
        "a": {"changes": {"sampler nuts": helped}},
        "b": {"changes": {"sampler nuts": not_helped}},
        "c": {"changes": {"a larger num_samples": not_helped}},
    }
    lines = advice.table(results).splitlines()
    assert "| a larger num_samples | 1 | 0 | 0 | no |" in lines
    assert "| sampler nuts | 2 | 1 | 1 | yes |" in lines
