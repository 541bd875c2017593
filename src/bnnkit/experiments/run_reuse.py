"""Runs of an experiment made once: a finished run is reused, one cut off is resumed.

The experiments (:mod:`bnnkit.experiments.compare_methods`, ...) put each method's run in a
directory of their output folder. Called again on that folder, :func:`run_or_reuse` leaves a
run whose ``run.json`` says "finished" with the same settings alone, resumes one that was
cut off (``resume=True``, bit for bit the uninterrupted run), and starts the others; so an
interrupted sweep continues where it stopped and a finished one only redraws its report.

Example:
    >>> import tempfile
    >>> from bnnkit.inference import hmc
    >>> from bnnkit.problem import ProblemConfig
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
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bnnkit.errors import ConfigError
from bnnkit.problem import ProblemConfig


def run_status(run_dir: str | os.PathLike) -> str | None:
    """The status in ``run_dir/run.json`` ("starting", "running", "finished"), or None."""
    from bnnkit.runs import RunDir

    rundir = RunDir(run_dir)
    if not rundir.run_file.is_file():
        return None
    record = rundir.read_record()
    return record.get("status") if isinstance(record, dict) else None


def _settings_differ(record: dict, problem: ProblemConfig, config: Any) -> list[str]:
    """Settings (problem and method) in which a stored run differs from the one asked for."""
    stored = {**record.get("problem", {}),
              **type(config).current_names(record.get("method_config", {}))}
    # Through JSON, as run.json holds them: tuples become lists, and so on.
    given = json.loads(json.dumps({**dataclasses.asdict(problem), **config.to_dict()}))
    return sorted(k for k in set(stored) | set(given) if stored.get(k) != given.get(k))


def run_or_reuse(problem: ProblemConfig, config: Any, run_dir: str | os.PathLike, *,
                 progress: bool = True, overwrite: bool = False,
                 on_unit: Callable[[int, dict], None] | None = None) -> bool:
    """Make the run of ``config`` on ``problem`` in ``run_dir`` unless it is there, finished.

    A finished run of the same settings is left alone; one that differs only in settings a
    resume may change (more iterations, say) is extended; one cut off is resumed; an empty or
    never-started directory gets a new run (:func:`bnnkit.runs.run`).

    With ``overwrite`` a run that is there is replaced instead (under its lock, as
    :func:`bnnkit.runs.run` replaces runs).

    Returns:
        Whether anything ran (False: a finished run was reused).

    Raises:
        ConfigError: ``run_dir`` holds a run of other settings (a resume may not change them),
            or anything :func:`bnnkit.runs.run` refuses.
    """
    from bnnkit import runs
    from bnnkit.runs import RunDir
    from bnnkit.runs.initial import with_chains

    status = run_status(run_dir)
    if status in ("running", "finished"):
        config = with_chains(config)  # as the stored run recorded it
    if overwrite and status is not None:
        runs.run(problem, config, Path(run_dir), overwrite=True, progress=progress,
                 on_unit=on_unit)
        return True
    if status in ("running", "finished"):
        record = RunDir(run_dir).read_record()
        if record.get("method") != config.METHOD:
            raise ConfigError(f"{os.fspath(run_dir)!r} holds a {record.get('method')!r} run, "
                              f"not {config.METHOD!r}; allowed: an --out of this experiment")
        differ = _settings_differ(record, problem, config)
        fixed = [k for k in differ if k not in type(config).resumable()]
        if fixed:
            raise ConfigError(
                f"{os.fspath(run_dir)!r} holds a run with another {fixed[0]} than this "
                "experiment asks for; allowed: the same settings, or another --out")
        if status == "finished" and not differ:
            return False
    # "starting" is a run that never started: runs.run starts it afresh.
    runs.run(problem, config, Path(run_dir), resume=status in ("running", "finished"),
             progress=progress, on_unit=on_unit)
    return True


def run_seconds(run_dir: str | os.PathLike) -> float:
    """Wall time of the run's units, summed from its log (whichever call ran them)."""
    from bnnkit.runs import RunDir

    return float(sum(r.get("seconds", 0.0) for r in RunDir(run_dir).read_log()))
