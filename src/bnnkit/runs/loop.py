"""The one run driver: any method of ``METHODS`` on a problem, into a run directory.

``run(problem, config, run_dir)`` builds the problem and the method (``config.METHOD`` names it
in :data:`bnnkit.inference.METHODS`), checks everything, and only then creates the directory.
It then advances every member (chain) unit by unit, where a unit is whatever
``config.loop(N)`` says (:class:`~bnnkit.inference.base.Loop`):

- ``iterations``: one ``method.step`` on the full training set (HMC, NUTS); the training set
  is put on the device(s) once, split over several devices with ``shard`` if asked;
- ``epochs``: ``N // batch_size`` minibatch steps of a fresh permutation in one ``lax.scan``
  inside one jitted call (SGD, ensembles, SGMCMC, VI); the last incomplete batch is dropped, so
  every step sees exactly ``batch_size`` examples and the ``N/|B|`` scaling is exact; with
  several devices ``shard`` splits the members, or each minibatch, over them;
- ``chunks``: one step per consecutive chunk of the training set, one pass (Laplace).

Members run in one vmapped step (or one after the other), vmapped under the axis name
:data:`~bnnkit.inference.adaptation.MEMBERS`, over which a method may share statistics between
its chains (ChEES adaptation); the programs that advance them are :mod:`bnnkit.runs.units`'s,
and what the run is made of is built and checked first (:mod:`bnnkit.runs.prepare`). Keys
(:mod:`bnnkit.runs.keys`), the directory's life (lock, "starting", resume, "finished"), the
rules over several processes (:mod:`bnnkit.runs.lifecycle`) and the sampler warnings
(:mod:`bnnkit.runs.tally`) are those :func:`bnnkit.runs.sample` shares.

After each unit, in this order: the posterior ``method.posterior`` returns for each member is
stored through :mod:`bnnkit.posterior.store` when the unit is kept; one log line is appended
(:mod:`bnnkit.runs.unit_outputs`); every ``save_every`` units (and at the end) the full state is
written. A crash between those writes loses at most the units after the last state, which a
resume recomputes identically.

Before any of that, every unit is checked (:func:`bnnkit.runs.divergence.non_finite`): a member
whose loss, log density (anything real its ``Info`` reports) or parameters became NaN or
infinite stops the run with :class:`~bnnkit.runs.divergence.DivergenceError` (exit code 2 on
the command line), naming the unit and what to try; nothing of that unit is stored, so the
directory keeps the last finite state, marked "diverged" (a run that kept nothing yet is
removed). A posterior that is not finite is not stored either.

Example:
    >>> from bnnkit.inference import hmc
    >>> from bnnkit.problem import ProblemConfig
    >>> import tempfile
    >>> result = run(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35),
    ...              hmc.Config(step_size=1e-3, trajectory_len=5e-3, num_iterations=3,
    ...                         num_burn_in=1, num_chains=2),
    ...              tempfile.mkdtemp() + "/run", progress=False)
    >>> result.record["status"], result.run_dir.sample_units()
    ('finished', [1, 2])
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import jax

from bnnkit import distributed, storage
from bnnkit import problem as problem_lib
from bnnkit.entry_points import check_call
from bnnkit.inference.base import Loop, Method, RunSettings
from bnnkit.runs import blocks, faults, lifecycle, sharding
from bnnkit.runs.budget import budget_ended
from bnnkit.runs.directory import RunDir
from bnnkit.runs.divergence import non_finite
from bnnkit.runs.extension import extend_until
from bnnkit.runs.initial import with_chains
from bnnkit.runs.keys import INIT_STREAM, member_keys
from bnnkit.runs.lifecycle import Lifecycle
from bnnkit.runs.prepare import (
    built_problem,
    check_augment,
    initial_params,
    member_init,
    method_module,
    placement_notes,
    resume_or_record,
    source_notes,
)
from bnnkit.runs.progress import ProgressBar
from bnnkit.runs.tally import SamplerTally
from bnnkit.runs.unit_outputs import log_line, metrics_on_test_set, store_posterior
from bnnkit.runs.units import (
    epoch_batch,
    first_batch,
    placed_batch,
    unit_batch,
    unit_function,
)
from bnnkit.runs.verdict import run_spelling
from bnnkit.settings import check_dtype
from bnnkit.threefry_lowering import straight

__all__ = ["RunResult", "run", "run_block"]


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What :func:`run` returns.

    Attributes:
        run_dir: the run directory.
        record: its ``run.json``.
        num_units: units (iterations, epochs, chunks) of the whole run.
        seconds: wall time of the units run by this call (compilation included).
        seconds_per_unit: the same per unit run by this call.
        last_log: the log line of the last unit run.
        warnings: sentences about the run a user should act on (a stuck or unstable
            sampler, a start from a run with another posterior), already shown during the
            run when progress was.
        stopped: why the run stopped before its last unit (its time budget, ``max_time``)
            and where, in a sentence; ``None`` when it ran them all. A stopped run resumes.
        until_converged: with ``until``, what the blocks did
            (:func:`bnnkit.runs.extension.extend_until`): ``outcome`` (a sentence),
            ``holds``, ``blocks`` and the last ``verdict``; ``None`` otherwise.
    """

    run_dir: RunDir
    record: dict
    num_units: int
    seconds: float
    seconds_per_unit: float
    last_log: dict
    warnings: tuple[str, ...] = ()
    units_run: int | None = None  # by this call (fewer than num_units after a resume)
    stopped: str | None = None
    until_converged: dict | None = None

    @property
    def status(self) -> str:
        """``"stopped"`` when the time budget ended the run before it did what it was asked
        (:attr:`stopped`, or ``until`` before the verdict reached its level: ``resume=True``
        continues it), else the status ``run.json`` records (``"finished"``)."""
        return "stopped" if budget_ended(self) else self.record.get("status", "finished")


def run(
    problem: problem_lib.ProblemConfig | problem_lib.Problem | None,
    config: RunSettings,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log_every: int | None = None,
    shard: str = "auto",
    on_unit: Callable[[int, dict], None] | None = None,
) -> RunResult:
    """Run (or resume) the method ``config`` configures on ``problem`` into ``run_dir``.

    Args:
        problem: data, model, likelihood, prior, temperature: a
            :class:`~bnnkit.problem.ProblemConfig`, or a built
            :class:`~bnnkit.problem.Problem` (e.g. :meth:`~bnnkit.problem.Problem.from_arrays`
            on arrays in memory, whose arrays the run stores as ``data.npz``); ``None`` takes
            it from the run the config starts from (Laplace's ``map_run``).
        config: a method's Config (``bnnkit.inference.hmc.Config(...)``, ...).
        run_dir: the run directory (created; an existing non-empty one needs ``resume`` or
            ``overwrite``).
        resume: continue the run stored in ``run_dir`` (only resumable settings may differ).
        overwrite: replace the run stored in ``run_dir``.
        progress: show progress (a bar on a terminal, plain lines otherwise).
        log_every: with plain progress lines, one every this many units (default: every
            10 % of the run or 30 s).
        shard: with several devices, split members (``"chains"``) or the training data
            (``"data"``; each minibatch of a minibatch method) over them; ``"auto"`` picks,
            ``"none"`` uses one device. After :func:`bnnkit.distributed.initialize`, the
            devices are every process's; only process 0 then reads and writes ``run_dir``, and
            the others' ``record`` holds only the status.
        on_unit: called with (unit, log line) after each unit.

    With a full-batch sampler's ``max_time`` the run stops cleanly after the unit at which
    that much wall time has passed in this call (its state saved, status "stopped",
    resumable); with ``until`` it extends itself in blocks until its verdict reaches that level
    or that time ends (:mod:`bnnkit.runs.extension`).

    Returns:
        A :class:`RunResult`.

    Raises:
        ConfigError: any bad input, named in one line, before anything is written.
    """
    check_call("bnnkit.run", locals())
    budget = config.budget()
    deadline = None if budget.max_time is None else time.monotonic() + budget.max_time
    if budget.until is not None:
        # Built here, once: every block and every verdict runs on this one problem.
        return extend_until(
            built_problem(problem, config),
            config,
            run_dir,
            run_block=run_block,
            deadline=deadline,
            resume=resume,
            overwrite=overwrite,
            progress=progress,
            log_every=log_every,
            shard=shard,
            on_unit=on_unit,
        )
    return run_block(
        problem,
        config,
        run_dir,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        log_every=log_every,
        shard=shard,
        on_unit=on_unit,
        deadline=deadline,
    )


def run_block(
    problem: problem_lib.ProblemConfig | problem_lib.Problem | None,
    config: RunSettings,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log_every: int | None = None,
    shard: str = "auto",
    on_unit: Callable[[int, dict], None] | None = None,
    deadline: float | None = None,
) -> RunResult:
    """:func:`run` up to ``config``'s last unit, or until ``deadline`` (a
    :func:`time.monotonic` time) has passed after a unit: the run is then "stopped" there,
    its state saved so that ``--resume`` continues it bit for bit."""
    module = method_module(config)
    sharding.check_mode(shard)
    rundir = RunDir(run_dir)
    # The directory first: cheap, and nothing is built for a run that cannot start there.
    lifecycle.check_target(rundir, resume=resume, overwrite=overwrite)
    config = with_chains(config)
    built = built_problem(problem, config)
    check_dtype(config, built.dtype)  # every real setting as the run computes it
    loop = config.loop(built.dataset.num_train)
    check_augment(built, loop)
    if hasattr(module, "check_problem"):  # a method that needs something of the network
        module.check_problem(built)
    method = module.build(built.log_posterior, config)
    init_params = initial_params(built, config, loop)
    notes = source_notes(config, built.config)
    batch, placements = placed_batch(built, loop, shard)
    init_keys = member_keys(config.seed, INIT_STREAM, loop.num_members)
    first = first_batch(built, loop) if batch is None else batch
    # Jitted here, so that the run's initialisation compiles the trace made for the check below.
    init_all = jax.jit(member_init(method, init_params))
    # Everything the run needs is checked here, by tracing, before the directory is touched.
    template = jax.eval_shape(init_all, init_keys, first)
    found, record = resume_or_record(rundir, built, config, loop, method, template, resume=resume)
    notes = (*notes, *placement_notes(rundir, record, placements))
    with lifecycle.opened(rundir, found, record=record, overwrite=overwrite) as life:
        _store_arrays(life, built)
        return _run_locked(
            life,
            built,
            method,
            config,
            loop,
            lambda: _initial_states(init_all, init_keys, first),
            template,
            batch,
            placements,
            progress=progress and life.writer,
            log_every=log_every,
            on_unit=on_unit,
            notes=notes,
            deadline=deadline,
        )


def _initial_states(init_all: Callable, keys: jax.Array, first: Any) -> Any:
    """``init_all(keys, first)`` (jitted) compiled with Threefry's hash straight
    (:func:`bnnkit.threefry_lowering.straight`): an initialisation is mostly key splits and
    draws, whose loops cost more to compile than its one run gains from them."""
    with straight():
        return init_all(keys, first)


def compile_ahead(built: problem_lib.Problem, config: RunSettings, shard: str = "auto") -> None:
    """Start compiling the block program that :func:`run` of ``config`` on ``built`` will run
    (:func:`bnnkit.runs.blocks.compile_ahead`), before the run it starts from exists: a
    composite calls it for its later stages while its first one runs. The chains' start is
    shaped as the model's initialiser shapes it, which is how a run from another run's
    positions is shaped too; where anything differs, the run compiles its own.

    Does nothing for a method that does not run in blocks or whose chains are not set.
    """
    if getattr(config, "num_chains", 1) is None:
        return
    method = method_module(config).build(built.log_posterior, config)
    loop = config.loop(built.dataset.num_train)
    if not blocks.applies(method, loop):
        return
    batch, placements = placed_batch(built, loop, shard)
    init_all = member_init(method, jax.vmap(built.init_params))
    keys = member_keys(config.seed, INIT_STREAM, loop.num_members)
    template = jax.eval_shape(init_all, keys, batch)
    blocks.compile_ahead(built, method, loop, config, template, batch, placements, for_later=True)


def _store_arrays(life: Lifecycle, built: problem_lib.Problem) -> None:
    """A problem made from arrays in memory: keep them in the run directory (once), so the
    run can be evaluated in another process; ``run.json`` records their sha256."""
    path = life.rundir.path / problem_lib.DATA_FILE
    if built.arrays is not None and life.writer and not path.is_file():
        storage.save_arrays(path, dict(built.arrays))


def _run_locked(
    life: Lifecycle,
    built: problem_lib.Problem,
    method: Method,
    config: RunSettings,
    loop: Loop,
    initial_state: Callable[[], Any],
    template: Any,
    batch,
    placements,
    *,
    progress: bool,
    log_every: int | None,
    on_unit: Callable[[int, dict], None] | None,
    notes=(),
    deadline: float | None = None,
) -> RunResult:
    """The run under its lock, from its starting state (a resume's, or ``initial_state()``)
    unit by unit to its last, or to the unit after which ``deadline`` has passed."""
    # Nothing can refuse the run now: a sampler's block program (the longest compile of a
    # reference's chains) compiles while the chains' start does.
    ahead = blocks.compile_ahead(built, method, loop, config, template, batch, placements)
    batch = epoch_batch(built, loop, batch, placements)
    start, state = _starting_state(life, config, loop, initial_state, template, placements)
    bar = _progress_bar(config, loop, start, progress=progress, log_every=log_every)
    tally = _tally(life, config, loop)
    for note in notes:
        bar.message(f"bnnkit: warning: {note}")

    def after_units(logs: list[dict]) -> None:
        # Units come one at a time, or a block at once (one update of the bar).
        for log in logs:
            tally.add(log)
            warning = tally.news()
            if warning is not None:
                bar.message(f"bnnkit: warning: {warning}")
            if on_unit is not None:
                on_unit(log["iteration"], log)
        bar.update(len(logs), tally.status(logs[-1]))

    drive = blocks.Drive(life, method, config, loop, batch, after_units, deadline)
    t0 = time.perf_counter()
    try:
        if blocks.applies(method, loop):
            log, meta, done, stopped = blocks.run_blocks(drive, state, start, ahead=ahead)
        else:
            log, meta, done, stopped = _unit_by_unit(drive, state, start, built, placements)
    finally:
        bar.close()
    return _result(life, loop, tally, notes, meta, log, start, done, t0, stopped)


def _unit_by_unit(
    drive: blocks.Drive, state: Any, start: int, built: problem_lib.Problem, placements
) -> tuple[dict, dict, int, str | None]:
    """The run's units from ``start``, one dispatch each (epochs, chunks, a method driven
    from the host); returns the last log line, member 0's posterior metadata, the units done
    and why the run stopped before its last (``None``: it did not)."""
    life, method, config, loop, batch = (
        drive.life,
        drive.method,
        drive.config,
        drive.loop,
        drive.batch,
    )
    step_all = unit_function(method, loop, built, config.seed, placements)
    log: dict = {}
    meta: dict = {}
    done = start
    for unit in range(start, loop.num_units):
        t_unit = time.perf_counter()
        state, info, finite = step_all(state, unit, unit_batch(built, loop, unit, batch))
        info, finite = jax.device_get(distributed.fetch((info, finite)))
        # Before anything of this unit is kept: a NaN loss or parameter stops the run.
        broken = non_finite(info, finite)
        if broken is not None:
            raise life.diverged(config, loop, unit, *broken)
        log, meta, save = _record_unit(
            life, built, method, config, loop, unit, state, info, meta, t_unit
        )
        faults.point("unit-done")
        drive.after_units([log])
        done = unit + 1
        stopped = _budget_ended(life, loop, drive.deadline, done, state, saved=save)
        if stopped is not None:
            return log, meta, done, stopped
    return log, meta, done, None


def _starting_state(
    life: Lifecycle,
    config: RunSettings,
    loop: Loop,
    initial_state: Callable[[], Any],
    template: Any,
    placements,
) -> tuple[int, Any]:
    """The units done and the state the run goes on from (a resume's, or ``initial_state()``),
    placed on the devices; the run is then marked "running"."""
    start, state = life.resume_state(template)
    if state is None:
        state = initial_state()
    if placements is not None:
        state = distributed.place(state, placements[0])
    life.begin(start, config, loop)
    return start, state


def _progress_bar(
    config: RunSettings, loop: Loop, start: int, *, progress: bool, log_every: int | None
) -> ProgressBar:
    """The run's progress bar, from ``start`` units done."""
    label = {
        "iterations": config.METHOD.upper(),
        "epochs": f"{config.METHOD} epoch",
        "chunks": f"{config.METHOD} chunk",
    }[loop.kind]
    # A sampler's burn-in tunes its step size, and with it the cost of an iteration.
    return ProgressBar(
        label,
        loop.num_units,
        start,
        enabled=progress,
        log_every=log_every,
        unit_name=loop.kind,
        settle_after=loop.burn_in if loop.kind == "iterations" else 0,
    )


def _tally(life: Lifecycle, config: RunSettings, loop: Loop) -> SamplerTally:
    """The sampler's tally, counted from the run's first unit (a resume's log included)."""
    # A warning's advice names the flags of the command that made the run (a reference's
    # chains: bnnkit reference's), so that each suggestion is one that command takes.
    tally = SamplerTally(
        loop,
        config.METHOD,
        run_spelling(life.rundir, life.record),
        given_step_size=getattr(config, "step_size", None),
    )
    for line in life.rundir.read_log() if life.writer else ():  # counted from its first unit
        tally.add(line)
    return tally


def _record_unit(
    life: Lifecycle,
    built: problem_lib.Problem,
    method: Method,
    config: RunSettings,
    loop: Loop,
    unit: int,
    state: Any,
    info: Any,
    meta: dict,
    t_unit: float,
) -> tuple[dict, dict, bool]:
    """What unit ``unit`` leaves behind, in this order: its posterior when it is kept, its
    log line (test metrics with it every ``eval_every`` units), and every ``save_every`` units
    (and at the end) the state.

    Returns:
        The log line, member 0's posterior metadata so far, and whether the state was saved.
    """
    save = (unit + 1) % loop.save_every == 0 or unit + 1 == loop.num_units
    evaluate = loop.eval_every and ((unit + 1) % loop.eval_every == 0 or unit + 1 == loop.num_units)
    # Over several processes, every one gathers the state at the same units.
    whole = distributed.fetch(state) if loop.keeps(unit) or save or evaluate else state
    if loop.keeps(unit):
        # Process 0 stores it; every process stops if its posterior is not finite.
        stored = distributed.first_decides(
            lambda unit=unit, whole=whole: store_posterior(life, unit, method, whole, config, loop)
        )
        meta = stored if life.writer else meta
    log = log_line(unit, loop, info, time.perf_counter() - t_unit)
    if evaluate:
        log["test"] = metrics_on_test_set(built, method.position(whole))
    if life.writer:
        life.rundir.append_log([log])
    if save:
        life.save_state(whole, unit + 1)
    return log, meta, save


def _budget_ended(
    life: Lifecycle, loop: Loop, deadline: float | None, done: int, state: Any, *, saved: bool
) -> str | None:
    """Why the run stops after ``done`` units, its state saved there so that a resume starts
    exactly there (``None``: it goes on): ``deadline`` passed before its last unit."""
    if (
        deadline is not None
        and done < loop.num_units
        and distributed.first_says(time.monotonic() >= deadline)
    ):
        if not saved:  # so that a resume starts exactly here
            life.save_state(distributed.fetch(state), done)
        return f"the time budget ended after {done} of {loop.num_units} {loop.kind}"
    return None


def _result(
    life: Lifecycle,
    loop: Loop,
    tally: SamplerTally,
    notes,
    meta: dict,
    log: dict,
    start: int,
    done: int,
    t0: float,
    stopped: str | None,
) -> RunResult:
    """Mark the run "finished" (or "stopped" after ``done`` units) and say what it did."""
    seconds = time.perf_counter() - t0
    if stopped is None:
        life.finish(
            **({"posterior_info": meta["info"]} if meta.get("info") else {}), **tally.record()
        )
    else:
        life.stop(stopped, units_done=done)
    warning = tally.warning()
    return RunResult(
        life.rundir,
        life.record,
        loop.num_units,
        seconds,
        seconds / max(done - start, 1),
        log,
        warnings=(*notes, *([] if warning is None else [warning])),
        units_run=done - start,
        stopped=stopped,
    )
