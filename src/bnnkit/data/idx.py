"""Reading the IDX format of MNIST and Fashion-MNIST (optionally gzip-compressed).

An IDX file is a big-endian header followed by the raw array:

    bytes 0-1: 0, bytes 2: type code (0x08 = unsigned byte), byte 3: number of dimensions d,
    then d 4-byte big-endian sizes, then prod(sizes) items in C order.

Image files are (N, rows, cols) uint8 (16-byte header), label files (N,) uint8 (8-byte header).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from bnnkit.errors import ConfigError

_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def parse_idx(raw: bytes, *, name: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of one (uncompressed) IDX file.

    Raises:
        ConfigError: a bad magic number, unknown type code or a size that does not match.

    Example:
        >>> header = bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big")
        >>> parse_idx(header + bytes([7, 8, 9]))
        array([7, 8, 9], dtype=uint8)
    """
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ConfigError(f"{name} is not an IDX file: the first two bytes must be zero")
    code, ndim = raw[2], raw[3]
    if code not in _DTYPES:
        raise ConfigError(
            f"{name}: IDX type code {code:#x} unknown; allowed: "
            f"{', '.join(hex(c) for c in _DTYPES)}"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ConfigError(f"{name}: IDX header truncated ({len(raw)} bytes)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = _DTYPES[code]
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise ConfigError(
            f"{name}: IDX header says shape {shape} ({expected} bytes) but the file "
            f"has {len(raw)} bytes"
        )
    array = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=False) if dtype.itemsize > 1 else array


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file, gunzipping it when its name ends in ``.gz``.

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/labels-idx1-ubyte.gz"
        >>> with gzip.open(path, "wb") as f:  # type 0x08 (uint8), 1 dimension of size 3
        ...     _ = f.write(bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big") + bytes([7, 8, 9]))
        >>> read_idx(path)
        array([7, 8, 9], dtype=uint8)
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as err:
        raise ConfigError(f"cannot read IDX file {str(path)!r}: {err}") from None
    return parse_idx(raw, name=str(path))
