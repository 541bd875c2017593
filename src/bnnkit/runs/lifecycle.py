"""The life of a run directory, the same for the run driver and for :func:`bnnkit.runs.sample`.

Both :func:`bnnkit.runs.run` (a method on a problem) and :func:`bnnkit.runs.sample` (a
full-batch sampler on any log density) go through these steps, in this order:

1. check the target (:func:`check_target`) and, for a resume, the stored run
   (:func:`bnnkit.runs.resumable.resume_checks`: the record, the same settings as now, the
   point the manifest lets it restart from) — all before anything is written;
2. take the lock (:func:`opened`); a new run then clears what ``overwrite`` replaces and
   writes ``run.json`` with status "starting": from here on the directory is a run, and one
   that dies before its first state is one that never started;
3. a resume loads the state it restarts from, checked against its manifest digest and the run's
   shapes (:func:`load_state`), and forgets every file written after it, which the units after
   it rewrite bit for bit (:meth:`Lifecycle.begin`); status "running";
4. units: the kept posteriors and, every ``save_every`` units, the state, each recorded in the
   manifest before it is renamed into place (:meth:`Lifecycle.recorder`,
   :meth:`Lifecycle.save_state`);
5. status "finished", the manifest compacted to one line per file (:meth:`Lifecycle.finish`);
   or, when a time budget ends first, status "stopped" after a saved state
   (:meth:`Lifecycle.stop`), from which a resume goes on.

What else both share has a module of its own: the key streams (:mod:`bnnkit.runs.keys`), whose
purity is what makes a resume reproduce the uninterrupted run bit for bit; the check for NaN
and infinite values (:mod:`bnnkit.runs.divergence`); SIGTERM and SIGHUP stopping a run as
Ctrl-C does (:mod:`bnnkit.runs.signals`); and the sampler's tally of acceptance and
divergences (:mod:`bnnkit.runs.tally`). The two kinds of runs keep two sample-file layouts, on
purpose (:mod:`bnnkit.runs.chunks` says why); the manifest records both
(:mod:`bnnkit.runs.manifest`) and :mod:`bnnkit.runs.stored` reads both back.

Over several processes (:mod:`bnnkit.distributed`) only process 0 reads and writes the
directory: it alone checks the target and the stored run (``first_decides``), holds the lock
(``first_holds``) and reads the state, which the others receive bit for bit (``from_first``);
every writing method of :class:`Lifecycle` does nothing on the other processes, and arrays
spread over processes are gathered whole (``fetch``) by every process at the same units.

Example:
    >>> import tempfile
    >>> from bnnkit.inference.hmc import Config
    >>> rundir = RunDir(tempfile.mkdtemp() + "/run")
    >>> check_target(rundir, resume=False, overwrite=False)
    >>> loop = Loop("iterations", 2, num_members=1)
    >>> new_record(Config(num_iterations=2, num_burn_in=1), loop, {})["method"]
    'hmc'
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import distributed, storage
from bnnkit.errors import ConfigError
from bnnkit.inference import _noise
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.runs import directory, faults, manifest, manifest_lines, placement, provenance, sources
from bnnkit.runs.directory import STATE_FILE, RunDir
from bnnkit.runs.divergence import DivergenceError, divergence_remedy
from bnnkit.runs.keys import UNIT_KEY
from bnnkit.runs.signals import stopped_by_signals

__all__ = ["Lifecycle", "check_target", "load_state", "new_record", "opened"]


def new_record(config: RunSettings, loop: Loop, problem: dict, **more: Any) -> dict:
    """``run.json`` of a new run (its status is set by :func:`opened`).

    Args:
        config: the method's Config.
        loop: its loop.
        problem: what the run is on (a problem's settings, or a density's description).
        more: what else the run records (its dataset, its number of parameters, ...).
    """
    record = {
        "method": config.METHOD,
        "layout": directory.LAYOUT,
        "problem": problem,
        "method_config": config.to_dict(),
        "loop": dataclasses.asdict(loop),
        "manifest": True,
        **more,
        "versions": provenance.versions(),
        "git": provenance.git_hash(),
        "gaussian_noise": _noise.GENERATOR,
        "started": provenance.now(),
    }
    # The run it starts from, by identity, so that a resume finds it under another path.
    source = sources.source_record(config)
    if source is not None:
        record[sources.SOURCE_KEY] = source
    # Where the manifest's chain starts: fixed once, so that a resume that extends the
    # settings keeps the chain of the lines it keeps.
    record[manifest_lines.IDENTITY_KEY] = manifest_lines.identity(
        provenance.settings_digest(record), getattr(config, "seed", None)
    )
    return record


def check_target(rundir: RunDir, *, resume: bool, overwrite: bool) -> None:
    """:func:`bnnkit.runs.placement.check_target` on process 0; every process raises if it
    refused."""
    distributed.first_decides(
        lambda: placement.check_target(rundir, resume=resume, overwrite=overwrite)
    )


def load_state(rundir: RunDir, template: Any, sha256: str | None) -> tuple[int, Any]:
    """The stored state (checked against its recorded digest and the run's shapes) and the
    units it covers.

    Args:
        rundir: the run directory.
        template: the state's shapes and dtypes (``jax.eval_shape`` of the run's init).
        sha256: the digest the manifest records for it (``None``: a run of an older layout).

    Raises:
        ConfigError: a damaged state.
    """
    stored = storage.load_arrays(rundir.state_file, sha256=sha256)
    if UNIT_KEY not in stored:
        raise ConfigError(f"{str(rundir.state_file)!r} is damaged: it records no unit")
    start = int(stored.pop(UNIT_KEY))
    tree = storage.unflatten_tree(template, stored)
    for want, got in zip(jax.tree.leaves(template), jax.tree.leaves(tree), strict=True):
        if tuple(want.shape) != tuple(np.shape(got)) or np.asarray(got).dtype != want.dtype:
            raise ConfigError(
                f"{str(rundir.state_file)!r} is damaged: it holds an array of "
                f"shape {np.shape(got)} where the run has {tuple(want.shape)}"
            )
    return start, jax.tree.map(jnp.asarray, tree)


class Lifecycle:
    """A locked run directory from "starting" to "finished", as process 0 writes it.

    Made by :func:`opened`. Every method that writes does nothing on a process other than 0.

    Attributes:
        rundir: the run directory.
        record: its ``run.json`` (on a process other than 0, only what this process set).
        found: what :func:`bnnkit.runs.resumable.resume_point` found (``None``: a new run, or
            not process 0).
        files: the manifest.
        writer: whether this process writes the directory.
    """

    def __init__(self, rundir: RunDir, record: dict, found: manifest.Check | None):
        self.rundir, self.record, self.found = rundir, record, found
        anchor = record.get(manifest_lines.IDENTITY_KEY)
        # A run made before the chain keeps an unchained manifest.
        self.files = manifest_lines.Manifest(
            rundir.manifest_file, anchor=anchor if isinstance(anchor, str) else None
        )
        self.writer = distributed.is_writer()
        #: Whether a state or kept unit has been recorded (from then on the run is kept
        #: whatever happens next).
        self.durable = False

    def resume_state(self, template: Any) -> tuple[int, Any]:
        """The units done and the state a resume restarts from (``(0, None)``: from the
        start), read by process 0 and handed to every process bit for bit."""
        start, state, found = 0, None, self.found
        if (
            found is not None
            and self.rundir.state_file.is_file()
            and (found.state_sha256 is not None or not self.record.get("manifest"))
        ):
            start, state = load_state(self.rundir, template, found.state_sha256)
        return distributed.from_first(start, state, template)

    def begin(self, start: int, config: RunSettings, loop: Loop, **more: Any) -> None:
        """Forget every file written after the state at ``start`` (the run rewrites them bit
        for bit) and mark the run "running" with ``config`` (a resume may change resumable
        settings) and ``more``."""
        if not self.writer:
            return
        if manifest_lines.HEAD_KEY in self.record:
            # The manifest changes from here on: first the record stops naming its last line.
            self.record.pop(manifest_lines.HEAD_KEY)
            self.rundir.write_record(self.record)
        self.rundir.remove_samples_from(start)
        if self.record.get("chunks"):
            for path in self.rundir.samples_dir.glob("chunk_*.npz"):
                done = manifest.chunk_unit(f"{directory.SAMPLES_DIR}/{path.name}")
                if done is None or done > start:
                    path.unlink()
        self.rundir.truncate_log(start)
        self._compact(start)
        self.record.pop("stopped", None)  # a stopped run goes on
        self.record.update(
            method_config=config.to_dict(),
            loop=dataclasses.asdict(loop),
            status="running",
            resumed_at=start if self.found is not None else None,
            layout=directory.LAYOUT,
            manifest=True,
            **more,
        )
        self.rundir.write_record(self.record)

    def _compact(self, start: int) -> None:
        """Rewrite the manifest with one line per file that the run keeps (a run of an older
        layout gets its first manifest here, from the files as they are)."""
        rundir, files, found = self.rundir, self.files, self.found
        if found is None:
            files.rewrite([])
            return
        if not self.record.get("manifest"):
            lines = [
                {
                    "file": manifest.sample_name(u),
                    "unit": u,
                    "sha256": storage.file_sha256(rundir.sample_file(u)),
                }
                for u in rundir.sample_units()
            ]
            if rundir.state_file.is_file():
                lines.append(
                    {
                        "file": STATE_FILE,
                        "unit": start,
                        "sha256": storage.file_sha256(rundir.state_file),
                    }
                )
            files.rewrite(lines)
            return
        entries = files.entries()
        lines = [
            lines_[-1]
            for name, lines_ in entries.items()
            if (manifest.sample_unit(name) is not None and manifest.sample_unit(name) < start)
            or (manifest.chunk_unit(name) is not None and lines_[-1]["unit"] <= start)
        ]
        if found.state_sha256 is not None:
            # The line the state matches: the newest, or the one before when a crash cut off
            # the write the newest describes.
            lines += [
                line for line in entries.get(STATE_FILE, []) if line["sha256"] == found.state_sha256
            ][-1:]
        files.rewrite(lines)

    def recorder(
        self, name: str, *, unit: int, point: str = "sample-recorded", **extra: Any
    ) -> Callable[[storage.Written], None]:
        """Writes a file's manifest line before the file is renamed into place (for
        ``before_rename`` of :func:`bnnkit.storage.save_arrays`)."""

        def record(written: storage.Written) -> None:
            self.files.append(manifest_lines.entry(name, written, unit=unit, **extra))
            self.durable = True
            faults.point(point)

        return record

    def save_state(self, state: Any, unit: int) -> None:
        """Write the full state after ``unit`` units (gathered whole: see
        :func:`bnnkit.distributed.fetch`)."""
        if self.writer:
            storage.save_arrays(
                self.rundir.state_file,
                {**storage.flatten_tree(state), UNIT_KEY: np.asarray(unit)},
                before_rename=self.recorder(STATE_FILE, unit=unit, point="state-recorded"),
            )

    def diverged(
        self, config: RunSettings, loop: Loop, unit: int, what: list[str], members: list[int]
    ) -> DivergenceError:
        """Mark the run "diverged" at ``unit`` (when it has kept something; a run that kept
        nothing is removed by :func:`opened`) and say so in one line.

        Returns:
            The :class:`DivergenceError` to raise.
        """
        kind = {"iterations": "iteration", "epochs": "epoch", "chunks": "chunk"}[loop.kind]
        who = (
            f"member {members[0]}"
            if len(members) == 1
            else f"members {', '.join(map(str, members[:5]))}{', ...' if len(members) > 5 else ''}"
        )
        # A resumed run keeps the state it resumed from even before it records a new one.
        if self.durable or self.found is not None:
            self.record.update(
                status="diverged", diverged={"unit": unit, "what": what, "members": members}
            )
            if self.writer:
                self.rundir.write_record(self.record)
            kept = (
                "its directory keeps the last finite state and the samples before it; "
                "start it again (--overwrite) with"
            )
        else:
            kept = "nothing was kept; run it again with"
        return DivergenceError(
            f"{config.label}: {' and '.join(what)} became NaN or infinite in {kind} {unit + 1} "
            f"of {loop.num_units} ({who}), so the run stopped: {kept}",
            divergence_remedy(config),
            config,
        )

    def stop(self, reason: str, *, units_done: int) -> None:
        """Mark the run "stopped" before its last unit (its state after ``units_done`` units is
        saved; ``--resume`` continues it), with the reason in a sentence."""
        self.record.update(
            status="stopped",
            stopped={"reason": reason, "units_done": units_done, "at": provenance.now()},
        )
        if self.writer:
            self.rundir.write_record(self.record)

    def finish(self, **more: Any) -> None:
        """Mark the run "finished" (with ``more``) and compact the manifest."""
        self.record.update(status="finished", finished=provenance.now(), **more)
        if self.writer:
            self.files.rewrite(self.files.latest().values())
            if self.files.anchor is not None:
                # The chain's end, so that the last line cannot be edited unseen either.
                self.record[manifest_lines.HEAD_KEY] = self.files.head()[0]
            self.rundir.write_record(self.record)


@contextlib.contextmanager
def opened(
    rundir: RunDir, found: manifest.Check | None, *, record: dict | None, overwrite: bool
) -> Iterator[Lifecycle]:
    """Hold the run directory's lock (process 0) for the block: a new run (``record``) is
    prepared and written with status "starting", a resumed one's record is read back.

    SIGTERM and SIGHUP stop the block as Ctrl-C does (:func:`stopped_by_signals`). A new run
    that fails with an error before its first state or kept unit is recorded leaves
    nothing behind: its files are removed, and the directory too when this run created it
    (so the same command, its value corrected, starts afresh). An interrupt (Ctrl-C, SIGTERM)
    leaves the run that never started, which ``--resume`` or the same command starts again.

    Raises:
        ConfigError: another process holds the lock, or the directory changed since
            :func:`check_target` into one that may not be started afresh.
    """
    writer = distributed.is_writer()
    created = _first_missing(rundir.path) if record is not None and writer else None
    undone = False
    try:
        with stopped_by_signals(), distributed.first_holds(rundir.lock):
            faults.point("locked")
            if record is not None and writer:
                rundir.prepare(overwrite=overwrite)
                # The directory is a run from here on: a crash leaves a run that never started.
                rundir.write_record({**record, "status": "starting"})
                faults.point("started")
                rundir.samples_dir.mkdir(exist_ok=True)
            life = Lifecycle(rundir, rundir.read_record() if writer else {}, found)
            try:
                yield life
            except Exception:
                if record is not None and writer and not life.durable:
                    rundir.forget_start()
                    undone = True
                raise
    finally:
        if undone and created is not None:
            # Once the lock is let go: the folders this run created, where still empty.
            _remove_empty(rundir.path, created)


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (``None``: it exists)."""
    path = path.absolute()
    if path.exists():
        return None
    while not path.parent.exists():
        path = path.parent
    return path


def _remove_empty(path: Path, upto: Path) -> None:
    """Remove ``path`` and its parents up to ``upto`` while they are empty folders."""
    current = path.absolute()
    while True:
        try:
            current.rmdir()
        except OSError:
            return
        if current == upto or current.parent == current:
            return
        current = current.parent
