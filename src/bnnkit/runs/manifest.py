"""A run directory's manifest: the sha256 and array shapes of every sample and state file.

``manifest.jsonl`` has one line per file written: its path inside the run directory, sha256,
size, every array's ``[shape, dtype]`` and, for the state, the units it covers. A line is
appended (flushed and fsynced) *before* the file it describes is renamed into place, so at every
moment each file either matches its latest line or is the one write in flight; a torn last line
is that write's. The manifest is rewritten compactly (one line per file, atomically) when a run
starts from its last state and when it finishes.

:func:`check` compares a run directory with its manifest and says what is missing, damaged or
unrecorded, and whether ``--resume`` recomputes it (anything after the last intact state).
A run of :func:`bnnkit.runs.sample` (``"chunks": true`` in ``run.json``) stores, instead of one
file per kept unit, one file per chunk of iterations (:func:`chunk_name`), whose line records
the chunk's ``first`` iteration and, as its ``unit``, the iterations done after it.

Example:
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> from bnnkit import storage
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> manifest = Manifest(folder / MANIFEST_FILE)
    >>> written = storage.save_arrays(folder / "state.npz", {"w": np.zeros(2)},
    ...     before_rename=lambda w: manifest.append(entry("state.npz", w, unit=1)))
    >>> manifest.latest()["state.npz"]["arrays"]
    {'w': [[2], '<f8']}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from bnnkit import storage
from bnnkit.errors import ConfigError

MANIFEST_FILE = "manifest.jsonl"


def entry(file: str, written: storage.Written, **extra: Any) -> dict[str, Any]:
    """The manifest line of a file (``file`` relative to the run directory)."""
    return {"file": file, "sha256": written.sha256, "bytes": written.size,
            "arrays": written.arrays, **extra}


class Manifest:
    """The manifest file of one run directory."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.is_file()

    def entries(self) -> dict[str, list[dict[str, Any]]]:
        """Every file's lines, oldest first.

        Raises:
            ConfigError: a line other than a torn last one is not a manifest entry.
        """
        if not self.path.is_file():
            return {}
        out: dict[str, list[dict[str, Any]]] = {}
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
                ok = (isinstance(value, dict) and isinstance(value.get("file"), str)
                      and isinstance(value.get("sha256"), str))
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                ok = False
            if not ok:
                if number == len(lines) and not data.endswith(b"\n"):
                    break  # the line of a write that was cut off
                raise ConfigError(f"{str(self.path)!r} is damaged at line {number}: not a "
                                  "manifest entry")
            out.setdefault(value["file"], []).append(value)
        return out

    def latest(self) -> dict[str, dict[str, Any]]:
        """Each file's latest line."""
        return {file: lines[-1] for file, lines in self.entries().items()}

    def append(self, line: dict[str, Any]) -> None:
        """Add one line, durable before this returns."""
        storage.append_bytes(self.path, (json.dumps(line, sort_keys=True) + "\n").encode())

    def rewrite(self, lines: Iterable[dict[str, Any]]) -> None:
        """Replace the manifest by ``lines`` (atomically)."""
        text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
        storage.atomic_write_bytes(self.path, text.encode())


class Finding(NamedTuple):
    """One thing wrong in a run directory.

    Attributes:
        file: the file, relative to the run directory.
        problem: what is wrong with it.
        repairable: ``--resume`` recomputes it from the last intact state.
    """

    file: str
    problem: str
    repairable: bool


class Check(NamedTuple):
    """What :func:`check` found.

    Attributes:
        findings: everything wrong, in file order.
        state_unit: units covered by the intact state (0: none, start from the beginning).
        state_sha256: the digest the intact state has (``None`` without one).
        samples: intact kept units and their files' digests (``None``: not verified, a run
            of an older layout).
    """

    findings: list[Finding]
    state_unit: int
    state_sha256: str | None
    samples: dict[int, str | None]


def sample_name(unit: int) -> str:
    """A kept unit's file, relative to the run directory."""
    return f"samples/sample_{unit:07d}.npz"


def sample_unit(file: str) -> int | None:
    """The unit of a sample file's manifest name (``None``: not a sample file)."""
    if not (file.startswith("samples/sample_") and file.endswith(".npz")):
        return None
    try:
        return int(file[len("samples/sample_"):-len(".npz")])
    except ValueError:
        return None


def chunk_name(unit: int) -> str:
    """The file of a chunk of iterations ending before ``unit``, relative to the run
    directory."""
    return f"samples/chunk_{unit:07d}.npz"


def chunk_unit(file: str) -> int | None:
    """The iterations done after a chunk file (``None``: not a chunk file)."""
    if not (file.startswith("samples/chunk_") and file.endswith(".npz")):
        return None
    try:
        return int(file[len("samples/chunk_"):-len(".npz")])
    except ValueError:
        return None


def _check_chunks(rundir, record: dict, lines: dict[str, list[dict[str, Any]]],
                  state_unit: int, state_ok: bool, hash_samples: bool) -> list[Finding]:
    """The findings of a chunked run's chunk files (see :func:`check`)."""
    findings = []
    recorded = {}
    for file, file_lines in lines.items():
        if chunk_unit(file) is not None:
            recorded[file] = file_lines[-1]
    for file, line in sorted(recorded.items()):
        # A chunk after the intact state is recomputed by a resume, like a sample there.
        tail = state_ok and int(line.get("unit", 0)) > state_unit
        path = rundir.path / file
        if not path.is_file():
            if not tail:
                findings.append(Finding(file, "is missing", False))
        elif hash_samples and storage.file_sha256(path) != line["sha256"]:
            findings.append(Finding(file, "is damaged or was edited (its sha256 differs "
                                    "from the manifest)", tail))
    for path in sorted(rundir.samples_dir.glob("chunk_*.npz")):
        file = f"samples/{path.name}"
        unit = chunk_unit(file)
        if file not in recorded and unit is not None:
            findings.append(Finding(file, "is not in the manifest",
                                    state_ok and unit > state_unit))
    if record.get("status") == "finished":
        done = 0
        for line in sorted(recorded.values(), key=lambda line: int(line.get("unit", 0))):
            if line.get("first") != done:
                break
            done = int(line["unit"])
        total = int(record["loop"].get("num_units", 0))
        if done < total:
            findings.append(Finding(MANIFEST_FILE, f"records no chunk from iteration {done} "
                                    f"(the finished run ran {total})", False))
    return findings


def check(rundir, record: dict, *, hash_samples: bool = True) -> Check:
    """Compare a run directory with its manifest.

    Args:
        rundir: a :class:`bnnkit.runs.RunDir`.
        record: its ``run.json`` (already read and checked).
        hash_samples: hash every sample file (else only the state; readers that load the
            samples pass the recorded digests to :func:`bnnkit.storage.load_arrays` instead).

    Returns:
        A :class:`Check`. Files after the last intact state (written by the units a resume
        recomputes) are findings only when they exist and differ from their line.
    """
    present = {u: None for u in rundir.sample_units()}
    if not record.get("manifest"):
        # Written before runs had a manifest: nothing to compare with.
        return Check([], 0, None, present)
    findings: list[Finding] = []
    manifest = Manifest(rundir.path / MANIFEST_FILE)
    if not manifest.exists():
        if rundir.state_file.exists() or present:
            findings.append(Finding(MANIFEST_FILE, "is missing", False))
        return Check(findings, 0, None, {})
    try:
        lines = manifest.entries()
    except ConfigError as err:
        return Check([Finding(MANIFEST_FILE, str(err).split(" is ", 1)[-1], False)], 0, None,
                     {})
    state_unit, state_sha = 0, None
    state_lines = lines.pop(rundir.state_file.name, [])
    if state_lines:
        if not rundir.state_file.is_file():
            # With a single line, the first state's write was in flight: there is no state yet.
            if len(state_lines) > 1 or record.get("status") == "finished":
                findings.append(Finding(rundir.state_file.name, "is missing", False))
        else:
            digest = storage.file_sha256(rundir.state_file)
            # The newest line, or the one before while the newest write was in flight.
            match = [line for line in state_lines[-2:] if line["sha256"] == digest]
            if match:
                state_unit, state_sha = int(match[-1].get("unit", 0)), digest
            else:
                findings.append(Finding(rundir.state_file.name, "is damaged or was edited "
                                        "(its sha256 differs from the manifest)", False))
    elif rundir.state_file.exists():
        findings.append(Finding(rundir.state_file.name, "is not in the manifest", False))
    state_ok = not findings
    samples: dict[int, str | None] = {}
    recorded = {}
    for file, file_lines in lines.items():
        unit = sample_unit(file)
        if unit is not None:
            recorded[unit] = file_lines[-1]
    for unit, line in sorted(recorded.items()):
        tail = state_ok and unit >= state_unit
        path = rundir.path / line["file"]
        if not path.is_file():
            if not tail:  # a tail file may be the write a crash cut off
                findings.append(Finding(line["file"], "is missing", False))
            continue
        if hash_samples and storage.file_sha256(path) != line["sha256"]:
            findings.append(Finding(line["file"], "is damaged or was edited (its sha256 "
                                    "differs from the manifest)", tail))
            continue
        samples[unit] = line["sha256"]
    for unit in sorted(set(present) - set(recorded)):
        findings.append(Finding(sample_name(unit), "is not in the manifest",
                                state_ok and unit >= state_unit))
    if record.get("chunks"):
        findings += _check_chunks(rundir, record, lines, state_unit, state_ok, hash_samples)
    elif record.get("status") == "finished":
        from bnnkit.inference.base import Loop

        expected = Loop(**record["loop"]).kept_units()
        for unit in sorted(set(expected) - set(recorded)):
            findings.append(Finding(sample_name(unit), "is missing (the finished run kept it)",
                                    False))
    findings.sort(key=lambda f: f.file)
    return Check(findings, state_unit, state_sha, samples)


def first_problem(rundir, found: Check, *, only_unrepairable: bool = False) -> str | None:
    """The one-line message of the first finding (``None`` when there is nothing to say)."""
    for finding in found.findings:
        if only_unrepairable and finding.repairable:
            continue
        return (f"{str(rundir.path / finding.file)!r} {finding.problem}; `bnnkit verify "
                f"{rundir.path}` lists every problem")
    return None
