"""The published CIFAR-10-C files (Hendrycks & Dietterich 2019), when they are on disk.

``<corruption>.npy`` holds 50,000 uint8 images (N, 32, 32, 3): the 10,000 CIFAR-10 test images at
severity 1, then at severity 2, ..., 5; ``labels.npy`` the matching 50,000 labels. Accepted
locations under the data directory: ``cifar10_c/CIFAR-10-C/``, ``cifar10_c/``, ``CIFAR-10-C/``,
or the uncompressed ``cifar10_c/CIFAR-10-C.tar`` (read without extracting). The .npy files are
read with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np

from bnnkit.data import fetch
from bnnkit.errors import ConfigError

PER_SEVERITY = 10_000
PUBLISHED = (
    "brightness",
    "contrast",
    "defocus_blur",
    "elastic_transform",
    "fog",
    "frost",
    "gaussian_blur",
    "gaussian_noise",
    "glass_blur",
    "impulse_noise",
    "jpeg_compression",
    "motion_blur",
    "pixelate",
    "saturate",
    "shot_noise",
    "snow",
    "spatter",
    "speckle_noise",
    "zoom_blur",
)


def find(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The CIFAR-10-C folder or tar under the data directory (or cache), or None."""
    root = fetch.data_root(data_dir)
    base = root if root is not None else fetch.cache_root()
    for candidate in (base / "cifar10_c" / "CIFAR-10-C", base / "cifar10_c", base / "CIFAR-10-C"):
        if (candidate / "labels.npy").is_file():
            return candidate
    tar = base / "cifar10_c" / "CIFAR-10-C.tar"
    return tar if tar.is_file() else None


def _read_npy(source: Path, filename: str) -> np.ndarray:
    if source.is_dir():
        path = source / filename
        if not path.is_file():
            raise ConfigError(
                f"{filename} not found in {source}/; allowed corruptions: {', '.join(PUBLISHED)}"
            )
        return np.load(path, allow_pickle=False, mmap_mode="r")
    with tarfile.open(source, "r:") as archive:
        try:
            member = archive.getmember(f"CIFAR-10-C/{filename}")
        except KeyError:
            raise ConfigError(f"{filename} not found in {source}") from None
        handle = archive.extractfile(member)
        assert handle is not None
        return np.load(io.BytesIO(handle.read()), allow_pickle=False)


def load(
    corruption: str, severity: int, *, data_dir: str | os.PathLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The 10,000 CIFAR-10-C test images of one corruption and severity, with their labels.

    Args:
        corruption: a published corruption name (e.g. ``"gaussian_noise"``).
        severity: 1..5.
        data_dir: folder holding ``cifar10_c/`` (default ``$BNNKIT_DATA_DIR``, else the cache).

    Returns:
        ``(images (10000, 32, 32, 3) uint8, labels (10000,) int32)``.

    Raises:
        ConfigError: files missing (says where to put them), unknown corruption or severity.

    Example:
        (Needs the CIFAR-10-C files on disk; nothing downloads them.)

        >>> x, y = load("gaussian_noise", 5)  # doctest: +SKIP
        >>> x.shape, y.shape  # doctest: +SKIP
        ((10000, 32, 32, 3), (10000,))
    """
    if corruption not in PUBLISHED:
        raise ConfigError(
            f"unknown CIFAR-10-C corruption {corruption!r}; allowed: {', '.join(PUBLISHED)}"
        )
    if severity not in (1, 2, 3, 4, 5):
        raise ConfigError(f"severity {severity!r} out of range; allowed: 1, 2, 3, 4, 5")
    source = find(data_dir)
    if source is None:
        raise ConfigError(
            "CIFAR-10-C not found: put the extracted CIFAR-10-C/ folder (or "
            "CIFAR-10-C.tar from https://zenodo.org/records/2535967) in "
            "<data dir>/cifar10_c/ and set BNNKIT_DATA_DIR=<data dir>"
        )
    images, labels = _read_npy(source, f"{corruption}.npy"), _read_npy(source, "labels.npy")
    if images.shape[0] != labels.shape[0] or images.shape[0] % 5 or images.ndim != 4:
        raise ConfigError(
            f"{corruption}.npy has shape {images.shape} for {labels.shape[0]} "
            f"labels; expected 5 x {PER_SEVERITY} images (N, 32, 32, 3)"
        )
    per_severity = images.shape[0] // 5
    window = slice((severity - 1) * per_severity, severity * per_severity)
    return np.ascontiguousarray(images[window]), np.asarray(labels[window], np.int32)
