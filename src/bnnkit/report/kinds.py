"""The kinds of folder a report covers, in one registry: :data:`KINDS`.

A kind is recognised by its marker files (a run directory: ``run.json`` naming a ``method``;
an experiment: the files its write function leaves) and turned into a
:class:`~bnnkit.report.sections.Section` by a small function that reads what the command
already wrote: the experiments' markdown tables and PNGs, and for a run the evaluation
:func:`bnnkit.evaluation.evaluate` stored (or computes, without writing, when it has none):
:mod:`bnnkit.report.run_report`.

Example:
    >>> import tempfile
    >>> kind_of(tempfile.mkdtemp()) is None
    True
    >>> "run" in KINDS and "convergence" in KINDS
    True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.report.run_report import is_run, reference_section, run_section, setting_value
from bnnkit.report.sections import Block, Figure, Section, Table, blocks_from_markdown

#: The reliability diagram ``bnnkit experiment compare-methods`` draws per classification
#: setting (``.format(setting)``); defined here, where the report reads it, so that the
#: experiment imports it from report/ and report/ never imports experiments/.
SETTING_RELIABILITY_FILE = "reliability_{}.png"


class Kind(NamedTuple):
    """The files that mark a folder as this kind, what it is (for messages), and the function
    that turns such a folder into a section."""

    markers: tuple[str, ...]
    what: str
    section: Callable[[Path], Section]


def _figures(folder: Path, captions: dict[str, str]) -> tuple[Figure, ...]:
    # A figure the command did not draw (no plots, or nothing to plot) is left out.
    return tuple(
        Figure(folder / name, caption)
        for name, caption in captions.items()
        if (folder / name).is_file()
    )


def _table_file(folder: Path, name: str) -> tuple[Block, ...]:
    file = folder / name
    return blocks_from_markdown(file.read_text()) if file.is_file() else ()


def convergence_section(folder: Path) -> Section:
    """``bnnkit convergence``: the R-hat summaries per space and the chain comparison."""
    report = storage.read_json(folder / "convergence.json")
    summary = Table(
        ("space", "median", "p90", "max"),
        tuple(
            (space, *(f"{h['summary'][k]:.3f}" for k in ("median", "p90", "max")))
            for space, h in report["histograms"].items()
        ),
    )
    return Section(
        f"Convergence of {report['method']} on {report['dataset']}",
        "convergence",
        os.fspath(folder),
        (
            f"{report['num_chains']} chains x {report['num_samples_per_chain']} kept samples, "
            f"function space on {report['num_test_points']} test points. Split R-hat:",
            summary,
            *_table_file(folder, "chains.md"),
        ),
        _figures(
            folder,
            {
                "rhat_histograms.png": "Histograms of split R-hat of every parameter (weight "
                "space) and of every test prediction (function space); "
                "values near 1 mean the chains agree.",
                "chains.png": "One long chain against several short ones of the same total "
                "length, each scored against the reference model average.",
            },
        ),
    )


def shift_section(folder: Path) -> Section:
    """``bnnkit shift``: accuracy, NLL and ECE per run, corruption and severity."""
    table = storage.read_json(folder / "shift_table.json")
    return Section(
        f"Covariate shift on {table.get('dataset')}",
        "shift",
        os.fspath(folder),
        _table_file(folder, "shift.md"),
        _figures(
            folder,
            {
                "degradation.png": "Per metric, box plots over the corruptions at "
                "each severity (0: clean) and their mean, one "
                "colour per run."
            },
        ),
    )


def _experiment(
    title: str, kind: str, table: str, captions: dict[str, str], intro: str = ""
) -> Callable[[Path], Section]:
    def build(folder: Path) -> Section:
        return Section(
            title,
            kind,
            os.fspath(folder),
            ((intro,) if intro else ()) + _table_file(folder, table),
            _figures(folder, captions),
        )

    build.__doc__ = f"``{title}``: its markdown table ``{table}`` and its figures."
    return build


def compare_methods_section(folder: Path) -> Section:
    """``bnnkit experiment compare-methods``: its table, the methods' bars and, per
    classification setting in ``results.json``, the methods' reliability diagram."""
    captions = {
        "compare_methods.png": "Each method's test NLL and its closeness to HMC's predictive."
    }
    for name in storage.read_json(folder / "results.json"):
        captions[SETTING_RELIABILITY_FILE.format(name)] = (
            f"Reliability diagram on {name}: each method's test accuracy against top-1 "
            "confidence in 15 equal-width bins (the diagonal is perfect calibration, ECE in the "
            "legend), and below, the share of test points in each bin."
        )
    return _experiment("Methods against HMC", "compare-methods", "table.md", captions)(folder)


def surface_section(folder: Path) -> Section:
    """``bnnkit surface``: the grid and points, and the three contour plots."""
    settings = storage.read_json(folder / "surface.json")
    grid = tuple((k, setting_value(v)) for k, v in sorted(settings.get("grid", {}).items()))
    points = tuple((str(i), p) for i, p in enumerate(settings.get("points", [])))
    captions = {
        "log_posterior.png": "The log posterior on the plane through the three "
        "points, contours with the points marked.",
        "log_likelihood.png": "The log likelihood on the same plane.",
        "log_prior.png": "The log prior on the same plane.",
    }
    return Section(
        "Posterior surface",
        "surface",
        os.fspath(folder),
        (Table(("grid", "value"), grid), Table(("point", "source"), points)),
        _figures(folder, captions),
    )


#: Where ``bnnkit paper`` draws each finding's figure (``.format(number)``).
FINDING_FIGURE = "figures/finding_{}.png"


def paper_section(folder: Path) -> Section:
    """``bnnkit paper``: the scale, the table of the paper's findings, measured, and each
    finding's figure with its verdict and the level of the reference it rests on under it."""
    file = folder / "findings.json"
    items = storage.read_json(file) if file.is_file() else []
    captions = {}
    for f in items:
        verdict = f["verdict"] + (f" ({f['caveat']})" if f.get("caveat") else "")
        level = f.get("reference") or "no HMC reference"
        captions[FINDING_FIGURE.format(f["number"])] = (
            f"Finding {f['number']}: {f['claim']}. Measured: {f['measured']}. Verdict: "
            f"{verdict}. Reference: {level}."
        )
    return Section(
        "The paper's findings",
        "paper",
        os.fspath(folder),
        _table_file(folder, "findings.md"),
        _figures(folder, captions),
    )


#: Every kind of folder a report covers: marker files, description and section function.
#: Tried in this order; the first whose markers are all present (and, for a run, whose
#: ``run.json`` names a method) is the folder's kind.
KINDS: dict[str, Kind] = {
    "run": Kind(("run.json",), "a run directory (run.json naming a method)", run_section),
    "reference": Kind(
        ("reference.json",), "bnnkit reference (read as its chains)", reference_section
    ),
    "paper": Kind(("paper.json", "findings.md"), "bnnkit paper", paper_section),
    "convergence": Kind(("convergence.json",), "bnnkit convergence", convergence_section),
    "shift": Kind(("shift_table.json",), "bnnkit shift", shift_section),
    "surface": Kind(("surface.json", "surface.npz"), "bnnkit surface", surface_section),
    "compare-methods": Kind(
        ("results.json", "table.md"), "bnnkit experiment compare-methods", compare_methods_section
    ),
    "prior-sweep": Kind(
        ("results.json", "prior_sweep.md"),
        "bnnkit experiment prior-sweep",
        _experiment(
            "HMC under several priors",
            "prior-sweep",
            "prior_sweep.md",
            {"prior_sweep.png": "Test NLL and metric of the HMC model average under each prior."},
        ),
    ),
    "temperature": Kind(
        ("results.json", "temperature.md"),
        "bnnkit experiment temperature",
        _experiment(
            "Posterior temperature",
            "temperature",
            "temperature.md",
            {
                "temperature.png": "Test metrics against the posterior "
                "temperature T (log axis), one line "
                "per method and augmentation."
            },
        ),
    ),
    "bbb-mnist": Kind(
        ("summary.json", "results.md"),
        "bnnkit experiment bbb-mnist",
        _experiment(
            "Bayes by Backprop on MNIST",
            "bbb-mnist",
            "results.md",
            {
                "error_curve.png": "Test error of the mean network after "
                "every epoch, with the published "
                "errors as lines."
            },
        ),
    ),
    "pruning": Kind(
        ("pruning.json", "pruning.md"),
        "bnnkit prune",
        _experiment(
            "Pruning by signal-to-noise ratio",
            "pruning",
            "pruning.md",
            {
                "pruning.png": "Test error of the pruned mean network against the "
                "share of weights removed, by SNR and by magnitude.",
                "snr_histogram.png": "Histogram of the weights' signal-to-noise "
                "ratio (dB), with the pruning thresholds.",
            },
        ),
    ),
}


def kind_of(folder: str | os.PathLike) -> str | None:
    """The name of ``folder``'s kind in :data:`KINDS`, or ``None`` when none matches."""
    path = Path(folder)
    if not path.is_dir():
        return None
    for name, kind in KINDS.items():
        if all((path / m).is_file() for m in kind.markers) and (name != "run" or is_run(path)):
            return name
    return None


def section(folder: str | os.PathLike) -> Section:
    """``folder``'s section, by the function of its kind.

    Raises:
        ConfigError: a folder of no known kind, naming it and the kinds known.
    """
    name = kind_of(folder)
    if name is None:
        known = "; ".join(f"{n} ({k.what})" for n, k in KINDS.items())
        raise ConfigError(
            f"{os.fspath(folder)!r} is no folder bnnkit can report on; allowed: {known}"
        )
    return KINDS[name].section(Path(folder))
