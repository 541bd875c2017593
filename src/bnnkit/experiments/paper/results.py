"""A study folder's findings: scored from the results its parts wrote, and each finding's
figure drawn as the paper draws it.

Both read the folder :func:`bnnkit.experiments.paper.paper` fills, so a study's findings can be
scored again (or drawn) from its results alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.experiments.paper.layout import SETTINGS_FILE
from bnnkit.experiments.paper.levels import (
    UNASSESSABLE,
    judged_prior_rows,
    judged_temperature_rows,
)
from bnnkit.experiments.paper.verdicts import (
    Finding,
    _classification_settings,
    _reference_row,
    _sgld_settings,
    assessed,
    finding_ensembles_close,
    finding_hmc_beats_standard,
    finding_no_cold_posterior,
    finding_one_long_chain,
    finding_poor_under_shift,
    finding_prior_robust,
)


def _reference_level(compare: Mapping[str, Any], name: str) -> list[str | None]:
    """The convergence level of setting ``name``'s HMC reference, as the compare-methods table
    recorded it ([] when the setting did not run; [None] when no level was recorded)."""
    rows = (compare.get(name) or {}).get("rows") or []
    found = _reference_row(rows)
    return [] if found is None else [found.get("level")]


def findings(out: str | os.PathLike) -> list[Finding]:
    """Score the paper's findings from the results written in ``out`` by :func:`paper`."""
    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    classification = _classification_settings(compare)
    mnist_hmc = _reference_level(compare, "mnist")
    image_hmc = [level for name in classification for level in _reference_level(compare, name)]
    sgld_hmc = [
        level for name in _sgld_settings(compare) for level in _reference_level(compare, name)
    ]
    converged = None if not mnist_hmc or mnist_hmc[0] is None else mnist_hmc[0] not in UNASSESSABLE
    temperature = read("temperature", "results.json")
    prior = read("prior_sweep", "results.json")
    shift = read("shift", "shift_table.json")
    images = (read(SETTINGS_FILE) or {}).get("images", "cifar10_proxy")
    shift_hmc = _reference_level(compare, images) or mnist_hmc
    temperature_hmc = [
        r.get("level")
        for r in judged_temperature_rows((temperature or {}).get("rows") or [])[0]
        if r.get("method") == "hmc"
    ]
    prior_hmc = [r.get("level") for r in judged_prior_rows(prior or [])[0]]
    return [
        assessed(finding_hmc_beats_standard(compare, converged), image_hmc),
        assessed(
            finding_one_long_chain(read("convergence", "convergence.json"), converged), mnist_hmc
        ),
        assessed(finding_no_cold_posterior(temperature), temperature_hmc),
        assessed(finding_prior_robust(prior), prior_hmc),
        assessed(finding_poor_under_shift((shift or {}).get("rows")), shift_hmc),
        assessed(finding_ensembles_close(compare), sgld_hmc),
    ]


def finding_figures(out: str | os.PathLike) -> dict[int, bytes]:
    """Each finding's figure (:mod:`bnnkit.report.finding_plots`), drawn as the paper draws
    it from the results in ``out``, by finding number; a finding whose part did not run has
    none."""
    from bnnkit.report import finding_plots as plots

    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    classification = {name: compare[name]["rows"] for name in _classification_settings(compare)}
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
