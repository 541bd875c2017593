"""The kinds of folder a report covers, in one registry: :data:`KINDS`.

A kind is recognised by its marker files (a run directory: ``run.json`` naming a ``method``;
an experiment: the files its write function leaves) and turned into a
:class:`~bnnkit.report.sections.Section` by a small function that reads what the command
already wrote: the experiments' markdown tables and PNGs, and for a run the evaluation
:func:`bnnkit.evaluation.evaluate` stored (or computes, without writing, when it has none).

Example:
    >>> import tempfile
    >>> kind_of(tempfile.mkdtemp()) is None
    True
    >>> "run" in KINDS and "convergence" in KINDS
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.report.sections import Block, Figure, Heading, Section, Table, blocks_from_markdown

#: The name a run's reliability diagram has in a report (drawn there, never in the run).
RELIABILITY_FILE = "reliability.png"
#: The name of a run's OOD score histograms in a report (drawn there, never in the run).
OOD_FILE = "ood_scores.png"
#: The name a run's running log predictive density plot has in a report (drawn there too).
RUNNING_LPD_FILE = "running_lpd.png"
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


def _is_run(folder: Path) -> bool:
    try:
        record = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and "method" in record


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


def _evaluation(folder: Path) -> dict[str, Any]:
    # evaluate() stores its result beside the run; reuse it unless the run changed since.
    from bnnkit.evaluation import evaluate
    from bnnkit.runs import RunDir

    stored = folder / "evaluation.json"
    if stored.is_file() and stored.stat().st_mtime >= RunDir(folder).run_file.stat().st_mtime:
        result = storage.read_json(stored)
        # An evaluation stored before classification ones carried their calibration bins is
        # recomputed, so that the run still gets its reliability diagram.
        if "calibration" in result or "accuracy" not in result.get("test", {}):
            return result
    return evaluate(folder, write=False)


def _value(v: Any) -> str:
    return (
        f"{v:.4g}"
        if isinstance(v, float)
        else json.dumps(v)
        if isinstance(v, (list, dict))
        else str(v)
    )


def _reliability(folder: Path, name: str, result: dict[str, Any]) -> tuple[Figure, ...]:
    # Drawn here, not stored: a report writes nothing into the folders it reads.
    from bnnkit.report.reliability_plots import reliability_png

    if "calibration" not in result:  # regression
        return ()
    png = reliability_png({name: result["calibration"]}, title=f"test set of {result['dataset']}")
    return (
        Figure(
            folder / RELIABILITY_FILE,
            "Reliability diagram of the model average on the "
            "test set: accuracy against top-1 confidence in 15 equal-width bins, the "
            "diagonal being perfect calibration, and below, the share of test points "
            "in each bin.",
            png=png,
        ),
    )


def _ood_histograms(folder: Path, name: str, result: dict[str, Any]) -> tuple[Figure, ...]:
    # The scores evaluate --ood stored; drawn here, like the reliability diagram.
    from bnnkit.evaluation import ood_file
    from bnnkit.report.ood_plots import ood_histograms_png

    found = result.get("ood")
    if not found:
        return ()
    file = folder / "predictions" / ood_file(found["dataset"])
    if not file.is_file():
        return ()
    png = ood_histograms_png(
        storage.load_arrays(file), in_name=result["dataset"], out_name=found["dataset"], title=name
    )
    return (
        Figure(
            folder / OOD_FILE,
            f"Out-of-distribution scores: the predictive entropy and "
            f"the mutual information of the test inputs of {result['dataset']} and of "
            f"{found['dataset']} (densities on shared bins); the AUROC of each score in "
            "its title.",
            png=png,
        ),
    )


def run_section(folder: Path) -> Section:
    """A run: its method, problem and settings, its evaluation (test metrics, sampler
    statistics, R-hat and ESS, the convergence verdict, the post-hoc parts asked for) and, for
    classification, its reliability diagram and, after ``evaluate --ood``, the histograms of
    its OOD scores."""
    from bnnkit.report.tables import rows

    record = storage.read_json(folder / "run.json")
    # The prior check as the run recorded it, whenever its evaluation was stored.
    result = {**_evaluation(folder), "prior_check": record.get("prior_check")}
    problem = record.get("problem") or {}
    blocks: list[Block] = [
        f"{record['method']} on {problem.get('dataset')} with model {problem.get('model')}, "
        f"run status {record.get('status', 'unknown')}.",
        Heading("problem"),
        Table(
            ("setting", "value"),
            tuple((k, _value(v)) for k, v in sorted(problem.items()) if v is not None),
        ),
        Heading("method settings"),
        Table(
            ("setting", "value"),
            tuple((k, _value(v)) for k, v in sorted((record.get("method_config") or {}).items())),
        ),
        Heading("evaluation"),
        Table(("quantity", "value"), tuple(rows(result))),
    ]
    verdict = result.get("convergence")
    if verdict:
        blocks.append(
            "Converged in function space."
            if verdict["converged"]
            else "NOT converged in function space: " + "; ".join(verdict["problems"])
        )
        blocks += _verdict_blocks(verdict)
    return Section(
        f"{record['method']} run",
        "run",
        os.fspath(folder),
        tuple(blocks),
        _reliability(folder, record["method"], result)
        + _ood_histograms(folder, record["method"], result)
        + _running_lpd(folder, result),
    )


def reference_section(folder: Path) -> Section:
    """A reference (``bnnkit reference``): its status, then its chains read as a run, as every
    reader of a run reads a reference folder.

    Raises:
        ConfigError: a reference whose chains have not run yet (stopped in its ensemble).
    """
    from bnnkit.runs.directory import REFERENCE_CHAINS, REFERENCE_FILE

    record = storage.read_json(folder / REFERENCE_FILE)
    status = record.get("status", "unknown") if isinstance(record, dict) else "unknown"
    chains = folder / REFERENCE_CHAINS
    if not _is_run(chains):
        raise ConfigError(
            f"the reference {os.fspath(folder)!r} has no chains yet (status {status}); allowed: "
            "a reference whose chains have run (continue it: bnnkit reference ... --resume)"
        )
    inner = run_section(chains)
    intro = (
        f"A reference (bnnkit reference): a deep ensemble, then one chain per member; "
        f"status {status}. Its chains, in {REFERENCE_CHAINS}/:"
    )
    return inner._replace(
        title="reference",
        kind="reference",
        source=os.fspath(folder),
        blocks=(intro, *inner.blocks),
    )


def _verdict_blocks(verdict: dict[str, Any]) -> list[Block]:
    """The verdict's level, its modes and a table of each chain's within-chain checks
    (nothing for an evaluation stored before the three outcomes)."""
    if "level" not in verdict:
        return []
    modes = verdict["modes"]
    blocks: list[Block] = [
        Heading("convergence verdict"),
        f"Level: {verdict['level']} ({verdict['summary']}). Distinct modes: {modes['count']} "
        f"(chains {' | '.join(', '.join(map(str, g)) for g in modes['groups'])}).",
    ]
    within = verdict.get("within")
    if within:

        def lpd(check: dict[str, Any], key: str, form: str) -> str:
            return "–" if not check.get("lpd") else format(check["lpd"][key], form)

        blocks.append(
            Table(
                (
                    "chain",
                    "mixed",
                    "R-hat within < threshold",
                    "ESS (5th percentile)",
                    "ESS (smallest)",
                    "LPD",
                    "LPD drift",
                    "drift se",
                    "log posterior rise (se)",
                ),
                tuple(
                    (
                        str(c["chain"]),
                        "yes" if c["mixed"] else "NO",
                        f"{c['rhat_share_below']:.0%}",
                        f"{c['ess_p5']:.0f}",
                        f"{c['ess_min']:.0f}",
                        lpd(c, "final", ".4f"),
                        lpd(c, "drift", "+.4f"),
                        lpd(c, "drift_se", ".4f"),
                        "–" if c.get("rise_z") is None else f"{c['rise_z']:.1f}",
                    )
                    for c in within
                ),
            )
        )
    return blocks


def _running_lpd(folder: Path, result: dict[str, Any]) -> tuple[Figure, ...]:
    # Drawn here from the curves the verdict stores, like the reliability diagram.
    from bnnkit.report.convergence_plots import running_lpd_png

    within = (result.get("convergence") or {}).get("within") or []
    if not within or not all(c.get("lpd") for c in within):
        return ()
    png = running_lpd_png(within, title=f"test set of {result['dataset']}")
    return (
        Figure(
            folder / RUNNING_LPD_FILE,
            "Each chain's running log predictive density: "
            "the model average of its first t kept draws, scored on the test set (nats "
            "per point). A chain that has mixed levels off; the verdict asks the model "
            "averages of its two halves to agree (the dotted line marks the middle).",
            png=png,
        ),
    )


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
    grid = tuple((k, _value(v)) for k, v in sorted(settings.get("grid", {}).items()))
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
        if all((path / m).is_file() for m in kind.markers) and (name != "run" or _is_run(path)):
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
