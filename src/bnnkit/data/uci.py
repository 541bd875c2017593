"""UCI regression benchmarks with the standard 20 train/test splits (5 for protein).

The data tables ship with the package (``files/uci/<name>/data.txt.gz``, whitespace-separated,
target in the last used column). The splits are *regenerated*, not shipped: the splits used by
PBP (Hernández-Lobato & Adams 2015), MC dropout and deep ensembles are exactly

    rng = numpy.random.RandomState(1)
    for split in range(n_splits):
        perm = rng.permutation(n)
        train, test = perm[:round(0.9 n)], perm[round(0.9 n):]

which the test-suite checks index for index against the published split files.
"""

from __future__ import annotations

import gzip
import re
from importlib import resources

import numpy as np

from bnnkit.data.dataset import Dataset, standardize
from bnnkit.errors import ConfigError

# name -> (number of feature columns (features are columns 0..k-1, the target is column k),
#          number of standard splits, licence of the data table)
UCI_DATASETS: dict[str, tuple[int, int, str]] = {
    "boston": (
        13,
        20,
        "StatLib / UCI ML Repository; known ethical problems (column B): "
        "report for comparison only",
    ),
    "concrete": (8, 20, "UCI ML Repository, CC BY 4.0 (Yeh 1998)"),
    "energy": (8, 20, "UCI ML Repository, CC BY 4.0 (Tsanas & Xifara 2012); heating load"),
    "kin8nm": (8, 20, "DELVE kin family (Rasmussen et al.), freely redistributable"),
    "naval": (16, 20, "UCI ML Repository, CC BY 4.0 (Coraddu et al. 2014); compressor decay"),
    "power-plant": (4, 20, "UCI ML Repository, CC BY 4.0 (Tüfekci 2014)"),
    "protein": (9, 5, "UCI ML Repository, CC BY 4.0 (Rana 2013)"),
    "wine-quality-red": (11, 20, "UCI ML Repository, CC BY 4.0 (Cortez et al. 2009)"),
    "yacht": (6, 20, "UCI ML Repository, CC BY 4.0 (Gerritsma et al. 2013)"),
}

_NAME_RE = re.compile(r"^(?P<base>[a-z0-9-]+?)(?:_(?P<split>-?\d+))?$")


def parse_name(name: str) -> tuple[str, int] | None:
    """Split ``"yacht_2"`` into ``("yacht", 2)``; ``None`` if it is not a UCI name.

    A bare name (``"yacht"``) means split 0.
    """
    match = _NAME_RE.match(name)
    if match is None or match["base"] not in UCI_DATASETS:
        return None
    return match["base"], int(match["split"] or 0)


def load_table(base: str) -> np.ndarray:
    """The whole data table of one UCI dataset as float64 (rows, columns)."""
    path = resources.files("bnnkit.data") / "files" / "uci" / base / "data.txt.gz"
    with path.open("rb") as raw, gzip.open(raw, "rt") as text:
        return np.loadtxt(text, dtype=np.float64, ndmin=2)


def standard_splits(num_rows: int, num_splits: int) -> tuple[np.ndarray, np.ndarray]:
    """Regenerate the standard splits: ``(index_train, index_test)``, each (splits, size).

    Example:
        >>> train, test = standard_splits(308, 20)
        >>> train.shape, test.shape
        ((20, 277), (20, 31))
    """
    rng = np.random.RandomState(1)  # the legacy generator is what reproduces the published files
    num_train = round(0.9 * num_rows)
    perms = np.stack([rng.permutation(num_rows) for _ in range(num_splits)])
    return perms[:, :num_train], perms[:, num_train:]


def load(name: str, *, standardize_data: bool = True) -> Dataset:
    """Load one split of a UCI regression dataset, standardised with training statistics.

    Args:
        name: ``"<dataset>_<split>"`` as in bnn_hmc, e.g. ``"yacht_2"``; a bare name means split 0.
        standardize_data: standardise inputs and targets with the training split's statistics
            (metrics are still reported in original units).

    Returns:
        A regression :class:`~bnnkit.data.dataset.Dataset` with float32 arrays.

    Raises:
        ConfigError: unknown dataset or a split index out of range.

    Example:
        >>> ds = load("yacht_2")
        >>> ds.x_train.shape, ds.x_test.shape
        ((277, 6), (31, 6))
    """
    parsed = parse_name(name)
    if parsed is None:
        raise ConfigError(
            f"unknown UCI dataset {name!r}; allowed: {', '.join(sorted(UCI_DATASETS))} "
            "with an optional _<split> suffix"
        )
    base, split = parsed
    num_features, num_splits, licence = UCI_DATASETS[base]
    if not 0 <= split < num_splits:
        raise ConfigError(
            f"split index {split} out of range for {base!r}: allowed 0..{num_splits - 1}"
        )
    table = load_table(base)
    index_train, index_test = standard_splits(table.shape[0], num_splits)
    x, y = table[:, :num_features], table[:, num_features]
    raw = Dataset(
        name=f"{base}_{split}",
        task="regression",
        x_train=x[index_train[split]],
        y_train=y[index_train[split]],
        x_test=x[index_test[split]],
        y_test=y[index_test[split]],
        info={
            "source": f"UCI {base}",
            "split": split,
            "num_splits": num_splits,
            "licence": licence,
        },
    )
    if not standardize_data:
        return raw
    return standardize(raw)
