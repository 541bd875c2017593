"""The covariate-shift figure: metrics against corruption severity, one colour per run.

As in Ovadia et al. (2019) and Izmailov et al. (2021, Fig. 6), each severity shows a box over
the corruptions (quartiles, whiskers to the extremes) and a line joins the means over them;
severity 0 is the clean test set. Renders a PNG to bytes (matplotlib's Agg backend); write it
with :func:`bnnkit.storage.atomic_write_bytes`.

Example:
    >>> data = {"accuracy": {"hmc": {0: [0.9], 1: [0.8, 0.7], 2: [0.6, 0.5]},
    ...                      "sgd": {0: [0.88], 1: [0.7, 0.6], 2: [0.4, 0.3]}}}
    >>> degradation_png(data)[1:4]
    b'PNG'
"""

from __future__ import annotations

import io as _io

import numpy as np

LABELS = {
    "accuracy": "accuracy",
    "nll": "negative log likelihood",
    "ece": "expected calibration error",
}


def degradation_png(data: dict[str, dict[str, dict[int, list[float]]]], title: str = "") -> bytes:
    """One panel per metric of ``{metric: {run label: {severity: [value per corruption]}}}``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    metrics = list(data)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.8), squeeze=False)
    labels = list(dict.fromkeys(label for by_label in data.values() for label in by_label))
    colours = plt.get_cmap("tab10")
    width = 0.8 / max(len(labels), 1)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for k, label in enumerate(labels):
            by_severity = data[metric].get(label, {})
            severities = sorted(by_severity)
            # Side by side within each severity, centred on it.
            positions = [s - 0.4 + width * (k + 0.5) for s in severities]
            colour = colours(k % 10)
            ax.boxplot(
                [by_severity[s] for s in severities],
                positions=positions,
                widths=0.9 * width,
                whis=(0, 100),
                patch_artist=True,
                boxprops={"facecolor": colour, "alpha": 0.35, "edgecolor": colour},
                medianprops={"color": colour},
                whiskerprops={"color": colour},
                capprops={"color": colour},
                showfliers=False,
                manage_ticks=False,
            )
            ax.plot(
                positions,
                [float(np.mean(by_severity[s])) for s in severities],
                "o-",
                color=colour,
                label=label,
                markersize=4,
            )
        ticks = sorted({s for by_label in data[metric].values() for s in by_label})
        ax.set_xticks(ticks, ["clean" if s == 0 else str(s) for s in ticks])
        ax.set_xlabel("corruption severity")
        ax.set_ylabel(LABELS.get(metric, metric))
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    buffer = _io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
