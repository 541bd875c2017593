"""What each registry dataset is, and whether its files are on this machine (nothing downloads).

Example:
    >>> [card.name for card in cards()][:3]
    ['mnist', 'fashion_mnist', 'cifar10']
    >>> yacht = next(card for card in cards() if card.name == "yacht")
    >>> yacht.input_shape, yacht.num_train, yacht.num_test
    ((6,), 277, 31)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from bnnkit.data import cifar, cifar10_c, cifar_jpeg_proxy, fetch, mnist, reference_probs, uci
from bnnkit.data.sources import LICENCES
from bnnkit.errors import ConfigError


class Card(NamedTuple):
    """One dataset's description.

    Attributes:
        name: registry name (``load(name)``).
        task: ``"classification"``, ``"regression"``, ``"evaluation"`` (test-only shifts) or
            ``"reference"`` (released predictive probabilities of a test set).
        input_shape: one example's shape as stored (images uint8 HWC, IMDB token ids).
        outputs: number of classes, or the target dimension for regression.
        num_train: training examples of the published split (before any validation split).
        num_test: test examples.
        licence: licence or terms as stated by the source.
        note: anything a user must know (proxy data, validation split, ...).
    """

    name: str
    task: str
    input_shape: tuple[int, ...]
    outputs: int
    num_train: int
    num_test: int
    licence: str
    note: str = ""


_IMAGE_CARDS = [
    Card("mnist", "classification", (28, 28, 1), 10, 60_000, 10_000, LICENCES["mnist"]),
    Card(
        "fashion_mnist",
        "classification",
        (28, 28, 1),
        10,
        60_000,
        10_000,
        LICENCES["fashion_mnist"],
    ),
    Card("cifar10", "classification", (32, 32, 3), 10, 50_000, 10_000, LICENCES["cifar10"]),
    Card(
        "cifar100",
        "classification",
        (32, 32, 3),
        100,
        50_000,
        10_000,
        LICENCES["cifar100"],
        "fine labels",
    ),
    Card(
        "imdb",
        "classification",
        (100,),
        2,
        25_000,
        25_000,
        LICENCES["imdb"],
        "20,000 train + 5,000 validation; vocabulary 20,000",
    ),
    Card(
        "cifar10_c",
        "evaluation",
        (32, 32, 3),
        10,
        0,
        50_000,
        LICENCES["cifar10_c"],
        "19 corruptions x 5 severities of the CIFAR-10 test set",
    ),
    Card(
        "cifar10_proxy",
        "classification",
        (32, 32, 3),
        10,
        50_000,
        10_000,
        LICENCES["cifar10_jpeg_proxy"],
        "lossy JPEG copy of CIFAR-10: qualitative questions "
        "and pipeline checks, never CIFAR-10 numbers",
    ),
    *(
        Card(
            ref.name,
            "reference",
            (ref.shape[1],),
            ref.shape[1],
            0,
            ref.shape[0],
            LICENCES[ref.name],
            f"HMC probabilities; rows in {ref.order}",
        )
        for ref in reference_probs.REFERENCES.values()
    ),
]


def cards() -> list[Card]:
    """Every registry dataset: the file-based ones, then the bundled UCI tables."""
    out = list(_IMAGE_CARDS)
    for base, (num_features, num_splits, licence) in uci.UCI_DATASETS.items():
        rows = uci.load_table(base).shape[0]
        num_train = round(0.9 * rows)
        out.append(
            Card(
                f"{base}",
                "regression",
                (num_features,),
                1,
                num_train,
                rows - num_train,
                licence,
                f"{num_splits} splits: {base}_0...{base}_{num_splits - 1}",
            )
        )
    return out


def folder(name: str) -> str:
    """The folder of the data directory that holds a dataset's files.

    Example:
        >>> folder("mnist"), folder("cifar10_proxy")
        ('mnist', 'cifar10_jpeg_proxy')
    """
    return cifar_jpeg_proxy.FOLDER if name in cifar_jpeg_proxy.NAMES else name


def _first_existing(folder: Path, names: list[str]) -> Path | None:
    return next((folder / n for n in names if (folder / n).exists()), None)


def where(name: str, data_dir: str | os.PathLike | None = None) -> str | None:
    """Where a dataset's files are on this machine, or None (never downloads).

    With a data directory (``data_dir`` / ``$BNNKIT_DATA_DIR``) only it is searched, as the
    loaders do; otherwise the download cache.

    Raises:
        ConfigError: unknown name or a data directory that does not exist.
    """
    if name in uci.UCI_DATASETS:
        return "bundled with bnnkit"
    root = fetch.data_root(data_dir)
    base = root if root is not None else fetch.cache_root()
    if name in ("mnist", "fashion_mnist"):
        folder = base / name
        if (folder / f"{name}.npz").is_file():
            return str(folder / f"{name}.npz")
        return str(folder) if mnist.idx_paths(folder) else None
    if name in cifar.LAYOUTS:
        archive, extracted, _, test_file, *_ = cifar.LAYOUTS[name]
        found = _first_existing(base / name, [extracted, archive, test_file])
        return None if found is None else str(found)
    if name == "imdb":
        folder = base / "imdb"
        found = _first_existing(folder, ["imdb.npz"])
        subsets = sorted(folder.glob("imdb_*.npz")) if folder.is_dir() else []
        return str(found) if found else (f"{subsets[0]} (subset)" if subsets else None)
    if name == "cifar10_c":
        found = cifar10_c.find(data_dir)
        return None if found is None else str(found)
    if name in reference_probs.REFERENCES:
        found = _first_existing(base / name, [reference_probs.FILENAME])
        return None if found is None else str(found)
    if name in cifar_jpeg_proxy.NAMES:
        found = _first_existing(base / cifar_jpeg_proxy.FOLDER, [cifar_jpeg_proxy.FILENAME])
        return None if found is None else str(found)
    raise ConfigError(
        f"unknown dataset {name!r}; allowed: {', '.join(card.name for card in cards())}"
    )
