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
    # The remedies as the verdict stores them; the reference command has no flag for
    # energy_var_end or the adjusted switch, so it prints neither.
    levels = {
        "failed": ["L0", "L1"],
        "L0": {
            "remedies": [
                {"changes": [["adjusted", "on"], ["sampler", "nuts"]]},
                {"changes": [["energy_var_end", "smaller"], ["num_tuning", "longer"]]},
            ]
        },
        "L1": {"remedies": [{"changes": [["num_tuning", "longer"], ["num_samples", "larger"]]}]},
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


def test_a_change_passes_for_a_level_it_made_pass_on_half_its_splits(advice):
    printed = {"printed_by": ["L1", "L3"], "raised_verdict": True}
    results = {
        "a": {"changes": {"a larger num_samples": {**printed, "passed_after": ["L3"]}}},
        "b": {"changes": {"a larger num_samples": {**printed, "passed_after": []}}},
        "c": {
            "changes": {
                "sampler nuts": {"printed_by": ["L0"], "passed_after": [], "raised_verdict": False}
            }
        },
    }
    lines = advice.table(results).splitlines()
    assert "| a larger num_samples | L1 | 2 | 0 | 2 | no |" in lines
    assert "| a larger num_samples | L3 | 2 | 1 | 2 | yes |" in lines
    assert "| sampler nuts | L0 | 1 | 0 | 0 | no |" in lines
