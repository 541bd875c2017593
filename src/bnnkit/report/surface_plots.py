"""Contour plots of a field on the plane through three parameter vectors
(:mod:`bnnkit.experiments.surface`).

The function renders a PNG to bytes (matplotlib's Agg backend, no display needed); write it with
:func:`bnnkit.storage.atomic_write_bytes`.
"""

from __future__ import annotations

import io as _io
from collections.abc import Sequence

import numpy as np

#: Filled contour levels: enough to see the shape of a basin, few enough to read.
LEVELS = 20
NAMES = ("A", "B", "C")


def _levels(z: np.ma.MaskedArray) -> np.ndarray | None:
    """Contour levels at quantiles of the field (``None`` when it is constant).

    Far from the points a log density falls by orders of magnitude more than between them;
    evenly spaced levels would paint everything near the points in one colour, while levels at
    quantiles give every colour the same share of the plane, whatever the range.
    """
    values = z.compressed()
    if values.size == 0 or not np.ptp(values) > 0:
        return None
    levels = np.unique(np.quantile(values, np.linspace(0.0, 1.0, LEVELS + 1)))
    return levels if levels.size >= 2 else None


def contour_png(u: np.ndarray, v: np.ndarray, values: np.ndarray, points: np.ndarray,
                labels: Sequence[str] = (), *, title: str = "", value_label: str = "",
                u_norm: float | None = None, v_norm: float | None = None) -> bytes:
    """Filled contours of ``values[i, j]`` at ``(u[i], v[j])``, with A, B, C marked.

    Non-finite values (a likelihood that overflowed far from the points) are left blank. The
    contour levels are the field's quantiles (each colour covers the same share of the
    grid), so the shape near the points shows even when the field spans orders of magnitude.

    Args:
        u: (n,) horizontal coordinates (units of ‖θ_B − θ_A‖).
        v: (m,) vertical coordinates (units of C's distance from the line AB).
        values: (n, m) the field.
        points: (3, 2) coordinates of A, B, C.
        labels: what A, B and C are (run directories), listed under the plot.
        title: the plot's title.
        value_label: the colour bar's label.
        u_norm: ‖θ_B − θ_A‖, named on the horizontal axis.
        v_norm: C's distance from the line AB, named on the vertical axis.

    Example:
        >>> u = v = np.linspace(-0.25, 1.25, 5)
        >>> values = -np.add.outer(u**2, v**2)
        >>> png = contour_png(u, v, values, np.array([[0, 0], [1, 0], [0.5, 1]]))
        >>> png[1:4]
        b'PNG'
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.colors
    import matplotlib.pyplot as plt

    grid_u, grid_v = np.meshgrid(np.asarray(u), np.asarray(v), indexing="ij")
    z = np.ma.masked_invalid(np.asarray(values, np.float64))
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    levels = _levels(z)
    if levels is not None:
        # One colour per band, not per value: with quantile levels a linear map would give
        # the bands near the maximum almost the same colour.
        norm = matplotlib.colors.BoundaryNorm(levels, ncolors=256)
        filled = ax.contourf(grid_u, grid_v, z, levels=levels, cmap="viridis", norm=norm,
                             alpha=0.8, zorder=0)
        ax.contour(grid_u, grid_v, z, levels=filled.levels, colors="k", linewidths=0.4,
                   alpha=0.5, zorder=1)
        fig.colorbar(filled, ax=ax, label=value_label)
    points = np.asarray(points, np.float64)
    ax.plot(points[:, 0], points[:, 1], "o", color="tab:red", ms=9, markeredgecolor="k",
            zorder=2)
    for name, (x, y) in zip(NAMES, points, strict=False):
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(7, 7), fontsize=12,
                    fontweight="bold", zorder=3)
    ax.set_xlabel("along B − A" + (f" (units of ‖B − A‖ = {u_norm:.3g})" if u_norm else ""))
    ax.set_ylabel("towards C, orthogonal to B − A"
                  + (f" (units of {v_norm:.3g})" if v_norm else ""))
    if title:
        ax.set_title(title, fontsize=10)
    if labels:
        fig.text(0.01, 0.005, "   ".join(f"{n}: {label}" for n, label in zip(NAMES, labels,
                                                                            strict=False)),
                 fontsize=7, ha="left", va="bottom")
    buffer = _io.BytesIO()
    # Fixed margins: tight_layout measures every tick label and would double the drawing time.
    fig.subplots_adjust(left=0.12, right=0.93, bottom=0.14 if labels else 0.11, top=0.93)
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()
