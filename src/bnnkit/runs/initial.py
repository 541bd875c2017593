"""Start a run from another run: its problem (Laplace) or its parameters (``--init-checkpoint``).

A source is written ``RUN`` or ``RUN:SAMPLE``. The parameters it gives are, per chain of the
source run, its kept sample of index ``SAMPLE`` (default ``-1``, the last) for a sampling
method, or the mean of its approximation (VI, Laplace). Member m of the new run starts from the
source's chain ``m mod chains``, or from the one chain ``member`` names.

The source must be a finished run of the same model and dataset whose parameters have this
problem's shapes; anything else is refused with one line naming the setting.

Example:
    >>> split_source("runs/sgd:3")
    ('runs/sgd', 3)
    >>> split_source("runs/sgd")
    ('runs/sgd', -1)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import problem as problem_lib
from bnnkit.errors import ConfigError
from bnnkit.inference.base import IterationSettings
from bnnkit.posterior import Mixture, Samples
from bnnkit.runs.directory import RunDir
from bnnkit.runs.sources import split_source
from bnnkit.runs.stored import recorded_problem, stored_posterior
from bnnkit.types import Params


def _source_record(spec: str, flag: str, allowed_methods: Sequence[str] | None) -> tuple:
    path, index = split_source(spec)
    allowed = (
        f"a finished {' or '.join(allowed_methods)} run"
        if allowed_methods
        else "a finished run directory"
    )
    if not Path(path).is_dir():
        raise ConfigError(f"{flag} {path!r} does not exist; allowed: {allowed}")
    rundir = RunDir(path)
    if not rundir.run_file.is_file():
        raise ConfigError(
            f"{flag} {path!r} is not a bnnkit run directory (no run.json); allowed: {allowed}"
        )
    record = rundir.read_record()
    if allowed_methods and record.get("method") not in allowed_methods:
        raise ConfigError(f"{flag} {path!r} is a {record.get('method')!r} run; allowed: {allowed}")
    if record.get("status") == "diverged":  # a resume would diverge again: nothing to advise
        raise ConfigError(
            f"{flag} {path!r} diverged (NaN or infinite values) before it "
            f"finished; allowed: {allowed}"
        )
    if record.get("status") != "finished":
        raise ConfigError(
            f"{flag} {path!r} is unfinished (status {record.get('status')!r}); "
            "allowed: a finished run (complete it with --resume)"
        )
    return rundir, record, index


def problem_of_run(config) -> problem_lib.Problem:
    """The problem of the run ``config`` starts from (for methods that take it from there),
    built as that run's (:func:`bnnkit.problem.build_recorded`).

    The source run names its model, so a model whose module is outside bnnkit is imported
    only inside :func:`bnnkit.models.imported.trusting_model` of that model: the user's
    ``--model`` on ``bnnkit laplace --map-run``.

    Raises:
        ConfigError: the config names no source run, or the source is not usable, or its
            model is outside bnnkit and not the one the user allowed.
    """
    rundir, record = _start_record(config)
    where = repr(str(rundir.run_file))
    # A user .npz is read from where the run recorded it, its bytes checked; arrays in
    # memory from the run's own copy.
    return problem_lib.build_recorded(
        recorded_problem(record, where), rundir.path, record.get("dataset")
    )


def config_of_run(config) -> problem_lib.ProblemConfig:
    """The problem settings of the run ``config`` starts from (nothing built), its data file
    resolved and checked as :func:`bnnkit.runs.stored.recorded_problem` does."""
    rundir, record = _start_record(config)
    return recorded_problem(record, repr(str(rundir.run_file)))


def _start_record(config) -> tuple[RunDir, dict]:
    """The run directory and record of the run ``config`` starts from.

    Raises:
        ConfigError: the config names no source run, or the source is not usable.
    """
    source = config.source_run()
    if source is None:
        raise ConfigError(
            f"{config.METHOD} needs a problem (--dataset, --model, ...) or a run to start from"
        )
    rundir, record, _ = _source_record(
        source, type(config).SOURCE_FLAG, getattr(type(config), "SOURCE_METHODS", None)
    )
    return rundir, record


def check_source_problem(config, *, dataset: str | None = None, model: str | None = None):
    """Refuse a ``--dataset``/``--model`` that differs from the source run's.

    Raises:
        ConfigError: naming the flag and the source run's value.
    """
    problem = config_of_run(config)
    for name, given in (("dataset", dataset), ("model", model)):
        if (
            name == "dataset"
            and given is not None
            and os.path.realpath(given) == (os.path.realpath(problem.dataset))
        ):
            continue  # the same file, named from another folder
        if given is not None and given != getattr(problem, name):
            raise ConfigError(
                f"--{name} {given!r} does not match the {config.SOURCE_NAME}, "
                f"which is for {name} {getattr(problem, name)!r}"
            )
    return problem


def source_differences(
    spec: str, problem: problem_lib.ProblemConfig, *, flag: str = "--init-checkpoint"
) -> list[str]:
    """How a run started from ``spec`` differs from it in its posterior (for a warning).

    Starting from a run with another temperature, prior or noise is a legitimate warm start,
    so these are reported, not refused; a run on other data is refused.

    Raises:
        ConfigError: the source is on other data (:data:`~bnnkit.problem.DATA_SETTINGS`),
            naming the setting.
    """
    path, _ = split_source(spec)
    record = RunDir(path).read_record()
    source = problem_lib.ProblemConfig.from_dict(record["problem"])
    name = f"{flag} {path}"
    refused = problem_lib.differences(problem, source, problem_lib.DATA_SETTINGS, name)
    if refused:
        raise ConfigError(
            f"{refused[0]}: the runs are on different data; allowed: a run on the same data"
        )
    differ = problem_lib.differences(problem, source, problem_lib.POSTERIOR_SETTINGS, name)
    if not differ:
        return []
    return [f"this run starts from {path}, whose posterior differs: {'; '.join(differ)}"]


def _positions(posterior, index: int) -> Params:
    """One position per chain of a stored posterior, stacked ``(chains, ...)``."""
    if isinstance(posterior, Samples):
        count = posterior.num_samples
        if not -count <= index < count:
            raise ConfigError(
                f"sample {index} out of range: the run kept {count} sample(s) per "
                f"chain; allowed: {-count}..{count - 1}"
            )
        return jax.tree.map(lambda a: np.asarray(a)[:, index], posterior.params)
    components = posterior.components if isinstance(posterior, Mixture) else (posterior,)
    means = [jax.tree.map(np.asarray, c.mean) for c in components]
    return jax.tree.map(lambda *a: np.stack(a), *means)


def with_chains(config):
    """``config`` with its number of chains settled: a full-batch sampler whose
    ``num_chains`` is ``None`` gets one chain per chain (member) of the run it starts from, or
    1; any other Config is returned as it is.

    So ``--init-checkpoint ENSEMBLE`` alone gives the ensemble-initialised layout: chain k
    starts at member k. What the run records is the settled number.

    Raises:
        ConfigError: the run to start from is missing or is no run directory.
    """
    if not isinstance(config, IterationSettings) or config.num_chains is not None:
        return config
    chains = 1
    if config.source_run() is not None:
        _, record, _ = _source_record(config.source_run(), type(config).SOURCE_FLAG, None)
        chains = int((record.get("loop") or {}).get("num_members") or 1)
    return dataclasses.replace(config, num_chains=chains)


def positions_from_run(
    spec: str,
    built: problem_lib.Problem,
    num_members: int,
    *,
    member: int | None = None,
    allowed_methods: Sequence[str] | None = None,
    flag: str = "--init-checkpoint",
    source_name: str = "source run",
) -> Params:
    """Starting positions for ``num_members`` members, stacked ``(members, ...)``.

    Args:
        spec: ``RUN`` or ``RUN:SAMPLE``.
        built: this run's problem (the source must match its model, dataset and shapes).
        num_members: members of this run.
        member: take every member from this chain of the source (else member m from chain
            ``m mod chains``).
        allowed_methods: methods whose runs may be the source (``None``: any).
        flag: the flag named in error messages.
        source_name: how error messages call the source run.

    Raises:
        ConfigError: a missing, unfinished or mismatched source, or an index out of range.
    """
    rundir, record, index = _source_record(spec, flag, allowed_methods)
    mine = dataclasses.asdict(built.config)
    for key in ("model", "dataset"):
        if record["problem"].get(key) != mine[key]:
            raise ConfigError(
                f"{flag} {str(rundir.path)!r} is for {key} {record['problem'].get(key)!r}, not "
                f"{mine[key]!r}; allowed: a run with the same model and dataset"
            )
    template = jax.eval_shape(built.init_params, jax.random.PRNGKey(0))
    stored = _positions(stored_posterior(rundir, record, template), index)
    chains = int(jax.tree.leaves(stored)[0].shape[0])
    for t, s in zip(jax.tree.leaves(template), jax.tree.leaves(stored), strict=True):
        if tuple(t.shape) != tuple(s.shape[1:]):
            raise ConfigError(
                f"{flag} {str(rundir.path)!r} has parameters of shape {tuple(s.shape[1:])} where "
                f"this model has {tuple(t.shape)} (another likelihood or noise setting); "
                "allowed: a run with the same network outputs"
            )
    if member is not None and not 0 <= member < chains:
        raise ConfigError(
            f"--member {member} out of range: the {source_name} has {chains} member(s)"
        )
    picks = [member if member is not None else m % chains for m in range(num_members)]
    dtype = jax.tree.leaves(template)[0].dtype
    return jax.tree.map(lambda a: jnp.asarray(a[np.asarray(picks)], dtype), stored)
