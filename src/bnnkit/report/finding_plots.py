"""One figure per finding of the paper, drawn as the paper draws it, from the study's tables.

``bnnkit paper`` writes ``figures/finding_<n>.png`` with these and the report shows each under
its finding, with the verdict and the level of the reference it rests on. Each function renders
a PNG to bytes from plain rows (what the experiments' ``results.json`` files hold):

1. :func:`methods_png`: accuracy and NLL of the reference, SGD and the deep ensemble;
2. :func:`chains_png`: agreement and total variation of one long chain against several short
   ones;
3. :func:`temperature_nll_png`: test NLL against the posterior temperature, with and without
   augmentation;
4. :func:`priors_png`: the model average's metric under every prior, the unjudged ones hatched;
5. :func:`severity_png`: accuracy against the corruption severity (mean over corruptions);
6. :func:`closeness_png`: agreement and total variation of every method with the reference.

Example:
    >>> rows = [{"method": "MCLMC (reference)", "accuracy": 0.7, "nll": 0.9},
    ...         {"method": "SGD", "accuracy": 0.72, "nll": 1.1},
    ...         {"method": "Deep ensemble (K=5)", "accuracy": 0.74, "nll": 0.8}]
    >>> methods_png({"mnist": rows})[1:4]
    b'PNG'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from bnnkit.report.figures import png_bytes, pyplot

#: The methods finding 1 sets against the reference.
STANDARD = ("SGD", "Deep ensemble (K=5)")


def _is_reference(method: str) -> bool:
    return method.endswith("(reference)")


def _line_plot(plt, fig, ax, xlabel: str, ylabel: str, title: str) -> bytes:
    # The labels, grid, legend and title of a one-axes line figure, rendered.
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    return png_bytes(plt, fig)


def methods_png(settings: Mapping[str, Sequence[Mapping[str, Any]]]) -> bytes:
    """Finding 1: per classification setting, test accuracy and NLL of the reference, SGD and
    the deep ensemble as grouped bars."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    names = list(settings)
    width = 0.8 / 3
    for j, metric in enumerate(("accuracy", "nll")):
        ax = axes[j]
        for k in range(3):
            values = []
            label = ""
            for name in names:
                rows = settings[name]
                pick = (
                    [r for r in rows if _is_reference(r["method"])]
                    if k == 0
                    else [r for r in rows if r["method"] == STANDARD[k - 1]]
                )
                values.append(float(pick[0].get(metric, math.nan)) if pick else math.nan)
                label = label or (pick[0]["method"] if pick else "")
            ax.bar(
                [i + (k - 1) * width for i in range(len(names))],
                values,
                width,
                label=label,
                color=("C3", "C0", "C2")[k],
            )
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel(f"test {'accuracy' if metric == 'accuracy' else 'NLL'}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("The reference's model average against SGD and a deep ensemble", fontsize=10)
    return png_bytes(plt, fig)


def chains_png(chains: Sequence[Mapping[str, Any]], reference: str) -> bytes:
    """Finding 2: agreement with ``reference`` and total variation to it, of one long chain
    against several short ones (the convergence part's ``chains`` rows).

    Example:
        >>> rows = [{"scheme": "1 chain x 40", "agreement": 0.8, "total_variation": 0.2},
        ...         {"scheme": "4 chains x 10", "agreement": 0.85, "total_variation": 0.15}]
        >>> chains_png(rows, "the pooled model average")[1:4]
        b'PNG'
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    labels = [r["scheme"] for r in chains]
    for ax, key, title in (
        (axes[0], "agreement", "agreement"),
        (axes[1], "total_variation", "total variation"),
    ):
        ax.bar(range(len(chains)), [float(r[key]) for r in chains], color=["C0", "C1"])
        ax.set_xticks(range(len(chains)), labels, fontsize=8)
        ax.set_ylabel(f"{title} with {reference}", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("One long chain against several short ones of the same length", fontsize=10)
    return png_bytes(plt, fig)


def temperature_nll_png(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Finding 3: test NLL against the temperature T (log axis), one line per method and
    augmentation.

    Example:
        >>> rows = [{"line": "MCLMC", "temperature": t, "nll": 1.0 + t} for t in (1, 0.1)]
        >>> temperature_nll_png(rows)[1:4]
        b'PNG'
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for i, line in enumerate(dict.fromkeys(r["line"] for r in rows)):
        mine = sorted((float(r["temperature"]), float(r["nll"])) for r in rows if r["line"] == line)
        ax.plot(*zip(*mine, strict=True), "o-", color=f"C{i}", label=line)
    ax.set_xscale("log")
    return _line_plot(
        plt,
        fig,
        ax,
        "posterior temperature T",
        "test NLL",
        "Cold posteriors: NLL against T, with and without augmentation",
    )


def priors_png(rows: Sequence[Mapping[str, Any]], judged: Sequence[Mapping[str, Any]]) -> bytes:
    """Finding 4: per dataset of the sweep, the model average's accuracy (or RMSE) under
    every prior; the rows not among ``judged`` (the finding's, see
    :func:`bnnkit.experiments.paper.levels.judged_prior_rows`) hatched.

    Example:
        >>> rows = [{"dataset": "yacht", "prior": p, "key": p, "rmse": r}
        ...         for p, r in (("gaussian_small", 0.6), ("gaussian", 0.3))]
        >>> priors_png(rows, rows[1:])[1:4]
        b'PNG'
    """
    plt = pyplot()
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        mine = [r for r in rows if r["dataset"] == name]
        metric = "accuracy" if "accuracy" in mine[0] else "rmse"
        bars = ax.barh(
            range(len(mine)),
            [float(r[metric]) for r in mine],
            color=["C0" if "gaussian" in str(r.get("spec", "gaussian")) else "C1" for r in mine],
        )
        for bar, r in zip(bars, mine, strict=True):
            if r not in judged:
                bar.set_hatch("//")
                bar.set_alpha(0.5)
        ax.set_yticks(range(len(mine)), [r["prior"] for r in mine], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"test {metric}")
        ax.set_title(name, fontsize=10)
    fig.suptitle(
        "The model average under each prior (hatched: reported, not judged: a prior "
        "that underfits by construction, or chains that did not mix)",
        fontsize=10,
    )
    return png_bytes(plt, fig)


def severity_png(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Finding 5: accuracy against the corruption severity (0: clean), mean over the
    corruptions, one line per run.

    Example:
        >>> rows = [{"label": "hmc", "severity": s, "accuracy": 0.9 - 0.1 * s}
        ...         for s in (0, 1, 3)]
        >>> severity_png(rows)[1:4]
        b'PNG'
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for i, label in enumerate(dict.fromkeys(r["label"] for r in rows)):
        by: dict[int, list[float]] = {}
        for r in rows:
            if r["label"] == label:
                by.setdefault(int(r["severity"]), []).append(float(r["accuracy"]))
        levels = sorted(by)
        ax.plot(levels, [sum(by[s]) / len(by[s]) for s in levels], "o-", color=f"C{i}", label=label)
    return _line_plot(
        plt,
        fig,
        ax,
        "corruption severity (0: clean)",
        "test accuracy (mean over corruptions)",
        "Accuracy under covariate shift",
    )


def closeness_png(settings: Mapping[str, Sequence[Mapping[str, Any]]]) -> bytes:
    """Finding 6: per classification setting, every method's agreement with the reference
    and total variation to it.

    Example:
        >>> rows = [{"method": "SGLD", "agreement": 0.8, "total_variation": 0.3}]
        >>> closeness_png({"mnist": rows})[1:4]
        b'PNG'
    """
    plt = pyplot()
    names = list(settings)
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.4 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        rows = [r for r in settings[name] if "agreement" in r]
        for j, key in enumerate(("agreement", "total_variation")):
            ax = axes[i, j]
            ax.barh(
                range(len(rows)),
                [float(r[key]) for r in rows],
                color=["C2" if r["method"].startswith("Deep") else "C0" for r in rows],
            )
            ax.set_yticks(range(len(rows)), [r["method"] for r in rows], fontsize=8)
            ax.invert_yaxis()
            ax.set_title(f"{name}: {key.replace('_', ' ')} with the reference", fontsize=10)
    fig.suptitle("How close each method's predictive is to the reference's", fontsize=10)
    return png_bytes(plt, fig)
