"""Per-channel input normalisations of image datasets, in pixel units.

Images are stored as uint8 and normalised on the device, per batch, as

    model input = (pixel - mean) / std,      pixel in 0..255,

so each normalisation is a :class:`~bnnkit.data.dataset.Standardizer` with (C,)-shaped mean and
std in pixel units. ``"bnn_hmc"`` uses the constants of bnn_hmc's ``data_utils`` (given there for
pixels scaled to [0, 1], multiplied by 255 here): MNIST mean 0.1307, std 0.3081; CIFAR-10 and
CIFAR-100 mean (0.49, 0.48, 0.44), std 0.2 per channel. ``"blundell"`` is the divide-by-126 of
Blundell et al. (2015) (mean 0, std 126). ``"unit"`` is pixel / 255; ``"none"`` feeds raw pixels.
"""

from __future__ import annotations

import numpy as np

from bnnkit.data.dataset import Standardizer
from bnnkit.errors import ConfigError

# family -> name -> (mean, std) in [0, 1] units (std 126/255 for Blundell's divide-by-126)
_STATS: dict[str, dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = {
    "mnist": {"bnn_hmc": ((0.1307,), (0.3081,)), "blundell": ((0.0,), (126 / 255,))},
    # Fashion-MNIST is not in bnn_hmc; its usual training-set statistics.
    "fashion_mnist": {"bnn_hmc": ((0.2860,), (0.3530,)), "blundell": ((0.0,), (126 / 255,))},
    "cifar10": {"bnn_hmc": ((0.49, 0.48, 0.44), (0.2, 0.2, 0.2))},
    "cifar100": {"bnn_hmc": ((0.49, 0.48, 0.44), (0.2, 0.2, 0.2))},
}


def allowed(family: str) -> list[str]:
    """Normalisation names accepted for one image family."""
    return [*_STATS[family], "unit", "none"]


def image_normalization(family: str, name: str, channels: int) -> Standardizer:
    """The on-device normalisation ``(pixel - mean) / std`` for one image family.

    Args:
        family: ``"mnist"``, ``"fashion_mnist"``, ``"cifar10"`` or ``"cifar100"``.
        name: ``"bnn_hmc"`` (default of every loader), ``"blundell"`` (MNIST-like only),
            ``"unit"`` or ``"none"``.
        channels: number of image channels (the length of mean and std).

    Raises:
        ConfigError: a name not defined for the family.

    Example:
        >>> z = image_normalization("mnist", "blundell", 1)
        >>> float(z.mean[0]), float(z.std[0])
        (0.0, 126.0)
    """
    if name == "unit":
        mean, std = (0.0,) * channels, (1.0,) * channels
    elif name == "none":
        return Standardizer(mean=np.zeros(channels), std=np.ones(channels))
    elif name in _STATS.get(family, {}):
        mean, std = _STATS[family][name]
    else:
        raise ConfigError(
            f"normalization {name!r} is not defined for {family}; allowed: "
            f"{', '.join(allowed(family))}"
        )
    return Standardizer(
        mean=np.asarray(mean, np.float64) * 255.0, std=np.asarray(std, np.float64) * 255.0
    )


def describe(name: str, norm: Standardizer) -> dict:
    """A JSON-friendly record of the normalisation, for ``dataset.info``."""
    return {
        "name": name,
        "mean": [float(v) for v in norm.mean],
        "std": [float(v) for v in norm.std],
        "units": "pixel 0..255",
        "formula": "(x - mean) / std per channel",
    }
