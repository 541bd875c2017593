"""How far a run got when its time budget ended, in one sentence the same for every method.

A run's time budget (``max_time``, or ``until``'s) ends it before it did what it was asked in
two ways: the run stops after the unit in which the budget passed (status "stopped", its state
saved, :meth:`bnnkit.runs.lifecycle.Lifecycle.stop`), or ``until`` ends at a block's last unit
before the verdict reached its level. Either way ``--resume`` continues it, and the
command line ends with the line of :mod:`bnnkit.commands.budget` (exit code 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bnnkit.runs.progress import duration


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def budget_ended(result: Any) -> bool:
    """Whether a :class:`bnnkit.runs.loop.RunResult`'s time budget ended its run: it stopped
    before its last unit, or ``until`` ran out of time before the verdict reached its level."""
    until = result.until_converged
    return result.stopped is not None or (until is not None and not until["holds"])


def progress(
    record: Mapping[str, Any],
    kept: int,
    *,
    max_time: float | None,
    mixed: bool | None = None,
    stage: str | None = None,
) -> str:
    """How far a run got when its time budget ended, in a sentence.

    Args:
        record: the run's ``run.json`` (its ``loop`` and, when stopped, ``stopped``).
        kept: kept units stored so far (each holds a sample of every chain or member).
        max_time: the budget in seconds.
        mixed: with ``until``, whether the verdict reached its level (``False``: the budget
            ended before); ``None`` without it.
        stage: the stage of a recipe of several runs that the budget ended (``"chains"`` of
            a reference), named in the sentence.

    Example:
        >>> record = {"loop": {"kind": "iterations", "num_units": 400, "burn_in": 300,
        ...                    "num_members": 4}, "stopped": {"units_done": 1}}
        >>> progress(record, 0, max_time=15.0)
        'the time budget of 15 s ended after 1 of 400 iterations (burn-in 300), no sample kept yet'
        >>> record["stopped"]["units_done"] = 350
        >>> progress(record, 50, max_time=90.0)
        'the time budget of 1 min 30 s ended after 350 of 400 iterations, 50 kept samples per chain'
    """
    loop = record["loop"]
    total = int(loop["num_units"])
    done = int((record.get("stopped") or {}).get("units_done", total))
    budget = "the time budget" if max_time is None else f"the time budget of {duration(max_time)}"
    where = "" if stage is None else f" in the {stage} stage"
    line = f"{budget} ended{where} after {done} of {total} {loop['kind']}"
    burn_in = int(loop.get("burn_in") or 0)
    if done <= burn_in and loop["kind"] == "iterations":
        line += f" (burn-in {burn_in})"
    if kept == 0:
        line += ", no sample kept yet"
    else:
        who = {"iterations": "chain", "epochs": "member"}.get(loop["kind"], "member")
        per = f" per {who}" if int(loop.get("num_members") or 1) > 1 else ""
        line += f", {_count(kept, 'kept sample')}{per}"
    if mixed is False:
        line += ", before the verdict reached the level asked"
    return line
