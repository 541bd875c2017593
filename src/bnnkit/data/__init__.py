"""Datasets by name: ``load("yacht_2")``, ``load("mnist")``, ``load("path/to/file.npz")``.

Loaders register themselves in :data:`LOADERS` (a name predicate and a load function), so a new
family of datasets is one module and one entry here. Every loader accepts ``subset_train_to``
(keep the first N training examples) and ``data_dir`` (a folder of files already on disk; default
``$BNNKIT_DATA_DIR``; without one, files are downloaded into ``$BNNKIT_CACHE_DIR``), and
``validation_size`` (examples carved from the end of train into ``info["validation"]``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from bnnkit.arguments import check_arguments, flag_argument, passed_on, text_argument, with_options
from bnnkit.data import cifar, cifar_jpeg_proxy, imdb, mnist, npz, splits, uci
from bnnkit.data.dataset import Dataset, Standardizer, standardize
from bnnkit.errors import ConfigError


class Loader(NamedTuple):
    """A family of datasets: which names it answers to, how to load one, what it offers."""

    matches: Callable[[str], bool]
    load: Callable[..., Dataset]
    names: Callable[[], list[str]]


def _options(name: str, options: dict, allowed: tuple[str, ...]) -> dict:
    # Options the caller left at None are ignored; anything else must be known to the loader.
    unknown = sorted(k for k, v in options.items() if k not in allowed and v is not None)
    if unknown:
        raise ConfigError(
            f"option {unknown[0]!r} is not accepted by {name!r}; allowed: {', '.join(allowed)}"
        )
    return {k: v for k, v in options.items() if k in allowed and v is not None}


def _load_uci(
    name: str,
    standardize_data: bool = True,
    subset_train_to: int | None = None,
    data_dir: str | os.PathLike | None = None,
    validation_size: int | None = None,
    **options,
) -> Dataset:
    _options(name, options, ())
    # data_dir is accepted for a uniform call signature: the UCI tables ship with the package.
    return splits.carve(
        uci.load(name, standardize_data=standardize_data),
        subset_train_to=subset_train_to,
        validation_size=validation_size,
    )


def _image_loader(module) -> Callable[..., Dataset]:
    def load_images(name: str, standardize_data: bool | None = None, **options) -> Dataset:
        # standardize_data does not apply: images are normalised on the device with the
        # dataset's input_normalization (choose it with normalization=...).
        kwargs = _options(
            name, options, ("subset_train_to", "data_dir", "validation_size", "normalization")
        )
        if "normalization" in kwargs:
            kwargs["normalization_name"] = kwargs.pop("normalization")
        return module.load(name, **kwargs)

    return load_images


def _load_imdb(name: str, standardize_data: bool | None = None, **options) -> Dataset:
    return imdb.load(
        name,
        **_options(
            name, options, ("subset_train_to", "data_dir", "validation_size", "num_words", "maxlen")
        ),
    )


LOADERS: dict[str, Loader] = {
    "uci": Loader(
        matches=lambda name: uci.parse_name(name) is not None,
        load=_load_uci,
        names=lambda: sorted(uci.UCI_DATASETS),
    ),
    "mnist": Loader(
        matches=lambda name: name in mnist.CLASS_NAMES,
        load=_image_loader(mnist),
        names=lambda: list(mnist.CLASS_NAMES),
    ),
    "cifar": Loader(
        matches=lambda name: name in cifar.LAYOUTS,
        load=_image_loader(cifar),
        names=lambda: list(cifar.LAYOUTS),
    ),
    "cifar10_proxy": Loader(
        matches=lambda name: name in cifar_jpeg_proxy.NAMES,
        load=_image_loader(cifar_jpeg_proxy),
        names=lambda: [cifar_jpeg_proxy.NAME],
    ),
    "imdb": Loader(
        matches=lambda name: name == "imdb",
        load=_load_imdb,
        names=lambda: ["imdb"],
    ),
}


def available() -> list[str]:
    """Every dataset name the registry knows (files are also accepted by path)."""
    return [name for loader in LOADERS.values() for name in loader.names()]


#: :func:`load`'s arguments and the check each gets (a row of
#: :data:`bnnkit.entry_points.ENTRY_POINTS`).
LOAD_CHECKS = {
    "name": with_options(text_argument),
    "standardize_data": with_options(flag_argument, optional=True),
    "options": with_options(passed_on),  # each is refused by its loader unless it takes it
}


def load(name: str, *, standardize_data: bool | None = None, **options) -> Dataset:
    """Load a dataset by registry name or by ``.npz`` path.

    Args:
        name: a registry name (``"yacht_2"``, ``"mnist"``, ``"cifar10"``, ``"imdb"``) or a path
            to an npz file with x_train, y_train, x_test, y_test.
        standardize_data: ``None`` keeps each source's default (UCI datasets are standardised,
            user files are used as given; images are never standardised on the host: their
            per-channel normalisation is ``dataset.input_normalization``).
        **options: ``subset_train_to`` (first N training examples), ``data_dir``,
            ``validation_size``; images also ``normalization`` (``"bnn_hmc"``, ``"blundell"``
            for MNIST, ``"unit"``, ``"none"``); IMDB ``num_words`` and ``maxlen``.

    Raises:
        ConfigError: unknown name, unknown option or unreadable file.

    Example:
        >>> ds = load("yacht_0")
        >>> ds.task, ds.num_train
        ('regression', 277)
    """
    check_arguments("bnnkit.load_dataset", locals(), LOAD_CHECKS)
    if name.endswith(".npz") or os.sep in name:
        dataset = npz.load(name, standardize_data=bool(standardize_data))
        kwargs = _options(name, options, ("subset_train_to", "data_dir", "validation_size"))
        kwargs.pop("data_dir", None)
        return splits.carve(dataset, **kwargs)
    for loader in LOADERS.values():
        if loader.matches(name):
            kwargs = dict(options)
            if standardize_data is not None:
                kwargs["standardize_data"] = standardize_data
            return loader.load(name, **kwargs)
    raise ConfigError(
        f"unknown dataset {name!r}; allowed: {', '.join(available())} (UCI names take a _<split> "
        "suffix, e.g. yacht_2), or a path to an .npz file"
    )


__all__ = ["LOADERS", "Dataset", "Standardizer", "available", "load", "standardize"]
