"""The life of a run directory, the same for the run driver and for :func:`bnnkit.runs.sample`.

Both :func:`bnnkit.runs.run` (a method on a problem) and :func:`bnnkit.runs.sample` (a
full-batch sampler on any log density) go through these steps, in this order:

1. check the target (:func:`check_target`) and, for a resume, the stored run
   (:func:`resume_checks`: the record, the same settings as now, the point the manifest lets
   it restart from) — all before anything is written;
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

Keys are pure functions of (seed, stream, member, unit): stream 0 initialises, 1 drives the
method's noise, 2 orders the data, 3 draws evaluation samples, 4 augments minibatches; member
m's key at unit u is ``fold_in(fold_in(fold_in(key(seed), stream), m), u)``
(:func:`member_keys`). Nothing else is random, which is what makes a resume reproduce the
uninterrupted run bit for bit.

Over several processes (:mod:`bnnkit.distributed`) only process 0 reads and writes the
directory: it alone checks the target and the stored run (``first_decides``), holds the lock
(``first_holds``) and reads the state, which the others receive bit for bit (``from_first``);
every writing method of :class:`Lifecycle` does nothing on the other processes, and arrays
spread over processes are gathered whole (``fetch``) by every process at the same units.

:class:`SamplerTally` counts acceptance and divergences as the units run, so that a stuck or
unstable sampler is named while it runs and on the result.

The two samplers of directories keep two sample-file layouts, on purpose. The driver writes one
``samples/sample_<unit>.npz`` per kept unit, holding whatever ``method.posterior`` returned for
each member (:mod:`bnnkit.posterior.store`): a network's kept draw is large and rare (one per
iteration of a full-batch gradient over the whole training set), and a kept unit of VI or
Laplace is an approximation, not a draw. :func:`bnnkit.runs.sample` writes one
``samples/chunk_<iterations done>.npz`` per checkpoint, holding the chunk's kept positions and
every iteration's sampler info: its draws are cheap (a small density takes microseconds per
iteration) and many, and one fsynced file per draw would make the disk, not the sampler, the
cost of a run of thousands of draws per chain. The manifest records both kinds
(:mod:`bnnkit.runs.manifest`) and :mod:`bnnkit.runs.stored` reads both back.

Example:
    >>> keys = member_keys(0, NOISE_STREAM, 3)
    >>> keys.shape, bool((keys[0] != keys[1]).any())
    ((3, 2), True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import distributed, storage
from bnnkit.data import npz
from bnnkit.errors import ConfigError
from bnnkit.inference import _noise
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.runs import directory, faults, manifest, sources
from bnnkit.runs.directory import STATE_FILE, RunDir

INIT_STREAM, NOISE_STREAM, DATA_STREAM, EVAL_STREAM, AUGMENT_STREAM = 0, 1, 2, 3, 4
#: Signals that stop a run the way Ctrl-C does: a scheduler's pre-emption, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class DivergenceError(ConfigError):
    """A run stopped because a member's loss, log density or parameters became NaN or
    infinite (:func:`non_finite`): what it computed from there on would be meaningless, so it
    stops keeping its last finite state, and the command line exits non-zero (code 2)."""


def finite_members(position: Any, num_members: int) -> jax.Array:
    """Whether each member's parameters are all finite (jit-able; members on the leading
    axis of every leaf).

    Example:
        >>> finite_members({"w": jnp.array([[0.0, 1.0], [jnp.nan, 2.0]])}, 2)
        Array([ True, False], dtype=bool)
    """
    ok = jnp.ones(num_members, bool)
    for leaf in jax.tree.leaves(position):
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf.reshape(num_members, -1)), axis=1)
    return ok


def non_finite(info: Any, finite: np.ndarray) -> tuple[list[str], list[int]] | None:
    """What became non-finite in a unit, and in which members (``None``: nothing).

    Every method reports its loss or log density in its ``Info`` and its parameters through
    ``method.position``, so this one check covers every method: a real-valued ``Info`` field
    that is NaN or infinite, or a parameter that is. (A sampler's rejected proposal is not in
    its ``Info``: HMC and NUTS reject a non-finite trajectory as a divergence and report its
    acceptance as 0, so their chains stay finite.)

    Args:
        info: the unit's ``Info``, on the host, members on the leading axis.
        finite: :func:`finite_members` of the unit's state.

    Example:
        >>> from typing import NamedTuple
        >>> class Info(NamedTuple):
        ...     log_posterior: np.ndarray
        >>> non_finite(Info(np.array([1.0, np.nan])), np.array([True, True]))
        (['log_posterior'], [1])
    """
    finite = np.asarray(finite, bool).reshape(-1)
    bad = ~finite
    what = ["the parameters"] if bad.any() else []
    for name, value in info._asdict().items():
        value = np.asarray(value)
        if not np.issubdtype(value.dtype, np.floating):
            continue
        rows = (
            value.reshape(len(finite), -1)
            if value.size and value.ndim
            else value.reshape(1, -1).repeat(len(finite), axis=0)
        )
        broken = ~np.isfinite(rows).all(axis=1)
        if broken.any():
            what.append(name)
            bad |= broken
    return (what, [int(m) for m in np.flatnonzero(bad)]) if what else None


def divergence_advice(config: RunSettings) -> str:
    """What to try after a divergence, naming only the settings ``config``'s command takes."""
    from bnnkit.settings import flag

    names = [f.name for f in dataclasses.fields(config)]
    tips = [
        f"a smaller {flag(type(config), name)}"
        for name in names
        if name.endswith("step_size") and getattr(config, name) is not None
    ]
    if "clip_grad_norm" in names:
        tips.append(f"gradient clipping ({flag(type(config), 'clip_grad_norm')})")
    if "prior_precision" in names:
        tips.append(f"a larger {flag(type(config), 'prior_precision')}")
    if not tips:
        tips.append("other settings")
    return ", ".join(tips[:-1]) + (" or " if len(tips) > 1 else "") + tips[-1]


class Terminated(KeyboardInterrupt):
    """A run stopped by SIGTERM or SIGHUP.

    Raised in the main thread when the signal arrives (:func:`stopped_by_signals`), so the run
    unwinds exactly as after Ctrl-C: writes in flight are dropped, the lock is let go and the
    last state stays on disk for ``--resume``. A ``KeyboardInterrupt``, so whatever handles
    Ctrl-C handles it too.

    Attributes:
        signum: the signal's number (the command line exits with ``128 + signum``).
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.

    Only signals left at their default action are taken over (an ignored SIGHUP, as under
    ``nohup``, stays ignored; a caller's own handler stays), and they are given back after the
    block. Outside the main thread, where Python delivers no signal, this does nothing.

    Example:
        >>> import os
        >>> with stopped_by_signals():
        ...     try:
        ...         os.kill(os.getpid(), signal.SIGTERM)
        ...     except Terminated as stop:
        ...         print(stop.signum == signal.SIGTERM)
        True
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: The entry of ``state.npz`` holding the units the state covers.
UNIT_KEY = "__unit__"


def member_keys(seed: int, stream: int, num_members: int) -> jax.Array:
    """Member m's root key of ``stream``: ``fold_in(fold_in(key(seed), stream), m)``."""
    base = jax.random.fold_in(jax.random.PRNGKey(seed), stream)
    return jax.vmap(lambda m: jax.random.fold_in(base, m))(jnp.arange(num_members))


def evaluation_key(seed: int) -> jax.Array:
    """The key of a run's evaluation draws (stream 3), so repeated evaluations agree."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_STREAM)


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
        "versions": directory.versions(),
        "git": directory.git_hash(),
        "gaussian_noise": _noise.GENERATOR,
        "started": directory.now(),
    }
    # The run it starts from, by identity, so that a resume finds it under another path.
    source = sources.source_record(config)
    if source is not None:
        record[sources.SOURCE_KEY] = source
    # Where the manifest's chain starts: fixed once, so that a resume that extends the
    # settings keeps the chain of the lines it keeps.
    record[manifest.IDENTITY_KEY] = manifest.identity(
        directory.settings_digest(record), getattr(config, "seed", None)
    )
    return record


def check_target(rundir: RunDir, *, resume: bool, overwrite: bool) -> None:
    """:meth:`RunDir.check_target` on process 0; every process raises if it refused."""
    distributed.first_decides(lambda: rundir.check_target(resume=resume, overwrite=overwrite))


def check_resume(record: dict, config: RunSettings, problem: dict) -> None:
    """Refuse to resume ``record``'s run with ``config`` on ``problem`` unless only resumable
    settings differ.

    Raises:
        ConfigError: another method, an older layout or noise generator, a setting the stored
            run has no state for, or a setting that differs, named in one line.
    """
    if record.get("method") != config.METHOD:
        raise ConfigError(f"cannot resume a {record.get('method')!r} run as {config.METHOD!r}")
    if "layout" not in record:
        raise ConfigError(
            "the run comes from an older bnnkit layout and cannot be resumed by "
            "this version; start it again with --overwrite"
        )
    if record.get("status") == "diverged":
        # A resume repeats the same steps bit for bit, so it would only diverge again.
        where = record.get("diverged")
        unit = where.get("unit") if isinstance(where, dict) else None
        loop_record = record.get("loop")
        kind = {"iterations": "iteration", "epochs": "epoch", "chunks": "chunk"}.get(
            loop_record.get("kind") if isinstance(loop_record, dict) else None, "unit"
        )
        at = f" in {kind} {unit + 1}" if isinstance(unit, int) else ""
        raise ConfigError(
            f"the run diverged (NaN or infinite values){at}, and a resume repeats "
            "its steps bit for bit; start it again with --overwrite and "
            f"{divergence_advice(config)}"
        )
    config_dict = config.to_dict()
    stored = type(config).current_names(record["method_config"])
    if sources.same_source(record, config.source_run()):
        # The run it started from, moved or copied with it: the same run under another path.
        config_dict["init_checkpoint"] = stored.get("init_checkpoint")
    # A resumable setting (HMC's integrator) changes neither the state nor the samples, so a
    # run made before it existed resumes with it.
    newer = sorted(set(config_dict) - set(stored) - type(config).resumable())
    if newer:
        # Its state has no place for what the new setting adapts or keeps.
        raise ConfigError(
            f"the run was made by an older bnnkit without the setting(s) "
            f"{', '.join(newer)} and cannot be resumed by this version; start it "
            "again with --overwrite"
        )
    if config.draws_gaussian_noise and record.get("gaussian_noise") != _noise.GENERATOR:
        raise ConfigError(
            f"the run drew its Gaussian noise with "
            f"{record.get('gaussian_noise', 'jax.random.normal')!r}, this version "
            f"with {_noise.GENERATOR!r}, so it cannot continue the same stream; "
            "start it again with --overwrite"
        )
    directory.check_same_settings(
        {**record["problem"], **stored}, {**problem, **config_dict}, type(config).resumable()
    )


def resume_refusal(record: Mapping[str, Any]) -> str | None:
    """Why a resume of the run that ``record`` describes is refused whatever its files hold
    (another layout, a run that diverged, settings or a noise generator this version cannot
    continue), as :func:`check_resume` says it; ``None`` when a resume with the run's own
    settings passes these checks. What ``bnnkit verify`` advises follows it.

    Example:
        >>> resume_refusal({"method": "no-such-method"})
        "this bnnkit has no method 'no-such-method'"
    """
    from bnnkit.inference import METHODS

    method = record.get("method")
    if not isinstance(method, str) or method not in METHODS:
        return f"this bnnkit has no method {method!r}"
    try:
        config = METHODS[method].Config.from_dict(record.get("method_config") or {})
        check_resume(dict(record), config, record.get("problem") or {})
    except (ConfigError, TypeError, KeyError) as err:
        return str(err)
    return None


def resume_point(rundir: RunDir, record: dict, loop: Loop, template: Any = None) -> manifest.Check:
    """Where a resume starts, after checking every file it keeps against the manifest.

    Args:
        template: the state's shapes and dtypes, checked against those the manifest records
            for the state (``None``: left to :func:`load_state`, under the lock).

    Raises:
        ConfigError: a damaged, missing or unrecorded file that the resume would keep (it
            cannot recompute what precedes its last state), a state of other shapes than the
            run's, or fewer units than already done.
    """
    found = manifest.check(rundir, record)
    problem = manifest.first_problem(rundir, found, only_unrepairable=True)
    if problem is not None:
        raise ConfigError(f"cannot resume: {problem}")
    done = found.state_unit
    if not record.get("manifest") and rundir.state_file.is_file():
        done = int(storage.load_arrays(rundir.state_file).get(UNIT_KEY, 0))
    if loop.num_units < done:
        raise ConfigError(
            f"--resume may only extend a run: {str(rundir.path)!r} has done {done} "
            f"{loop.kind}, more than the {loop.num_units} asked for now; allowed: >= {done}"
        )
    if template is not None and found.state_sha256 is not None:
        line = manifest.Manifest(rundir.manifest_file).latest_matching(
            rundir.state_file.name, found.state_sha256
        )
        if line is not None and isinstance(line.get("arrays"), dict):
            check_state_arrays(rundir, template, line["arrays"])
    return found


def check_state_arrays(rundir: RunDir, template: Any, recorded: Mapping[str, Any]) -> None:
    """Refuse a state whose recorded arrays (``[shape, dtype]`` by key, as the manifest keeps
    them) are not the run's, as :func:`load_state` would once the state is read.

    Raises:
        ConfigError: a missing entry, or an array of another shape or dtype.
    """
    if UNIT_KEY not in recorded:
        raise ConfigError(f"{str(rundir.state_file)!r} is damaged: it records no unit")
    for path, leaf in jax.tree_util.tree_flatten_with_path(template)[0]:
        key = storage.path_to_str(path)
        if key not in recorded:
            raise ConfigError(
                f"{str(rundir.state_file)!r} holds no {key!r}, which the run as "
                f"set up now has: it was made by another model or method, or "
                f"{directory.RUN_FILE} was edited"
            )
        shape, dtype = recorded[key]
        if tuple(shape) != tuple(leaf.shape) or dtype != np.dtype(leaf.dtype).str:
            raise ConfigError(
                f"{str(rundir.state_file)!r} holds {key!r} of shape "
                f"{tuple(shape)} ({dtype}) where the run as set up now has "
                f"{tuple(leaf.shape)} ({np.dtype(leaf.dtype).str}): it was made "
                f"by another model, or {directory.RUN_FILE} was edited"
            )


def resume_checks(
    rundir: RunDir,
    config: RunSettings,
    problem: dict,
    loop: Loop,
    *,
    chunks: bool,
    data: Mapping[str, Any] | None = None,
    template: Any = None,
) -> manifest.Check | None:
    """Every check of a resume, on process 0 (the others get ``None``; every process raises
    if process 0 refused).

    Args:
        chunks: the resume is of a :func:`bnnkit.runs.sample` run (else of the driver's).
        data: the dataset's ``info`` as loaded now: a user file's fingerprint must be the one
            the run recorded (then the file may be named by another path, from another folder).
        template: the state's shapes (see :func:`resume_point`).

    Raises:
        ConfigError: a run of the other kind, or as :func:`check_resume` and
            :func:`resume_point`.
    """

    def checks() -> manifest.Check:
        record = rundir.read_record()
        if bool(record.get("chunks")) != chunks:
            made, use = (
                ("the driver (bnnkit.runs.run)", "bnnkit.runs.run")
                if chunks
                else ("bnnkit.runs.sample", "bnnkit.runs.sample")
            )
            raise ConfigError(
                f"{rundir.given!r} is a run of {made}, not of "
                f"{'sample()' if chunks else 'the driver'}; resume it with {use}"
            )
        given = problem
        recorded = record.get("dataset")
        if (
            data is not None
            and isinstance(recorded, dict)
            and isinstance(record.get("problem"), dict)
            and npz.same_data(recorded, data, "--dataset")
        ):
            given = {**problem, "dataset": record["problem"].get("dataset")}
        check_resume(record, config, given)
        return resume_point(rundir, record, loop, template)

    return distributed.first_decides(checks)


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
        found: what :func:`resume_point` found (``None``: a new run, or not process 0).
        files: the manifest.
        writer: whether this process writes the directory.
    """

    def __init__(self, rundir: RunDir, record: dict, found: manifest.Check | None):
        self.rundir, self.record, self.found = rundir, record, found
        anchor = record.get(manifest.IDENTITY_KEY)
        # A run made before the chain keeps an unchained manifest.
        self.files = manifest.Manifest(
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
        if manifest.HEAD_KEY in self.record:
            # The manifest changes from here on: first the record stops naming its last line.
            self.record.pop(manifest.HEAD_KEY)
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
            self.files.append(manifest.entry(name, written, unit=unit, **extra))
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
            f"of {loop.num_units} ({who}), so the run stopped: {kept} "
            f"{divergence_advice(config)}"
        )

    def stop(self, reason: str, *, units_done: int) -> None:
        """Mark the run "stopped" before its last unit (its state after ``units_done`` units is
        saved; ``--resume`` continues it), with the reason in a sentence."""
        self.record.update(
            status="stopped",
            stopped={"reason": reason, "units_done": units_done, "at": directory.now()},
        )
        if self.writer:
            self.rundir.write_record(self.record)

    def finish(self, **more: Any) -> None:
        """Mark the run "finished" (with ``more``) and compact the manifest."""
        self.record.update(status="finished", finished=directory.now(), **more)
        if self.writer:
            self.files.rewrite(self.files.latest().values())
            if self.files.anchor is not None:
                # The chain's end, so that the last line cannot be edited unseen either.
                self.record[manifest.HEAD_KEY] = self.files.head()[0]
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


class SamplerTally:
    """Acceptance, divergences and capped trajectories of a run so far, burn-in and sampling
    counted apart.

    The progress status shows both (``burn-in div 21`` while burning in; ``div 0 (burn-in
    21)`` after), so it agrees with ``bnnkit evaluate``, which counts only what follows the
    burn-in. Methods that log no acceptance rate are not judged. A method that logs
    ``capped`` (HMC, NUTS: the trajectory hit the cap on its length) gets the share of capped
    iterations in the status once there are any, in the warning and in :meth:`record`.

    Example:
        >>> tally = SamplerTally(Loop("iterations", 20, num_members=2, burn_in=10))
        >>> for unit in range(20):
        ...     tally.add({"burn_in": unit < 10, "acceptance_rate": [0.0, 0.02],
        ...                "divergent": [True, False]})
        >>> tally.status({"burn_in": False, "acceptance_rate": [0.0, 0.02],
        ...               "divergent": [True, False]})
        'sampling | accept 0.01 | div 10 (burn-in 10)'
        >>> tally.warning()[:50]
        'the chains look stuck: acceptance 0.01 after burn-'
        >>> tally.news()[:21], tally.news()
        ('the chains look stuck', None)
    """

    def __init__(
        self,
        loop: Loop,
        method: str | None = None,
        vocabulary: Any = None,
        *,
        given_step_size: float | None = None,
    ):
        self.loop = loop
        self.method = method
        self.vocabulary = vocabulary  # the warning's words (None: the command line's)
        # The advice of a warning follows the step size the chains run at against this one.
        self.given_step_size = given_step_size
        self.step_size: float | None = None
        self.acceptance = 0.0
        self.sampled = 0
        self.divergent = 0
        self.burn_in_divergent = 0
        self.capped = 0
        self.burn_in_capped = 0
        self.burnt = 0
        self.logs_capped = False
        self.told = False

    def add(self, log: dict[str, Any]) -> None:
        if "acceptance_rate" not in log:
            return
        divergent = int(np.sum(log.get("divergent", 0)))
        # A run logged before trajectories reported their cap has no "capped": none counted.
        capped = int(np.sum(log.get("capped", 0)))
        self.logs_capped = self.logs_capped or "capped" in log
        if log.get("burn_in"):
            self.burn_in_divergent += divergent
            self.burn_in_capped += capped
            self.burnt += 1
            return
        self.sampled += 1
        self.acceptance += float(np.mean(log["acceptance_rate"]))
        self.divergent += divergent
        self.capped += capped
        if "step_size" in log:
            self.step_size = float(np.mean(log["step_size"]))

    def enough_to_judge(self) -> bool:
        """At least 10 sampling units, and a tenth of them, have run."""
        sampling = self.loop.num_units - self.loop.burn_in
        return self.sampled >= max(10, round(0.1 * sampling)) or (0 < sampling == self.sampled)

    def warning(self) -> str | None:
        """The stuck-or-unstable warning of the sampling so far (``None``: none)."""
        from bnnkit.metrics.convergence import capped_warning, sampler_warning

        if not self.sampled:
            return None
        transitions = self.sampled * self.loop.num_members
        from bnnkit.metrics.vocabulary import cli_vocabulary

        warnings = [
            sampler_warning(
                self.acceptance / self.sampled,
                self.divergent,
                transitions,
                step_size=self.step_size,
                given_step_size=self.given_step_size,
                burn_in=self.loop.burn_in,
                vocabulary=self.vocabulary or cli_vocabulary(self.method),
            ),
            capped_warning(self.capped, transitions, self.method),
        ]
        return "; ".join(w for w in warnings if w is not None) or None

    def record(self) -> dict[str, Any]:
        """What ``run.json`` keeps of the tally: the capped iterations (all chains together)
        after and during burn-in, and their share, for a method that logs them (else
        nothing)."""
        if not self.logs_capped:
            return {}
        members = self.loop.num_members
        return {
            "capped": {
                "num_capped": self.capped,
                "share": self.capped / max(self.sampled * members, 1),
                "burn_in_capped": self.burn_in_capped,
                "burn_in_share": self.burn_in_capped / max(self.burnt * members, 1),
            }
        }

    def news(self) -> str | None:
        """The warning, the first time there is enough to judge and one to give (then
        ``None``): what a running loop shows once."""
        if self.told or not self.enough_to_judge():
            return None
        warning = self.warning()
        self.told = warning is not None
        return warning

    def status(self, log: dict[str, Any]) -> str:
        """The progress bar's status: phase and the quantities a method logs."""
        sampler = "acceptance_rate" in log
        parts = ["burn-in" if log.get("burn_in") else "sampling"] if sampler else []
        if sampler:
            parts.append(f"accept {np.mean(log['acceptance_rate']):.2f}")
        if "step_size" in log:
            parts.append(f"step {np.mean(log['step_size']):.2e}")
        if "num_leapfrog" in log:
            parts.append(f"L {int(np.max(log['num_leapfrog']))}")
        for key, label in (("log_posterior", "log post"), ("elbo", "elbo")):
            if key in log:
                parts.append(f"{label} {np.mean(log[key]):.4g}")
        if sampler and "divergent" in log:
            if log.get("burn_in"):
                parts.append(f"burn-in div {self.burn_in_divergent}")
            else:
                parts.append(f"div {self.divergent} (burn-in {self.burn_in_divergent})")
        if sampler and self.capped + self.burn_in_capped:
            members = self.loop.num_members
            if log.get("burn_in"):
                parts.append(f"burn-in capped {self.burn_in_capped / (self.burnt * members):.0%}")
            else:
                parts.append(f"capped {self.capped / max(self.sampled * members, 1):.0%}")
        for key, value in log.get("test", {}).items():
            if key != "ece":
                parts.append(f"test {key} {value:.4g}")
        return " | ".join(parts)
