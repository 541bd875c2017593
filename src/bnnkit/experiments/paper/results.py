"""A study folder's findings: scored from the results its parts wrote, and each finding's
figure drawn as the paper draws it.

Both read the folder :func:`bnnkit.experiments.paper.study.paper` fills, so a study's findings
can be scored again (or drawn) from its results alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.experiments.paper.layout import SETTINGS_FILE
from bnnkit.experiments.paper.levels import (
    judged_prior_rows,
    judged_temperature_rows,
    passes,
)
from bnnkit.experiments.paper.method_rows import (
    beats_standard_settings,
    classification_settings,
    reference_row,
    sgld_settings,
)
from bnnkit.experiments.paper.verdicts import (
    Finding,
    assessed,
    finding_ensembles_close,
    finding_hmc_beats_standard,
    finding_no_cold_posterior,
    finding_one_long_chain,
    finding_poor_under_shift,
    finding_prior_robust,
)
from bnnkit.report import finding_plots as plots


def _reference_field(compare: Mapping[str, Any], name: str, key: str) -> list[str | None]:
    """Field ``key`` of setting ``name``'s HMC reference row in the compare-methods table
    (``levels``: its verdict; ``level``: its convergence level, in results written before
    the one verdict): [] when
    the setting or its reference did not run, [None] when the field was not recorded."""
    rows = (compare.get(name) or {}).get("rows") or []
    found = reference_row(rows)
    return [] if found is None else [found.get(key)]


def _references(compare: Mapping[str, Any], names: list[str]) -> tuple[list, list]:
    """The convergence levels (as recorded before the one verdict) and the verdicts of
    settings ``names``' references, in the same order."""
    return (
        [level for name in names for level in _reference_field(compare, name, "level")],
        [verdict for name in names for verdict in _reference_field(compare, name, "levels")],
    )


def findings(out: str | os.PathLike) -> list[Finding]:
    """Score the paper's findings from the results written in ``out`` by :func:`paper`, each
    with the verdicts of the runs it rests on (``levels`` in each part's rows; ``level`` in
    results written before the one verdict)."""
    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    mnist_hmc = _references(compare, ["mnist"])
    mnist_row = reference_row((compare.get("mnist") or {}).get("rows") or [])
    converged = None if mnist_row is None else passes(mnist_row)
    temperature = read("temperature", "results.json")
    prior = read("prior_sweep", "results.json")
    shift = read("shift", "shift_table.json")
    images = (read(SETTINGS_FILE) or {}).get("images", "cifar10_proxy")
    shift_hmc = (
        _references(compare, [images])
        if _reference_field(compare, images, "levels") or _reference_field(compare, images, "level")
        else mnist_hmc
    )
    temperature_rows = [
        r
        for r in judged_temperature_rows((temperature or {}).get("rows") or [])[0]
        if r.get("method") == "hmc"
    ]
    prior_rows = judged_prior_rows(prior or [])[0]

    def rows_hmc(rows: list) -> tuple[list, list]:
        return [r.get("level") for r in rows], [r.get("levels") for r in rows]

    return [
        assessed(
            finding_hmc_beats_standard(compare, converged),
            *_references(compare, beats_standard_settings(compare)),
        ),
        assessed(
            finding_one_long_chain(read("convergence", "convergence.json"), converged), *mnist_hmc
        ),
        assessed(finding_no_cold_posterior(temperature), *rows_hmc(temperature_rows)),
        assessed(finding_prior_robust(prior), *rows_hmc(prior_rows)),
        assessed(finding_poor_under_shift((shift or {}).get("rows")), *shift_hmc),
        assessed(finding_ensembles_close(compare), *_references(compare, sgld_settings(compare))),
    ]


def finding_figures(out: str | os.PathLike) -> dict[int, bytes]:
    """Each finding's figure (:mod:`bnnkit.report.finding_plots`), drawn as the paper draws
    it from the results in ``out``, by finding number; a finding whose part did not run has
    none."""

    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    classification = {name: compare[name]["rows"] for name in classification_settings(compare)}
    figures: dict[int, bytes] = {}
    if classification:
        figures[1] = plots.methods_png(classification)
        figures[6] = plots.closeness_png(classification)
    chains = read("convergence", "convergence.json") or {}
    if len(chains.get("chains") or []) >= 2 and "agreement" in chains["chains"][0]:
        figures[2] = plots.chains_png(chains["chains"], str(chains.get("reference", "")))
    temperature = (read("temperature", "results.json") or {}).get("rows")
    if temperature:
        figures[3] = plots.temperature_nll_png(temperature)
    prior = read("prior_sweep", "results.json")
    if prior:
        figures[4] = plots.priors_png(prior, judged_prior_rows(prior)[0])
    shift = (read("shift", "shift_table.json") or {}).get("rows")
    if shift:
        figures[5] = plots.severity_png(shift)
    return figures
