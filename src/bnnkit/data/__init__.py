"""Datasets by name: ``load("yacht_2")``, ``load("path/to/file.npz")``.

Loaders register themselves in :data:`LOADERS` (a name predicate and a load function), so a new
family of datasets is one module and one entry here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from bnnkit.data import npz, uci
from bnnkit.data.dataset import Dataset, Standardizer, standardize
from bnnkit.errors import ConfigError


class Loader(NamedTuple):
    """A family of datasets: which names it answers to, how to load one, what it offers."""

    matches: Callable[[str], bool]
    load: Callable[..., Dataset]
    names: Callable[[], list[str]]


LOADERS: dict[str, Loader] = {
    "uci": Loader(
        matches=lambda name: uci.parse_name(name) is not None,
        load=lambda name, standardize_data=True, **_: uci.load(
            name, standardize_data=standardize_data
        ),
        names=lambda: sorted(uci.UCI_DATASETS),
    ),
}


def available() -> list[str]:
    """Every dataset name the registry knows (files are also accepted by path)."""
    return [name for loader in LOADERS.values() for name in loader.names()]


def load(name: str, *, standardize_data: bool | None = None, **options) -> Dataset:
    """Load a dataset by registry name or by ``.npz`` path.

    Args:
        name: a registry name (``"yacht_2"``) or a path to an npz file with x_train, y_train,
            x_test, y_test.
        standardize_data: ``None`` keeps each source's default (registry datasets are
            standardised, user files are used as given).
        **options: loader-specific options.

    Raises:
        ConfigError: unknown name or unreadable file.

    Example:
        >>> ds = load("yacht_0")
        >>> ds.task, ds.num_train
        ('regression', 277)
    """
    if name.endswith(".npz") or os.sep in name:
        return npz.load(name, standardize_data=bool(standardize_data))
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
