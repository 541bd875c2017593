"""The ``--out DIR`` of an experiment or a report: new or empty, else continued (``--resume``)
or replaced (``--overwrite``), and only when it holds that output's settings file.

Every experiment and :func:`bnnkit.report.document.document` check their folder with
:func:`check` before they read a run or write a byte, so a refused command leaves nothing
behind. A folder inside a run directory is refused: a run directory holds only what its run
writes, so no export can replace one of its files. It sits below both, so that ``report/``
does not import ``experiments/``.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> check(folder, "shift.json", "covariate-shift table", resume=False, overwrite=False)
    >>> check(folder, "shift.json", "covariate-shift table", resume=True, overwrite=False)
    Traceback (most recent call last):
    ...
    bnnkit.errors.ConfigError: nothing to resume: '...' holds no shift.json
"""

from __future__ import annotations

import os
from pathlib import Path

from bnnkit.errors import ConfigError


def _continue_or_replace(flags: tuple[str, ...]) -> str:
    """The advice for a folder in the way, naming only the flags the command takes."""
    parts = {"--resume": "pass --resume to continue it", "--overwrite": "--overwrite to replace it"}
    offered = [parts[f] for f in ("--resume", "--overwrite") if f in flags]
    if not offered:
        return "allowed: an empty folder or a new path"
    if len(offered) == 1 and offered[0].startswith("--"):
        return "pass " + offered[0]
    return " or ".join(offered)


def check(
    out: str | os.PathLike,
    settings_file: str,
    what: str,
    *,
    resume: bool,
    overwrite: bool,
    flags: tuple[str, ...] = ("--resume", "--overwrite"),
) -> None:
    """Check, writing nothing, that an experiment may be written into (or continued in) ``out``.

    Args:
        out: the folder given to ``--out``.
        settings_file: the file that marks a folder as this experiment's (``"surface.json"``).
        what: the experiment's output, for the messages (``"surface"``).
        resume: continue the experiment in ``out``.
        overwrite: replace the experiment in ``out``.
        flags: which of ``--resume`` and ``--overwrite`` the command offers (its messages
            advise no other).

    Raises:
        ConfigError: both flags, an empty path, a file in the way, a folder that cannot be
            written, a folder inside a run directory, ``resume`` of a folder without
            ``settings_file``, a non-empty folder without either flag, or ``overwrite`` of a
            folder without ``settings_file``.
    """
    from bnnkit.runs.placement import check_outside_runs

    given = os.fspath(out)
    path = Path(given)
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other; allowed: one of them")
    if not given.strip():
        raise ConfigError("--out '' names no folder; allowed: a path")
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"--out {given!r} is a file; allowed: a folder or a path that does not exist yet"
        )
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"--out {given!r} cannot be created: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"--out {given!r} cannot be written: {str(existing)!r} does not "
            "allow this user to write"
        )
    check_outside_runs(given, "--out")
    has_settings = (path / settings_file).is_file()
    if resume:
        if not has_settings:
            raise ConfigError(f"nothing to resume: {given!r} holds no {settings_file}")
        return
    from bnnkit.runs.lock import LOCK_FILE

    if path.is_dir() and any(e.name != LOCK_FILE for e in path.iterdir()):
        if not overwrite:
            raise ConfigError(f"--out {given!r} is not empty; {_continue_or_replace(flags)}")
        if not has_settings:
            raise ConfigError(
                f"refusing to overwrite {given!r}: it is not empty and holds no "
                f"{settings_file}, so it is not a {what} of bnnkit"
            )
