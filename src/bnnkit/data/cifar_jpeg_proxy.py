"""``cifar10_proxy``: a lossy JPEG (quality 75) copy of CIFAR-10, natural images on any machine.

Pixel values are *not* the CIFAR-10 originals, so results on it are never CIFAR-10 results: it is
fine for qualitative questions (does cooling the posterior help, does a method lose more under
corruption than another) and for pipeline and speed checks, never for published CIFAR-10
numbers. Random crops and flips preserve its labels, as they do CIFAR-10's. The registry
name is ``cifar10_proxy``; ``cifar10_jpeg_proxy``, its earlier name, still loads it. File:
``<data dir>/cifar10_jpeg_proxy/cifar10_jpeg_q75_proxy.npz`` holding ``train_jpeg_bytes``,
``train_offsets`` (N + 1), ``y_train``, the same for ``test`` and ``class_names``; image i is
the JPEG ``bytes[offsets[i]:offsets[i + 1]]``. There is no public download. The stored
class-major order is interleaved round-robin over classes so that the first N training
examples cover every class.
"""

from __future__ import annotations

import io
import os

import numpy as np

from bnnkit.data import fetch, normalization, splits
from bnnkit.data.dataset import Dataset
from bnnkit.data.sources import LICENCES
from bnnkit.errors import ConfigError

#: The folder of the data directory that holds the file (the dataset's earlier name).
FOLDER = "cifar10_jpeg_proxy"
#: The registry name.
NAME = "cifar10_proxy"
#: Every name the registry loads it by.
NAMES = (NAME, FOLDER)
FILENAME = "cifar10_jpeg_q75_proxy.npz"


def decode(blob: np.ndarray, offsets: np.ndarray, indices: np.ndarray | None = None) -> np.ndarray:
    """Decode JPEGs ``indices`` (default all) of a concatenated blob into (N, H, W, 3) uint8.

    Example:
        >>> from PIL import Image
        >>> def jpeg(gray):
        ...     buffer = io.BytesIO()
        ...     Image.new("RGB", (32, 32), (gray,) * 3).save(buffer, "JPEG")
        ...     return buffer.getvalue()
        >>> parts = [jpeg(0), jpeg(255)]
        >>> blob = np.frombuffer(b"".join(parts), np.uint8)
        >>> offsets = np.cumsum([0] + [len(p) for p in parts])  # image i: blob[o[i]:o[i + 1]]
        >>> images = decode(blob, offsets, [1])
        >>> images.shape, int(images.min())
        ((1, 32, 32, 3), 255)
    """
    from PIL import Image

    indices = np.arange(len(offsets) - 1) if indices is None else np.asarray(indices)
    data = blob.tobytes()
    out = None
    for row, i in enumerate(indices):
        with Image.open(io.BytesIO(data[offsets[i] : offsets[i + 1]])) as image:
            pixels = np.asarray(image.convert("RGB"))
        if out is None:
            out = np.empty((len(indices), *pixels.shape), np.uint8)
        out[row] = pixels
    return np.empty((0, 32, 32, 3), np.uint8) if out is None else out


def interleaved_order(labels: np.ndarray, index_within_class: np.ndarray) -> np.ndarray:
    """Order class-major examples round-robin over classes (k-th of every class, then k+1-th).

    Example:
        >>> interleaved_order(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))
        array([0, 2, 1, 3])
    """
    return np.lexsort((labels, index_within_class))


def load(
    name: str = NAME,
    *,
    data_dir: str | os.PathLike | None = None,
    subset_train_to: int | None = None,
    validation_size: int | None = None,
    normalization_name: str = "bnn_hmc",
) -> Dataset:
    """Load the JPEG proxy of CIFAR-10 (uint8 NHWC, CIFAR-10 normalisation).

    Only the training images that survive ``subset_train_to`` / ``validation_size`` are decoded.

    Raises:
        ConfigError: the file is missing (no download exists) or malformed.

    Example:
        (Needs the proxy file on disk; it has no public download.)

        >>> ds = load(subset_train_to=500)  # doctest: +SKIP
        >>> ds.x_train.shape  # doctest: +SKIP
        (500, 32, 32, 3)
    """
    path = fetch.locate(FOLDER, [FILENAME], data_dir=data_dir, remotes=())
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except (ValueError, OSError) as err:
        raise ConfigError(f"{str(path)!r} is not a readable pickle-free npz: {err}") from None
    orders = {}
    for split in ("train", "test"):
        within = arrays.get(f"{split}_index_within_class")
        labels = arrays[f"y_{split}"]
        orders[split] = (
            np.arange(len(labels)) if within is None else interleaved_order(labels, within)
        )
    keep = len(orders["train"])
    if subset_train_to is not None and not validation_size:
        keep = min(keep, subset_train_to)  # decode only what survives the subset
    train_order = orders["train"][:keep]
    x_train = decode(arrays["train_jpeg_bytes"], arrays["train_offsets"], train_order)
    x_test = decode(arrays["test_jpeg_bytes"], arrays["test_offsets"], orders["test"])
    norm = normalization.image_normalization("cifar10", normalization_name, 3)
    dataset = Dataset(
        name=name,
        task="classification",
        x_train=x_train,
        y_train=arrays["y_train"][train_order].astype(np.int32),
        x_test=x_test,
        y_test=arrays["y_test"][orders["test"]].astype(np.int32),
        num_classes=10,
        input_normalization=norm,
        info={
            "source": str(path),
            "licence": LICENCES[FOLDER],
            "warning": "lossy JPEG proxy of CIFAR-10 (reordered round-robin over classes): "
            "not CIFAR-10; never quote its figures as CIFAR-10 results",
            "normalization": normalization.describe(normalization_name, norm),
            "class_names": [str(c) for c in arrays.get("class_names", range(10))],
        },
    )
    return splits.carve(dataset, subset_train_to=subset_train_to, validation_size=validation_size)
