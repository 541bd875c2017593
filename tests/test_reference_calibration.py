"""The pure parts of ``benchmarks/reference_calibration.py``: the ranking a candidate reference
gives the methods against the truth's, and the table that crosses it with the verdict."""

from __future__ import annotations

import doctest

import pytest


@pytest.fixture(scope="module")
def calibration(benchmark_script):
    return benchmark_script("reference_calibration")


def test_examples_in_its_docstrings(calibration):
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    assert doctest.testmod(calibration, optionflags=flags).failed == 0


def test_a_candidate_ranks_as_the_truth_only_with_the_same_order_and_top(calibration):
    truth = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}
    same = calibration.ranks_as_truth(truth, {k: 10 * v for k, v in truth.items()}, 0.8)
    assert same["tau"] == pytest.approx(1.0) and same["ranks_as_truth"]
    # One swap among five methods: τ = (10 - 2 · 1) / 10 = 0.8, and the top is kept.
    swapped = calibration.ranks_as_truth(truth, {**truth, "d": 5.5}, 0.8)
    assert swapped["tau"] == pytest.approx(0.8) and swapped["ranks_as_truth"]
    # The same τ with the top two swapped: the closest method differs, so it does not.
    top = calibration.ranks_as_truth(truth, {**truth, "a": 2.5}, 0.8)
    assert top["tau"] == pytest.approx(0.8) and top["top_candidate"] == "b"
    assert not top["ranks_as_truth"]


def test_a_pair_closer_than_the_truths_floor_is_not_asked_of_a_candidate(calibration):
    truth = {"a": 1.0, "b": 1.05, "c": 2.0, "d": 3.0}
    # a and b are 0.05 apart, below the floor 0.1: swapping them and the top is no error ...
    swapped = {"a": 1.1, "b": 1.0, "c": 2.0, "d": 3.0}
    found = calibration.ranks_as_truth(truth, swapped, 0.8, floor=0.1)
    assert found["resolved_pairs"] == 5 and found["tau"] == pytest.approx(1.0)
    assert found["ranks_as_truth"] and found["top_candidate"] == "b"
    # ... though the strict reading counts it (τ-b (5 - 1) / 6, another closest method).
    assert found["strict"]["tau"] == pytest.approx(4 / 6) and not found["strict"]["ranks_as_truth"]
    # A resolved pair out of order is: c and d are 1.0 apart.
    crossed = calibration.ranks_as_truth(truth, {**truth, "c": 3.5}, 0.8, floor=0.1)
    assert crossed["tau"] == pytest.approx((4 - 1) / 5) and not crossed["ranks_as_truth"]


def test_the_table_crosses_the_verdict_with_the_ranking(calibration):
    def candidate(verdict, ranks):
        return {
            "budget": 1.0,
            "verdict": verdict,
            "tau": 1.0 if ranks else 0.2,
            "top_truth": "a",
            "top_candidate": "a",
            "ranks_as_truth": ranks,
            "strict": {"tau": 1.0 if ranks else 0.2, "ranks_as_truth": False},
        }

    method = {"wasserstein_1": 0.5, "floor": {"wasserstein_1": 0.1}, "lpd_difference": -0.2}
    results = [
        {
            "dataset": "yacht_0",
            "methods": {"a": method},
            "candidates": [
                candidate("reproducible", True),
                candidate("certified", False),
                candidate("not a reference", True),
            ],
        }
    ]
    text = calibration.table(results)
    assert "| reproducible or better | 1 | 1 |" in text
    assert "| not a reference | 1 | 0 |" in text
    assert 'precision of "reproducible or better": 0.50' in text
    # The strict reading, where no candidate ranks as the truth, follows.
    assert 'precision of "reproducible or better": 0.00' in text.split("Strictly")[1]
    assert "| yacht_0 | a | 0.5 | 0.1 | -0.200 |" in text


def test_problem_flags_become_problem_settings(calibration):
    settings = calibration.problem_settings("--weight-decay 1 --prior laplace:scale=0.1")
    assert settings == {"weight_decay": 1.0, "prior": "laplace:scale=0.1"}


def test_studies_combine_by_split_and_budget(calibration):
    def study(splits, budgets, names):
        results = [
            {
                "dataset": name,
                "methods": {"a": {"from": splits}},
                "candidates": [{"budget": b, "from": splits} for b in budgets],
            }
            for name in names
        ]
        return {"args": {"splits": splits, "budgets": budgets}, "results": results}

    first = study([1], [1.0, 0.5], ["yacht_1", "boston_1"])
    low = study([1, 2], [0.1, 0.5], ["yacht_1", "yacht_2"])
    found = calibration.combined([first, low])
    assert [r["dataset"] for r in found["results"]] == ["yacht_1", "boston_1", "yacht_2"]
    yacht = found["results"][0]
    # The first study's truth and its candidates; a budget both ran is taken once, from it.
    assert yacht["methods"]["a"]["from"] == [1]
    assert [(c["budget"], c["from"]) for c in yacht["candidates"]] == [
        (1.0, [1]),
        (0.5, [1]),
        (0.1, [1, 2]),
    ]
    assert found["args"] == {"splits": [1, 2], "budgets": [1.0, 0.5, 0.1]}
