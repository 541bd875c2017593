"""Runs that extend themselves until their verdict reaches a level: ``until`` with ``max_time``.

A full-batch sampler's run with ``until`` (``bnnkit hmc ... --until reproducible --max-time
2h``) first runs its ``num_iterations``. While its verdict (:mod:`bnnkit.metrics.levels`, the
one ``bnnkit evaluate`` gives) is below that level, it runs another block, which is exactly
the call ``--resume`` with a larger ``--num-iterations`` makes
(:func:`bnnkit.runs.loop.run_block` with ``resume=True`` and the larger ``num_iterations``), so
the samples are those of one longer run, bit for bit. It ends when the verdict reaches the
level, or when ``max_time`` has passed in this call, and says which:

- "verdict reproducible after N iterations" (or certified: the level it reached), or
- "time budget of 30 min ended at N iterations, verdict not a reference:", and what failed,
  as a block says it (below). A budget that ends inside a block stops the run after the unit
  it ends in, its state saved (status "stopped"); ``--resume --until LEVEL`` with a new budget
  goes on.

Each block that does not end the run prints a few lines of at most 80 columns
(:func:`block_summary`): its iterations and kept draws per chain, its verdict and the first
problem of each level that failed, its divergences, its seconds and the length of the next
block.

The verdict is the one ``bnnkit evaluate`` gives (:func:`bnnkit.runs.verdict.of_stored_run`):
the kept samples are read back and predict the test set, and the levels judge them.

**Block size.** The kept iterations grow by half each block: with B burn-in iterations and K
kept, the next block runs to B + ⌈1.5 K⌉. Geometric growth keeps the number of verdicts
logarithmic in the length the run needs (each verdict reads and predicts with every kept
sample, so its cost grows with the run), and stops at most half a block's worth past the
length at which the verdict would first reach the level. A chain's ESS grows linearly with the
kept iterations, so a run that is short by a factor f needs about log(f)/log(1.5) blocks.

**Cost of the verdict.** Each block records its seconds of sampling and of judging
(``blocks`` in ``run.json``'s ``until_converged``, the name runs have stored it under). Judging
costs S forward passes over the test set for S kept samples (and those of the run's own
ensemble), against the L leapfrog steps (each a full-batch gradient) of each of the block's
iterations.

A resumed run (``resume=True``) continues to the larger of ``num_iterations`` and the
iterations its last block asked for, then judges and extends as above.
"""

from __future__ import annotations

import dataclasses
import math
import os
import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from bnnkit import distributed
from bnnkit import problem as problem_lib
from bnnkit.inference.base import IterationSettings
from bnnkit.metrics.levels import Verdict, reaches
from bnnkit.runs import verdict as run_verdict
from bnnkit.runs.directory import RunDir
from bnnkit.runs.progress import duration

#: Each block's kept iterations are this many times the last's (see the module's docstring).
GROWTH = 1.5
#: Columns of the lines a block and the outcome print.
WIDTH = 80


def next_length(num_iterations: int, num_burn_in: int) -> int:
    """The ``num_iterations`` of the next block: the kept iterations grown by half.

    Example:
        >>> next_length(300, 100), next_length(2, 1)
        (400, 3)
    """
    kept = num_iterations - num_burn_in
    return num_burn_in + max(kept + 1, math.ceil(GROWTH * kept))


def _stored_target(rundir: RunDir, config: IterationSettings) -> int:
    """The iterations the stored run's last block asked for (0 when there is no run)."""
    if not rundir.run_file.is_file():
        return 0
    record = rundir.read_record()
    stored = type(config).current_names(record.get("method_config", {}))
    return int(stored.get("num_iterations", 0))


def _judge(rundir: RunDir, built: problem_lib.Problem, kept: int) -> tuple[Verdict | None, float]:
    """The verdict on the run so far and its seconds (``None`` with fewer than 4 kept samples
    per chain, where the levels have nothing to work on)."""
    if kept < 4:
        return None, 0.0
    return run_verdict.of_stored_run(rundir, built)


def verdict_brief(verdict: Verdict | None, kept: int) -> list[str]:
    """The verdict in short lines: its outcome with each level's status, then the first problem
    of each level that failed; ``bnnkit evaluate`` gives every figure.

    Example:
        >>> from bnnkit.metrics.findings import Finding
        >>> from bnnkit.metrics.levels import verdict
        >>> found = verdict({"L0": Finding("pass"), "L1": Finding("fail", ("chain 1 drifts",))})
        >>> for line in verdict_brief(found, 200):
        ...     print(line)
        verdict reproducible (L0 pass, L1 FAIL)
        L1: chain 1 drifts
        >>> verdict_brief(None, 3)
        ['3 kept iterations per chain are too few to judge']
    """
    if verdict is None:
        return [f"{kept:,} kept iterations per chain are too few to judge"]
    statuses = ", ".join(
        f"{name} {'pass' if found.passed else 'FAIL'}" for name, found in verdict.findings.items()
    )
    lines = [f"verdict {verdict.outcome} ({statuses})"]
    for name in verdict.failed:
        found = verdict.findings[name]
        first = found.problems[0] if found.problems else found.why
        lines.append(f"{name}: {first}")
    return lines


def short_lines(*lines: str) -> str:
    """``lines`` wrapped to :data:`WIDTH` columns, each continuation indented by two spaces.

    Example:
        >>> print(short_lines("block 1: 20 iterations", "  " + "word " * 20))
        block 1: 20 iterations
          word word word word word word word word word word word word word word word
          word word word word word
    """
    out: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        out += textwrap.wrap(
            line, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        )
    return "\n".join(out)


def block_summary(
    number: int,
    done: int,
    kept: int,
    verdict: Verdict | None,
    *,
    sampled: float,
    judged: float,
    following: int,
    divergent: tuple[int, int, int] | None = None,
) -> str:
    """What a block that did not end the run prints: lines of at most :data:`WIDTH` columns
    (how far the run got; the verdict in brief, :func:`verdict_brief`; its divergences,
    :func:`divergence_line`; the block's seconds and the next length).

    Example:
        >>> print(block_summary(2, 1_200, 1_000, None, sampled=45.3, judged=1.2,
        ...                     following=1_700))
        block 2: 1,200 iterations, 1,000 kept per chain
          1,000 kept iterations per chain are too few to judge
          sampled in 45 s, judged in 1 s; extending to 1,700 iterations
    """
    return short_lines(
        f"block {number}: {done:,} iterations, {kept:,} kept per chain",
        *(f"  {line}" for line in verdict_brief(verdict, kept)),
        *(f"  {line}" for line in divergence_line(divergent)),
        f"  sampled in {duration(sampled)}, judged in {duration(judged)}; extending to "
        f"{following:,} iterations",
    )


def divergences(rundir: RunDir) -> tuple[int, int]:
    """Divergent transitions and all transitions after burn-in so far, all chains together,
    from the run's log (``(0, 0)`` for a sampler that logs none)."""
    divergent = transitions = 0
    for line in rundir.read_log():
        if line.get("burn_in") or "divergent" not in line:
            continue
        flags = np.atleast_1d(np.asarray(line["divergent"]))
        divergent += int(np.sum(flags))
        transitions += int(flags.size)
    return divergent, transitions


def divergence_line(divergent: tuple[int, int, int] | None) -> list[str]:
    """A block's divergences, ``(after burn-in so far, transitions so far, before the block)``,
    as one line where there are any: a longer run with more of them is no better reference,
    so an extension says so at each block.

    Example:
        >>> divergence_line((7_126, 80_024, 10))
        ['divergences after burn-in: 7,126 of 80,024 transitions (8.9 %), 7,116 in this block']
        >>> divergence_line((0, 80_024, 0)), divergence_line(None)
        ([], [])
    """
    if divergent is None or not divergent[0] or not divergent[1]:
        return []
    total, transitions, before = divergent
    return [
        f"divergences after burn-in: {total:,} of {transitions:,} transitions "
        f"({100 * total / transitions:.1f} %), {total - before:,} in this block"
    ]


def extend_until(
    problem: problem_lib.Problem,
    config: IterationSettings,
    run_dir: str | os.PathLike,
    *,
    run_block: Callable[..., Any],
    deadline: float,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log_every: int | None = None,
    shard: str = "auto",
    on_unit: Callable[[int, dict], None] | None = None,
) -> Any:
    """Run ``config`` on the built ``problem`` in blocks until its verdict reaches the level
    ``config.until`` or ``deadline`` (a :func:`time.monotonic` time) passes (see the module's
    docstring). Every block and every verdict runs on ``problem`` as given, never rebuilt.

    ``run_block`` runs one block (:func:`bnnkit.runs.loop.run_block`, which the driver passes
    in: the driver calls this module, so this module does not import the driver).

    Returns:
        The last block's :class:`~bnnkit.runs.loop.RunResult`, its ``seconds`` those of all
        blocks, with ``until_converged``: ``outcome`` (lines of at most 80 columns),
        ``until`` (the level asked), ``holds`` (whether the verdict reached it), ``reached``
        (the verdict's outcome), ``blocks`` (per block: ``iterations`` done, ``seconds`` of
        sampling, ``verdict_seconds``, ``verdict``) and the last ``verdict``
        (:class:`~bnnkit.metrics.levels.Verdict`); the same is stored in ``run.json`` under
        ``until_converged`` (without the verdict, which ``bnnkit evaluate`` gives).
    """
    rundir = RunDir(run_dir)
    target = _first_target(rundir, config, resume=resume)
    blocks: list[dict[str, Any]] = []
    seconds = 0.0
    divergent_before = 0
    options = dict(
        progress=progress, log_every=log_every, shard=shard, on_unit=on_unit, deadline=deadline
    )
    while True:
        block = dataclasses.replace(config, num_iterations=target)
        result = run_block(problem, block, run_dir, resume=resume, overwrite=overwrite, **options)
        resume, overwrite = True, False  # every later block continues this run
        seconds += result.seconds
        done, kept, verdict, holds, divergent, judged_block = _judged(
            rundir, problem, result, target, config
        )
        blocks.append(judged_block)
        out_of_time = result.stopped is not None or distributed.first_says(
            time.monotonic() >= deadline
        )
        if holds or out_of_time:
            break
        following = next_length(target, config.num_burn_in)
        if progress and distributed.is_writer():
            lines = _block_lines(
                len(blocks), judged_block, kept, verdict, following, (*divergent, divergent_before)
            )
            print(lines, flush=True)
        divergent_before = divergent[0]
        target = following
    summary = {
        "outcome": _outcome(holds, verdict, done, kept, config, (*divergent, divergent_before)),
        "until": config.until,
        "holds": holds,
        "reached": None if verdict is None else verdict.outcome,
        "max_time": config.max_time,
        "growth": GROWTH,
        "blocks": blocks,
    }
    record = _record_summary(rundir, result.record, summary)
    return dataclasses.replace(
        result, record=record, seconds=seconds, until_converged={**summary, "verdict": verdict}
    )


def _first_target(rundir: RunDir, config: IterationSettings, *, resume: bool) -> int:
    """The ``num_iterations`` of the first block: ``config``'s, or for a resume the larger of
    it and the iterations the stored run's last block asked for (as process 0 reads them)."""
    target = config.num_iterations
    if resume:
        stored = distributed.first_decides(lambda: _stored_target(rundir, config))
        target, _ = distributed.from_first(max(target, stored or 0), None, None)
    return target


def _judged(
    rundir: RunDir,
    problem: problem_lib.Problem,
    result: Any,
    target: int,
    config: IterationSettings,
) -> tuple[int, int, Verdict | None, bool, tuple[int, int], dict[str, Any]]:
    """What a block ended at and the verdict on the run so far: the iterations done and kept
    per chain, the verdict, whether it reached ``config.until`` (as process 0 says), the
    divergences after burn-in so far with the transitions, and the block as ``run.json``
    records it."""
    done = (result.record.get("stopped") or {}).get("units_done", target)
    kept = done - config.num_burn_in
    verdict, judged = _judge(rundir, problem, kept) if distributed.is_writer() else (None, 0.0)
    holds = distributed.first_says(
        verdict is not None and reaches(verdict.outcome, str(config.until))
    )
    divergent = divergences(rundir) if distributed.is_writer() else (0, 0)
    block = {
        "iterations": done,
        "seconds": result.seconds,
        "verdict_seconds": judged,
        "verdict": None if verdict is None else verdict.outcome,
        "divergent": divergent[0],
    }
    return done, kept, verdict, holds, divergent, block


def _block_lines(
    number: int,
    block: dict[str, Any],
    kept: int,
    verdict: Verdict | None,
    following: int,
    divergent: tuple[int, int, int],
) -> str:
    """:func:`block_summary` of block ``number``, as :func:`_judged` recorded it."""
    return block_summary(
        number,
        block["iterations"],
        kept,
        verdict,
        sampled=block["seconds"],
        judged=block["verdict_seconds"],
        following=following,
        divergent=divergent,
    )


def _outcome(
    holds: bool,
    verdict: Verdict | None,
    done: int,
    kept: int,
    config: IterationSettings,
    divergent: tuple[int, int, int],
) -> str:
    """How the run ended, in lines of at most :data:`WIDTH` columns: the level its verdict
    reached, or that the time budget ended first and what failed (:func:`verdict_brief`,
    :func:`divergence_line`)."""
    if holds:
        return short_lines(f"verdict {verdict.outcome} after {done:,} iterations")
    reached = "" if verdict is None else f", verdict {verdict.outcome}"
    return short_lines(
        f"time budget of {duration(config.max_time)} ended at {done:,} iterations{reached} "
        f"(asked: {config.until}):",
        *(f"  {line}" for line in verdict_brief(verdict, kept)[1:] or verdict_brief(None, kept)),
        *(f"  {line}" for line in divergence_line(divergent)),
    )


def _record_summary(rundir: RunDir, record: dict, summary: dict[str, Any]) -> dict:
    """``run.json`` with ``summary`` under ``until_converged``, written by process 0 under the
    lock (the other processes keep ``record``)."""
    with distributed.first_holds(rundir.lock):
        if distributed.is_writer():
            record = {**rundir.read_record(), "until_converged": summary}
            rundir.write_record(record)
    return record
