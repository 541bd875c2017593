"""Robustness to covariate shift: stored posteriors on corrupted test images (Izmailov et al.
2021, Sec. 8; Ovadia et al. 2019).

For every run (a method's stored posterior on one image dataset), every corruption of
:data:`bnnkit.data.corruptions.CORRUPTIONS` and every severity s ∈ {1..5}, the run's Bayesian
model average

    p(y | x̃) = (1/S) Σ_s p(y | x̃, θ_s),   x̃ = corrupt(x, corruption, severity)

is scored on the corrupted test set by accuracy, NLL, ECE and Brier score
(:func:`bnnkit.metrics.predictive.metrics_for`), plus once on the clean test set (severity 0).
The corrupted images and the predictive are exactly those of ``bnnkit evaluate --corruption``
(:func:`bnnkit.evaluation.corrupted_inputs`, :func:`bnnkit.evaluation.run_prediction`): the same
corruption seed, and for VI or Laplace runs the same evaluation draws. Nothing is trained.

One cell, a (run, corruption) pair with all its severities, is written atomically to
``cells/`` as it finishes, so a killed table continues with ``resume=True`` where it stopped.
:func:`covariate_shift` writes the long table as ``shift_table.json``, ``shift.csv`` and
``shift.md`` and the degradation figure ``degradation.png`` (per metric, box plots over the
corruptions at each severity and the mean over them, one colour per run); ``bnnkit shift`` is
its command line.

Example:
    >>> rows = [{"label": "hmc", "corruption": c, "severity": s, "accuracy": a}
    ...         for c, s, a in (("clean", 0, 0.9), ("fog", 1, 0.8), ("snow", 1, 0.6))]
    >>> degradation(rows, "accuracy")
    {'hmc': {0: [0.9], 1: [0.8, 0.6]}}
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.data.corruptions import CORRUPTIONS, SEVERITIES
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import clear_outputs
from bnnkit.settings import check_numbers, setting

#: The files an output folder holds (besides its lock and the cells' folder).
SETTINGS_FILE = "shift.json"
TABLE_FILE = "shift_table.json"
CSV_FILE = "shift.csv"
MARKDOWN_FILE = "shift.md"
FIGURE_FILE = "degradation.png"
CELLS_DIR = "cells"
#: The clean test set's row: no corruption, severity 0.
CLEAN = "clean"
METRICS = ("accuracy", "nll", "ece", "brier")
COLUMNS = ("label", "method", "corruption", "severity", *METRICS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """What each cell is scored on: how many test images, and the corruptions' seed."""

    max_test: int | None = setting(
        None,
        help="score only the first N test images (default: all)",
        metavar="N",
        bounds=(1, None),
    )
    seed: int = setting(
        0,
        help="seed of the corruptions' randomness (0: the images `bnnkit "
        "evaluate --corruption` scores)",
        bounds=(0, 2**32 - 1),
    )

    def __post_init__(self) -> None:
        check_numbers(self)


def check_corruptions(corruptions: Sequence[str] | None) -> tuple[str, ...]:
    """The corruptions, all of :data:`CORRUPTIONS` by default, each named once.

    Raises:
        ConfigError: an unknown name, a repeated one, or an empty list.
    """
    if corruptions is None:
        return CORRUPTIONS
    names = tuple(corruptions)
    if not names:
        raise ConfigError(f"no corruption given; allowed: {', '.join(CORRUPTIONS)}")
    for name in names:
        if name not in CORRUPTIONS:
            raise ConfigError(f"unknown corruption {name!r}; allowed: {', '.join(CORRUPTIONS)}")
    if len(set(names)) != len(names):
        raise ConfigError("--corruptions names a corruption twice; allowed: each once")
    return names


def check_severities(severities: Sequence[int]) -> tuple[int, ...]:
    """The severities in increasing order, each once.

    Raises:
        ConfigError: a severity outside 1..5, or none.
    """
    values = tuple(severities)
    if not values:
        raise ConfigError("no severity given; allowed: 1 2 3 4 5")
    for s in values:
        if s not in SEVERITIES or isinstance(s, bool):
            raise ConfigError(f"severity {s!r} out of range; allowed: 1 2 3 4 5")
    return tuple(sorted(set(int(s) for s in values)))


@dataclasses.dataclass(frozen=True)
class LoadedRun:
    """A stored run ready to be scored: where it is, its label, and what ``load_run`` gave."""

    path: str
    label: str
    method: str
    record: dict
    problem: Any
    posterior: Any


def _labels(paths: Sequence[str]) -> list[str]:
    """Short names: each run's folder name, the full path where two share one."""
    names = [Path(p).name or p for p in paths]
    return [n if names.count(n) == 1 else p for n, p in zip(names, paths, strict=True)]


def load_runs(runs: Sequence[str | os.PathLike]) -> list[LoadedRun]:
    """Load the stored runs and check that they can be shifted together.

    Raises:
        ConfigError: no run, a run that is not one, a run whose test inputs are not images,
            or runs on different data.
    """
    from bnnkit import problem as problem_lib
    from bnnkit.evaluation import check_images
    from bnnkit.runs import load_run

    paths = [os.fspath(r) for r in runs]
    if not paths:
        raise ConfigError("no run given; allowed: one or more run directories")
    if len(set(paths)) != len(paths):
        raise ConfigError("a run is given twice; allowed: each run once")
    loaded: list[LoadedRun] = []
    for path, label in zip(paths, _labels(paths), strict=True):
        if not os.path.isdir(path):
            raise ConfigError(f"run {path!r} does not exist; allowed: run directories")
        record, problem, posterior, _ = load_run(path, network=True)
        check_images(problem.dataset, path, "bnnkit shift", "runs")
        if loaded:
            first = loaded[0]
            refused = problem_lib.differences(
                problem.config, first.problem.config, problem_lib.DATA_SETTINGS, first.path
            )
            if refused:
                raise ConfigError(
                    f"{path} is a run on other data: {refused[0]}; allowed: runs on one dataset"
                )
        loaded.append(
            LoadedRun(path, label, str(record.get("method", "?")), record, problem, posterior)
        )
    return loaded


def run_digest(run: LoadedRun) -> str:
    """sha256 of the samples the run's model average uses (a resume must be of the same
    posteriors: a run continued since would give other numbers)."""
    from bnnkit.evaluation import run_samples

    digest = hashlib.sha256()
    arrays = storage.flatten_tree(run_samples(run.record, run.posterior).params)
    for key in sorted(arrays):
        digest.update(key.encode())
        digest.update(np.ascontiguousarray(arrays[key]).tobytes())
    return digest.hexdigest()


def cell_metrics(
    run: LoadedRun, corruption: str, severity: int, config: Config
) -> dict[str, float]:
    """Accuracy, NLL and ECE of the run's model average on the test images under
    ``corruption`` at ``severity`` (``CLEAN`` and 0: the clean images)."""
    from bnnkit.evaluation import corrupted_inputs, run_prediction
    from bnnkit.metrics.predictive import metrics_for

    dataset = run.problem.dataset
    count = config.max_test
    if corruption == CLEAN:
        x = np.asarray(dataset.x_test)[:count]
    else:
        x = corrupted_inputs(dataset, corruption, severity, seed=config.seed, count=count)
    prediction = run_prediction(run.record, run.problem, run.posterior, x)
    return metrics_for(prediction, np.asarray(dataset.y_test_original)[:count])


def _cell_file(folder: Path, index: int, corruption: str) -> Path:
    return folder / f"run{index:03d}_{corruption}.json"


def _settings(
    config: Config,
    loaded: Sequence[LoadedRun],
    corruptions: tuple[str, ...],
    severities: tuple[int, ...],
) -> dict[str, Any]:
    return {
        "config": dataclasses.asdict(config),
        "corruptions": list(corruptions),
        "severities": list(severities),
        "dataset": loaded[0].problem.dataset.name,
        "runs": [
            {"run": r.path, "label": r.label, "method": r.method, "samples_sha256": run_digest(r)}
            for r in loaded
        ],
    }


def _check_resume(stored: dict, settings: dict, out: str) -> None:
    names = {
        "config": "--max-test or --seed",
        "corruptions": "the corruptions",
        "severities": "the severities",
        "runs": "the runs or their samples",
    }
    for key, what in names.items():
        if stored.get(key) != settings[key]:
            raise ConfigError(
                f"--resume of {out!r} with other settings: {what} differ from "
                "the stored table's; allowed: the same runs, corruptions, "
                "severities, --max-test and --seed"
            )


def _read_cell(
    file: Path, run: LoadedRun, corruption: str, severities: tuple[int, ...]
) -> list[dict[str, Any]] | None:
    """The rows of a finished cell, or None when it has not been written."""
    if not file.is_file():
        return None
    rows = storage.read_json(file)
    expected = [0] if corruption == CLEAN else list(severities)
    if (
        not isinstance(rows, list)
        or [r.get("severity") for r in rows] != expected
        or any(r.get("label") != run.label or r.get("corruption") != corruption for r in rows)
    ):
        raise ConfigError(
            f"{str(file)!r} is damaged or from another table; allowed: the cells "
            "this table wrote (start afresh with --overwrite)"
        )
    return rows


@dataclasses.dataclass(frozen=True)
class Shift:
    """The long table and where it was written.

    Attributes:
        rows: one per (run, corruption, severity), the clean test set as corruption
            ``"clean"`` at severity 0: ``label``, ``method``, ``corruption``, ``severity``,
            ``accuracy``, ``nll``, ``ece`` (and ``run``, the path).
        dataset: the runs' dataset.
        files: what was written, by kind (``table``, ``csv``, ``markdown``, ``figure``).
    """

    rows: list[dict[str, Any]]
    dataset: str
    files: dict[str, Path]


def degradation(rows: Sequence[dict[str, Any]], metric: str) -> dict[str, dict[int, list]]:
    """Per run label and severity, the metric over the corruptions (the figure's boxes)."""
    out: dict[str, dict[int, list]] = {}
    for r in rows:
        out.setdefault(r["label"], {}).setdefault(int(r["severity"]), []).append(r[metric])
    return out


def covariate_shift(
    runs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    config: Config | None = None,
    *,
    corruptions: Sequence[str] | None = None,
    severities: Sequence[int] = SEVERITIES,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    plots: bool = True,
) -> Shift:
    """Score stored runs on corrupted test images and write the table and figure to ``out``.

    Writes ``shift.json`` (settings), ``cells/*.json`` (each (run, corruption) atomically as
    it finishes), then ``shift_table.json``, ``shift.csv``, ``shift.md`` and
    ``degradation.png``. Everything is checked before anything is written.

    Args:
        runs: run directories of any method, on one image dataset.
        out: the output folder (new or empty, else ``resume`` or ``overwrite``).
        config: test images scored and the corruptions' seed (default :class:`Config`'s).
        corruptions: names from :data:`CORRUPTIONS` (default all).
        severities: from 1..5 (default all).
        resume: continue a table in ``out`` that was cut off (the same runs and settings);
            finished cells are read, not recomputed.
        overwrite: replace the table in ``out``.
        progress: show progress over the cells.
        plots: draw ``degradation.png``.

    Raises:
        ConfigError: a bad output folder (:func:`bnnkit.output_folder.check`),
            unknown corruptions or severities, runs that are not on images or not on one
            dataset, or a resume with other settings.

    Example:
        (Needs stored runs on an image dataset; see docs/guides/covariate-shift.md.)

        >>> shift = covariate_shift(["runs/hmc", "runs/sgd"], "runs/shift",
        ...                         corruptions=["fog", "snow"])  # doctest: +SKIP
    """
    from bnnkit import output_folder
    from bnnkit.runs import lock

    config = Config() if config is None else config
    output_folder.check(
        out, SETTINGS_FILE, "covariate-shift table", resume=resume, overwrite=overwrite
    )
    corruptions = check_corruptions(corruptions)
    severities = check_severities(severities)
    loaded = load_runs(runs)
    settings = _settings(config, loaded, corruptions, severities)
    path = Path(out)
    if resume:
        _check_resume(storage.read_json(path / SETTINGS_FILE), settings, os.fspath(out))

    cells = [(i, run, name) for i, run in enumerate(loaded) for name in (CLEAN, *corruptions)]
    path.mkdir(parents=True, exist_ok=True)
    with lock.hold(path):
        if not resume:
            clear_outputs(
                path,
                (SETTINGS_FILE, TABLE_FILE, CSV_FILE, MARKDOWN_FILE, FIGURE_FILE),
                CELLS_DIR,
                "*.json",
            )
            storage.write_json(path / SETTINGS_FILE, settings)
        done = _score_cells(cells, path / CELLS_DIR, severities, config, progress)
        table = [row for i, _, name in cells for row in done[(i, name)]]
        files = write_table(table, path, settings)
        if plots:
            files["figure"] = write_figure(table, path, title=_title(loaded[0].problem))
    return Shift(rows=table, dataset=settings["dataset"], files=files)


def _score_cells(
    cells: Sequence[tuple[int, LoadedRun, str]],
    folder: Path,
    severities: tuple[int, ...],
    config: Config,
    progress: bool,
) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """Each cell's rows, by (run index, corruption): read where ``folder`` holds the cell
    already, else scored at each severity and written as the cell finishes."""
    from bnnkit.runs.progress import ProgressBar

    folder.mkdir(exist_ok=True)
    done = {
        (i, name): _read_cell(_cell_file(folder, i, name), run, name, severities)
        for i, run, name in cells
    }
    finished = sum(rows is not None for rows in done.values())
    bar = ProgressBar(
        "shift", total=len(cells), start=finished, enabled=progress, unit_name="cells"
    )
    try:
        for i, run, name in cells:
            if done[(i, name)] is not None:
                continue
            rows = []
            for severity in (0,) if name == CLEAN else severities:
                metrics = cell_metrics(run, name, severity, config)
                rows.append(
                    {
                        "run": run.path,
                        "label": run.label,
                        "method": run.method,
                        "corruption": name,
                        "severity": severity,
                        **{m: metrics[m] for m in METRICS},
                    }
                )
            storage.write_json(_cell_file(folder, i, name), rows)
            done[(i, name)] = rows
            bar.update(
                1, f"{run.label}: {name}, accuracy {np.mean([r['accuracy'] for r in rows]):.3f}"
            )
    finally:
        bar.close()
    return done


def _title(problem: Any) -> str:
    name = problem.dataset.name
    return f"{problem.config.model} on {Path(name).stem if name.endswith('.npz') else name}"


def write_table(
    rows: list[dict[str, Any]], out: str | os.PathLike, settings: dict[str, Any]
) -> dict[str, Path]:
    """``shift_table.json`` (settings and rows), ``shift.csv`` and ``shift.md`` in ``out``."""
    from bnnkit.report.tables import csv_text, long_markdown

    path = Path(out)
    files = {"table": path / TABLE_FILE, "csv": path / CSV_FILE, "markdown": path / MARKDOWN_FILE}
    storage.write_json(files["table"], {**settings, "rows": rows})
    storage.atomic_write_bytes(files["csv"], csv_text(rows, COLUMNS).encode())
    storage.atomic_write_bytes(files["markdown"], (long_markdown(rows, COLUMNS) + "\n").encode())
    return files


def write_figure(rows: list[dict[str, Any]], out: str | os.PathLike, title: str = "") -> Path:
    """The degradation figure: per metric, box plots over the corruptions at each severity
    and their mean, one colour per run."""
    from bnnkit.report.shift_plots import degradation_png

    target = Path(out) / FIGURE_FILE
    storage.atomic_write_bytes(
        target, degradation_png({m: degradation(rows, m) for m in METRICS}, title=title)
    )
    return target
