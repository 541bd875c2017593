"""The reliability diagram: accuracy against top-1 confidence per confidence bin.

From the bins :func:`bnnkit.metrics.predictive.calibration_bins` gives (and
:func:`bnnkit.evaluation.evaluate` stores under ``"calibration"``): a perfectly calibrated
predictive has ``acc_b = conf_b`` in every bin, on the diagonal, and its expected calibration
error ``ECE = Σ_b (n_b/N) |acc_b − conf_b|`` (in the legend) weighs each bin's gap by its share
of the points ``n_b/N`` (the lower panel). One model is drawn as bars; several, to compare
methods, as one coloured step line each, so none hides another. A dot marks each bin's mean
confidence: its height above or below the diagonal is the bin's gap.

Renders a PNG to bytes (matplotlib's Agg backend); write it with
:func:`bnnkit.storage.atomic_write_bytes`.

Example:
    >>> bins = {"edges": [0.0, 0.5, 1.0], "counts": [0, 4], "confidence": [None, 0.8],
    ...         "accuracy": [None, 0.75]}
    >>> reliability_png({"HMC": bins, "SGD": bins}, title="demo")[1:4]
    b'PNG'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bnnkit.metrics.predictive import ece_from_bins
from bnnkit.report.figures import png_bytes, pyplot


def _values(column: Sequence[float | None]) -> np.ndarray:
    # An empty bin's None becomes NaN, which matplotlib leaves undrawn.
    return np.array([np.nan if v is None else v for v in column], np.float64)


def reliability_png(curves: Mapping[str, Mapping[str, Sequence[Any]]], title: str = "") -> bytes:
    """A reliability diagram of each named model's bins (``curves``: name -> bins, in the
    legend's order), with the share of points per bin in a small panel below.

    Args:
        curves: model name -> its :func:`~bnnkit.metrics.predictive.calibration_bins`.
        title: what the models predict on, after "Reliability diagram".
    """
    plt = pyplot()
    fig, (ax, share) = plt.subplots(
        2, 1, figsize=(5.6, 5.8), sharex=True, gridspec_kw={"height_ratios": (3, 1)}
    )
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect calibration")
    bars = len(curves) == 1
    for i, (name, bins) in enumerate(curves.items()):
        colour = f"C{i}"
        edges = np.asarray(bins["edges"], np.float64)
        accuracy = _values(bins["accuracy"])
        counts = np.asarray(bins["counts"], np.float64)
        label = f"{name} (ECE {ece_from_bins(bins):.3f})"
        if bars:
            ax.bar(
                edges[:-1],
                np.nan_to_num(accuracy),
                width=np.diff(edges),
                align="edge",
                color=colour,
                alpha=0.45,
                edgecolor=colour,
                label=label,
            )
        else:
            # No baseline: the outer edges would otherwise drop to accuracy 0.
            ax.stairs(accuracy, edges, baseline=None, color=colour, lw=1.6, label=label)
        ax.plot(_values(bins["confidence"]), accuracy, "o", color=colour, ms=3.5)
        share.stairs(
            counts / max(counts.sum(), 1.0),
            edges,
            baseline=0.0 if bars else None,
            color=colour,
            fill=bars,
            alpha=0.45 if bars else 1.0,
            lw=1.4,
        )
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("Reliability diagram" + (f": {title}" if title else ""), fontsize=10)
    share.set_xlabel("top-1 confidence")
    share.set_ylabel("share of points")
    share.grid(alpha=0.3)
    return png_bytes(plt, fig)
