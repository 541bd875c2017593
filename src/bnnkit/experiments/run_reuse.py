"""Runs of an experiment made once: a finished run is reused, one cut off is resumed.

The experiments (:mod:`bnnkit.experiments.compare_methods`, ...) put each method's run in a
directory of their output folder. Called again on that folder, :func:`run_or_reuse` leaves a
run whose ``run.json`` says "finished" with the same settings alone, resumes one that was
cut off (``resume=True``, bit for bit the uninterrupted run), and starts the others; so an
interrupted sweep continues where it stopped and a finished one only redraws its report.

Example:
    >>> import tempfile
    >>> from bnnkit.inference import hmc
    >>> from bnnkit.problem import Problem, ProblemConfig
    >>> problem = ProblemConfig("yacht_0", "linear", noise_std=0.5)
    >>> config = hmc.Config(step_size=1e-3, trajectory_len=0.01, num_iterations=2)
    >>> folder = tempfile.mkdtemp() + "/run"
    >>> run_or_reuse(problem, config, folder), run_status(folder)  # doctest: +SKIP
    (True, 'finished')
    >>> run_or_reuse(problem, config, folder)  # finished: not run again  # doctest: +SKIP
    False
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bnnkit.errors import ConfigError
from bnnkit.problem import Problem, ProblemConfig


def run_status(run_dir: str | os.PathLike) -> str | None:
    """The status in ``run_dir/run.json`` ("starting", "running", "finished"), or None."""
    from bnnkit.runs import RunDir

    rundir = RunDir(run_dir)
    if not rundir.run_file.is_file():
        return None
    record = rundir.read_record()
    return record.get("status") if isinstance(record, dict) else None


def run_or_reuse(
    problem: ProblemConfig | Problem | None,
    config: Any,
    run_dir: str | os.PathLike,
    *,
    progress: bool = True,
    overwrite: bool = False,
    on_unit: Callable[[int, dict], None] | None = None,
) -> bool:
    """Make the run of ``config`` on ``problem`` in ``run_dir`` unless it is there, finished.

    What is there is judged as a composite run judges its stages
    (:func:`bnnkit.runs.composite.stage_action`): a finished run of the same settings, its
    files intact, is left alone; one that differs only in settings a resume may change (more
    iterations, say) is extended; one cut off or stopped is resumed; an empty or never-started
    directory gets a new run (:func:`bnnkit.runs.run`). The problem is built once, here.

    With ``overwrite`` a run that is there is replaced instead (under its lock, as
    :func:`bnnkit.runs.run` replaces runs).

    Returns:
        Whether anything ran (False: a finished run was reused).

    Raises:
        ConfigError: ``run_dir`` holds a run this call cannot continue (another method, other
            settings a resume may not change, damaged files), or anything
            :func:`bnnkit.runs.run` refuses.
    """
    from bnnkit import runs
    from bnnkit.problem import build
    from bnnkit.runs.composite import Stage, stage_action
    from bnnkit.runs.initial import problem_of_run, with_chains

    run_dir = Path(run_dir)
    status = run_status(run_dir)
    if status in ("running", "stopped", "finished"):
        config = with_chains(config)  # as the stored run recorded it
    if isinstance(problem, ProblemConfig):
        problem = build(problem)
    elif problem is None:
        problem = problem_of_run(config)
    if overwrite and status is not None:
        runs.run(problem, config, run_dir, overwrite=True, progress=progress, on_unit=on_unit)
        return True
    try:
        action = stage_action(problem, Stage(run_dir.name, config), config, run_dir)
    except ConfigError as err:
        raise ConfigError(
            f"{os.fspath(run_dir)!r} holds a run this experiment cannot continue: {err}; "
            "allowed: the same settings, or another --out"
        ) from None
    if action == "reuse":
        return False
    runs.run(
        problem, config, run_dir, resume=action == "resume", progress=progress, on_unit=on_unit
    )
    return True


#: How many times :func:`run_or_reuse_stable` divides a diverged run's step size by ten.
MAX_STEP_REDUCTIONS = 3


def run_or_reuse_stable(
    problem: ProblemConfig, config: Any, run_dir: str | os.PathLike, *, progress: bool = True
) -> tuple[Any, bool]:
    """:func:`run_or_reuse` for a step size derived from another run (an experiment's rule,
    not a user's choice): a run that diverges (:class:`bnnkit.runs.divergence.DivergenceError`)
    is made again with its step sizes divided by ten, at most :data:`MAX_STEP_REDUCTIONS`
    times, as the divergence's own advice says; a run already there is reused at the step it
    was made with.

    Returns:
        The Config the run was made with (the caller reports its step) and whether anything ran.

    Raises:
        DivergenceError: the run diverged at the smallest step tried too.
    """
    from bnnkit.runs.divergence import DivergenceError

    candidates = [_scaled_steps(config, 10.0**-k) for k in range(MAX_STEP_REDUCTIONS + 1)]
    first, overwrite = 0, False
    status = run_status(run_dir)
    if status is not None:
        from bnnkit.runs import RunDir

        stored = RunDir(run_dir).read_record().get("method_config", {}).get("init_step_size")
        steps = [c.init_step_size for c in candidates]
        if stored in steps:
            first = steps.index(stored)
            if status == "diverged":
                first, overwrite = first + 1, True
    for k in range(first, len(candidates)):
        try:
            return candidates[k], run_or_reuse(
                problem, candidates[k], run_dir, progress=progress, overwrite=overwrite
            )
        except DivergenceError:
            if k == len(candidates) - 1:
                raise
            overwrite = run_status(run_dir) is not None  # a diverged run that kept units
    raise AssertionError("unreachable")


def _scaled_steps(config: Any, factor: float) -> Any:
    """``config`` with its initial and final step sizes times ``factor``."""
    if factor == 1.0:
        return config
    steps = {
        name: getattr(config, name) * factor
        for name in ("init_step_size", "final_step_size")
        if getattr(config, name, None) is not None
    }
    return dataclasses.replace(config, **steps)


def run_seconds(run_dir: str | os.PathLike) -> float:
    """Wall time of the run's units, summed from its log (whichever call ran them)."""
    from bnnkit.runs import RunDir

    return float(sum(r.get("seconds", 0.0) for r in RunDir(run_dir).read_log()))


def clear_outputs(folder: Path, files: Iterable[str], parts_dir: str, part_glob: str) -> None:
    """Delete what an experiment wrote in ``folder`` before it starts again (``--overwrite``).

    Removes the named ``files``, the parts in ``parts_dir`` matching ``part_glob`` and the
    temporaries a cut-off write left (``.*.tmp``, in the folder and in ``parts_dir``); runs and
    anything else in the folder stay.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "cells").mkdir()
        >>> for name in ("table.json", "cells/a.json", ".x.tmp", "keep.txt"):
        ...     _ = (folder / name).write_text("{}")
        >>> clear_outputs(folder, ("table.json", "settings.json"), "cells", "*.json")
        >>> sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
        ['cells', 'keep.txt']
    """
    for name in files:
        (folder / name).unlink(missing_ok=True)
    for pattern in (f"{parts_dir}/{part_glob}", ".*.tmp", f"{parts_dir}/.*.tmp"):
        for f in folder.glob(pattern):
            f.unlink()
