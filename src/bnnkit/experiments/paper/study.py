"""The study's driver: :func:`paper` checks everything, runs the parts in turn, then scores
the findings and writes the report.

It is cut into named steps (check, record the settings, run each part, write the findings),
each a function, so that each can be read and changed alone. The output folder is an
experiment's (:func:`bnnkit.output_folder.continues`: a foreign folder refused, an earlier study
of the same settings continued), and each run and reference a part makes in it is a run or a
composite run judged by :func:`bnnkit.runs.composite.stage_action` before it is reused.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bnnkit import output_folder, storage
from bnnkit import problem as problem_lib
from bnnkit.experiments import (
    bbb_mnist,
    compare_methods,
    convergence,
    covariate_shift,
    prior_sweep,
    reference,
    surface,
    temperature,
)
from bnnkit.experiments.paper.layout import (
    FINDINGS_FILE,
    FINDINGS_JSON,
    PARTS,
    REPORT_DIR,
    SETTINGS_FILE,
)
from bnnkit.experiments.paper.part_settings import (
    bbb_config,
    compare_settings,
    prior_config,
    prior_settings,
    temperature_config,
)
from bnnkit.experiments.paper.results import finding_figures, findings
from bnnkit.experiments.paper.scales import Config
from bnnkit.experiments.paper.verdicts import Finding, findings_markdown
from bnnkit.report.document import document
from bnnkit.report.kinds import FINDING_FIGURE


@dataclasses.dataclass(frozen=True)
class Study:
    """What :func:`paper` made: the scale, each part's folder, the findings and the report."""

    scale: str
    parts: dict[str, Path]
    findings: list[Finding]
    report: Path

    def markdown(self) -> str:
        return findings_markdown(self.findings, self.scale)


# --- the study's folder -------------------------------------------------------------------


def _check_out(out: Path, config: Config) -> bool:
    """Whether ``out`` continues an earlier study (of the same scale); refuses other folders."""

    same = {
        "scale": ("--scale", config.scale),
        "seed": ("--seed", config.seed),
        "images": ("--images", config.images),
    }
    # A study made before the image data was a setting ran on the CIFAR-10 proxy.
    before = {"images": "cifar10_proxy"}
    return output_folder.continues(out, SETTINGS_FILE, "paper study", same, before=before)


def _record_settings(out: Path, config: Config, continuing: bool) -> None:
    """Make ``out`` and, for a new study, write its settings (a continued study keeps its own)."""
    out.mkdir(parents=True, exist_ok=True)
    if not continuing:
        storage.write_json(
            out / SETTINGS_FILE,
            {
                "scale": config.scale,
                "seed": config.seed,
                "images": config.images,
                "data_dir": config.data_dir,
                "plan": dataclasses.asdict(config.plan()),
            },
        )


# --- the steps ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Checked:
    """Every part's settings, made and checked before anything is written."""

    continuing: bool
    compare: dict[str, Any]
    temperature: Any
    prior: Any
    bbb: Any
    corruptions: Any
    severities: Any


def _check(config: Config, out: Path) -> _Checked:
    """The folder, every part's settings and the data, checked; raises before any write."""

    plan = config.plan()
    continuing = _check_out(out, config)
    settings = compare_settings(config)
    # Its chains start at the members of the CIFAR-10 proxy reference's ensemble.
    temperature_cfg = temperature_config(
        config,
        settings[config.images].hmc.step_size,
        out / "compare_methods" / config.images / "hmc" / reference.ENSEMBLE_DIR,
    )
    prior_cfg = prior_config(config)
    bbb_cfg = bbb_config(config)
    corruptions = covariate_shift.check_corruptions(plan.corruptions)
    severities = covariate_shift.check_severities(plan.severities)
    for setting_ in settings.values():  # loads every dataset now: a missing one stops here
        problem_lib.build(setting_.problem)
    temperature.check(temperature_cfg)
    return _Checked(
        continuing, settings, temperature_cfg, prior_cfg, bbb_cfg, corruptions, severities
    )


def _shift_runs(out: Path, setting: str, names: Sequence[str]) -> list[str]:
    root = out / "compare_methods" / setting
    return [os.fspath(root / name) for name in names]


def _run_shift(
    config: Config, out: Path, parts: dict[str, Path], checked: _Checked, progress: bool
) -> None:
    """The covariate-shift tables, the natural images' then MNIST's; a finished table stays."""

    plan = config.plan()
    for part, setting_, names in (
        ("shift", config.images, ("hmc", "sgd", "deep")),
        ("shift_mnist", "mnist", ("hmc", "sgd", "deep", "sghmc-clr")),
    ):
        if part == "shift_mnist" and not plan.mnist_shift:
            continue
        if not (parts[part] / covariate_shift.TABLE_FILE).is_file():
            covariate_shift.covariate_shift(
                _shift_runs(out, setting_, names),
                parts[part],
                covariate_shift.Config(max_test=plan.test_points, seed=config.seed),
                corruptions=checked.corruptions,
                severities=checked.severities,
                resume=(parts[part] / covariate_shift.SETTINGS_FILE).is_file(),
                progress=progress,
            )


def _run_parts(
    config: Config,
    out: Path,
    parts: dict[str, Path],
    checked: _Checked,
    progress: bool,
    announce: Callable[[int, str], None],
) -> None:
    """Every part in turn (:data:`PARTS`), each reusing what it finished before."""

    plan = config.plan()
    announce(1, "cheaper methods against the reference")
    compare_methods.compare_methods(
        compare_methods.Config(settings=",".join(checked.compare)),
        parts["compare_methods"],
        settings=checked.compare,
        progress=progress,
    )

    hmc_dir = parts["compare_methods"] / "mnist" / "hmc"
    announce(2, "convergence in weight and function space")
    convergence.convergence_report(
        hmc_dir,
        parts["convergence"],
        convergence.Config(max_test=plan.test_points),
        overwrite=(parts["convergence"] / "convergence.json").is_file(),
    )

    announce(3, "covariate shift: CIFAR-10 proxy, then MNIST")
    _run_shift(config, out, parts, checked, progress)

    announce(4, "posterior surface through three reference chains")
    if not (parts["surface"] / "surface.npz").is_file():
        surface.posterior_surface(
            [f"{hmc_dir}:{c}:-1" for c in range(3)],
            parts["surface"],
            surface.Config(grid_size=plan.grid),
            resume=(parts["surface"] / "surface.json").is_file(),
            progress=progress,
        )

    announce(5, "posterior temperature, with and without augmentation")
    temperature.temperature_sweep(checked.temperature, parts["temperature"], progress=progress)

    announce(6, "priors of several scales and shapes")
    prior_sweep.prior_sweep(
        checked.prior,
        parts["prior_sweep"],
        settings_=prior_settings(config, out),
        progress=progress,
    )

    announce(7, "Bayes by Backprop on MNIST")
    bbb_mnist.bbb_mnist(checked.bbb, parts["bbb_mnist"], progress=progress)


def _write_findings(
    config: Config, out: Path, parts: dict[str, Path]
) -> tuple[list[Finding], Path]:
    """The findings scored, their figures, ``findings.json`` and ``findings.md``, then the
    report of the whole folder; returns the findings and the report's folder."""

    items = findings(out)
    for number, png in finding_figures(out).items():
        file = out / FINDING_FIGURE.format(number)
        file.parent.mkdir(exist_ok=True)
        storage.atomic_write_bytes(file, png)
    storage.write_json(out / FINDINGS_JSON, [dataclasses.asdict(f) for f in items])
    storage.atomic_write_bytes(out / FINDINGS_FILE, findings_markdown(items, config.scale).encode())
    report_dir = out / REPORT_DIR
    document(
        [out, *(parts[name] for name in PARTS if parts[name].is_dir())],
        report_dir,
        overwrite=(report_dir / "report.md").is_file(),
    )
    return items, report_dir


def paper(
    config: Config,
    out: str | os.PathLike,
    *,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> Study:
    """Run (or continue) the whole study at ``config.scale`` in ``out`` and write its report.

    Everything is checked (the folder, every part's settings, the data) before anything is
    written; each part reuses its finished runs, so a cut-off study continues where it was.

    Args:
        config: the scale, data folder and seed.
        out: the study's folder (new or empty, or an earlier study of the same scale and seed).
        progress: every run's progress bar, and a line per part.
        say: where the part lines go.

    Raises:
        ConfigError: a bad ``out`` or settings, or data that cannot be loaded.

    Example:
        (Minutes to hours; see docs/tutorials/paper-study.md.)

        >>> study = paper(Config(scale="tiny"), "runs/paper_tiny")  # doctest: +SKIP
    """
    out = Path(out)
    checked = _check(config, out)
    _record_settings(out, config, checked.continuing)
    parts = {name: out / name for name in PARTS}
    steps = len(PARTS) - 1  # the two shift tables are one step

    def announce(k: int, what: str) -> None:
        if progress:
            say(f"[paper {k}/{steps}] {what}")

    _run_parts(config, out, parts, checked, progress, announce)
    items, report_dir = _write_findings(config, out, parts)
    return Study(config.scale, parts, items, report_dir)
