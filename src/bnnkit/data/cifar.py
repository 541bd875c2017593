"""CIFAR-10 and CIFAR-100 from the *binary* distributions (never the pickled python version).

Record layout (https://www.cs.toronto.edu/~kriz/cifar.html):

- CIFAR-10: ``<1 label byte><3072 pixel bytes>`` per image in ``data_batch_1.bin`` ...
  ``data_batch_5.bin`` (10,000 records each) and ``test_batch.bin``;
- CIFAR-100: ``<1 coarse label byte><1 fine label byte><3072 pixel bytes>`` in ``train.bin``
  (50,000) and ``test.bin`` (10,000); the fine label (100 classes) is used.

The 3072 pixel bytes are the red, green and blue 32x32 planes, each row-major; they are returned
as uint8 NHWC (N, 32, 32, 3). Files are read from ``cifar-10-binary.tar.gz`` /
``cifar-100-binary.tar.gz`` directly (nothing is extracted) or from an extracted folder.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np

from bnnkit.data import fetch, normalization, splits
from bnnkit.data.dataset import Dataset
from bnnkit.data.sources import LICENCES
from bnnkit.errors import ConfigError

PIXELS = 32 * 32 * 3

# name -> (archive, extracted folder, train members, test member, label bytes, classes,
#          label-names member)
LAYOUTS = {
    "cifar10": (
        "cifar-10-binary.tar.gz",
        "cifar-10-batches-bin",
        tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
        "test_batch.bin",
        1,
        10,
        "batches.meta.txt",
    ),
    "cifar100": (
        "cifar-100-binary.tar.gz",
        "cifar-100-binary",
        ("train.bin",),
        "test.bin",
        2,
        100,
        "fine_label_names.txt",
    ),
}

CIFAR10_CLASSES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


def parse_records(
    raw: bytes, label_bytes: int, *, name: str = "<bytes>"
) -> tuple[np.ndarray, np.ndarray]:
    """Decode CIFAR binary records into ``(images (N, 32, 32, 3) uint8, labels (N,) int32)``.

    The last label byte of each record is used (CIFAR-100: the fine label).

    Raises:
        ConfigError: the byte count is not a whole number of records.

    Example:
        >>> record = bytes([3]) + bytes(range(256)) * 12
        >>> images, labels = parse_records(record, 1)
        >>> images.shape, int(labels[0]), int(images[0, 0, 1, 0])  # R plane, row 0, column 1
        ((1, 32, 32, 3), 3, 1)
    """
    size = label_bytes + PIXELS
    if len(raw) == 0 or len(raw) % size:
        raise ConfigError(
            f"{name}: {len(raw)} bytes is not a whole number of {size}-byte CIFAR records"
        )
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    labels = records[:, label_bytes - 1].astype(np.int32)
    images = records[:, label_bytes:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


class _Members:
    """Read named members from a tar archive or a folder (matching on the base name)."""

    def __init__(self, path: Path):
        self.path = path
        self._tar = None
        self._index: dict[str, tarfile.TarInfo] = {}
        if path.is_file():
            try:
                self._tar = tarfile.open(path, "r:*")  # noqa: SIM115 - closed by close()
            except (tarfile.TarError, OSError) as err:
                raise ConfigError(f"cannot open archive {str(path)!r}: {err}") from None
            for member in self._tar.getmembers():
                if member.isfile():
                    self._index[os.path.basename(member.name)] = member

    def read(self, name: str, *, required: bool = True) -> bytes | None:
        if self._tar is None:
            candidate = self.path / name
            if candidate.is_file():
                return candidate.read_bytes()
        elif name in self._index:
            handle = self._tar.extractfile(self._index[name])
            if handle is not None:
                return handle.read()
        if required:
            raise ConfigError(f"{name} missing from {str(self.path)!r}")
        return None

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()


def read_arrays(
    name: str, data_dir: str | os.PathLike | None = None
) -> tuple[dict[str, np.ndarray], list[str], str]:
    """Raw uint8 arrays, class names and the source path of CIFAR-10 or CIFAR-100."""
    archive, extracted, train_files, test_file, label_bytes, classes, names_file = LAYOUTS[name]
    path = fetch.locate(
        name,
        [extracted, archive, test_file],
        data_dir=data_dir,
        what=f"{archive} (or its extracted {extracted}/ folder)",
    )
    if path.name == test_file:
        path = path.parent
    members = _Members(path)
    try:
        parts = [parse_records(members.read(f), label_bytes, name=f) for f in train_files]
        x_test, y_test = parse_records(members.read(test_file), label_bytes, name=test_file)
        label_text = members.read(names_file, required=False)
    finally:
        members.close()
    class_names = [s for s in (label_text or b"").decode().split("\n") if s.strip()]
    if len(class_names) != classes:
        class_names = (
            CIFAR10_CLASSES if name == "cifar10" else [f"class_{i}" for i in range(classes)]
        )
    arrays = {
        "x_train": np.concatenate([p[0] for p in parts]),
        "y_train": np.concatenate([p[1] for p in parts]),
        "x_test": x_test,
        "y_test": y_test,
    }
    for key in ("y_train", "y_test"):
        if arrays[key].size and arrays[key].max() >= classes:
            raise ConfigError(
                f"{path}: {key} holds label {arrays[key].max()}; allowed: 0..{classes - 1}"
            )
    return arrays, class_names, str(path)


def load(
    name: str = "cifar10",
    *,
    data_dir: str | os.PathLike | None = None,
    subset_train_to: int | None = None,
    validation_size: int | None = None,
    normalization_name: str = "bnn_hmc",
) -> Dataset:
    """Load CIFAR-10 or CIFAR-100 as uint8 NHWC images with an on-device normalisation.

    Args:
        name: ``"cifar10"`` or ``"cifar100"``.
        data_dir: folder holding ``<name>/`` with the archive or extracted folder (default
            ``$BNNKIT_DATA_DIR``, else the download cache).
        subset_train_to: keep the first N training examples.
        validation_size: carve this many examples from the end of train into
            ``info["validation"]``.
        normalization_name: ``"bnn_hmc"`` (mean (0.49, 0.48, 0.44), std 0.2 in [0, 1] units),
            ``"unit"`` or ``"none"``.

    Returns:
        A classification Dataset: x (N, 32, 32, 3) uint8, y (N,) int32 (fine labels for
        CIFAR-100); 50,000 / 10,000 examples for the published files.

    Raises:
        ConfigError: unknown name, missing or malformed files, bad options.

    Example:
        (Needs the CIFAR-10 files, which doctests do not download.)

        >>> ds = load("cifar10", subset_train_to=1000)  # doctest: +SKIP
        >>> ds.x_train.shape  # doctest: +SKIP
        (1000, 32, 32, 3)
    """
    if name not in LAYOUTS:
        raise ConfigError(f"unknown dataset {name!r}; allowed: {', '.join(LAYOUTS)}")
    arrays, class_names, source = read_arrays(name, data_dir)
    norm = normalization.image_normalization(name, normalization_name, 3)
    dataset = Dataset(
        name=name,
        task="classification",
        x_train=arrays["x_train"],
        y_train=arrays["y_train"],
        x_test=arrays["x_test"],
        y_test=arrays["y_test"],
        num_classes=LAYOUTS[name][5],
        input_normalization=norm,
        info={
            "source": source,
            "licence": LICENCES[name],
            "normalization": normalization.describe(normalization_name, norm),
            "class_names": class_names,
        },
    )
    return splits.carve(dataset, subset_train_to=subset_train_to, validation_size=validation_size)
