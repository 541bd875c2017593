"""A manifest file: one line per file a run writes, each chained to the line before it.

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
without breaking the chain, which :meth:`Manifest.chain_break` finds. A run made before the
chain (no ``identity`` in ``run.json``) is read as it was written, unchained. These are
integrity checks, not signatures: whoever recomputes every digest, the record's included, goes
undetected.

What a run directory's files say against these lines is :func:`bnnkit.runs.manifest.check`'s
to judge; this module is the file and its chain.

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

RUN_FILE = "run.json"  # bnnkit.runs.directory.RUN_FILE (directory imports the manifest)
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
                            f"is chained but {RUN_FILE} records no identity to chain it to "
                            f"({RUN_FILE} was edited, or the line comes from another run)"
                        ),
                    )
                continue
            if link != previous:
                if link is None:
                    why = "carries no chain digest (it was added or edited by hand)"
                elif number == 1 or previous == anchor:
                    why = (
                        f"is not chained to this run's {RUN_FILE} (the line comes from "
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
