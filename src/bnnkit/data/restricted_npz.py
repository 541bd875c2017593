"""Restricted reading of npz files that hold object arrays (the Keras ``imdb.npz``).

Object arrays in ``.npy`` members are stored as pickles. They are read here, and nowhere else in
bnnkit, under two restrictions:

1. the whole file's sha256 must equal a pinned value *before* any byte is unpickled;
2. the unpickler is :class:`RestrictedUnpickler`, whose ``find_class`` resolves only the numpy
   names needed to rebuild an ndarray (``_reconstruct``, ``ndarray``, ``dtype``, ``scalar``);
   anything else (``os.system``, ``builtins.eval``, ...) raises ``pickle.UnpicklingError``.

Members with plain dtypes are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
from numpy.lib import format as npy_format

from bnnkit.errors import ConfigError
from bnnkit.storage import file_sha256

ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    (module, name)
    for module in ("numpy.core.multiarray", "numpy._core.multiarray")
    for name in ("_reconstruct", "scalar")
) | {("numpy", "ndarray"), ("numpy", "dtype")}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that can rebuild numpy arrays and nothing else.

    Example:
        >>> import pickle
        >>> data = pickle.dumps(np.array([[1, 2], [3]], dtype=object))
        >>> RestrictedUnpickler(io.BytesIO(data)).load()[0]
        [1, 2]
    """

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"restricted unpickler refuses {module}.{name}")
        if module == "numpy.core.multiarray" and hasattr(np, "_core"):
            module = "numpy._core.multiarray"  # numpy >= 2 moved it; avoids the shim's warning
        return super().find_class(module, name)


def _read_member(handle: io.BufferedIOBase, name: str) -> np.ndarray:
    version = npy_format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = npy_format.read_array_header_1_0(handle)
    else:
        shape, fortran, dtype = npy_format.read_array_header_2_0(handle)
    if not dtype.hasobject:
        count = int(np.prod(shape, dtype=np.int64))
        data = np.frombuffer(handle.read(count * dtype.itemsize), dtype=dtype, count=count)
        return data.reshape(shape, order="F" if fortran else "C")
    try:
        # latin1 is numpy's documented encoding for pickles written by Python 2 (Keras' file).
        array = RestrictedUnpickler(handle, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as err:
        raise ConfigError(
            f"member {name} could not be read by the restricted unpickler: {err}"
        ) from None
    if not isinstance(array, np.ndarray):
        raise ConfigError(f"member {name} holds {type(array).__name__}; allowed: ndarray")
    return array


def load_object_npz(path: str | os.PathLike, sha256: str) -> dict[str, np.ndarray]:
    """Read every array of an npz with object arrays, after checking the file's sha256.

    Args:
        path: the npz file.
        sha256: the expected hex digest (``"sha256:"`` prefix allowed).

    Returns:
        ``{member name without .npy: array}``.

    Raises:
        ConfigError: checksum mismatch (nothing is unpickled then), a member that references
            anything but numpy's array reconstruction, or an unreadable file.

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/ragged.npz"
        >>> np.savez(path, x_train=np.array([[1, 2], [3]], dtype=object))
        >>> arrays = load_object_npz(path, file_sha256(path))
        >>> arrays["x_train"].dtype, arrays["x_train"][1]
        (dtype('O'), [3])
    """
    expected = sha256.removeprefix("sha256:").lower()
    actual = file_sha256(path)
    if actual != expected:
        raise ConfigError(
            f"checksum mismatch for {str(path)!r}: sha256 {actual}, expected "
            f"{expected}; refusing to unpickle it"
        )
    arrays = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                key = member.removesuffix(".npy")
                with archive.open(member) as handle:
                    arrays[key] = _read_member(handle, member)
    except (zipfile.BadZipFile, OSError) as err:
        raise ConfigError(f"{str(path)!r} is not a readable npz: {err}") from None
    return arrays
