"""Where a run or an output may go: nowhere inside another run directory or run made of runs,
whose folder holds only what its run writes (so no export replaces one of its files); only a
composite run opens its own stages inside its folder, under its lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from bnnkit.errors import ConfigError
from bnnkit.runs import lock as _lock
from bnnkit.runs.directory import (
    COMPOSITE_FILE,
    COMPOSITE_RECORDS,
    MANIFEST_FILE,
    RUN_FILE,
    SAMPLES_DIR,
    STATE_FILE,
)
from bnnkit.runs.lock import LOCK_FILE


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
        if not (folder / RUN_FILE).exists() and any(
            (folder / name).is_file() for name in (*COMPOSITE_RECORDS.values(), COMPOSITE_FILE)
        ):
            return folder
    return None


def composite_held_here(folder: Path) -> bool:
    """Whether ``folder`` is a composite run whose lock this process holds: it opens its own
    stages there (:mod:`bnnkit.runs.composite`), and nobody else may."""
    if (folder / RUN_FILE).exists():
        return False
    who = _lock.holder(folder)
    return who is not None and who.get("pid") == os.getpid()


def check_outside_runs(path: str | os.PathLike, flag: str) -> None:
    """Refuse an output path inside a run directory: it could replace the run's own files
    (``samples RUN --out RUN/state.npz``), and a run directory holds only what its run writes.

    Raises:
        ConfigError: naming the flag, the path and the run directory.
    """
    run = enclosing_run(path)
    if run is not None:
        raise ConfigError(
            f"{flag} {os.fspath(path)!r} is inside the run directory "
            f"{str(run)!r}, which holds only what its run writes; allowed: a "
            "path outside every run directory"
        )
