"""Atomic, pickle-free storage: JSON records and ``.npz`` arrays keyed by pytree paths.

Every file is written to a temporary name in the same directory, flushed, fsynced and renamed,
so a crash leaves either the old file or the new one, never half of one. Arrays are stored as
uncompressed ``.npz`` and read back with ``allow_pickle=False``; nothing is ever unpickled. A
file that cannot be read (truncated, not an archive, holding objects, an array header that
declares more bytes than the file holds, JSON nested beyond what Python parses) is a
:class:`~bnnkit.errors.ConfigError` naming the file, never a silent partial read or a crash.

What is written lands where it was asked to, and nowhere else:

- a symbolic link is never written through nor replaced: a destination that is a link is
  refused (:func:`refuse_link`), temporary files are created with ``O_EXCL | O_NOFOLLOW``, and
  appends (:func:`append_bytes`) open with ``O_NOFOLLOW``; a link planted in a run directory
  (a ``.lock`` or ``state.npz`` pointing at a file elsewhere) cannot make bnnkit write there;
- files are created with mode ``0o666`` less the process's umask, like any other tool's, so a
  group that may read a shared folder may read the runs in it.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = save_arrays(folder / "a.npz", flatten_tree({"params": {"w": np.arange(3)}}))
    >>> load_arrays(folder / "a.npz")
    {'params/w': array([0, 1, 2])}
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import math
import os
import secrets
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


#: Mode of a new file before the umask applies (as ``open(..., "w")`` creates files).
FILE_MODE = 0o666
#: Flags of a file opened for writing: never through a symbolic link, not inherited by children.
_NO_LINK = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def refuse_link(path: str | os.PathLike) -> None:
    """Refuse to write to ``path`` when it is a symbolic link.

    Raises:
        ConfigError: naming the link and where it points.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> (folder / "link").symlink_to("/etc/hostname")
        >>> refuse_link(folder / "link")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: '.../link' is a symbolic link (to '/etc/hostname'); ...
    """
    if os.path.islink(path):
        raise ConfigError(
            f"{os.fspath(path)!r} is a symbolic link (to {os.readlink(path)!r}); bnnkit writes "
            "no file through a link, which could point outside the folder it was given; "
            "allowed: a regular file or a path that does not exist yet"
        )


def _link_refused(path: str | os.PathLike, err: OSError) -> ConfigError | None:
    """The refusal of an ``O_NOFOLLOW`` open that met a link (``None``: another error)."""
    if err.errno == errno.ELOOP or os.path.islink(path):
        return ConfigError(
            f"{os.fspath(path)!r} is a symbolic link; bnnkit writes no file "
            "through a link; allowed: a regular file"
        )
    return None


def append_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Append ``data`` to ``path`` (created if missing), durable before this returns; never
    through a symbolic link.

    Raises:
        ConfigError: ``path`` is a symbolic link.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_LINK, FILE_MODE)
    except OSError as err:
        refused = _link_refused(path, err)
        if refused is not None:
            raise refused from None
        raise
    with os.fdopen(fd, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_bytes(
    path: str | os.PathLike, data: bytes, *, before_rename: Callable[[Written], None] | None = None
) -> Written:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a mix.

    The temporary file is created beside ``path`` (``O_EXCL | O_NOFOLLOW``, mode
    :data:`FILE_MODE` less the umask) and renamed over it; a ``path`` that is a symbolic link
    is refused, never replaced or written through.

    Args:
        path: the file.
        data: its new contents.
        before_rename: called with the new file's digest once it is durable under its temporary
            name and before it replaces ``path`` (so a record of it can be written first).

    Raises:
        ConfigError: ``path`` is a symbolic link.
    """
    path = Path(path)
    refuse_link(path)
    written = Written(hashlib.sha256(data).hexdigest(), len(data))
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_LINK, FILE_MODE)
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


def parse_json(text: str | bytes, what: str) -> Any:
    """Parse JSON text.

    Args:
        text: the JSON.
        what: what it is, for the message (``"'run/run.json'"``).

    Raises:
        ConfigError: not valid JSON, not UTF-8, or nested deeper than Python parses.

    Example:
        >>> parse_json("[" * 100_000, "'deep.json'")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: 'deep.json' is damaged: JSON nested too deeply to read; ...
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{what} is damaged: not valid JSON ({err.msg} at line {err.lineno})"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} is damaged: not valid JSON (not UTF-8 text)") from None
    except RecursionError:
        raise ConfigError(
            f"{what} is damaged: JSON nested too deeply to read; allowed: what bnnkit writes"
        ) from None


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file.

    Raises:
        ConfigError: the file is not valid JSON (a damaged record).
    """
    with open(path, "rb") as f:
        data = f.read()
    return parse_json(data, repr(str(path)))


def save_arrays(
    path: str | os.PathLike,
    arrays: Mapping[str, Any],
    *,
    before_rename: Callable[[Written], None] | None = None,
) -> Written:
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

    return atomic_write_bytes(path, buffer.getvalue(), before_rename=with_shapes)._replace(
        arrays=shapes
    )


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_arrays(
    path: str | os.PathLike, *, sha256: str | Collection[str] | None = None
) -> dict[str, np.ndarray]:
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
            raise ConfigError(
                f"{str(path)!r} is damaged or was edited: its sha256 differs "
                "from the one recorded when it was written"
            )
    try:
        return read_npz(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise ConfigError(
            f"{str(path)!r} is damaged or not a bnnkit array file "
            f"({type(err).__name__}: {' '.join(str(err).split())})"
        ) from None


def read_npz(source: Any, names: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` archive, each array's header checked against the bytes the
    archive holds for it before anything is allocated.

    Args:
        source: a file name or a binary file object.
        names: the arrays to read (default: all).

    Raises:
        ValueError: a single ``.npy`` array, pickled objects, or a header that declares more
            data than its member holds (an ``.npy`` header can claim 10¹¹ elements in a file
            of a few bytes).
        zipfile.BadZipFile, OSError, EOFError: not a readable archive.

    Example:
        >>> buffer = io.BytesIO()
        >>> np.savez(buffer, a=np.arange(3))
        >>> _ = buffer.seek(0)
        >>> read_npz(buffer)
        {'a': array([0, 1, 2])}
    """
    archive = np.load(source, allow_pickle=False)
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError("a single .npy array, not an .npz archive")
    with archive:
        wanted = archive.files if names is None else [n for n in names if n in archive.files]
        for name in wanted:
            _check_header(archive.zip, name)
        return {k: archive[k] for k in wanted}


def _check_header(zip_file: zipfile.ZipFile, name: str) -> None:
    """Refuse an archive member whose ``.npy`` header declares more bytes than it holds."""
    member = name if name in zip_file.namelist() else f"{name}.npy"
    info = zip_file.getinfo(member)
    with zip_file.open(member) as f:
        version = np.lib.format.read_magic(f)
        reader = {
            (1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0,
        }.get(version)
        if reader is None:
            return  # numpy's own reader refuses (or reads) other versions
        shape, _, dtype = reader(f, max_header_size=10_000)
        header = f.tell()
    if dtype.hasobject:
        return  # refused by allow_pickle=False when read
    need = math.prod(shape) * dtype.itemsize
    have = info.file_size - header
    if need > have:
        raise ValueError(
            f"array {name!r} declares shape {tuple(shape)} of {dtype} "
            f"({need} bytes) but the file holds {max(have, 0)} bytes for it"
        )


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
