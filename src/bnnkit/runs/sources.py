"""A run started from another: where its source is written (``RUN[:SAMPLE]``) and how the
run knows that source again when both were moved or copied.

A run started with ``--init-checkpoint`` records its source's path (a setting) and its
source's identity (:data:`SOURCE_KEY`, :func:`source_record`). A resume that names the source
by another path is the same run when the run there has that identity: a folder of runs
(:mod:`bnnkit.runs.composite`) copied elsewhere resumes from its own copy.

Example:
    >>> split_source("runs/sgd:3")
    ('runs/sgd', 3)
    >>> split_source("runs/sgd")
    ('runs/sgd', -1)
"""

from __future__ import annotations

from bnnkit.errors import ConfigError
from bnnkit.runs.directory import RunDir
from bnnkit.runs.manifest_lines import IDENTITY_KEY


def split_source(spec: str) -> tuple[str, int]:
    """``RUN[:SAMPLE]`` as (run directory, sample index)."""
    path, sep, index = str(spec).rpartition(":")
    if sep and path and index.lstrip("-").isdigit():
        return path, int(index)
    return str(spec), -1


#: The field of ``run.json`` holding the identity of the run it started from
#: (:func:`source_identity`), by which a resume recognises that run under another path.
SOURCE_KEY = "init_source"


def source_identity(spec: str | None) -> str | None:
    """The identity (``run.json``'s, :func:`bnnkit.runs.manifest_lines.identity`) of the run that
    ``spec`` (``RUN[:SAMPLE]``) names; ``None`` without a source, or for one made before runs
    had identities, or unreadable."""
    if spec is None:
        return None
    rundir = RunDir(split_source(spec)[0])
    if not rundir.run_file.is_file():
        return None
    try:
        identity = rundir.read_record().get(IDENTITY_KEY)
    except ConfigError:
        return None
    return identity if isinstance(identity, str) else None


def source_record(config) -> dict[str, str] | None:
    """What a new run started from another records of it (:data:`SOURCE_KEY`): the
    source's identity and sample index, or ``None`` (no source, or one without identity)."""
    spec = config.source_run()
    identity = source_identity(spec)
    if identity is None:
        return None
    return {"identity": identity, "sample": split_source(spec)[1]}


def same_source(record: dict, spec: str | None) -> bool:
    """Whether ``spec`` names the very run that the run of ``record`` started from, under
    another path (a folder moved or copied with its source): the same identity and sample.

    Example:
        >>> same_source({}, "runs/sgd")  # a run that recorded no source identity
        False
    """
    recorded = record.get(SOURCE_KEY)
    if not isinstance(recorded, dict) or spec is None:
        return False
    return (
        recorded.get("identity") == source_identity(spec)
        and recorded.get("sample") == split_source(spec)[1]
    )
