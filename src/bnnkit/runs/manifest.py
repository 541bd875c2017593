"""A run directory's manifest: the sha256 and array shapes of every sample and state file.

``manifest.jsonl`` has one line per file written: its path inside the run directory, sha256,
size, every array's ``[shape, dtype]`` and, for the state, the units it covers. A line is
appended (flushed and fsynced) *before* the file it describes is renamed into place, so at every
moment each file either matches its latest line or is the one write in flight; a torn last line
is that write's. The manifest is rewritten compactly (one line per file, atomically) when a run
starts from its last state and when it finishes.

The lines form a chain: each carries, as ``prev``, the sha256 of the line before it (its bytes
as written), and the first one the run's identity, the digest ``run.json`` records as
``identity`` (:func:`identity`: the run's settings digest when it was made, and its seed). So
a line cannot be removed from the middle, edited, or taken with its file from another run
without breaking the chain, which :func:`check` reports naming the file of the first line
that does not follow. A run made before the chain (no ``identity`` in ``run.json``) is read as
it was written, unchained. These are integrity checks, not signatures: whoever recomputes every
digest, the record's included, goes undetected.

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
    >>> root = identity("0" * 64, seed=0)
    >>> manifest = Manifest(folder / MANIFEST_FILE, anchor=root)
    >>> written = storage.save_arrays(folder / "state.npz", {"w": np.zeros(2)},
    ...     before_rename=lambda w: manifest.append(entry("state.npz", w, unit=1)))
    >>> manifest.latest()["state.npz"]["arrays"]
    {'w': [[2], '<f8']}
    >>> manifest.latest()["state.npz"][CHAIN_KEY] == root, manifest.chain_break(root)
    (True, None)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from bnnkit import storage
from bnnkit.errors import ConfigError

_RUN_FILE = "run.json"  # bnnkit.runs.directory.RUN_FILE, which imports this module
MANIFEST_FILE = "manifest.jsonl"
#: The field of a manifest line holding the sha256 of the line before it (of the first line:
#: the run's :func:`identity`).
CHAIN_KEY = "prev"
#: The field of ``run.json`` holding the run's :func:`identity`, where its manifest's chain
#: starts (absent: a run made before manifests were chained).
IDENTITY_KEY = "identity"
#: The field of ``run.json`` holding the digest of the manifest's last line when the run
#: finished (absent while a run goes on: lines are added then, and the record is not rewritten
#: for each).
HEAD_KEY = "manifest_head"
#: ``Manifest(path)`` without an anchor: the chain continues from the one the file starts from.
_FROM_FILE = object()


def identity(settings_sha256: str, seed: Any) -> str:
    """The digest a run's manifest chain starts from: its settings digest when it was made
    and its seed (stored in ``run.json``; a resume never changes it, though it may extend the
    settings).

    Example:
        >>> identity("0" * 64, 1) != identity("0" * 64, 2)
        True
    """
    text = json.dumps({"seed": seed, "settings_sha256": settings_sha256}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def line_digest(line: bytes) -> str:
    """The sha256 of a manifest line as written (its bytes, without the newline)."""
    return hashlib.sha256(line).hexdigest()


def _encode(line: dict[str, Any]) -> bytes:
    return json.dumps(line, sort_keys=True).encode()


class ChainBreak(NamedTuple):
    """The first manifest line that does not follow from the one before it
    (:meth:`Manifest.chain_break`).

    Attributes:
        line: its number in the file (from 1).
        file: the file it records.
        why: what is wrong with it, as a phrase that follows "which" (``"does not follow from
            the line before it (...)"``).
    """

    line: int
    file: str
    why: str


def entry(file: str, written: storage.Written, **extra: Any) -> dict[str, Any]:
    """The manifest line of a file (``file`` relative to the run directory)."""
    return {
        "file": file,
        "sha256": written.sha256,
        "bytes": written.size,
        "arrays": written.arrays,
        **extra,
    }


class Manifest:
    """The manifest file of one run directory.

    Args:
        path: the file.
        anchor: the run's :func:`identity`, where the chain of lines starts (``None``: an
            unchained manifest, of a run made before the chain). Left out, the chain goes on
            from where the file's first line starts it (none when the file has no chain).
    """

    def __init__(self, path: str | os.PathLike, anchor: str | object | None = _FROM_FILE):
        self.path = Path(path)
        self._anchor = anchor
        self._head: str | None = None  # the digest the next appended line carries

    @property
    def anchor(self) -> str | None:
        """Where the chain starts (``None``: unchained)."""
        if self._anchor is _FROM_FILE:
            first = next(iter(self._complete_lines()), None)
            value = None
            if first is not None:
                with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                    value = json.loads(first[1])
            chained = isinstance(value, dict) and isinstance(value.get(CHAIN_KEY), str)
            self._anchor = value[CHAIN_KEY] if chained else None
        return self._anchor  # type: ignore[return-value]

    def _complete_lines(self) -> list[tuple[int, bytes]]:
        """Every non-blank line but a torn last one, with its number."""
        if not self.path.is_file():
            return []
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        if not data.endswith(b"\n"):
            lines = lines[:-1]  # a write that was cut off (or nothing)
        return [(n, line) for n, line in enumerate(lines, 1) if line.strip()]

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
                ok = (
                    isinstance(value, dict)
                    and isinstance(value.get("file"), str)
                    and isinstance(value.get("sha256"), str)
                )
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                ok = False
            if not ok:
                if number == len(lines) and not data.endswith(b"\n"):
                    break  # the line of a write that was cut off
                raise ConfigError(
                    f"{str(self.path)!r} is damaged at line {number}: not a manifest entry"
                )
            out.setdefault(value["file"], []).append(value)
        return out

    def latest(self) -> dict[str, dict[str, Any]]:
        """Each file's latest line."""
        return {file: lines[-1] for file, lines in self.entries().items()}

    def latest_matching(self, file: str, sha256: str) -> dict[str, Any] | None:
        """``file``'s latest line that records ``sha256`` (``None``: none does)."""
        lines = [line for line in self.entries().get(file, []) if line["sha256"] == sha256]
        return lines[-1] if lines else None

    def append(self, line: dict[str, Any]) -> None:
        """Add one line (chained to the last one), durable before this returns."""
        line = {k: v for k, v in line.items() if k != CHAIN_KEY}
        if self.anchor is not None:
            if self._head is None:
                complete = self._complete_lines()
                self._head = line_digest(complete[-1][1]) if complete else self.anchor
            line[CHAIN_KEY] = self._head
        raw = _encode(line)
        storage.append_bytes(self.path, raw + b"\n")
        if self.anchor is not None:
            self._head = line_digest(raw)

    def rewrite(self, lines: Iterable[dict[str, Any]]) -> None:
        """Replace the manifest by ``lines`` (atomically), chained anew from the anchor."""
        anchor = self.anchor
        head, out = anchor, []
        for line in lines:
            line = {k: v for k, v in line.items() if k != CHAIN_KEY}
            if anchor is not None:
                line[CHAIN_KEY] = head
            raw = _encode(line)
            head = line_digest(raw)
            out.append(raw + b"\n")
        storage.atomic_write_bytes(self.path, b"".join(out))
        self._head = head

    def head(self) -> tuple[str | None, str | None]:
        """The digest of the last whole line (the anchor when there is none) and the file it
        records (``None`` for an empty manifest); a torn last line gives ``(None, None)``."""
        if self.path.is_file():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                return None, None
        complete = self._complete_lines()
        if not complete:
            return self.anchor, None
        file = None
        with contextlib.suppress(
            json.JSONDecodeError, UnicodeDecodeError, RecursionError, AttributeError
        ):
            file = json.loads(complete[-1][1]).get("file")
        return line_digest(complete[-1][1]), file if isinstance(file, str) else None

    def chain_break(self, anchor: str | None) -> ChainBreak | None:
        """The first line that does not follow from the one before it, the first line from
        ``anchor`` (``None``: every line follows; a torn last line, a write a crash cut off,
        is not judged).

        Args:
            anchor: the run's :func:`identity` from ``run.json`` (``None``: a run made before
                the chain, whose lines must then carry none).
        """
        previous = anchor
        for number, raw in self._complete_lines():
            try:
                value = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return None  # a damaged line: entries() names it
            if not isinstance(value, dict):
                return None
            file = str(value.get("file"))
            link = value.get(CHAIN_KEY)
            if anchor is None:
                if link is not None:
                    return ChainBreak(
                        number,
                        file,
                        (
                            f"is chained but {_RUN_FILE} records no identity to chain it to "
                            f"({_RUN_FILE} was edited, or the line comes from another run)"
                        ),
                    )
                continue
            if link != previous:
                if link is None:
                    why = "carries no chain digest (it was added or edited by hand)"
                elif number == 1 or previous == anchor:
                    why = (
                        f"is not chained to this run's {_RUN_FILE} (the line comes from "
                        "another run, or the record's identity was edited)"
                    )
                else:
                    why = (
                        "does not follow from the line before it (the line comes from "
                        "another run, or a line was edited or removed)"
                    )
                return ChainBreak(number, file, why)
            previous = line_digest(raw)
        return None


class Finding(NamedTuple):
    """One thing wrong in a run directory.

    Attributes:
        file: the file, relative to the run directory.
        problem: what is wrong with it.
        repairable: ``--resume`` recomputes it from the last intact state.
        in_the_way: it is not what bnnkit writes there (a folder where a run keeps a file, a
            link): until it is removed, neither ``--resume`` nor ``--overwrite`` writes the run.
    """

    file: str
    problem: str
    repairable: bool
    in_the_way: bool = False


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
        return int(file[len("samples/sample_") : -len(".npz")])
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
        return int(file[len("samples/chunk_") : -len(".npz")])
    except ValueError:
        return None


def _check_chunks(
    rundir,
    record: dict,
    lines: dict[str, list[dict[str, Any]]],
    state_unit: int,
    state_ok: bool,
    hash_samples: bool,
) -> list[Finding]:
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
            findings.append(
                Finding(
                    file, "is damaged or was edited (its sha256 differs from the manifest)", tail
                )
            )
    for path in sorted(rundir.samples_dir.glob("chunk_*.npz")):
        file = f"samples/{path.name}"
        unit = chunk_unit(file)
        if file not in recorded and unit is not None:
            findings.append(Finding(file, "is not in the manifest", state_ok and unit > state_unit))
    if record.get("status") == "finished":
        done = 0
        for line in sorted(recorded.values(), key=lambda line: int(line.get("unit", 0))):
            if line.get("first") != done:
                break
            done = int(line["unit"])
        total = int(record["loop"].get("num_units", 0))
        if done < total:
            findings.append(
                Finding(
                    MANIFEST_FILE,
                    f"records no chunk from iteration {done} (the finished run ran {total})",
                    False,
                )
            )
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
        return Check(
            [Finding(MANIFEST_FILE, "is " + str(err).split(" is ", 1)[-1], False)], 0, None, {}
        )
    findings += chain_findings(manifest, record)
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
                findings.append(
                    Finding(
                        rundir.state_file.name,
                        "is damaged or was edited (its sha256 differs from the manifest)",
                        False,
                    )
                )
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
            findings.append(
                Finding(
                    line["file"],
                    "is damaged or was edited (its sha256 differs from the manifest)",
                    tail,
                )
            )
            continue
        samples[unit] = line["sha256"]
    for unit in sorted(set(present) - set(recorded)):
        findings.append(
            Finding(sample_name(unit), "is not in the manifest", state_ok and unit >= state_unit)
        )
    if record.get("chunks"):
        findings += _check_chunks(rundir, record, lines, state_unit, state_ok, hash_samples)
    elif record.get("status") == "finished":
        from bnnkit.inference.base import Loop

        expected = Loop(**record["loop"]).kept_units()
        for unit in sorted(set(expected) - set(recorded)):
            findings.append(
                Finding(sample_name(unit), "is missing (the finished run kept it)", False)
            )
    findings.sort(key=lambda f: f.file)
    return Check(findings, state_unit, state_sha, samples)


def chain_findings(manifest: Manifest, record: dict) -> list[Finding]:
    """The first break of ``manifest``'s chain from ``record``'s identity, or a last line
    other than the one a finished run's record names, as a finding on the file that line
    records (none: the chain holds, or the run predates it and the manifest carries none).
    Nothing after a break can be trusted, so no resume repairs it."""
    anchor = record.get(IDENTITY_KEY)
    if anchor is not None and not isinstance(anchor, str):
        return [Finding(_RUN_FILE, f"is damaged: its {IDENTITY_KEY!r} is not a digest", False)]
    broken = manifest.chain_break(anchor)
    if broken is not None:
        return [_line_finding(broken.file, f"line {broken.line}", broken.why)]
    if HEAD_KEY in record:
        head, file = manifest.head()
        if head != record[HEAD_KEY]:
            return [
                _line_finding(
                    file,
                    "the last line",
                    (
                        f"is not the line the finished run's {_RUN_FILE} says it ended with "
                        "(a line at its end was edited, added or removed)"
                    ),
                )
            ]
    return []


def _line_finding(file: str | None, where: str, why: str) -> Finding:
    """A finding on the manifest line at ``where`` that records ``file``: named by the sample
    or chunk it records, which a reader refuses; any other line (the state's, which readers
    of the samples do not need) by the manifest itself, since no line after it can be
    trusted either."""
    if file is not None and (sample_unit(file) is not None or chunk_unit(file) is not None):
        return Finding(file, f"is recorded by {where} of {MANIFEST_FILE}, which {why}", False)
    recording = f" (recording {file})" if file is not None else ""
    return Finding(MANIFEST_FILE, f"has {where}{recording}, which {why}", False)


def first_problem(rundir, found: Check, *, only_unrepairable: bool = False) -> str | None:
    """The one-line message of the first finding (``None`` when there is nothing to say)."""
    for finding in found.findings:
        if only_unrepairable and finding.repairable:
            continue
        return (
            f"{str(rundir.path / finding.file)!r} {finding.problem}; `bnnkit verify "
            f"{rundir.path}` lists every problem"
        )
    return None
