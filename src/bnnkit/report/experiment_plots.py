"""Figures of the paper's experiments: methods against HMC, the prior sweep, Bayes by Backprop
on MNIST and the temperature sweep.

Each function renders a PNG to bytes (matplotlib's Agg backend, no display needed) from the
table rows its experiment returns; write them with :func:`bnnkit.storage.atomic_write_bytes`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from bnnkit.report.figures import png_bytes, pyplot

#: Axis labels of the test metrics the experiments report.
METRIC_LABELS = {
    "accuracy": "test accuracy",
    "nll": "test NLL (nats per example)",
    "rmse": "test RMSE (standardised units)",
    "ece": "test ECE",
    "agreement": "agreement with HMC",
    "total_variation": "total variation to HMC",
    "rmse_to_reference_mean": "RMSE to HMC's predictive mean",
}


def _barh(
    ax,
    labels: Sequence[str],
    values: Sequence[float],
    colors: Sequence[str],
    title: str,
    xlabel: str,
) -> None:
    ax.barh(range(len(values)), values, color=colors)
    ax.set_yticks(range(len(values)), labels)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    finite = [v for v in values if math.isfinite(v)]
    if finite:
        lo, hi = min(finite), max(finite)
        ax.set_xlim(max(0.0, lo - 0.15 * (hi - lo + 1e-9)), hi + 0.1 * (hi - lo + 1e-9))


def compare_methods_png(results: Mapping[str, Sequence[Mapping[str, Any]]]) -> bytes:
    """Per setting: each method's test NLL and its closeness to HMC (agreement for
    classification, RMSE to HMC's predictive mean for regression) as bars.

    Example:
        >>> rows = [{"method": "HMC (reference)", "nll": 0.5, "rmse": 0.3},
        ...         {"method": "SGD", "nll": 0.9, "rmse": 0.4, "rmse_to_reference_mean": 0.2}]
        >>> compare_methods_png({"yacht": rows})[1:4]
        b'PNG'
    """
    plt = pyplot()
    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.4 * len(results)), squeeze=False)
    for i, (name, rows) in enumerate(results.items()):
        labels = [r["method"] for r in rows]
        colors = ["C3" if r["method"].endswith("(reference)") else "C0" for r in rows]
        closeness = (
            "agreement" if any("agreement" in r for r in rows) else ("rmse_to_reference_mean")
        )
        for j, key in enumerate(("nll", closeness)):
            values = [float(r.get(key, math.nan)) for r in rows]
            _barh(
                axes[i, j],
                labels,
                values,
                colors,
                f"{name}: {METRIC_LABELS[key]}",
                METRIC_LABELS[key],
            )
    fig.suptitle("Cheaper methods against the reference (red)", fontsize=10)
    return png_bytes(plt, fig)


def prior_sweep_png(rows: Sequence[Mapping[str, Any]], metrics: Mapping[str, str]) -> bytes:
    """Per dataset (``metrics``: dataset -> "rmse" or "accuracy"): test NLL and the metric of
    the HMC BMA under each prior, Gaussian scales in blue, other shapes in orange.

    Example:
        >>> rows = [{"dataset": "yacht", "prior": "Gaussian σ=1", "spec": "gaussian:scale=1",
        ...          "nll": 0.2, "rmse": 0.3},
        ...         {"dataset": "yacht", "prior": "Laplace", "spec": "laplace:scale=0.7",
        ...          "nll": 0.3, "rmse": 0.35}]
        >>> prior_sweep_png(rows, {"yacht": "rmse"})[1:4]
        b'PNG'
    """
    plt = pyplot()
    names = [n for n in metrics if any(r["dataset"] == n for r in rows)]
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 3.6 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        mine = [r for r in rows if r["dataset"] == name]
        labels = [r["prior"] for r in mine]
        colors = ["C0" if r["spec"].startswith("gaussian") else "C1" for r in mine]
        for j, key in enumerate(("nll", metrics[name])):
            _barh(
                axes[i, j],
                labels,
                [float(r[key]) for r in mine],
                colors,
                f"{name}: {METRIC_LABELS[key]}",
                METRIC_LABELS[key],
            )
    fig.suptitle(
        "HMC BMA under different priors (blue: Gaussian scales; orange: other shapes "
        "at the middle Gaussian's variance)",
        fontsize=10,
    )
    return png_bytes(plt, fig)


def error_curve_png(
    curves: Mapping[str, tuple[Sequence[int], Sequence[float]]],
    published: Mapping[str, float],
    reference: tuple[str, float] | None = None,
    title: str = "",
) -> bytes:
    """Test error (%) of the mean network per epoch, one line per prior (``curves``: label ->
    (epochs, errors)), with each prior's published error (``published``: label -> %) dotted
    and an extra ``reference`` (label, %) dashed.

    Example:
        >>> error_curve_png({"Gaussian": ([1, 2], [3.0, 2.5])}, {"Gaussian": 1.82})[1:4]
        b'PNG'
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for i, (label, (epochs, errors)) in enumerate(curves.items()):
        color = f"C{i}"
        ax.plot(epochs, errors, "-", color=color, label=f"{label} (this run)")
        if label in published:
            ax.axhline(
                published[label],
                color=color,
                ls=":",
                lw=1,
                label=f"{label}: published {published[label]} %",
            )
    if reference is not None:
        ax.axhline(reference[1], color="grey", ls="--", lw=1, label=reference[0])
    worst = max((max(e) for _, e in curves.values() if len(e)), default=0.0)
    if worst <= 4.0:  # the published range; a short run's higher errors keep the full axis
        ax.set_ylim(1.0, 4.0)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test error of the mean network (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)
    return png_bytes(plt, fig)


def temperature_png(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], title: str = ""
) -> bytes:
    """Test metrics against the posterior temperature T (log axis), one line per
    ``row["line"]`` (method and augmentation), one panel per metric.

    Example:
        >>> rows = [{"line": "HMC", "temperature": t, "accuracy": 0.9, "nll": 0.3}
        ...         for t in (1.0, 0.1)]
        >>> temperature_png(rows, ["accuracy", "nll"])[1:4]
        b'PNG'
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 3.8), squeeze=False)
    lines = list(dict.fromkeys(r["line"] for r in rows))
    for ax, key in zip(axes[0], metrics, strict=True):
        for i, line in enumerate(lines):
            mine = sorted((r for r in rows if r["line"] == line), key=lambda r: r["temperature"])
            ax.plot(
                [r["temperature"] for r in mine],
                [r[key] for r in mine],
                "o-",
                color=f"C{i}",
                label=line,
            )
        ax.set_xscale("log")
        ax.set_xlabel("posterior temperature T (log scale)")
        ax.set_ylabel(METRIC_LABELS.get(key, key))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(title or "Test metrics against the posterior temperature", fontsize=10)
    return png_bytes(plt, fig)
