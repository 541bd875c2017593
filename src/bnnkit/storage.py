"""Atomic, pickle-free storage: JSON records and ``.npz`` arrays keyed by pytree paths.

Every file is written to a temporary name in the same directory, flushed, fsynced and renamed,
so a crash leaves either the old file or the new one, never half of one. Arrays are stored as
uncompressed ``.npz`` and read back with ``allow_pickle=False``; nothing is ever unpickled. A
file that cannot be read (truncated, not an archive, holding objects) is a
:class:`~bnnkit.errors.ConfigError` naming the file, never a silent partial read.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = save_arrays(folder / "a.npz", flatten_tree({"params": {"w": np.arange(3)}}))
    >>> load_arrays(folder / "a.npz")
    {'params/w': array([0, 1, 2])}
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from bnnkit.errors import ConfigError


class Written(NamedTuple):
    """What was written: the file's sha256 (hex), its size in bytes and, for arrays, the
    ``[shape, dtype]`` of each."""

    sha256: str
    size: int
    arrays: dict[str, list] | None = None


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *,
                       before_rename: Callable[[Written], None] | None = None) -> Written:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a mix.

    Args:
        path: the file.
        data: its new contents.
        before_rename: called with the new file's digest once it is durable under its temporary
            name and before it replaces ``path`` (so a record of it can be written first).
    """
    path = Path(path)
    written = Written(hashlib.sha256(data).hexdigest(), len(data))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if before_rename is not None:
            before_rename(written)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return written


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file.

    Raises:
        ConfigError: the file is not valid JSON (a damaged record).
    """
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{str(path)!r} is damaged: not valid JSON ({err.msg} at line "
                          f"{err.lineno})") from None


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, Any], *,
                before_rename: Callable[[Written], None] | None = None) -> Written:
    """Atomically save a flat mapping of name -> array as an uncompressed ``.npz``.

    Returns:
        The file's digest and every array's ``[shape, dtype]`` (``before_rename`` as in
        :func:`atomic_write_bytes`, with the arrays filled in).
    """
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    shapes = {k: [list(v.shape), v.dtype.str] for k, v in arrays.items()}

    def with_shapes(written: Written) -> None:
        if before_rename is not None:
            before_rename(written._replace(arrays=shapes))

    return atomic_write_bytes(path, buffer.getvalue(),
                              before_rename=with_shapes)._replace(arrays=shapes)


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_arrays(path: str | os.PathLike, *,
                sha256: str | Collection[str] | None = None) -> dict[str, np.ndarray]:
    """Load an ``.npz`` written by :func:`save_arrays`; pickled objects are refused.

    Args:
        path: the file.
        sha256: the digest (or digests) the file must have, as recorded when it was written.

    Raises:
        ConfigError: the file is missing, truncated, not an ``.npz``, holds objects, or its
            bytes differ from the recorded digest.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{str(path)!r} is missing") from None
    if sha256 is not None:
        allowed = {sha256} if isinstance(sha256, str) else set(sha256)
        if hashlib.sha256(data).hexdigest() not in allowed:
            raise ConfigError(f"{str(path)!r} is damaged or was edited: its sha256 differs "
                              "from the one recorded when it was written")
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with archive:
            return {k: archive[k] for k in archive.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise ConfigError(f"{str(path)!r} is damaged or not a bnnkit array file "
                          f"({type(err).__name__}: {' '.join(str(err).split())})") from None


def path_to_str(path: tuple) -> str:
    """A pytree key path as ``"params/Dense_0/kernel"``."""
    parts = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return "/".join(parts)


def flatten_tree(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """A pytree as ``{"<prefix>params/Dense_0/kernel": array, ...}`` (keys are tree paths).

    Example:
        >>> flatten_tree({"params": {"w": np.zeros(2)}})
        {'params/w': array([0., 0.])}
    """
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        out[prefix + path_to_str(path)] = np.asarray(leaf)
    return out


def unflatten_tree(template: Any, arrays: Mapping[str, np.ndarray], prefix: str = "") -> Any:
    """Inverse of :func:`flatten_tree`, shaped by ``template``'s tree structure.

    Raises:
        ConfigError: a leaf of the template is missing from ``arrays``.

    Example:
        >>> unflatten_tree({"w": 0}, {"w": np.ones(2)})
        {'w': array([1., 1.])}
    """
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(template)
    leaves = []
    for path, _ in leaves_with_path:
        key = prefix + path_to_str(path)
        if key not in arrays:
            raise ConfigError(f"stored arrays lack {key!r}; the file belongs to another model")
        leaves.append(arrays[key])
    return jax.tree_util.tree_unflatten(treedef, leaves)
