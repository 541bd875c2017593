"""Everything wrong in a run directory, and where the run stands: what ``bnnkit verify``
reports and what a resume or a composite run checks before it reuses a finished run.

A run directory's files are checked against its manifest and its record
(:mod:`bnnkit.runs.manifest`); links and entries where the run writes that are not its own are
named as in the way, and a user data file the run recorded is checked to be the one it was made
on. A run a live process is writing is not judged: what is read of it may be a moment of a
write, not damage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from bnnkit.data import npz
from bnnkit.errors import ConfigError
from bnnkit.runs import lock as _lock
from bnnkit.runs import manifest, manifest_lines
from bnnkit.runs.directory import RUN_FILE, RunDir

#: The name under which :func:`verify` reports the data a run was made on.
DATA_FINDING = "the data"


def data_finding(record: Mapping[str, Any]) -> manifest.Finding | None:
    """What changed of the user data file a run recorded (``None``: nothing, or a run on a
    registry dataset or without a fingerprint)."""
    recorded = record.get("dataset")
    if not isinstance(recorded, dict):
        return None
    given = str((record.get("problem") or {}).get("dataset"))
    try:
        npz.recorded_file(recorded, given)
    except ConfigError as err:
        return manifest.Finding(DATA_FINDING, f"({err})", False)
    return None


def check_not_in_progress(rundir: RunDir) -> None:
    """Refuse to judge a run directory that a live process holds (it is being written: what
    is read of it may be a moment of a write, not damage).

    Raises:
        ConfigError: naming the process and since when it holds the run.
    """
    who = _lock.holder(rundir.path)
    if who is not None:
        since = f" since {who['since']}" if who.get("since") else ""
        raise ConfigError(
            f"{rundir.given!r} is in progress: process {who.get('pid')} has been writing it"
            f"{since}, so its files are not checked now; verify it once that process has "
            "finished or stopped"
        )


def verify(run_dir: str | os.PathLike) -> tuple[list[manifest.Finding], str]:
    """Everything wrong in a run directory, and one line on where the run stands.

    A run that a live process is writing is not judged (:func:`check_not_in_progress`), before
    the check and again after it when the check found something: a run started while it was
    read is in progress, not damaged.

    Returns:
        The findings (``run.json``, links where the run writes and the data it was made on
        included) and a summary such as ``"finished: 10 of 10 iterations"``.

    Raises:
        ConfigError: ``run_dir`` is not a run directory at all, or a live process is writing
            it.
    """
    rundir = RunDir(run_dir)
    if not rundir.path.is_dir() or not rundir.run_file.exists():
        raise ConfigError(f"{str(run_dir)!r} is not a bnnkit run directory (no {RUN_FILE})")
    check_not_in_progress(rundir)
    findings, summary = _verify(rundir)
    if findings:
        check_not_in_progress(rundir)
    return findings, summary


def _verify(rundir: RunDir) -> tuple[list[manifest.Finding], str]:
    # What is in the way is named as such, and nothing else about the same entry: removing
    # it comes first, and what is then missing is the next verify's to say.
    in_the_way = [
        manifest.Finding(
            str(link.relative_to(rundir.path)),
            f"is a symbolic link (to {os.readlink(link)!r}), which bnnkit does not write through",
            False,
            in_the_way=True,
        )
        for link in rundir.links()
    ]
    in_the_way += [
        manifest.Finding(str(path.relative_to(rundir.path)), problem, False, in_the_way=True)
        for path, problem in rundir.misplaced()
    ]
    named = {f.file for f in in_the_way}
    try:
        record = rundir.read_record()
    except ConfigError as err:
        problem = str(err).split("' ", 1)[-1]
        return sorted(
            [
                *in_the_way,
                *([] if RUN_FILE in named else [manifest.Finding(RUN_FILE, problem, False)]),
            ],
            key=lambda f: f.file,
        ), "unreadable"
    found = manifest.check(rundir, record)
    data = data_finding(record)
    findings = sorted(
        [
            *(f for f in found.findings if f.file not in named),
            *in_the_way,
            *([data] if data else []),
        ],
        key=lambda f: f.file,
    )
    loop = record.get("loop") or {}
    total = loop.get("num_units", "?")
    kind = loop.get("kind", "units")
    summary = f"{record.get('status')}: the state covers {found.state_unit} of {total} {kind}"
    if record.get("manifest") and manifest_lines.IDENTITY_KEY not in record:
        summary += (
            "; note: no chain: written by an older bnnkit (its manifest lines are not "
            "chained to its record, so a line taken with its file from another run "
            "would not be detected)"
        )
    return findings, summary
