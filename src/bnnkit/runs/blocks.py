"""A sampler's iterations in blocks: many iterations per dispatch, their draws written per block.

A full-batch sampler's iteration (an MCLMC iteration of ten integrator steps, a NUTS
trajectory) on a small network costs a few milliseconds; dispatching it from Python, reading
its statistics back and writing its draw to a file of its own cost as much again. So where a
method says what of its state a draw is (``Method.draw``) and its step is vmapped over the
chains (no ``step_members``), the run driver (:mod:`bnnkit.runs.loop`) runs its iterations in
blocks:

- one compiled program (:func:`block_function`) scans a fixed number of iterations,
  :func:`scan_length`, each behind a ``lax.cond`` on the block's own count, so that blocks of
  every length run the same program: it compiles once, and an iteration computes the same bits
  whatever block it falls in, which is what makes a resume bit-exact wherever it starts. It
  returns every iteration's ``Info``, draw and finiteness;
- a block's length is chosen from the time the blocks before it took, so that one takes about
  :data:`BLOCK_SECONDS`: the first block is one iteration (it compiles), blocks end where
  burn-in does (tuning and kept iterations are timed apart) and where the run does;
- after a block, in this order: its kept draws in one file, ``sample_<first>-<last>.npz``
  (one manifest line, one digest), its log lines in one append, and the state when
  :data:`CHECKPOINT_SECONDS` have passed since the last one (and ``checkpoint_every``
  iterations), at the end, at a stop, and when Ctrl-C or SIGTERM interrupts the next block: a
  resumed run loses at most the block that was running.

The block's program is compiled ahead (:func:`compile_ahead`), in a thread started once the
run can no longer be refused, so that it compiles while the run compiles and starts its
chains (and, for a composite's later stage, while the stages before it run); the first block
then finds it compiled. Both lower it inside :func:`bnnkit.threefry_lowering.straight`: the
hashes of its key splits and draws compile without their loop, the same bits in an iteration
that costs less (``docs/performance.md``, "Threefry's hash without its loop").

A non-finite iteration stops the run as before (:func:`bnnkit.runs.divergence.non_finite`):
the block is run again from its start up to the iteration before, which gives the same bits,
so that its draws and state are kept and the directory holds the last finite state.

Example:
    >>> from bnnkit.inference import mclmc
    >>> from bnnkit.runs.loop import run
    >>> from bnnkit.problem import ProblemConfig
    >>> import tempfile
    >>> result = run(ProblemConfig("yacht_0", "linear", noise_std=0.35),
    ...              mclmc.Config(num_iterations=6, num_burn_in=2, num_chains=2),
    ...              tempfile.mkdtemp() + "/run", progress=False)
    >>> result.run_dir.sample_units(), sorted(result.run_dir.sample_files())
    ([2, 3, 4, 5], [2])
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

from bnnkit import distributed
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, Method, RunSettings
from bnnkit.posterior import store
from bnnkit.runs import faults, manifest
from bnnkit.runs.divergence import finite_members, non_finite
from bnnkit.runs.keys import NOISE_STREAM, member_keys
from bnnkit.runs.lifecycle import Lifecycle
from bnnkit.runs.unit_outputs import finite_posteriors, log_line
from bnnkit.threefry_lowering import straight

#: The wall time a block aims at: short enough that the progress, the time budget and an
#: interrupt are answered within about a second, long enough that a block's dispatch, its
#: read-back and its file cost little beside its iterations.
BLOCK_SECONDS = 1.0
#: The most iterations one block scans (the compiled program's length).
MAX_BLOCK = 64
#: The most bytes of draws one block returns: a large network's blocks are shorter.
MAX_DRAW_BYTES = 1 << 27
#: A state is written after a block once this much wall time has passed since the last one.
CHECKPOINT_SECONDS = 10.0


def applies(method: Method, loop: Loop) -> bool:
    """Whether the run driver runs ``method`` in blocks: a sampler's full-batch iterations,
    vmapped over its chains, whose draw is part of its state and kept at every iteration after
    burn-in (no test metrics between them)."""
    return (
        loop.kind == "iterations"
        and method.draw is not None
        and method.step_members is None
        and loop.keep_every == 1
        and not loop.eval_every
    )


def scan_length(method: Method, template: Any, loop: Loop) -> int:
    """Iterations of the compiled block: :data:`MAX_BLOCK`, fewer where the chains' draws of
    that many iterations pass :data:`MAX_DRAW_BYTES`, and at most the run's.

    Args:
        method: the method (its ``draw``).
        template: the stacked chains' state, or its shapes (``jax.eval_shape``).
        loop: the run's loop.
    """
    draw = jax.eval_shape(method.draw, template)
    size = sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(draw))
    return max(1, min(MAX_BLOCK, MAX_DRAW_BYTES // max(size, 1), loop.num_units))


def block_function(method: Method, loop: Loop, seed: int, length: int) -> Callable:
    """``(state, first, count, batch) -> (state, (infos, draws, finite))``: iterations
    ``first`` to ``first + count - 1`` of every chain in one compiled scan of ``length``.

    Iteration ``u`` of chain ``c`` uses ``fold_in(key_c, u)``, as a run of one iteration per
    dispatch does; the outputs have ``length`` rows, of which the first ``count`` are the
    block's (the rest repeat nothing: their ``Info`` is zeros, their state the last one).
    """
    noise_keys = member_keys(seed, NOISE_STREAM, loop.num_members)
    step = jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS)

    # Jitted so that it is traced once: the shapes of its outputs and the scan's body both
    # take the one trace (tracing an MCLMC iteration is over a second of Python, in the
    # thread that compiles ahead, holding the interpreter's lock). XLA inlines the call; the
    # draws are the same bits as when it was traced twice (docs/performance.md).
    @jax.jit
    def one(state, unit, batch):
        keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
        return step(keys, state, batch)

    def block(state, first, count, batch):
        # The unit as the body passes it (an int32, not weakly typed), so the trace is reused.
        shapes = jax.eval_shape(one, state, jnp.asarray(first, jnp.int32), batch)[1]
        blank = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

        def body(state, index):
            # The predicate is one scalar for every chain, so only one branch runs.
            new, info = jax.lax.cond(
                index < count,
                lambda s: one(s, first + index, batch),
                lambda s: (s, blank),
                state,
            )
            finite = finite_members(method.position(new), loop.num_members)
            return new, (info, method.draw(new), finite)

        return jax.lax.scan(body, state, jnp.arange(length, dtype=jnp.int32))

    return jax.jit(block)


@dataclasses.dataclass
class Ahead:
    """A block's program, compiling in a thread (:func:`compile_ahead`)."""

    function: Callable
    length: int
    thread: threading.Thread
    problem: Any  # held, so that the id in its key is never another problem's

    def ready(self) -> Callable:
        """The program, once its compilation has ended (a failed one is left to the call)."""
        self.thread.join()
        return self.function


#: Block programs compiling ahead of their run (a composite's later stage), by what makes the
#: program: the problem, the settings, the loop and the shapes and placements of its inputs.
_STARTED: dict[tuple, Ahead] = {}


def compile_ahead(
    problem: Any,
    method: Method,
    loop: Loop,
    config: RunSettings,
    template: Any,
    batch: Any,
    placements,
    *,
    for_later: bool = False,
) -> Ahead | None:
    """Start compiling the block program of a run in blocks (``None`` for another run), or
    take the one that a call ``for_later`` with the same arguments started (a composite
    starts its later stages' programs while its first stage runs).

    The program is lowered for arrays of ``template``'s shapes placed as the run places its
    state (``placements``, or the default device), which is the key under which JAX keeps the
    executable: the run's first call of the same function with such arrays finds it there.
    The thread is not a daemon: a process that ends while it compiles waits for it (a compiler
    stopped at exit aborts the process). So a run starts it only once nothing can refuse it.

    Args:
        problem: the built problem whose ``log_posterior`` ``method`` samples (part of what
            makes the program: two runs on one problem object with equal settings, loop and
            inputs run the same program).
        method: the method.
        loop: the run's loop.
        config: its settings.
        template: the chains' state, or its shapes.
        batch: the training set as placed.
        placements: where the members and the data lie (``None``: one device).
        for_later: keep it for the run that will ask for it, instead of handing it back to
            the caller's own run.
    """
    if not applies(method, loop):
        return None
    where = placements[0] if placements is not None else SingleDeviceSharding(jax.devices()[0])
    spec = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=where), template)
    key = (id(problem), config, loop, _signature(spec), _signature(batch))
    started = _STARTED.pop(key, None)
    if started is not None and started.problem is problem and not for_later:
        return started
    length = scan_length(method, template, loop)
    function = block_function(method, loop, config.seed, length)

    def compile_now() -> None:
        # Any failure is the first block's to report, when it compiles again.
        try:
            with straight():
                function.lower(spec, 0, 1, batch).compile()
        except Exception:
            return

    thread = threading.Thread(target=compile_now, name="bnnkit-compile-block")
    thread.start()
    ahead = Ahead(function, length, thread, problem)
    if for_later:
        _STARTED[key] = ahead
    return ahead


def forget(problem: Any) -> None:
    """Drop the programs compiled ahead for runs on ``problem`` that no run took (a composite
    that stopped, or whose stage compiled its own), so that none is kept alive."""
    for key in [k for k, ahead in _STARTED.items() if ahead.problem is problem]:
        del _STARTED[key]


def _signature(tree: Any) -> tuple:
    """The shapes, dtypes and placements of a tree's leaves, which with the function make the
    key of a compiled program."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return tuple(
        (
            jax.tree_util.keystr(path),
            leaf.shape,
            str(leaf.dtype),
            str(getattr(leaf, "sharding", "")),
        )
        for path, leaf in leaves
    )


@dataclasses.dataclass
class Clock:
    """How long the blocks took, to size the next one and to time the checkpoints."""

    per_unit: float | None = None
    last_save: float = dataclasses.field(default_factory=time.monotonic)
    saved_unit: int = 0

    def next_count(self, first: int, loop: Loop, length: int) -> int:
        """The next block's iterations from ``first``: one until one has been timed, then
        about :data:`BLOCK_SECONDS` of them, ending where burn-in or the run does."""
        end = loop.burn_in if first < loop.burn_in else loop.num_units
        count = 1 if self.per_unit is None else round(BLOCK_SECONDS / max(self.per_unit, 1e-6))
        return max(1, min(count, length, end - first))

    def due(self, done: int, config: RunSettings) -> bool:
        """Whether the state is written after ``done`` units: :data:`CHECKPOINT_SECONDS`
        and ``checkpoint_every`` iterations since the last one."""
        every = getattr(config, "checkpoint_every", 1)
        return (
            time.monotonic() - self.last_save >= CHECKPOINT_SECONDS
            and done - self.saved_unit >= every
        )


@dataclasses.dataclass
class Block:
    """A block's outputs on the host: its first unit, its units' ``Info`` (one per row), their
    draws and finiteness, and the time its iterations took."""

    first: int
    count: int
    infos: Any
    draws: Any
    finite: np.ndarray
    seconds: float

    def info(self, row: int) -> Any:
        return jax.tree.map(lambda a: a[row], self.infos)


@dataclasses.dataclass(frozen=True)
class Drive:
    """What drives a run's units, one at a time (:mod:`bnnkit.runs.loop`) or in blocks.

    Attributes:
        life: the open run directory.
        method: the method.
        config: its settings.
        loop: the run's loop.
        batch: the training set, placed.
        after_units: called with the log lines of the units just recorded (the tally, the
            progress, the caller's ``on_unit``).
        deadline: a :func:`time.monotonic` time after which the run stops at a unit's (a
            block's) end; ``None``: no time budget.
    """

    life: Lifecycle
    method: Method
    config: RunSettings
    loop: Loop
    batch: Any
    after_units: Callable[[list[dict]], None]
    deadline: float | None


def run_blocks(
    drive: Drive, state: Any, start: int, *, ahead: Ahead | None = None
) -> tuple[dict, dict, int, str | None]:
    """The run's iterations from ``start`` in blocks, each recorded as the module says.

    Args:
        drive: the run (``applies(drive.method, drive.loop)``).
        state: the chains' state after ``start`` units, placed on the devices.
        start: units done.
        ahead: the block program :func:`compile_ahead` started compiling (``None``: it
            compiles at the first block).

    Returns:
        The last log line, member 0's posterior metadata, the units done and why the run
        stopped before its last unit (``None``: it did not).

    Raises:
        DivergenceError: an iteration became non-finite (its block's finite part is kept).
    """
    life, loop, batch = drive.life, drive.loop, drive.batch
    if ahead is None:
        length = scan_length(drive.method, state, loop)
        block_fn = block_function(drive.method, loop, drive.config.seed, length)
    else:
        length, block_fn = ahead.length, ahead.ready()
    clock = Clock(saved_unit=start)
    log: dict = {}
    meta: dict = {}
    done, committed = start, state  # the units recorded, and the state after them
    try:
        while done < loop.num_units:
            count = clock.next_count(done, loop, length)
            t0 = time.perf_counter()
            with straight():  # the first block lowers the program, when not ahead
                state, outputs = block_fn(committed, done, count, batch)
            block = Block(
                done,
                count,
                *jax.device_get(distributed.fetch(outputs)),
                time.perf_counter() - t0,
            )
            broken = next(
                (
                    (row, found)
                    for row in range(count)
                    if (found := non_finite(block.info(row), block.finite[row])) is not None
                ),
                None,
            )
            if broken is not None:
                row, found = broken
                if row:  # the finite iterations before it, the same bits again
                    state, _ = block_fn(committed, done, row, batch)
                    log, meta = _record(drive, block, row, meta)
                    done, committed = done + row, state
                if done > clock.saved_unit:
                    _save(life, clock, committed, done)
                raise life.diverged(drive.config, loop, done, *found)
            log, meta = _record(drive, block, count, meta)
            done, committed = done + count, state
            clock.per_unit = block.seconds / count
            stopped = _stopped(loop, drive.deadline, done)
            if done == loop.num_units or stopped is not None or clock.due(done, drive.config):
                _save(life, clock, committed, done)
            if stopped is not None:
                return log, meta, done, stopped
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM during a block: the blocks before it are recorded, so their state
        # is what a resume starts from.
        if done > clock.saved_unit:
            _save(life, clock, committed, done)
        raise
    return log, meta, done, None


def _save(life: Lifecycle, clock: Clock, state: Any, done: int) -> None:
    life.save_state(distributed.fetch(state), done)
    clock.last_save, clock.saved_unit = time.monotonic(), done


def _stopped(loop: Loop, deadline: float | None, done: int) -> str | None:
    """Why the run stops after ``done`` units (``None``: it goes on): the time budget."""
    if (
        deadline is not None
        and done < loop.num_units
        and distributed.first_says(time.monotonic() >= deadline)
    ):
        return f"the time budget ended after {done} of {loop.num_units} {loop.kind}"
    return None


def _record(drive: Drive, block: Block, count: int, meta: dict) -> tuple[dict, dict]:
    """Keep the first ``count`` units of ``block``: their kept draws in one file, their log
    lines in one append; then ``drive.after_units``."""
    life, loop = drive.life, drive.loop
    t0 = time.perf_counter()
    kept = [u for u in range(block.first, block.first + count) if loop.keeps(u)]
    if kept:
        rows = [u - block.first for u in kept]
        draws = jax.tree.map(lambda a: np.asarray(a)[rows], block.draws)
        stored = distributed.first_decides(lambda: _store(drive, kept, draws))
        meta = stored if life.writer else meta
    written = time.perf_counter() - t0
    lines = [
        {
            **log_line(u, loop, block.info(u - block.first), block.seconds / block.count),
            "write_seconds": written / count,
        }
        for u in range(block.first, block.first + count)
    ]
    if life.writer:
        life.rundir.append_log(lines)
    faults.point("unit-done")
    drive.after_units(lines)
    return lines[-1], meta


def _store(drive: Drive, kept: list[int], draws: Any) -> dict:
    """The posteriors of every chain over the kept units ``kept`` (draws stacked on a leading
    axis, chains on the next) in one file and its manifest line."""
    life, method, loop = drive.life, drive.method, drive.loop
    members = [
        method.posterior(jax.tree.map(lambda a, m=m: a[:, m], draws))
        for m in range(loop.num_members)
    ]
    finite_posteriors(life, drive.config, loop, kept[0], members)
    first, last = kept[0], kept[-1]
    store.save(
        life.rundir.sample_file(first, last),
        members,
        before_rename=life.recorder(manifest.sample_name(first, last), unit=first),
    )
    faults.point("sample-written")
    return members[0].meta()
