"""A run directory, and a reference's chains, as a section of a report.

A run's section reads what the run and its evaluation already hold: its method, problem and
settings, the evaluation :func:`bnnkit.evaluation.evaluate` stored beside it (or computes,
without writing, when it has none or the run changed since), the table of its rows
(:func:`bnnkit.report.tables.rows`), and the figures drawn from the evaluation: the
reliability diagram, the OOD score histograms and the histogram of R-hat within chains per test
point (the verdict's level 1, :mod:`bnnkit.metrics.levels`). The section opens with the
verdict at a glance (:func:`headline`): its outcome in its colour, and what to do. The figures
are drawn in the report, never written into the run, so a report changes nothing in the folders
it reads. A reference folder (``bnnkit reference``) reads as its chains, a run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate, ood_file
from bnnkit.report.convergence_plots import rhat_histograms_png
from bnnkit.report.ood_plots import ood_histograms_png
from bnnkit.report.reliability_plots import reliability_png
from bnnkit.report.sections import Block, Figure, Heading, Headline, Section, Table
from bnnkit.report.tables import rows
from bnnkit.runs import RunDir
from bnnkit.runs.composite_folder import read_record
from bnnkit.runs.directory import resolve

#: The name a run's reliability diagram has in a report (drawn there, never in the run).
RELIABILITY_FILE = "reliability.png"
#: The name of a run's OOD score histograms in a report (drawn there, never in the run).
OOD_FILE = "ood_scores.png"
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


#: The tone of each verdict's headline (:data:`bnnkit.metrics.levels.VERDICTS`).
TONES = {"certified": "good", "reproducible": "fair", "not a reference": "poor"}


def headline(result: dict[str, Any]) -> tuple[Headline, ...]:
    """An evaluation's verdict at a glance: its outcome and summary in the outcome's tone, and
    what to do; an older evaluation's convergence verdict as it recorded it; nothing for a
    run that is no run of chains.

    Example:
        >>> headline({"levels": {"verdict": "reproducible", "summary": "L1 failed",
        ...                      "advice": ["more draws"]}})[0]
        Headline(text='verdict: reproducible (L1 failed)', tone='fair', to_do=('more draws',))
    """
    found = result.get("levels")
    if found:
        return (
            Headline(
                f"verdict: {found['verdict']} ({found['summary']})",
                TONES.get(found["verdict"], "none"),
                tuple(found.get("advice", ())),
            ),
        )
    old = result.get("convergence")
    if old and "level" in old:
        return (
            Headline(
                f"convergence verdict, as recorded: {old['level']} ({old['summary']})",
                "none",
                tuple(old.get("advice", ())),
            ),
        )
    return ()


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
    """A run: its verdict at a glance (:func:`headline`), its method, problem and settings, its
    evaluation (test metrics, the verdict level by level, sampler statistics, R-hat and ESS,
    the post-hoc parts asked for) and, for
    classification, its reliability diagram and, after ``evaluate --ood``, the histograms of
    its OOD scores."""
    record = storage.read_json(folder / "run.json")
    # The prior check as the run recorded it, whenever its evaluation was stored.
    result = {**_evaluation(folder), "prior_check": record.get("prior_check")}
    problem = record.get("problem") or {}
    blocks: list[Block] = [
        *headline(result),
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
    return Section(
        f"{record['method']} run",
        "run",
        os.fspath(folder),
        tuple(blocks),
        _reliability(folder, record["method"], result)
        + _ood_histograms(folder, record["method"], result)
        + _rhat_within(folder, result),
    )


def reference_section(folder: Path) -> Section:
    """A reference (``bnnkit reference``): its status, then its chains read as a run, as every
    reader of a run reads a reference folder.

    Raises:
        ConfigError: a reference whose chains have not run yet (stopped in its ensemble).
    """
    record = read_record(folder)
    status = record.get("status", "unknown")
    chains = resolve(folder)
    if not is_run(chains):
        raise ConfigError(
            f"the reference {os.fspath(folder)!r} has no chains yet (status {status}); allowed: "
            "a reference whose chains have run (continue it: bnnkit reference ... --resume)"
        )
    inner = run_section(chains)
    intro = (
        f"A reference (bnnkit reference): a deep ensemble, then one chain per member; "
        f"status {status}. Its chains, in {chains.name}/:"
    )
    glance = tuple(b for b in inner.blocks if isinstance(b, Headline))
    rest = tuple(b for b in inner.blocks if not isinstance(b, Headline))
    return inner._replace(
        title="reference",
        kind="reference",
        source=os.fspath(folder),
        blocks=(*glance, intro, *rest),
    )


def _rhat_within(folder: Path, result: dict[str, Any]) -> tuple[Figure, ...]:
    # Drawn here from the histogram the reference levels store, like the running LPD.

    found = (result.get("levels") or {}).get("L1") or {}
    # Evaluations stored before typed findings hold the level's figures beside its status.
    histogram = (found.get("figures") or found).get("rhat_histogram")
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
