"""MNIST and Fashion-MNIST: 28x28 grayscale images, 10 classes, 60,000 train / 10,000 test.

Accepted files in ``<data dir>/mnist/`` (or ``fashion_mnist/``):

- the four IDX files of the original distribution (``train-images-idx3-ubyte.gz``,
  ``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``;
  gzipped or not), or
- the Keras layout ``mnist.npz`` / ``fashion_mnist.npz`` (x_train (60000, 28, 28) uint8, y_train,
  x_test, y_test), read without pickles.

Images are returned as uint8 NHWC (N, 28, 28, 1); the normalisation is applied on the device.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bnnkit.data import fetch, normalization, splits
from bnnkit.data.dataset import Dataset
from bnnkit.data.idx import read_idx
from bnnkit.data.sources import LICENCES, REMOTES
from bnnkit.errors import ConfigError

IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}

CLASS_NAMES = {
    "mnist": [str(d) for d in range(10)],
    "fashion_mnist": [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ],
}


def idx_paths(folder: Path) -> dict[str, Path] | None:
    found = {}
    for key, stem in IDX_FILES.items():
        for candidate in (folder / f"{stem}.gz", folder / stem):
            if candidate.is_file():
                found[key] = candidate
                break
        else:
            return None
    return found


def read_arrays(
    family: str, data_dir: str | os.PathLike | None = None
) -> tuple[dict[str, np.ndarray], str]:
    """The raw uint8 arrays of one family and a description of the files they came from.

    Looks in the data directory (``data_dir`` / ``$BNNKIT_DATA_DIR``) or the cache, and downloads
    into the cache only when no data directory is set.

    Raises:
        ConfigError: no files found (says which files to put where) or malformed files.
    """
    npz_name = f"{family}.npz"
    root = fetch.data_root(data_dir)
    base = root if root is not None else fetch.cache_root()
    folder = base / family
    if (folder / npz_name).is_file():
        return read_keras_npz(folder / npz_name), str(folder / npz_name)
    paths = idx_paths(folder)
    accepted = (
        f"{npz_name} (Keras layout) or the four IDX files "
        f"({', '.join(s + '.gz' for s in IDX_FILES.values())})"
    )
    if paths is None and root is not None:
        raise ConfigError(f"{family} not found: put {accepted} in {folder}/")
    if paths is None:
        remotes = [REMOTES[family]]
        if family == "mnist":  # when the Keras file is unreachable, the original IDX files
            remotes.append(REMOTES["mnist_idx"])
        for i, files in enumerate(remotes):
            try:
                downloaded = fetch.download_all(family, files, cache=base, accepted=accepted)
                break
            except fetch.UnreachableError:
                if i + 1 == len(remotes):
                    raise
        if downloaded[0].suffix == ".npz":
            return read_keras_npz(downloaded[0]), str(downloaded[0])
        paths = idx_paths(folder)
        if paths is None:
            raise ConfigError(f"downloaded files incomplete in {folder}/")
    return {key: read_idx(path) for key, path in paths.items()}, str(folder)


def read_keras_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a Keras-layout ``mnist.npz`` (x_train, y_train, x_test, y_test; no pickles)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: np.asarray(archive[key]) for key in IDX_FILES}
    except (KeyError, ValueError, OSError) as err:
        raise ConfigError(
            f"{str(path)!r} is not a Keras-layout MNIST npz with x_train, y_train, "
            f"x_test, y_test: {err}"
        ) from None


def load(
    name: str = "mnist",
    *,
    data_dir: str | os.PathLike | None = None,
    subset_train_to: int | None = None,
    validation_size: int | None = None,
    normalization_name: str = "bnn_hmc",
) -> Dataset:
    """Load MNIST or Fashion-MNIST as uint8 NHWC images with an on-device normalisation.

    Args:
        name: ``"mnist"`` or ``"fashion_mnist"``.
        data_dir: folder holding ``<name>/`` with the files (default ``$BNNKIT_DATA_DIR``, else
            the download cache).
        subset_train_to: keep the first N training examples.
        validation_size: carve this many examples from the end of train into
            ``info["validation"]``.
        normalization_name: ``"bnn_hmc"`` (mean 0.1307, std 0.3081 for MNIST), ``"blundell"``
            (x / 126), ``"unit"`` (x / 255) or ``"none"``.

    Returns:
        A classification Dataset: x (N, 28, 28, 1) uint8, y (N,) int32, 10 classes;
        ``info`` holds the files used, the normalisation and the class names.

    Raises:
        ConfigError: unknown name, missing or malformed files, bad options.

    Example:
        (Needs the MNIST files, which doctests do not download.)

        >>> ds = load("mnist", normalization_name="blundell")  # doctest: +SKIP
        >>> ds.x_train.shape, ds.x_train.dtype, ds.input_normalization.std  # doctest: +SKIP
        ((60000, 28, 28, 1), dtype('uint8'), array([126.]))
    """
    if name not in CLASS_NAMES:
        raise ConfigError(f"unknown dataset {name!r}; allowed: {', '.join(CLASS_NAMES)}")
    arrays, source = read_arrays(name, data_dir)
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 3 or x.dtype != np.uint8 or x.shape[0] != y.shape[0]:
            raise ConfigError(
                f"{source}: x_{split} has shape {x.shape} dtype {x.dtype} for "
                f"{y.shape[0]} labels; allowed: (N, H, W) uint8 with N labels"
            )
    norm = normalization.image_normalization(name, normalization_name, 1)
    dataset = Dataset(
        name=name,
        task="classification",
        x_train=arrays["x_train"][..., None],
        y_train=arrays["y_train"].astype(np.int32),
        x_test=arrays["x_test"][..., None],
        y_test=arrays["y_test"].astype(np.int32),
        num_classes=10,
        input_normalization=norm,
        info={
            "source": source,
            "licence": LICENCES[name],
            "normalization": normalization.describe(normalization_name, norm),
            "class_names": CLASS_NAMES[name],
        },
    )
    return splits.carve(dataset, subset_train_to=subset_train_to, validation_size=validation_size)
