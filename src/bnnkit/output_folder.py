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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.runs.lock import LOCK_FILE
from bnnkit.runs.placement import check_outside_runs


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
    check_outside_runs(given, "out")
    has_settings = (path / settings_file).is_file()
    if resume:
        if not has_settings:
            raise ConfigError(f"nothing to resume: {given!r} holds no {settings_file}")
        return

    if path.is_dir() and any(e.name != LOCK_FILE for e in path.iterdir()):
        if not overwrite:
            raise ConfigError(f"--out {given!r} is not empty; {_continue_or_replace(flags)}")
        if not has_settings:
            raise ConfigError(
                f"refusing to overwrite {given!r}: it is not empty and holds no "
                f"{settings_file}, so it is not a {what} of bnnkit"
            )


def continues(
    out: str | os.PathLike,
    settings_file: str,
    what: str,
    same: Mapping[str, tuple[str, Any]],
    *,
    before: Mapping[str, Any] | None = None,
) -> bool:
    """Whether ``out`` continues an earlier output of the same settings, for an output that
    goes on where it stopped without a ``--resume`` (``bnnkit paper``); a new or empty folder
    is checked as :func:`check` checks it (writing nothing) and gives ``False``.

    Args:
        out: the ``--out`` folder.
        settings_file: the file that marks a folder as this output's.
        what: the output, for the messages.
        same: the settings that must match, by their key in ``settings_file``: (flag, value).
        before: what ``settings_file`` of an older version, without a key, meant by it.

    Raises:
        ConfigError: ``out`` is a file, holds this output of other settings (naming each
            setting by its flag and value), or anything :func:`check` refuses.

    Example:
        >>> import json, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> continues(folder, "paper.json", "paper study", {"scale": ("--scale", "tiny")})
        False
        >>> _ = open(f"{folder}/paper.json", "w").write(json.dumps({"scale": "small"}))
        >>> continues(folder, "paper.json", "paper study", {"scale": ("--scale", "tiny")})
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --out '...' holds a paper study of --scale small; allowed: ...
    """
    given = os.fspath(out)
    path = Path(given)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {given!r} is a file; allowed: a folder")
    if not (path / settings_file).is_file():
        check(out, settings_file, what, resume=False, overwrite=False, flags=())
        return False
    stored = {**(before or {}), **storage.read_json(path / settings_file)}
    if any(stored.get(key) != value for key, (_, value) in same.items()):
        named = [f"{flag} {stored.get(key)}" for key, (flag, _) in same.items()]
        listed = ", ".join(named[:-1]) + (" and " if len(named) > 1 else "") + named[-1]
        raise ConfigError(
            f"--out {given!r} holds a {what} of {listed}; allowed: the same, or another --out"
        )
    return True
