"""A verdict leaves out the changes measured not to help runs of its kind
(:mod:`bnnkit.metrics.measured_advice`), on the command line and from Python, and says what
was measured where nothing is left; a verdict stored before the measurement prints as before."""

from __future__ import annotations

from bnnkit.commands.advice import line
from bnnkit.metrics.findings import Finding, Remedy
from bnnkit.metrics.levels import Verdict
from bnnkit.metrics.measured_advice import NOTHING_MEASURED_HELPS, unhelpful

ADJUSTED = Remedy("a Metropolis-adjusted sampler", (("adjusted", "on"), ("sampler", "nuts")))
LONGER = Remedy("a longer burn-in", (("num_tuning", "longer"), ("members", "larger")))
#: Measured, or not a setting of the reference command: nothing of it is printed.
STARTED = Remedy("an ensemble's start", (("num_tuning", "longer"), ("init_checkpoint", "other")))
DRAWS = Remedy("more draws", (("num_samples", "larger"),))


def stored(measured: dict[str, tuple[tuple[str, str], ...]]) -> dict:
    """A reference's stored verdict, L0 and L1 failed with the remedies they print."""
    findings = {
        "L0": Finding("fail", remedies=(ADJUSTED,), soft=True),
        "L1": Finding("fail", remedies=(LONGER, STARTED, DRAWS)),
        "L2": Finding("pass"),
        "L3": Finding("pass"),
    }
    verdict = Verdict("not a reference", findings, {}, measured)
    return {**verdict.to_dict(), "command": "reference"}


def test_the_reference_of_a_learned_noise_leaves_out_what_was_measured():
    measured = unhelpful("reference", learned_noise=True)
    printed = line(stored(measured))
    assert "--sampler nuts" not in printed and "--num-samples" not in printed
    # More members were not measured: that remedy stays, without the measured change.
    assert "to do: a longer burn-in: a larger --members" in printed
    assert "an ensemble's start" not in printed
    assert NOTHING_MEASURED_HELPS not in printed


def test_nothing_left_says_what_was_measured():
    everything = (*ADJUSTED.changes, *LONGER.changes, *STARTED.changes, *DRAWS.changes)
    printed = line(stored({"L0": everything, "L1": everything}))
    assert printed.endswith("to do: " + NOTHING_MEASURED_HELPS)


def test_a_verdict_stored_before_the_measurement_prints_every_remedy():
    found = stored({})
    del found["unhelpful"]
    printed = line(found)
    assert "--sampler nuts" in printed and "a larger --num-samples" in printed


def test_only_the_measured_kind_of_run_is_filtered():
    assert unhelpful("reference", learned_noise=False) == {}
    assert unhelpful("mclmc", learned_noise=True) == {}
    assert unhelpful(None, learned_noise=True) == {}


def test_a_change_measured_for_one_level_stays_for_another():
    # More draws did not make L1 pass, but they did make L3 pass: printed for L3 only.
    findings = {
        "L1": Finding("fail", remedies=(DRAWS,)),
        "L3": Finding("fail", remedies=(DRAWS,)),
    }
    measured = unhelpful("reference", learned_noise=True)
    verdict = Verdict("not a reference", findings, {}, measured)
    assert verdict.advice() == ["more draws: a larger num_samples"]
    assert Verdict("not a reference", {"L1": findings["L1"]}, {}, measured).advice() == [
        NOTHING_MEASURED_HELPS
    ]


def test_halves_that_disagree_are_advised_more_members_not_more_draws():
    # L2's remedy names both; twice the draws made L2 pass on 1 of 3 splits, twice the
    # members on 3 of 3 (benchmarks/results/xeon/advice_followed_precision3.md).
    from bnnkit.metrics.halves import MORE_CHAINS_OR_DRAWS

    findings = {"L2": Finding("fail", remedies=(MORE_CHAINS_OR_DRAWS,))}
    measured = unhelpful("reference", learned_noise=True)
    printed = line(
        {**Verdict("not a reference", findings, {}, measured).to_dict(), "command": "reference"}
    )
    assert "a larger --members" in printed and "--num-samples" not in printed
