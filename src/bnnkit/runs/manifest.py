"""A run directory checked against its manifest: what is missing, damaged or unrecorded.

Every sample and state file a run writes has its line in ``manifest.jsonl`` (its sha256, size
and arrays), appended before the file is renamed into place and chained to the line before it
(:mod:`bnnkit.runs.manifest_lines`: its :class:`~bnnkit.runs.manifest_lines.Manifest`,
:func:`~bnnkit.runs.manifest_lines.identity`, :func:`~bnnkit.runs.manifest_lines.entry`, ...).

:func:`check` compares a run directory with its manifest and says what is missing, damaged or
unrecorded, and whether ``--resume`` recomputes it (anything after the last intact state).
A run of :func:`bnnkit.runs.sample` (``"chunks": true`` in ``run.json``) stores, instead of one
file per kept unit, one file per chunk of iterations (:func:`chunk_name`), whose line records
the chunk's ``first`` iteration and, as its ``unit``, the iterations done after it.

Example:
    >>> import tempfile, pathlib
    >>> from bnnkit.runs import RunDir
    >>> rundir = RunDir(pathlib.Path(tempfile.mkdtemp()))
    >>> check(rundir, {"manifest": True})
    Check(findings=[], state_unit=0, state_sha256=None, samples={})
    >>> sample_name(3), sample_unit("samples/sample_0000003.npz"), chunk_unit("run.json")
    ('samples/sample_0000003.npz', 3, None)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.inference.base import Loop
from bnnkit.runs.manifest_lines import (
    HEAD_KEY,
    IDENTITY_KEY,
    MANIFEST_FILE,
    RUN_FILE,
    Manifest,
)

# The manifest's names, those of its lines (bnnkit.runs.manifest_lines) included: the run
# driver, the readers and `bnnkit verify` use them from here.
__all__ = [
    "Check",
    "Finding",
    "chain_findings",
    "check",
    "chunk_name",
    "chunk_unit",
    "first_problem",
    "sample_name",
    "sample_range",
    "sample_unit",
]


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


def sample_name(unit: int, last: int | None = None) -> str:
    """A kept unit's file, or that of the kept units ``unit`` to ``last`` (a block of a
    sampler's iterations, :func:`bnnkit.runs.blocks.run_blocks`), relative to the run
    directory."""
    if last is None:
        return f"samples/sample_{unit:07d}.npz"
    return f"samples/sample_{unit:07d}-{last:07d}.npz"


def sample_range(file: str) -> tuple[int, int] | None:
    """The first and last unit a sample file's manifest name holds (``None``: not a sample
    file).

    Example:
        >>> sample_range("samples/sample_0000500-0000509.npz")
        (500, 509)
    """
    if not (file.startswith("samples/sample_") and file.endswith(".npz")):
        return None
    first, _, last = file[len("samples/sample_") : -len(".npz")].partition("-")
    try:
        return int(first), int(last or first)
    except ValueError:
        return None


def sample_unit(file: str) -> int | None:
    """The first unit of a sample file's manifest name (``None``: not a sample file)."""
    found = sample_range(file)
    return None if found is None else found[0]


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
    present = {u: None for u in rundir.sample_files()}
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
    state_findings, state_unit, state_sha = _state_findings(
        rundir, record, lines.pop(rundir.state_file.name, [])
    )
    findings += state_findings
    state_ok = not findings
    sample_findings, samples, recorded = _sample_findings(
        rundir, lines, present, state_unit, state_ok, hash_samples
    )
    findings += sample_findings
    if record.get("chunks"):
        findings += _check_chunks(rundir, record, lines, state_unit, state_ok, hash_samples)
    elif record.get("status") == "finished":
        findings += _kept_findings(record, recorded)
    findings.sort(key=lambda f: f.file)
    return Check(findings, state_unit, state_sha, samples)


def _state_findings(
    rundir, record: dict, state_lines: list[dict[str, Any]]
) -> tuple[list[Finding], int, str | None]:
    """The findings on the state file against its lines, and the units and digest of the
    intact state (``0, None``: none)."""
    findings = []
    state_unit, state_sha = 0, None
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
    return findings, state_unit, state_sha


def _sample_findings(
    rundir,
    lines: dict[str, list[dict[str, Any]]],
    present: dict[int, None],
    state_unit: int,
    state_ok: bool,
    hash_samples: bool,
) -> tuple[list[Finding], dict[int, str | None], dict[int, dict[str, Any]]]:
    """The findings on the sample files (recorded ones, then unrecorded ones), the intact
    samples' digests by unit, and each recorded unit's latest line."""
    findings = []
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
    files = rundir.sample_files()
    for unit in sorted(set(present) - set(recorded)):
        name = f"samples/{files[unit].name}" if unit in files else sample_name(unit)
        findings.append(Finding(name, "is not in the manifest", state_ok and unit >= state_unit))
    return findings, samples, recorded


def _kept_findings(record: dict, recorded: dict[int, dict[str, Any]]) -> list[Finding]:
    """The units a finished run kept that the manifest does not record."""
    expected = Loop(**record["loop"]).kept_units()
    covered = set()
    for unit, line in recorded.items():
        first, last = sample_range(line["file"]) or (unit, unit)
        covered.update(range(first, last + 1))
    return [
        Finding(sample_name(unit), "is missing (the finished run kept it)", False)
        for unit in sorted(set(expected) - covered)
    ]


def chain_findings(manifest: Manifest, record: dict) -> list[Finding]:
    """The first break of ``manifest``'s chain from ``record``'s identity, or a last line
    other than the one a finished run's record names, as a finding on the file that line
    records (none: the chain holds, or the run predates it and the manifest carries none).
    Nothing after a break can be trusted, so no resume repairs it."""
    anchor = record.get(IDENTITY_KEY)
    if anchor is not None and not isinstance(anchor, str):
        return [Finding(RUN_FILE, f"is damaged: its {IDENTITY_KEY!r} is not a digest", False)]
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
                        f"is not the line the finished run's {RUN_FILE} says it ended with "
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
