"""Where a run or an output may go: nowhere inside another run directory or run made of runs,
whose folder holds only what its run writes (so no export replaces one of its files); only a
composite run opens its own stages inside its folder, under its lock. :func:`check_target` is
every check of a run's directory before anything is written.

Example:
    >>> import tempfile
    >>> check_target(RunDir(tempfile.mkdtemp() + "/run"), resume=False, overwrite=False)
"""

from __future__ import annotations

import os
from pathlib import Path

from bnnkit.errors import ArgumentError, ConfigError
from bnnkit.runs import lock as _lock
from bnnkit.runs.directory import (
    RUN_FILE,
    SAMPLES_DIR,
    STATE_FILE,
    RunDir,
    composite_record,
)
from bnnkit.runs.lock import LOCK_FILE
from bnnkit.runs.manifest_lines import MANIFEST_FILE


def enclosing_run(path: str | os.PathLike) -> Path | None:
    """The run directory ``path`` is or lies inside (links resolved), if any.

    A folder is a run directory when it holds ``run.json`` and one more file or folder that
    only runs have (``samples/``, the manifest, the state or the lock); a composite run's
    folder (its parent record, and no ``run.json``) is one too.

    Example:
        >>> import tempfile
        >>> enclosing_run(tempfile.mkdtemp() + "/out.npz") is None
        True
    """
    current = Path(os.path.realpath(path))
    for folder in (current, *current.parents):
        if (folder / RUN_FILE).is_file() and any(
            (folder / name).exists() for name in (SAMPLES_DIR, MANIFEST_FILE, STATE_FILE, LOCK_FILE)
        ):
            return folder
        if composite_record(folder) is not None:
            return folder
    return None


def composite_held_here(folder: Path) -> bool:
    """Whether ``folder`` is a composite run whose lock this process holds: it opens its own
    stages there (:mod:`bnnkit.runs.composite`), and nobody else may."""
    if (folder / RUN_FILE).exists():
        return False
    who = _lock.holder(folder)
    return who is not None and who.get("pid") == os.getpid()


def check_outside_runs(path: str | os.PathLike, argument: str, where: str = "") -> None:
    """Refuse an output path inside a run directory: it could replace the run's own files
    (``samples RUN --out RUN/state.npz``), and a run directory holds only what its run writes.

    Args:
        path: the output path.
        argument: the parameter (and the command line's destination) it came from.
        where: the entry point that was called (empty for a command).

    Raises:
        ArgumentError: naming the argument, the path and the run directory.
    """
    run = enclosing_run(path)
    if run is not None:
        raise ArgumentError(
            where,
            argument,
            f"{os.fspath(path)!r} is inside the run directory {str(run)!r}, which holds only "
            "what its run writes",
            "a path outside every run directory",
        )


def check_target(rundir: RunDir, *, resume: bool, overwrite: bool) -> None:
    """Check, writing nothing, that a run may start (or continue) in ``rundir``.

    Raises:
        ConfigError: an empty path, a file in the way, a folder that cannot be written,
            both ``resume`` and ``overwrite``, ``resume`` of a directory that holds no run,
            a non-empty directory without either flag, ``overwrite`` of something that is
            not a run, or a directory another live process is writing.
    """
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other; allowed: one of them")
    if not rundir.given.strip():
        raise ConfigError("--dir '' names no directory; allowed: a path")
    rundir.check_links()
    enclosing = enclosing_run(rundir.path.parent)
    if enclosing is not None and not composite_held_here(enclosing):
        raise ConfigError(
            f"run directory {rundir.given!r} is inside the run directory "
            f"{str(enclosing)!r}; allowed: a path outside every other run"
        )
    if rundir.path.exists() and not rundir.path.is_dir():
        raise ConfigError(
            f"run directory {rundir.given!r} is a file; allowed: a directory "
            "or a path that does not exist yet"
        )
    existing = rundir.path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(
            f"run directory {rundir.given!r} cannot be created: "
            f"{str(existing)!r} is a file, not a folder"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"run directory {rundir.given!r} cannot be written: "
            f"{str(existing)!r} does not allow this user to write"
        )
    if rundir.samples_dir.is_dir() and not os.access(rundir.samples_dir, os.W_OK | os.X_OK):
        raise ConfigError(
            f"run directory {rundir.given!r} cannot be written: "
            f"{str(rundir.samples_dir)!r} does not allow this user to write"
        )
    if resume:
        if not rundir.run_file.is_file():
            raise ConfigError(f"nothing to resume: {rundir.given!r} holds no {RUN_FILE}")
    elif rundir.exists() and not rundir.never_started():
        if not overwrite:
            raise ConfigError(
                f"run directory {rundir.given!r} is not empty; pass --resume to continue it "
                "or --overwrite to replace it"
            )
        if not rundir.run_file.is_file():
            raise ConfigError(
                f"refusing to overwrite {rundir.given!r}: it is not empty and holds no "
                f"{RUN_FILE}, so it is not a bnnkit run"
            )
    who = _lock.holder(rundir.path) if rundir.path.is_dir() else None
    if who is not None:
        since = f" since {who['since']}" if who.get("since") else ""
        raise ConfigError(
            f"run directory {rundir.given!r} is in use by process {who.get('pid')}{since}; "
            "allowed: one writing process at a time (wait for it to finish or stop it)"
        )
    # Last: a run in use is named as such, whatever is in its folder.
    rundir.check_layout()
