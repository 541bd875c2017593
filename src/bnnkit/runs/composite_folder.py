"""A composite run's folder from outside: which folder is one, its record, its stages, what
a call may do with it, and everything wrong in it (``bnnkit verify``).

The life of a composite is :mod:`bnnkit.runs.composite`; this is what the readers and the
checks before a call need, without running anything.

Example:
    >>> composite_stages({"kind": "two", "stages": [{"name": "ensemble"}, {"name": "chains"}]})
    ['ensemble', 'chains']
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.runs import lock
from bnnkit.runs.directory import (
    RUN_FILE,
    composite_record,
    composite_record_name,
    composite_stages,
)
from bnnkit.runs.lock import LOCK_FILE
from bnnkit.runs.manifest import Finding
from bnnkit.runs.placement import check_outside_runs
from bnnkit.runs.verification import verify as verify_run


def stage_dir(folder: str | os.PathLike, name: str) -> Path:
    """The run directory of stage ``name`` of the composite in ``folder``."""
    return Path(folder) / name


def read_record(folder: str | os.PathLike) -> dict[str, Any]:
    """The parent record of the composite in ``folder``.

    Raises:
        ConfigError: ``folder`` holds no composite, or its record is damaged.
    """
    file = composite_record(folder)
    if file is None:
        raise ConfigError(
            f"{os.fspath(folder)!r} holds no composite run (no KIND.json recording its kind)"
        )
    record = storage.read_json(file)
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        raise ConfigError(f"{str(file)!r} is damaged: not the record of a composite run")
    return record


def check_folder(
    folder: Path, kind: str, stages: tuple[str, ...], *, resume: bool, overwrite: bool
) -> None:
    """Refuse, writing nothing, a folder a composite of ``kind`` with stages named ``stages``
    may not start or resume in.

    Raises:
        ConfigError: both ``resume`` and ``overwrite``; a file in the way; a folder inside a
            run directory; a non-empty folder without either flag; ``resume`` of a folder
            holding no composite of this kind; ``overwrite`` of a folder holding what no
            composite of this kind writes.
    """
    what, record = f"a folder made by bnnkit {kind}", composite_record_name(kind)
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other; allowed: one of them")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{str(folder)!r} is a file; allowed: a folder")
    # Inside another run or composite, a composite could replace that one's files.
    check_outside_runs(folder.absolute().parent, "dir")
    entries = {e.name for e in folder.iterdir()} - {LOCK_FILE} if folder.is_dir() else set()
    if resume and record not in entries:
        raise ConfigError(f"--resume: {str(folder)!r} holds no {kind} ({record}); allowed: {what}")
    if entries and not resume and not overwrite:
        raise ConfigError(
            f"{str(folder)!r} is not empty; allowed: --resume (continue the {kind} "
            "there) or --overwrite (replace it)"
        )
    foreign = entries - {record, *stages}
    if overwrite and foreign:
        raise ConfigError(
            f"--overwrite: {str(folder)!r} holds {sorted(foreign)[0]!r}, which no "
            f"{kind} writes; allowed: {what} or an empty one"
        )


def verify(folder: str | os.PathLike) -> tuple[list[Any], str]:
    """Everything wrong in a composite: each stage's run checked as ``bnnkit verify`` checks
    a run (its findings named ``STAGE/FILE``), and a stage the record says ran but that is
    gone; and one line on where the composite stands.

    Raises:
        ConfigError: ``folder`` holds no composite, its record is damaged, or a live process
            is writing it.
    """
    folder = Path(folder)
    record = read_record(folder)
    who = lock.holder(folder)
    if who is not None:
        raise ConfigError(
            f"{os.fspath(folder)!r} is in progress: process {who.get('pid')} is writing it, so "
            "its files are not checked now; verify it once that process has finished or stopped"
        )
    findings: list[Any] = []
    states = []
    for name in composite_stages(record):
        run_dir = stage_dir(folder, name)
        if not (run_dir / RUN_FILE).is_file():
            if _ran(record, name):
                findings.append(Finding(name, "is missing, though the record says it ran", False))
            states.append(f"{name} not started")
            continue
        found, summary = verify_run(run_dir)
        findings += [f._replace(file=f"{name}/{f.file}") for f in found]
        states.append(f"{name} {summary}")
    return findings, f"{record.get('status')} {record.get('kind')}; " + "; ".join(states)


def _ran(record: dict[str, Any], name: str) -> bool:
    """Whether the parent record says stage ``name`` has run (a record made before outcomes
    were recorded: every stage of a finished composite)."""
    outcomes = record.get("outcomes")
    if isinstance(outcomes, dict):
        return name in outcomes
    return record.get("status") == "finished"
