"""Run directories: their files, the lock, the record, and the rules for resume and overwrite.

A run directory holds::

    run.json         the record: method, resolved configs, versions, seed, git hash, start/end
                     times, status ("starting" / "running" / "finished"), the layout version,
                     the sha256 of its own settings (an edit is detected), the run's identity
                     where the manifest's chain starts and, once finished, where it ends
    manifest.jsonl   sha256 and array shapes of every sample and state file, each line
                     chained to the one before it (:mod:`bnnkit.runs.manifest`)
    state.npz        latest full method state of every member (for exact resume)
    samples/         the posteriors the method returned at its kept units, written by
                     :mod:`bnnkit.posterior.store`: one file per kept unit (iteration or
                     epoch), ``sample_<unit>.npz``, or per block of a sampler's kept
                     iterations, ``sample_<first>-<last>.npz``
    metrics.jsonl    one line per unit (acceptance, step size, losses, test metrics, ...)
    evaluation*.json, predictions/   written by ``bnnkit evaluate``

Every write goes through :mod:`bnnkit.storage` (atomic, pickle-free). The lock
(:mod:`bnnkit.runs.lock`) lets one process write a directory at a time. A new run's first
write after its lock is ``run.json`` with status "starting"; a directory that holds nothing
more than that (or only a stale lock and an empty ``samples/``) is a run that never started
and may be started afresh. Everything a run's path or flags could get wrong is checked by
:func:`bnnkit.runs.placement.check_target` before anything is written, a folder where a run
keeps a file included (:meth:`RunDir.misplaced`).

Example:
    >>> import tempfile
    >>> rundir = RunDir(tempfile.mkdtemp() + "/run")
    >>> with rundir.lock():
    ...     rundir.prepare(overwrite=False)
    >>> rundir.sample_file(3).name
    'sample_0000003.npz'
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.runs import lock as _lock
from bnnkit.runs.lock import LOCK_FILE
from bnnkit.runs.manifest_lines import MANIFEST_FILE
from bnnkit.runs.provenance import settings_digest

RUN_FILE = "run.json"
#: The arrays of a problem made in memory: ``bnnkit.problem.DATA_FILE`` (not imported here,
#: where reading a run needs no model code).
DATA_FILE = "data.npz"
STATE_FILE = "state.npz"
SAMPLES_DIR = "samples"
LOG_FILE = "metrics.jsonl"

#: Version of the layout written by this bnnkit; runs without it predate the one driver;
#: layout 3 adds the manifest and the settings digest.
LAYOUT = 3
#: Layouts this version reads (2: the one driver, before the manifest); none at all is the
#: layout before the one driver.
KNOWN_LAYOUTS = (2, 3)
#: What ``run.json`` of a run of the current layout must hold, and of which type.
REQUIRED = {"method": str, "problem": dict, "method_config": dict, "loop": dict, "status": str}
#: Temporary files of atomic writes (see :func:`bnnkit.storage.atomic_write_bytes`).
TEMPORARY = (".*.tmp", f"{SAMPLES_DIR}/.*.tmp")
#: The parent record of a composite run made before records were named after their kind
#: (every kind's but a reference's, whose record was always ``reference.json``).
COMPOSITE_FILE = "composite.json"


def composite_record_name(kind: str) -> str:
    """The parent record's file name of a composite run of ``kind``
    (:mod:`bnnkit.runs.composite`): ``KIND.json``.

    Example:
        >>> composite_record_name("reference")
        'reference.json'
    """
    return f"{kind}.json"


def composite_record(folder: str | os.PathLike) -> Path | None:
    """The parent record of the composite run in ``folder``, ``None`` where ``folder`` holds
    none: a folder without ``run.json`` whose ``KIND.json`` records that kind (or, written
    before records were named after their kind, whose ``composite.json`` records one).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> composite_record(folder) is None
        True
        >>> _ = (folder / "reference.json").write_text('{"kind": "reference"}')
        >>> composite_record(folder).name
        'reference.json'
    """
    folder = Path(folder)
    if not folder.is_dir() or (folder / RUN_FILE).exists():
        return None
    for file in sorted(folder.glob("*.json")):
        kind = _recorded_kind(file)
        if kind is not None and file.name in (composite_record_name(kind), COMPOSITE_FILE):
            return file
    return None


#: A composite's parent record is a few kilobytes; larger JSON files (a user's own, in a folder
#: that a path's check walks through) are not read.
MAX_RECORD_BYTES = 1 << 20


def _recorded_kind(file: Path) -> str | None:
    try:
        if file.stat().st_size > MAX_RECORD_BYTES:
            return None
        record = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    kind = record.get("kind") if isinstance(record, dict) else None
    return kind if isinstance(kind, str) else None


def composite_stages(record: Mapping[str, Any]) -> list[str]:
    """The stages a composite's parent record names, in the order they ran.

    Example:
        >>> composite_stages({"kind": "reference", "stages": [{"name": "ensemble"},
        ...                                                   {"name": "chains"}]})
        ['ensemble', 'chains']
    """
    stages = record.get("stages")
    if isinstance(stages, list):
        return [s["name"] for s in stages if isinstance(s, dict) and isinstance(s.get("name"), str)]
    # The reader of references made before stages were recorded: an ensemble, then chains.
    return ["ensemble", "chains"] if record.get("kind") == "reference" else []


def resolve(path: str | os.PathLike) -> Path:
    """The run directory a path stands for: a composite run's folder reads as its last
    stage's run (a reference's chains), any other path as it is, so that ``bnnkit evaluate
    REF`` (and every other command that reads a run) gives the model average pooled over the
    reference's chains.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> resolve(folder) == folder
        True
        >>> _ = (folder / "two.json").write_text(
        ...     '{"kind": "two", "stages": [{"name": "first"}, {"name": "last"}]}')
        >>> resolve(folder) == folder / "last"
        True
    """
    path = Path(path)
    record = composite_record(path)
    if record is None:
        return path
    stages = composite_stages(storage.read_json(record))
    return path / stages[-1] if stages else path


#: Where ``bnnkit evaluate`` writes its predictions.
PREDICTIONS_DIR = "predictions"
#: Where ``bnnkit prune`` writes by default.
PRUNING_DIR = "pruning"
#: The entries a run directory's owner writes at its top level (besides ``evaluation*.json``);
#: ``samples/`` and ``predictions/`` are bnnkit's through and through.
OWN_FILES = (LOCK_FILE, RUN_FILE, STATE_FILE, LOG_FILE, MANIFEST_FILE, "laplace.npz")


def _inside(name: str) -> property:
    """A read-only :class:`RunDir` attribute: the path of the entry ``name`` in the run
    directory."""

    def entry(rundir: RunDir) -> Path:
        return rundir.path / name

    return property(entry)


class RunDir:
    """A run directory: paths plus the rules for creating, resuming and overwriting it."""

    def __init__(self, path: str | os.PathLike):
        self.given = os.fspath(path)
        self.path = resolve(path)

    run_file = _inside(RUN_FILE)
    state_file = _inside(STATE_FILE)
    samples_dir = _inside(SAMPLES_DIR)
    log_file = _inside(LOG_FILE)
    manifest_file = _inside(MANIFEST_FILE)

    def sample_file(self, unit: int, last: int | None = None) -> Path:
        """The file of kept unit ``unit``, or of the block of kept units ``unit`` to ``last``."""
        name = f"sample_{unit:07d}.npz" if last is None else f"sample_{unit:07d}-{last:07d}.npz"
        return self.samples_dir / name

    def links(self) -> list[Path]:
        """Symbolic links where bnnkit writes in this directory: its own files, ``samples/``,
        ``predictions/``, ``pruning/`` and anything inside those."""
        if not self.path.is_dir():
            return []
        folders = (SAMPLES_DIR, PREDICTIONS_DIR, PRUNING_DIR)
        found = [
            self.path / name for name in (*OWN_FILES, *folders) if (self.path / name).is_symlink()
        ]
        found += [p for p in self.path.glob("evaluation*.json") if p.is_symlink()]
        for folder in (self.path / name for name in folders):
            if folder.is_dir() and not folder.is_symlink():
                found += [p for p in folder.iterdir() if p.is_symlink()]
        return sorted(found)

    def misplaced(self) -> list[tuple[Path, str]]:
        """Entries where bnnkit writes a file but finds a folder (or something else that is
        not a regular file), or writes a folder but finds a file: its own files, temporary
        files, ``samples/`` and the sample and chunk files in it, ``predictions/`` and
        ``evaluation*.json``. Links are :meth:`links`' to name.

        Returns:
            Each entry and what it is, as a phrase that follows its name.
        """
        if not self.path.is_dir():
            return []
        found = []

        def want_file(path: Path) -> None:
            with contextlib.suppress(FileNotFoundError):
                mode = path.lstat().st_mode
                if stat.S_ISDIR(mode):
                    found.append((path, "is a folder where bnnkit keeps a file of the run"))
                elif not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                    found.append(
                        (path, "is not a regular file (bnnkit keeps a file of the run there)")
                    )

        for name in (*OWN_FILES, DATA_FILE):
            want_file(self.path / name)
        for pattern in ("evaluation*.json", *TEMPORARY):
            for path in self.path.glob(pattern):
                want_file(path)
        for folder, patterns in (
            (self.samples_dir, ("sample_*.npz", "chunk_*.npz", ".*.tmp")),
            (self.path / PREDICTIONS_DIR, ("*.npz", ".*.tmp")),
        ):
            if folder.is_symlink() or not (folder.exists() or folder.is_symlink()):
                continue
            if not folder.is_dir():
                found.append((folder, "is a file where bnnkit keeps a folder of the run"))
                continue
            for pattern in patterns:
                for path in folder.glob(pattern):
                    want_file(path)
        return sorted(set(found))

    def check_layout(self) -> None:
        """Refuse a run directory with a folder where bnnkit writes a file, or a file where
        it writes a folder (:meth:`misplaced`): a run would stop at it part-way, after it had
        written other files.

        Raises:
            ConfigError: naming the first such entry.
        """
        for path, problem in self.misplaced():
            raise ConfigError(
                f"{str(path)!r} {problem}; allowed: the run's own files (remove "
                "it, or start the run in another directory)"
            )

    def check_links(self) -> None:
        """Refuse a run directory with a symbolic link where bnnkit writes (:meth:`links`):
        writing there would follow it, possibly outside the run directory. The directory itself
        may be a link (``--dir`` names it); what is inside it must be its own.

        Raises:
            ConfigError: naming the first link and its target.
        """
        for link in self.links():
            raise ConfigError(
                f"{str(link)!r} is a symbolic link (to {os.readlink(link)!r}); bnnkit writes "
                "no file of a run through a link, which could point outside the run "
                "directory; allowed: the run's own files (remove the link)"
            )

    def exists(self) -> bool:
        """Whether the directory holds anything besides its lock."""
        return self.path.is_dir() and any(e.name != LOCK_FILE for e in self.path.iterdir())

    def read_record(self) -> dict:
        """``run.json``, checked: the keys a run needs, and settings that match their digest.

        Raises:
            ConfigError: no run here, or a damaged or edited record.
        """
        if not self.run_file.is_file():
            raise ConfigError(f"{str(self.path)!r} is not a bnnkit run directory (no {RUN_FILE})")
        record = storage.read_json(self.run_file)
        if not isinstance(record, dict) or not isinstance(record.get("method"), str):
            raise ConfigError(
                f"{str(self.run_file)!r} is damaged: it is not a JSON object naming a method"
            )
        layout = record.get("layout")
        if "layout" in record and (type(layout) is not int or layout not in KNOWN_LAYOUTS):
            kind = "layout" if type(layout) is int else "not a layout number:"
            raise ConfigError(
                f"{str(self.run_file)!r} is damaged or from another bnnkit: {kind} "
                f"{json.dumps(layout)[:40]}; allowed: the layouts this version reads, "
                f"{', '.join(map(str, KNOWN_LAYOUTS))}"
            )
        # What only layout 3 writes: a record with any of it is checked as one (an older
        # layout number, or none, written over a newer run hides no edit).
        newer = "settings_sha256" in record or "manifest" in record or self.manifest_file.exists()
        if (layout or 0) >= 3 or newer:
            if layout != LAYOUT:
                raise ConfigError(
                    f"{str(self.run_file)!r} was edited: it has the manifest "
                    f"and settings digest of layout {LAYOUT} but says layout "
                    f"{json.dumps(layout)}; allowed: the record the run wrote"
                )
            for key, kind in REQUIRED.items():
                if not isinstance(record.get(key), kind):
                    raise ConfigError(
                        f"{str(self.run_file)!r} is damaged: {key!r} is missing "
                        f"or not a JSON {'object' if kind is dict else 'string'}"
                    )
            if record.get("settings_sha256") != settings_digest(record):
                raise ConfigError(
                    f"{str(self.run_file)!r} was edited: its settings no longer match the "
                    "digest recorded with them; allowed: the settings the run was made with"
                )
        return record

    def write_record(self, record: Mapping[str, Any]) -> None:
        """Write ``run.json``, with the digest of its settings."""
        record = dict(record)
        if record.get("layout", 0) >= 3:
            record["settings_sha256"] = settings_digest(record)
        storage.write_json(self.run_file, record)

    def prepare(self, *, overwrite: bool) -> None:
        """Under the lock: clear what ``overwrite`` replaces (or a run that never started)
        and create ``samples/``.

        Raises:
            ConfigError: the directory changed since
                :func:`~bnnkit.runs.placement.check_target` into one that may not be started
                afresh.
        """
        if self.exists():
            if not (overwrite and self.run_file.is_file()) and not self.never_started():
                raise ConfigError(
                    f"run directory {self.given!r} is not empty; pass --resume "
                    "to continue it or --overwrite to replace it"
                )
            self._clear()
        self.samples_dir.mkdir(parents=True, exist_ok=True)

    def never_started(self) -> bool:
        """Whether the directory holds only what a run leaves before its first state and
        sample: a lock, an empty ``samples/``, an empty manifest and log, temporary files,
        and a ``run.json`` whose status is "starting" (or "running": a run interrupted before
        its first unit was recorded)."""
        for entry in self.path.iterdir():
            if entry.name in (LOCK_FILE, MANIFEST_FILE, LOG_FILE) or (
                entry.name.startswith(".") and entry.name.endswith(".tmp")
            ):
                if entry.name in (MANIFEST_FILE, LOG_FILE) and entry.lstat().st_size:
                    return False
                continue
            if (
                entry == self.samples_dir
                and entry.is_dir()
                and not any(not f.name.endswith(".tmp") for f in entry.iterdir())
            ):
                continue
            if entry == self.run_file:
                with contextlib.suppress(ConfigError, OSError, UnicodeDecodeError):
                    record = storage.read_json(entry)
                    if isinstance(record, dict) and record.get("status") in ("starting", "running"):
                        continue
            return False
        return True

    def forget_start(self) -> None:
        """Under the lock: remove what a new run wrote before it failed without recording a
        state or a kept unit (its record, manifest, log and empty ``samples/``), leaving the
        directory as it was before the run (empty, or absent once its lock is let go)."""
        self._clear()
        with contextlib.suppress(OSError):
            self.samples_dir.rmdir()

    def _clear(self) -> None:
        for name in (RUN_FILE, STATE_FILE, LOG_FILE, MANIFEST_FILE, "laplace.npz"):
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
        for pattern in ("evaluation*.json", "predictions/*.npz", *TEMPORARY):
            for f in self.path.glob(pattern):
                f.unlink()
        if self.samples_dir.is_dir():
            for f in self.samples_dir.glob("*.npz"):
                f.unlink()

    def remove_temporary(self) -> None:
        """Delete temporary files of writes a crash cut off (only under the lock: no write of
        this run is in flight then)."""
        for pattern in TEMPORARY:
            for f in self.path.glob(pattern):
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()

    def sample_files(self) -> dict[int, Path]:
        """Every stored posterior's file by the first unit it holds, in order."""
        if not self.samples_dir.is_dir():
            return {}
        files = {}
        for f in self.samples_dir.glob("sample_*.npz"):
            first, _, last = f.stem[len("sample_") :].partition("-")
            with contextlib.suppress(ValueError):
                int(last or first)
                files[int(first)] = f
        return dict(sorted(files.items()))

    def sample_units(self) -> list[int]:
        """Units (iterations or epochs) that have a stored posterior, in order (a block's
        file holds every unit from its first to its last)."""
        units = []
        for first, f in self.sample_files().items():
            last = f.stem.partition("-")[2]
            units.extend(range(first, int(last or first) + 1))
        return units

    def remove_samples_from(self, unit: int) -> None:
        """Delete stored posteriors of units ``>= unit`` (recomputed identically on resume):
        a block's file goes with its first unit, and a state is only saved where a block
        ends."""
        for first, f in self.sample_files().items():
            if first >= unit:
                f.unlink()

    def append_log(self, records: list[dict]) -> None:
        """Append unit records (one JSON line each), flushed and fsynced."""
        if not records:
            return
        storage.append_bytes(
            self.log_file, "".join(json.dumps(record) + "\n" for record in records).encode()
        )

    def truncate_log(self, upto_unit: int) -> None:
        """Keep only log lines of units < ``upto_unit`` (used on resume)."""
        if not self.log_file.is_file():
            return
        kept = [
            json.dumps(record) + "\n"
            for record in self.read_log()
            if record["iteration"] < upto_unit
        ]
        storage.atomic_write_bytes(self.log_file, "".join(kept).encode())

    def read_log(self) -> list[dict]:
        """Every complete line of ``metrics.jsonl``: JSON objects of one unit each (a torn
        or foreign line is skipped; the log is a diagnostic, not part of the posterior)."""
        if not self.log_file.is_file():
            return []
        records = []
        with open(self.log_file, errors="replace") as f:
            for line in f:
                with contextlib.suppress(json.JSONDecodeError, RecursionError):
                    record = json.loads(line)
                    if isinstance(record, dict) and type(record.get("iteration")) is int:
                        records.append(record)
        return records

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Create the directory if needed and hold its lock; temporary files of writes cut
        off by a crash are removed on taking it and on leaving.

        Raises:
            ConfigError: another live process holds the lock.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        with _lock.hold(self.path):
            # Again under the lock: a link made since check_target must not be written through,
            # nor a folder made where a file goes be found part-way.
            self.check_links()
            self.check_layout()
            self.remove_temporary()
            try:
                yield
            finally:
                self.remove_temporary()
