"""The verdicts of the HMC runs a finding rests on, and which runs a finding may compare: a
finding is only as good as the weakest reference under it, and a run that is not a reference
says nothing about its posterior, so it is left out of a comparison or withholds the verdict.

Each run has one verdict (:mod:`bnnkit.metrics.levels`: certified, reproducible, or not a
reference), and a finding names the weakest (:func:`weakest_verdict`). Results written before
the one verdict hold a run's convergence level instead (converged, mixed-multimodal,
mixed-few-draws, not-mixed): they are read as recorded (:func:`weakest_level`,
:func:`passes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bnnkit.metrics.levels import VERDICTS

#: The level, in results written before the one verdict, of a reference whose chains each
#: mixed and agreed but whose pooled draws gave an ESS below 100 at the worst test point.
FEW_DRAWS = "mixed-few-draws"
#: The level of a run without a verdict (too few kept draws, or results written before the
#: levels were recorded).
UNJUDGED = "not judged"
#: The reference levels on which a finding cannot be assessed, weakest last.
UNASSESSABLE = ("not-mixed", UNJUDGED)
#: Every level a reference could have in results written before the one verdict, best first,
#: with :data:`FEW_DRAWS` between the last two, then "not judged".
RECORDED_LEVELS = ("converged", "mixed-multimodal", FEW_DRAWS, "not-mixed", UNJUDGED)


def weakest_level(levels: Sequence[str | None]) -> str:
    """The weakest of some runs' convergence levels (:data:`RECORDED_LEVELS`; ``None``: a
    run without a verdict, :data:`UNJUDGED`); "" for no run.

    Example:
        >>> weakest_level(["converged", "mixed-multimodal"]), weakest_level([])
        ('mixed-multimodal', '')
        >>> weakest_level(["not-mixed", None]), weakest_level(["converged", FEW_DRAWS])
        ('not judged', 'mixed-few-draws')
    """
    order = RECORDED_LEVELS
    known = [level if level in order else UNJUDGED for level in levels]
    return max(known, key=order.index, default="")


#: The levels' verdict of a run evaluated before the reference levels existed (or without
#: them: too few draws to judge).
NOT_RECORDED = "not recorded"
#: Every levels' verdict a reference can have, best first: those of
#: :data:`bnnkit.metrics.levels.VERDICTS`, then :data:`NOT_RECORDED`.
LEVELS_VERDICTS = (*VERDICTS, NOT_RECORDED)
#: The levels' verdicts that vouch for a reference: another run would reproduce its model
#: average well within the distances the findings compare.
VOUCHED = ("certified", "reproducible")


def weakest_verdict(verdicts: Sequence[str | None]) -> str:
    """The weakest of some runs' reference levels' verdicts (:data:`LEVELS_VERDICTS`;
    ``None``: a run without them, :data:`NOT_RECORDED`); "" for no run.

    Example:
        >>> weakest_verdict(["certified", "reproducible"]), weakest_verdict([])
        ('reproducible', '')
        >>> weakest_verdict(["not a reference", None]), weakest_verdict(["certified"])
        ('not recorded', 'certified')
    """
    order = LEVELS_VERDICTS
    known = [verdict if verdict in order else NOT_RECORDED for verdict in verdicts]
    return max(known, key=order.index, default="")


def passes(row: Mapping[str, Any]) -> bool:
    """Whether a run can carry a finding: its verdict vouches for it (:data:`VOUCHED`); in
    results written before the one verdict (no ``levels``), its recorded ``level`` is not
    :data:`UNASSESSABLE`.

    Example:
        >>> passes({"levels": "reproducible"}), passes({"levels": "not a reference"})
        (True, False)
        >>> passes({"level": "converged"}), passes({"levels": None})
        (True, False)
    """
    if row.get("levels") is not None or "level" not in row:
        return row.get("levels") in VOUCHED
    return weakest_level([row.get("level")]) not in UNASSESSABLE


def judged_temperature_rows(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[float]]:
    """The temperature sweep's rows finding 3 compares, and the temperatures left out: the
    full-batch sampler's rows at T < 1 that do not :func:`pass <passes>` (T = 1 is always
    kept: the finding is measured against it, and its own verdict decides whether it can be).
    When every T < 1 would go, none does: with nothing colder to compare, the finding rests
    on those runs, and their level makes it not assessable.

    Example:
        >>> rows = [{"method": "hmc", "temperature": t, "levels": verdict} for t, verdict in
        ...         ((1.0, "certified"), (0.3, "reproducible"), (0.1, "not a reference"))]
        >>> kept, dropped = judged_temperature_rows(rows)
        >>> [r["temperature"] for r in kept], dropped
        ([1.0, 0.3], [0.1])
    """

    def unjudged(r: Mapping[str, Any]) -> bool:
        return r.get("method") == "hmc" and float(r["temperature"]) != 1.0 and not passes(r)

    colder = {
        float(r["temperature"])
        for r in rows
        if r.get("method") == "hmc" and float(r["temperature"]) != 1.0
    }
    dropped = sorted({float(r["temperature"]) for r in rows if unjudged(r)}, reverse=True)
    if set(dropped) == colder:
        return list(rows), []
    return [r for r in rows if not unjudged(r)], dropped


#: The sweep's priors that finding 4 reports but does not judge: the Gaussian at a third of
#: the base scale s. s is about the fan-in rule's scale for the sweep's networks (σ ≈ 0.09 on
#: the hidden layers of 784-256-256-10, s = 0.1), and a prior three times narrower shrinks
#: each ReLU layer's output by 3, so the prior's networks are near-constant functions: it
#: underfits by construction, before any data are seen. The range judged is s to 3 s for the
#: Gaussian, the fan-in rule, and four other shapes at variance s².
UNJUDGED_PRIORS = ("gaussian_small",)


def judged_prior_rows(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The prior sweep's rows finding 4 compares, and the rows left out because they do not
    :func:`pass <passes>`; rows of :data:`UNJUDGED_PRIORS` are in
    neither (rows without a ``key``, from before the sweep recorded it, are all judged).

    A dataset with fewer than two priors whose chains mixed is left out whole: there is no
    comparison left on it. When that leaves nothing, nothing is left out: the finding then
    rests on those runs, and their level makes it not assessable.

    Example:
        >>> rows = [{"dataset": "a", "key": k, "levels": verdict} for k, verdict in
        ...         (("gaussian", "certified"), ("laplace", "not a reference"),
        ...          ("logistic", "reproducible"))]
        >>> rows.append({"dataset": "b", "key": "gaussian", "levels": "certified"})
        >>> kept, dropped = judged_prior_rows(rows)
        >>> [(r["dataset"], r["key"]) for r in kept]
        [('a', 'gaussian'), ('a', 'logistic')]
        >>> [(r["dataset"], r["key"]) for r in dropped]
        [('a', 'laplace'), ('b', 'gaussian')]
    """
    scored = [r for r in rows if r.get("key") not in UNJUDGED_PRIORS]
    mixed = [r for r in scored if passes(r)]
    counts: dict[str, int] = {}
    for r in mixed:
        counts[r["dataset"]] = counts.get(r["dataset"], 0) + 1
    kept = [r for r in mixed if counts[r["dataset"]] >= 2]
    if not kept:
        return scored, []
    return kept, [r for r in scored if r not in kept]
