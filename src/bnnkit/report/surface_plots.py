"""Contour plots of a field on the plane through three parameter vectors
(:mod:`bnnkit.experiments.surface`).

The function renders a PNG to bytes (matplotlib's Agg backend, no display needed); write it with
:func:`bnnkit.storage.atomic_write_bytes`.
"""

from __future__ import annotations

import io as _io
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

#: Filled contour levels: enough to see the shape of a basin, few enough to read.
LEVELS = 20
#: Labelled ticks on the colour bar.
TICKS = 6
#: The share of the grid, at its low end, drawn in the lowest colour instead of getting bands
#: of its own: far from the points a log density is orders of magnitude below its values
#: between them, and those few points would otherwise set the scale.
CLIP_QUANTILE = 0.05
NAMES = ("A", "B", "C")


class ColourScale(NamedTuple):
    """How a field's values map to colours, and what the colour bar says.

    Attributes:
        levels: contour levels, increasing.
        ticks: the levels labelled on the colour bar (the highest among them).
        labels: their labels, 4 significant digits each, all in one notation
            (:func:`notation`), no offset or exponent text that could read as another value.
        clipped: below ``levels[0]``: the share of the grid drawn in the lowest colour (0
            when nothing is).
    """

    levels: np.ndarray
    ticks: np.ndarray
    labels: list[str]
    clipped: float

    def label(self, value: float) -> str:
        """``value`` in the notation of the colour bar's labels."""
        return notation(self.ticks)(value)


def _scientific(value: float) -> str:
    mantissa, exponent = f"{value:.3e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent}"


def notation(values: Sequence[float] | np.ndarray) -> Callable[[float], str]:
    """One notation for all of ``values``, 4 significant digits: plain numbers when each
    reads so (``-79.41``, ``535.7``), else every one in e-notation (``-3.545e+13``,
    ``5.357e+02``), so that a column of labels never mixes the two.

    Example:
        >>> [notation([-16, -4.4, 0])(x) for x in (-16, -4.4, 0)]
        ['-16', '-4.4', '0']
        >>> [notation([-3.545e13, -6305, 535.7])(x) for x in (-3.545e13, -6305, 535.7)]
        ['-3.545e+13', '-6.305e+03', '5.357e+02']
    """
    plain = all("e" not in f"{float(x):.4g}" for x in np.asarray(values, np.float64).ravel())
    return (lambda x: f"{float(x):.4g}") if plain else (lambda x: _scientific(float(x)))


def colour_scale(values: np.ndarray) -> ColourScale | None:
    """Contour levels at quantiles of the field above its :data:`CLIP_QUANTILE`, and the colour
    bar's labelled ticks (``None`` when the field is constant).

    Far from the points a log density falls by orders of magnitude more than between them;
    evenly spaced levels would paint everything near the points in one colour, while levels at
    quantiles give every colour the same share of the plane, whatever the range. The lowest
    values are clipped into the lowest colour, and the colour bar says what was.

    Example:
        >>> field = -np.logspace(0, 10, 400)  # from -1 down to -1e10
        >>> field[-1] = 535.7
        >>> scale = colour_scale(field)
        >>> scale.labels[-1], round(scale.clipped, 2), len(set(scale.labels)) == len(scale.labels)
        ('5.357e+02', 0.05, True)
    """
    finite = np.asarray(values, np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0 or not np.ptp(finite) > 0:
        return None
    low = float(np.quantile(finite, CLIP_QUANTILE))
    kept = finite[finite >= low]
    levels = np.unique(np.quantile(kept, np.linspace(0.0, 1.0, LEVELS + 1)))
    if levels.size < 2:
        levels = np.array([float(finite.min()), float(finite.max())])
        low = levels[0]
    step = max(1, int(np.ceil((levels.size - 1) / (TICKS - 1))))
    ticks = levels[::-1][::step][::-1]  # counted down from the highest, which is labelled
    label = notation(ticks)
    labels = [label(x) for x in ticks]
    # Distinct labels: where 4 digits cannot tell two ticks apart, keep the higher one.
    keep = [i for i in range(len(labels)) if i == len(labels) - 1 or labels[i] != labels[i + 1]]
    return ColourScale(levels, ticks[keep], [labels[i] for i in keep], float(np.mean(finite < low)))


def contour_png(
    u: np.ndarray,
    v: np.ndarray,
    values: np.ndarray,
    points: np.ndarray,
    labels: Sequence[str] = (),
    **options: Any,
) -> bytes:
    """Filled contours of ``values[i, j]`` at ``(u[i], v[j])``, with A, B, C marked, as a PNG
    (the figure of :func:`contour_figure`, which takes the same arguments; ``options`` are its
    keyword arguments: ``title``, ``value_label``, ``u_norm``, ``v_norm``).

    Example:
        >>> u = v = np.linspace(-0.25, 1.25, 5)
        >>> values = -np.add.outer(u**2, v**2)
        >>> png = contour_png(u, v, values, np.array([[0, 0], [1, 0], [0.5, 1]]))
        >>> png[1:4]
        b'PNG'
    """
    import matplotlib.pyplot as plt

    fig = contour_figure(u, v, values, points, labels, **options)
    buffer = _io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()


def contour_figure(
    u: np.ndarray,
    v: np.ndarray,
    values: np.ndarray,
    points: np.ndarray,
    labels: Sequence[str] = (),
    *,
    title: str = "",
    value_label: str = "",
    u_norm: float | None = None,
    v_norm: float | None = None,
) -> Any:
    """Filled contours of ``values[i, j]`` at ``(u[i], v[j])``, with A, B, C marked: a
    matplotlib figure (the caller closes it).

    Non-finite values (a likelihood that overflowed far from the points) are left blank. The
    contour levels are the field's quantiles (each colour covers the same share of the
    grid), so the shape near the points shows even when the field spans orders of magnitude;
    the lowest values are clipped into the lowest colour, and the colour bar's label says below
    which value and for what share of the grid (:func:`colour_scale`).

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

    The colour bar's labels are the ticks of :func:`colour_scale`, written by one
    matplotlib formatter in one notation (:func:`notation`).

    Example:
        >>> import matplotlib.pyplot as plt
        >>> u = v = np.linspace(-0.25, 1.25, 5)
        >>> values = -1e6 * np.add.outer(u**2, v**2)
        >>> fig = contour_figure(u, v, values, np.array([[0, 0], [1, 0], [0.5, 1]]))
        >>> fig.canvas.draw()
        >>> texts = [t.get_text() for t in fig.axes[1].get_yticklabels()]
        >>> texts[-1], all("e+" in text for text in texts)
        ('-3.125e+04', True)
        >>> plt.close(fig)
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.6, 5.0))
    _draw_contours(fig, ax, u, v, values, value_label)
    _mark_points(ax, points)
    ax.set_xlabel("along B − A" + (f" (units of ‖B − A‖ = {u_norm:.3g})" if u_norm else ""))
    ax.set_ylabel(
        "towards C, orthogonal to B − A" + (f" (units of {v_norm:.3g})" if v_norm else "")
    )
    if title:
        ax.set_title(title, fontsize=10)
    if labels:
        fig.text(
            0.01,
            0.005,
            "   ".join(f"{n}: {label}" for n, label in zip(NAMES, labels, strict=False)),
            fontsize=7,
            ha="left",
            va="bottom",
        )
    # Fixed margins: tight_layout would measure every tick label (docs/performance.md,
    # Evaluation).
    fig.subplots_adjust(left=0.11, right=0.88, bottom=0.14 if labels else 0.11, top=0.93)
    return fig


def _draw_contours(
    fig: Any, ax: Any, u: np.ndarray, v: np.ndarray, values: np.ndarray, value_label: str
) -> None:
    """The filled contours at the field's quantile levels, their lines, the colour bar and,
    where values were clipped into the lowest colour, what was (nothing for a constant
    field)."""
    import matplotlib.colors
    import matplotlib.ticker

    grid_u, grid_v = np.meshgrid(np.asarray(u), np.asarray(v), indexing="ij")
    z = np.ma.masked_invalid(np.asarray(values, np.float64))
    scale = colour_scale(z.filled(np.nan))
    if scale is None:
        return
    # One colour per band, not per value: with quantile levels a linear map would give
    # the bands near the maximum almost the same colour.
    norm = matplotlib.colors.BoundaryNorm(scale.levels, ncolors=256, extend="min")
    clipped = np.ma.maximum(z, scale.levels[0])  # the clipped values take the lowest band
    filled = ax.contourf(
        grid_u,
        grid_v,
        clipped,
        levels=scale.levels,
        cmap="viridis",
        norm=norm,
        alpha=0.8,
        zorder=0,
        extend="min",
    )
    ax.contour(
        grid_u,
        grid_v,
        clipped,
        levels=filled.levels,
        colors="k",
        linewidths=0.4,
        alpha=0.5,
        zorder=1,
    )
    if scale.clipped > 0:  # under the colour bar's arrow, which stands for them
        fig.text(
            0.99,
            0.045,
            f"▼ below {scale.label(scale.levels[0])}: "
            f"{scale.clipped:.0%} of the grid,\nin the lowest colour",
            fontsize=7,
            ha="right",
            va="bottom",
        )
    bar = fig.colorbar(
        filled,
        ax=ax,
        label=value_label,
        ticks=scale.ticks,
        format=matplotlib.ticker.FuncFormatter(lambda x, _: scale.label(x)),
    )
    bar.ax.yaxis.get_offset_text().set_visible(False)


def _mark_points(ax: Any, points: np.ndarray) -> None:
    """A, B and C, marked and named."""
    points = np.asarray(points, np.float64)
    ax.plot(points[:, 0], points[:, 1], "o", color="tab:red", ms=9, markeredgecolor="k", zorder=2)
    for name, (x, y) in zip(NAMES, points, strict=False):
        ax.annotate(
            name,
            (x, y),
            textcoords="offset points",
            xytext=(7, 7),
            fontsize=12,
            fontweight="bold",
            zorder=3,
        )
