"""A PNG grid showing one image under every corruption and severity.

Example:
    >>> import tempfile
    >>> image = np.full((32, 32, 3), 128, np.uint8)
    >>> path = render_grid(image, "a grey image", tempfile.mkdtemp() + "/grid.png", seed=0)
    >>> os.path.basename(path)
    'grid.png'
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.data import cifar, cifar_jpeg_proxy, fetch, mnist
from bnnkit.data.catalog import where
from bnnkit.data.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from bnnkit.errors import ConfigError

# requested dataset first, then these, in order
_FALLBACKS = ("cifar10", "cifar10_proxy", "cifar100", "mnist", "fashion_mnist")


def _first_test_image(name: str, data_dir: str | os.PathLike | None) -> np.ndarray:
    if name in cifar.LAYOUTS:
        return cifar.read_arrays(name, data_dir)[0]["x_test"][0]
    if name in mnist.CLASS_NAMES:
        return mnist.read_arrays(name, data_dir)[0]["x_test"][0][..., None]
    if name in cifar_jpeg_proxy.NAMES:
        path = fetch.locate(
            cifar_jpeg_proxy.FOLDER, [cifar_jpeg_proxy.FILENAME], data_dir=data_dir, remotes=()
        )
        with np.load(path, allow_pickle=False) as archive:
            blob, offsets = archive["test_jpeg_bytes"], archive["test_offsets"]
        return cifar_jpeg_proxy.decode(blob, offsets, np.array([0]))[0]
    raise ConfigError(f"{name!r} is not an image dataset; allowed: {', '.join(_FALLBACKS)}")


def find_image(preferred: str, data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, str]:
    """The first test image of ``preferred`` or, when its files are absent, of the first image
    dataset available locally; with a description naming which one (and why).

    Raises:
        ConfigError: no image dataset is available locally.
    """
    if preferred in cifar_jpeg_proxy.NAMES:  # its earlier name
        preferred = cifar_jpeg_proxy.NAME
    tried = [preferred] + [n for n in _FALLBACKS if n != preferred]
    for name in tried:
        if name not in _FALLBACKS:
            raise ConfigError(f"{name!r} is not an image dataset; allowed: {', '.join(_FALLBACKS)}")
        if where(name, data_dir) is None:
            continue
        label = f"{name} test image 0"
        if name in cifar_jpeg_proxy.NAMES:
            label += " (lossy JPEG proxy)"
        if name != preferred:
            label += f"; {preferred} not available locally"
        return _first_test_image(name, data_dir), label
    raise ConfigError(
        f"no image dataset available locally (tried {', '.join(tried)}); set "
        f"BNNKIT_DATA_DIR or pass --data-dir"
    )


def grid_figure(image: np.ndarray, description: str, *, seed: int = 0) -> Any:
    """The grid as a matplotlib Figure: one row per corruption, columns clean + severities 1..5.

    Args:
        image: (H, W, C) uint8 with C = 1 or 3.
        description: shown in the title (which dataset/image this is).
        seed: seed of every corruption's randomness.

    Returns:
        The ``matplotlib.figure.Figure`` (close it with ``plt.close`` when done).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = len(CORRUPTIONS), 1 + len(SEVERITIES)
    # constrained layout reserves room for the two-line suptitle above the column titles;
    # tight_layout did not, and the title ran into "clean", "severity 1", ...
    fig, axes = plt.subplots(
        rows, cols, figsize=(1.3 * cols, 1.3 * rows + 0.6), layout="constrained"
    )
    gray = image.shape[-1] == 1
    for r, name in enumerate(CORRUPTIONS):
        corrupted = [image] + [corrupt(image, name, s, seed=seed) for s in SEVERITIES]
        for c, shown in enumerate(corrupted):
            ax = axes[r, c]
            ax.imshow(
                shown[..., 0] if gray else shown,
                cmap="gray" if gray else None,
                vmin=0,
                vmax=255,
                interpolation="nearest",
            )
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title("clean" if c == 0 else f"severity {c}", fontsize=8)
            if c == 0:
                ax.set_ylabel(name, fontsize=7)
    fig.suptitle(f"Corruptions (Hendrycks & Dietterich 2019)\n{description}", fontsize=9)
    return fig


def render_grid(
    image: np.ndarray, description: str, out: str | os.PathLike, *, seed: int = 0
) -> str:
    """Save the grid of :func:`grid_figure` as a PNG.

    Args:
        image: (H, W, C) uint8 with C = 1 or 3.
        description: shown in the title (which dataset/image this is).
        out: PNG path.
        seed: seed of every corruption's randomness.

    Returns:
        The path written.
    """
    import io

    import matplotlib.pyplot as plt

    fig = grid_figure(image, description, seed=seed)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    storage.atomic_write_bytes(out, buffer.getvalue())
    return str(out)
