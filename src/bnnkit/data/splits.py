"""Training subsets and validation splits, applied the same way to every dataset.

Order of operations (as in bnn_hmc): the validation split is carved from the *end* of the
training set first, then ``subset_train_to`` keeps the *first* N remaining training examples.
The validation arrays travel in ``dataset.info["validation"] = (x_val, y_val)``.
"""

from __future__ import annotations

import dataclasses

from bnnkit.data.dataset import Dataset
from bnnkit.errors import ConfigError


def carve(
    dataset: Dataset, *, subset_train_to: int | None = None, validation_size: int | None = None
) -> Dataset:
    """Split off a validation set from the end of train, then keep the first N of train.

    Args:
        dataset: any dataset (arrays are sliced, never copied).
        subset_train_to: keep the first N training examples (``None``: all).
        validation_size: number of examples taken from the end of the training set
            (``None`` or 0: no validation split).

    Returns:
        The dataset with shortened training arrays and ``info["validation"]`` when requested.

    Raises:
        ConfigError: a size that is not positive or does not fit into the training set.

    Example:
        >>> from bnnkit.data import uci
        >>> ds = carve(uci.load("yacht_0"), subset_train_to=100, validation_size=77)  # 277 train
        >>> ds.num_train, ds.info["validation"][0].shape[0]
        (100, 77)
    """
    x, y = dataset.x_train, dataset.y_train
    info = dict(dataset.info)
    n = int(x.shape[0])
    if validation_size:
        if not 0 < validation_size < n:
            raise ConfigError(
                f"validation_size {validation_size} does not fit {dataset.name!r} "
                f"with {n} training examples; allowed: 1..{n - 1}"
            )
        info["validation"] = (x[n - validation_size :], y[n - validation_size :])
        x, y = x[: n - validation_size], y[: n - validation_size]
        n -= validation_size
    if subset_train_to is not None:
        if not 0 < subset_train_to <= n:
            raise ConfigError(
                f"subset_train_to {subset_train_to} out of range for "
                f"{dataset.name!r}; allowed: 1..{n}"
            )
        x, y = x[:subset_train_to], y[:subset_train_to]
        info["subset_train_to"] = subset_train_to
    return dataclasses.replace(dataset, x_train=x, y_train=y, info=info)
