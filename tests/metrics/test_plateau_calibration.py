"""The calibration cases of levels 2 and 3: the default references of ``benchmarks/
reference_calibration.py`` judged again by the code's thresholds.

Each case is a default reference (at its full budget or a share of it down to a twentieth,
under the prior its study names) on a split of a small UCI set, stored with its levels'
statuses, level 2's distances, level 3's figures and whether it ranks six cheap
methods as a 16-member long reference does: Kendall's τ ≥ 0.8 over the pairs the long
reference resolves (further apart than its own half-to-half floor) and a closest method within
that floor of its closest (``ranks_as_truth`` of ``benchmarks/reference_calibration.py``).
Two properties are checked on every recorded case, so that a threshold moved without the table
fails here:

- levels 2 and 3 judged again from their stored figures (:func:`bnnkit.metrics.halves.judge`,
  :func:`bnnkit.metrics.plateau.judge`), with the other levels as stored, give the verdict the
  table records (the table is this code's);
- "reproducible or better" has a precision of at least 0.9 against "ranks as the truth", the
  verdict's promise (docs/uci-benchmark.md, "Does the verdict say what a reference is for?").

No tolerance is tuned here: the verdicts are deterministic functions of the stored figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bnnkit.metrics import levels

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "xeon"


def cases() -> list[tuple[str, dict]]:
    """Every candidate of the calibration results that stores its levels."""
    found = []
    for path in sorted(RESULTS.glob("reference_calibration*.json")):
        for result in json.loads(path.read_text())["results"]:
            for candidate in result["candidates"]:
                if candidate.get("plateau") and candidate.get("levels"):
                    found.append((f"{result['dataset']}@{candidate['budget']:g}", candidate))
    return found


CASES = cases()


@pytest.fixture(scope="module")
def judged_again(benchmark_script):
    """The candidate's verdict with levels 2 (where its distances are stored) and 3 judged again
    from their figures, as the study's ``--rejudge`` judges it."""
    calibration = benchmark_script("reference_calibration")
    return calibration.verdict_again


def test_there_are_calibration_cases():
    assert len(CASES) >= 15


@pytest.mark.parametrize(("name", "candidate"), CASES, ids=[n for n, _ in CASES])
def test_the_table_is_this_codes_verdict(name, candidate, judged_again):
    again = judged_again(candidate)
    if candidate.get("halves"):
        assert again["levels"]["L2"]["status"] == candidate["levels"]["L2"]["status"], name
    assert again["verdict"] == candidate["verdict"], name


def test_reproducible_ranks_as_the_truth(judged_again):
    called = [c for _, c in CASES if levels.reaches(judged_again(c)["verdict"], "reproducible")]
    right = sum(c["ranks_as_truth"] for c in called)
    assert called, "no case is called reproducible"
    assert right / len(called) >= 0.9, f"precision {right}/{len(called)}"
