"""Runs that extend themselves until every chain mixes: ``until_converged`` with ``max_time``.

A full-batch sampler's run with ``until_converged`` (``bnnkit hmc ... --until-converged
--max-time 2h``) first runs its ``num_iterations``. While the within-chain verdict fails, it runs
another block, which is exactly the call ``--resume`` with a larger ``--num-iterations`` makes
(:func:`bnnkit.runs.loop.run_block` with ``resume=True`` and the larger ``num_iterations``), so
the samples are those of one longer run, bit for bit. It ends when each chain has mixed, or when
``max_time`` has passed in this call, and says which:

- "converged within each chain after N iterations" (the verdict's level is ``converged`` or
  ``mixed-multimodal``: every chain passes the within-chain checks of
  :mod:`bnnkit.metrics.within_chain`; chains in different modes are a valid reference for the
  model average and are not extended further), or
- "time budget of 30 min ended at N iterations; the within-chain verdict still fails: ...".
  A budget that ends inside a block stops the run after the unit it ends in, its state saved
  (status "stopped"); ``--resume --until-converged`` with a new budget goes on.

The verdict is the one ``bnnkit evaluate`` gives (:func:`bnnkit.runs.verdict.of_stored_run`):
the kept samples are read back, predict the test set, and each chain is judged on its own.

**Block size.** The kept iterations grow by half each block: with B burn-in iterations and K
kept, the next block runs to B + ⌈1.5 K⌉. Geometric growth keeps the number of verdicts
logarithmic in the length the run needs (each verdict reads and predicts with every kept
sample, so its cost grows with the run), and stops at most half a block's worth past the
length at which the verdict would first hold. The within-chain ESS grows linearly with the kept
iterations, so a run that is short by a factor f needs about log(f)/log(1.5) blocks.

**Cost of the verdict.** Each block records its seconds of sampling and of judging
(``blocks`` in ``run.json``'s ``until_converged``). Judging costs S forward passes over the test
set for S kept samples and the diagnostics of :mod:`bnnkit.metrics.convergence`, against the
L leapfrog steps (each a full-batch gradient) of each of the block's iterations.

A resumed run (``resume=True``) continues to the larger of ``num_iterations`` and the
iterations its last block asked for, then judges and extends as above.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from typing import Any

from bnnkit import distributed
from bnnkit import problem as problem_lib
from bnnkit.inference.base import IterationSettings
from bnnkit.metrics.convergence import chain_line
from bnnkit.runs import verdict as run_verdict
from bnnkit.runs.directory import RunDir
from bnnkit.runs.progress import duration

#: Each block's kept iterations are this many times the last's (see the module's docstring).
GROWTH = 1.5


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


def _judge(rundir: RunDir, built: problem_lib.Problem,
           kept: int) -> tuple[dict[str, Any] | None, float]:
    """The verdict on the run so far and its seconds (``None`` with fewer than 4 kept samples
    per chain, where even the between-chain checks have nothing to work on)."""
    if kept < 4:
        return None, 0.0
    return run_verdict.of_stored_run(rundir, built)


def _failing(verdict: dict[str, Any] | None, kept: int) -> str:
    """Why the within-chain verdict fails, in a few words per chain."""
    if verdict is None:
        return f"{kept} kept iterations per chain are too few to judge"
    failing = [c for c in verdict.get("within") or () if not c["mixed"]]
    if not failing:
        return verdict["summary"]
    return "; ".join(f"chain {c['chain']}: {chain_line(c)}" for c in failing)


def until_converged(problem: problem_lib.ProblemConfig | None, config: IterationSettings,
                    run_dir: str | os.PathLike, *, run_block: Callable[..., Any],
                    deadline: float, resume: bool = False,
                    overwrite: bool = False, progress: bool = True,
                    log_every: int | None = None, shard: str = "auto",
                    on_unit: Callable[[int, dict], None] | None = None) -> Any:
    """Run ``config`` in blocks until each chain mixes or ``deadline`` (a
    :func:`time.monotonic` time) passes (see the module's docstring).

    ``run_block`` runs one block (:func:`bnnkit.runs.loop.run_block`, which the driver passes
    in: the driver calls this module, so this module does not import the driver).

    Returns:
        The last block's :class:`~bnnkit.runs.loop.RunResult`, its ``seconds`` those of all
        blocks, with ``until_converged``: ``outcome`` (the sentence), ``holds``, ``blocks``
        (per block: ``iterations`` done, ``seconds`` of sampling, ``verdict_seconds``,
        ``level``) and the last ``verdict``; the same is stored in ``run.json`` under
        ``until_converged`` (without the verdict, which ``bnnkit evaluate`` gives).
    """
    rundir = RunDir(run_dir)
    target = config.num_iterations
    if resume:
        stored = distributed.first_decides(lambda: _stored_target(rundir, config))
        target, _ = distributed.from_first(max(target, stored or 0), None, None)
    built = problem_lib.build(problem)
    blocks: list[dict[str, Any]] = []
    seconds = 0.0
    while True:
        block = dataclasses.replace(config, num_iterations=target)
        result = run_block(problem, block, run_dir, resume=resume, overwrite=overwrite,
                           progress=progress, log_every=log_every, shard=shard,
                           on_unit=on_unit, deadline=deadline)
        resume, overwrite = True, False  # every later block continues this run
        seconds += result.seconds
        done = (result.record.get("stopped") or {}).get("units_done", target)
        kept = done - config.num_burn_in
        verdict, judged = (_judge(rundir, built, kept) if distributed.is_writer()
                           else (None, 0.0))
        holds = distributed.first_says(verdict is not None
                                       and run_verdict.within_holds(verdict))
        blocks.append({"iterations": done, "seconds": result.seconds,
                       "verdict_seconds": judged,
                       "level": None if verdict is None else verdict["level"]})
        out_of_time = result.stopped is not None or distributed.first_says(
            time.monotonic() >= deadline)
        if holds or out_of_time:
            break
        following = next_length(target, config.num_burn_in)
        if progress and distributed.is_writer():
            print(f"after {done} iterations {_failing(verdict, kept)} (judged in "
                  f"{judged:.1f} s, sampled in {result.seconds:.1f} s); extending to "
                  f"{following} iterations", flush=True)
        target = following
    if holds:
        outcome = f"converged within each chain after {done} iterations"
        if verdict["level"] == "mixed-multimodal":
            outcome += f" ({verdict['summary']})"
    else:
        outcome = (f"time budget of {duration(config.max_time)} ended at {done} iterations; "
                   f"the within-chain verdict still fails: {_failing(verdict, kept)}")
    summary = {"outcome": outcome, "holds": holds, "max_time": config.max_time,
               "growth": GROWTH, "blocks": blocks}
    record = result.record
    with distributed.first_holds(rundir.lock):
        if distributed.is_writer():
            record = {**rundir.read_record(), "until_converged": summary}
            rundir.write_record(record)
    return dataclasses.replace(result, record=record, seconds=seconds,
                               until_converged={**summary, "verdict": verdict})
