"""Figures of weight pruning: error against the pruned fraction, and the SNR histogram.

Each function renders a PNG to bytes (matplotlib's Agg backend, no display needed); write them
with :func:`bnnkit.storage.atomic_write_bytes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bnnkit.report.figures import png_bytes, pyplot


def _figure(width: float = 5.5, height: float = 3.6):
    plt = pyplot()
    return plt, *plt.subplots(figsize=(width, height))


def _png(plt, fig) -> bytes:
    return png_bytes(plt, fig, dpi=120)


def pruning_curve_png(rows: list[dict[str, Any]], task: str, title: str = "") -> bytes:
    """Test error (classification, %) or RMSE of the pruned mean against the pruned share.

    Example:
        >>> rows = [{"fraction": 0.0, "snr": {"rmse": 1.0}, "magnitude": {"rmse": 1.0}},
        ...         {"fraction": 0.9, "snr": {"rmse": 1.1}, "magnitude": {"rmse": 1.8}}]
        >>> png = pruning_curve_png(rows, "regression")  # rows as pruning_table returns them
        >>> png[1:4]
        b'PNG'
    """
    key, label, scale = (
        ("error", "test error (%)", 100.0)
        if task == "classification"
        else ("rmse", "test RMSE", 1.0)
    )
    plt, fig, ax = _figure()
    x = [100 * r["fraction"] for r in rows]
    ax.plot(x, [scale * r["snr"][key] for r in rows], "o-", label="by |μ|/σ (signal-to-noise)")
    ax.plot(x, [scale * r["magnitude"][key] for r in rows], "s--", label="by |μ| (magnitude)")
    ax.set_xlabel("weights removed (%)")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return _png(plt, fig)


def snr_histogram_png(
    log_snr_db: np.ndarray, cutoff_fractions: Sequence[float] = (), title: str = ""
) -> bytes:
    """Density and CDF of ``10 log10(|μ|/σ)`` over the weights (Blundell et al.'s Fig. 4).

    Vertical lines mark the thresholds below which each of ``cutoff_fractions`` of the weights
    lie (the signal-to-noise pruning cut-offs).
    """
    values = np.asarray(log_snr_db, np.float64)
    plt, fig, ax = _figure()
    ax.hist(values, bins=100, density=True, color="tab:blue", alpha=0.7)
    ax.set_xlabel("signal-to-noise ratio 10 log10(|μ|/σ) (dB)")
    ax.set_ylabel("density")
    cdf = ax.twinx()
    ordered = np.sort(values)
    cdf.plot(ordered, np.arange(1, ordered.size + 1) / max(ordered.size, 1), color="tab:orange")
    cdf.set_ylabel("CDF")
    cdf.set_ylim(0, 1.01)
    for f in cutoff_fractions:
        if 0 < f < 1 and values.size:
            ax.axvline(np.quantile(values, f), color="tab:red", lw=0.8, ls=":")
    if title:
        ax.set_title(title)
    return _png(plt, fig)
