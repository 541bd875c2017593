"""Figures of convergence: R-hat histograms in weight and function space (Izmailov et al.
2021, Fig. 3), and the one-long-chain against several-short-chains scores.

Each function renders a PNG to bytes (matplotlib's Agg backend); write them with
:func:`bnnkit.storage.atomic_write_bytes`.

Example:
    >>> h = {"edges": [1.0, 1.1, 1.2], "counts": [3, 1], "log_bins": False, "undefined": 0}
    >>> rhat_histograms_png({"weights": h, "function": h})[1:4]
    b'PNG'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnnkit.report.figures import png_bytes, pyplot

TITLES = {
    "weights": "weight space (every parameter)",
    "function": "function space (every test prediction)",
}


def rhat_histograms_png(histograms: dict[str, dict[str, Any]], title: str = "") -> bytes:
    """One panel per space, drawn from the stored edges and counts (log x when the bins are)."""
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(histograms), figsize=(4.5 * len(histograms), 3.4), squeeze=False
    )
    for ax, (space, h) in zip(axes[0], histograms.items(), strict=True):
        edges, counts = np.asarray(h["edges"]), np.asarray(h["counts"])
        ax.stairs(counts, edges, fill=True, alpha=0.7)
        if h["log_bins"]:
            from matplotlib.ticker import FormatStrFormatter

            ax.set_xscale("log")
            # Plain numbers (1, 2, 5) rather than 2×10⁰: R-hat values sit near 1.
            ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
            ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
            ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.axvline(1.1, color="tab:red", lw=0.8, ls=":")  # the paper's mark of convergence
        undefined = f"; {h['undefined']} constant" if h.get("undefined") else ""
        ax.set_title(
            f"{TITLES.get(space, space)}\n{int(counts.sum())} values{undefined}", fontsize=9
        )
        ax.set_xlabel("split R-hat")
        ax.set_ylabel("count")
    if title:
        fig.suptitle(title)
    return png_bytes(plt, fig)


def chains_png(rows: list[dict[str, Any]], reference: str = "") -> bytes:
    """Bars of each score (agreement, total variation, or RMSE) per chain scheme.

    Example:
        >>> rows = [{"scheme": "1 chain x 8 samples", "agreement": 0.9, "total_variation": 0.1},
        ...         {"scheme": "4 chains x 2 samples", "agreement": 0.95,
        ...          "total_variation": 0.05}]
        >>> chains_png(rows, "the run's own model average")[1:4]
        b'PNG'
    """
    plt = pyplot()
    scores = [
        k for k in rows[0] if k not in ("scheme", "num_chains", "samples_per_chain", "per_chain")
    ]
    fig, axes = plt.subplots(1, len(scores), figsize=(3.4 * len(scores), 3.2), squeeze=False)
    colours = plt.get_cmap("tab10")
    for ax, score in zip(axes[0], scores, strict=True):
        ax.bar(
            range(len(rows)), [r[score] for r in rows], color=[colours(k) for k in range(len(rows))]
        )
        ax.set_xticks(range(len(rows)), [r["scheme"] for r in rows], fontsize=8)
        ax.set_ylabel(score.replace("_", " "))
        ax.grid(alpha=0.3, axis="y")
    if reference:
        fig.suptitle(f"against {reference}", fontsize=9)
    return png_bytes(plt, fig)
