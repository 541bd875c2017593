"""Histograms of out-of-distribution scores: the predictive entropy and the mutual information
of the test inputs of a run's own dataset against those of another dataset
(:mod:`bnnkit.metrics.ood`), one panel per score, each with both histograms on shared bins
(densities, so sets of different sizes compare) and the AUROC in the title.

Renders a PNG to bytes (matplotlib's Agg backend).

Example:
    >>> rng = np.random.default_rng(0)
    >>> scores = {"in_entropy": rng.random(50), "out_entropy": rng.random(40) + 0.5,
    ...           "in_mutual_information": rng.random(50),
    ...           "out_mutual_information": rng.random(40)}
    >>> ood_histograms_png(scores, in_name="mnist", out_name="fashion_mnist")[1:4]
    b'PNG'
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bnnkit.metrics.ood import auroc
from bnnkit.report.figures import png_bytes, pyplot

SCORES = {"entropy": "predictive entropy (nats)", "mutual_information": "mutual information (nats)"}


def ood_histograms_png(
    scores: Mapping[str, np.ndarray], *, in_name: str, out_name: str, title: str = ""
) -> bytes:
    """One panel per score in ``scores`` (``in_<score>``, ``out_<score>`` arrays, as
    :func:`bnnkit.evaluation.evaluate` stores them), in- and out-of-distribution overlaid."""
    plt = pyplot()
    names = [s for s in SCORES if f"in_{s}" in scores and f"out_{s}" in scores]
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        mine, theirs = np.asarray(scores[f"in_{name}"]), np.asarray(scores[f"out_{name}"])
        top = float(max(mine.max(initial=0.0), theirs.max(initial=0.0)))
        bins = np.linspace(0.0, top if top > 0 else 1.0, 41)
        ax.hist(
            mine,
            bins=bins,
            density=True,
            alpha=0.55,
            color="C0",
            label=f"{in_name} (in, {mine.size})",
        )
        ax.hist(
            theirs,
            bins=bins,
            density=True,
            alpha=0.55,
            color="C3",
            label=f"{out_name} (OOD, {theirs.size})",
        )
        ax.set_xlabel(SCORES[name])
        ax.set_ylabel("density")
        ax.set_title(f"AUROC {auroc(mine, theirs):.3f}")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return png_bytes(plt, fig)
