"""A run directory, and a reference's chains, as a section of a report.

A run's section reads what the run and its evaluation already hold: its method, problem and
settings, the evaluation :func:`bnnkit.evaluation.evaluate` stored beside it (or computes,
without writing, when it has none or the run changed since), the table of its rows
(:func:`bnnkit.report.tables.rows`), the convergence verdict with each chain's checks, and the
figures drawn from the evaluation: the reliability diagram, the OOD score histograms, each
chain's running log predictive density and the histogram of R-hat within chains per test point
(the reference levels', :mod:`bnnkit.metrics.levels`). The figures are drawn in the report,
never written into the run, so a report changes nothing in the folders it reads. A reference
folder (``bnnkit reference``) reads as its chains, a run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.report.sections import Block, Figure, Heading, Section, Table

#: The name a run's reliability diagram has in a report (drawn there, never in the run).
RELIABILITY_FILE = "reliability.png"
#: The name of a run's OOD score histograms in a report (drawn there, never in the run).
OOD_FILE = "ood_scores.png"
#: The name a run's running log predictive density plot has in a report (drawn there too).
RUNNING_LPD_FILE = "running_lpd.png"
#: The name of the histogram of a run's R-hat within chains per test point, in a report.
RHAT_WITHIN_FILE = "rhat_within.png"


def is_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run: a readable ``run.json`` naming a ``method``."""
    try:
        record = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and "method" in record


def _evaluation(folder: Path) -> dict[str, Any]:
    # evaluate() stores its result beside the run; reuse it unless the run changed since.
    from bnnkit.evaluation import evaluate
    from bnnkit.runs import RunDir

    stored = folder / "evaluation.json"
    if stored.is_file() and stored.stat().st_mtime >= RunDir(folder).run_file.stat().st_mtime:
        result = storage.read_json(stored)
        # An evaluation stored before classification ones carried their calibration bins is
        # recomputed, so that the run still gets its reliability diagram.
        # So is one of Markov chains stored before the reference levels were judged.
        current = "calibration" in result or "accuracy" not in result.get("test", {})
        if current and ("levels" in result or "convergence" not in result):
            return result
    return evaluate(folder, write=False)


def setting_value(v: Any) -> str:
    """A setting's value in a report's table: floats to 4 significant digits, lists and dicts
    as JSON."""
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
            tuple((k, setting_value(v)) for k, v in sorted(problem.items()) if v is not None),
        ),
        Heading("method settings"),
        Table(
            ("setting", "value"),
            tuple(
                (k, setting_value(v))
                for k, v in sorted((record.get("method_config") or {}).items())
            ),
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
        + _running_lpd(folder, result)
        + _rhat_within(folder, result),
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
    if not is_run(chains):
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


def _rhat_within(folder: Path, result: dict[str, Any]) -> tuple[Figure, ...]:
    # Drawn here from the histogram the reference levels store, like the running LPD.
    from bnnkit.report.convergence_plots import rhat_histograms_png

    histogram = ((result.get("levels") or {}).get("L1") or {}).get("rhat_histogram")
    if not histogram:
        return ()
    png = rhat_histograms_png(
        {"R-hat within chains (worst chain per test point)": histogram},
        title=f"test set of {result['dataset']}",
    )
    return (
        Figure(
            folder / RHAT_WITHIN_FILE,
            "R-hat within chains per test point: each chain's kept draws cut into 4 "
            "consecutive pieces taken as chains, the worst chain's value at each test point "
            "(level 1 of the reference levels asks 95 % of them below 1.1 in every chain; the "
            "dotted line). The last bin holds every value above 1.2.",
            png=png,
        ),
    )
