"""The three points of a posterior surface: where they are stored, and the one problem they share.

A point is a run directory or a ``.npz`` file of ``bnnkit samples``, with a chain and a
sample (``RUN:CHAIN:SAMPLE``; an approximate posterior's member mean). The runs among the
points, and the run given for sample files, must target one posterior
(:data:`SAME_POSTERIOR`): a surface through positions of different posteriors would show none
of them. Everything here is read and checked before
:func:`~bnnkit.experiments.surface.posterior_surface` writes anything.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bnnkit import problem as problem_lib
from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.types import Params

#: Settings in which the three points' problems must agree: one posterior, one dataset.
SAME_POSTERIOR = (*problem_lib.DATA_SETTINGS, "standardize", *problem_lib.POSTERIOR_SETTINGS)


def split_point(spec: str) -> tuple[str, int, int]:
    """``PATH[:SAMPLE]`` or ``PATH[:CHAIN:SAMPLE]`` as (path, chain, sample); chain 0 and the
    last sample by default.

    Example:
        >>> split_point("runs/hmc"), split_point("runs/hmc:3"), split_point("s.npz:1:-1")
        (('runs/hmc', 0, -1), ('runs/hmc', 0, 3), ('s.npz', 1, -1))
    """
    indices: list[int] = []
    path = str(spec)
    while len(indices) < 2:
        head, sep, tail = path.rpartition(":")
        if not (sep and head and tail.lstrip("-").isdigit()):
            break
        indices.insert(0, int(tail))
        path = head
    if len(indices) == 2:
        return path, indices[0], indices[1]
    return path, 0, indices[0] if indices else -1


def _pick(posterior: Any, chain: int, sample: int, spec: str) -> Params:
    """One position of a stored posterior: a sample of one chain, or one member's mean."""
    from bnnkit.posterior import Mixture, Samples

    if isinstance(posterior, Samples):
        chains, count = posterior.num_chains, posterior.num_samples
        if not 0 <= chain < chains:
            raise ConfigError(f"{spec}: chain {chain} out of range; allowed: 0..{chains - 1}")
        if not -count <= sample < count:
            raise ConfigError(
                f"{spec}: sample {sample} out of range: {count} kept per chain; "
                f"allowed: {-count}..{count - 1}"
            )
        return jax.tree.map(lambda x: np.asarray(x)[chain, sample], posterior.params)
    components = posterior.components if isinstance(posterior, Mixture) else (posterior,)
    if not 0 <= chain < len(components):
        raise ConfigError(f"{spec}: member {chain} out of range; allowed: 0..{len(components) - 1}")
    if sample not in (0, -1):
        raise ConfigError(
            f"{spec}: an approximate posterior gives one position per member, "
            "its mean; allowed: RUN or RUN:MEMBER:0"
        )
    return jax.tree.map(np.asarray, components[chain].mean)


def _check_shapes(stored: Params, template: Params, spec: str) -> None:
    for t, s in zip(jax.tree.leaves(template), jax.tree.leaves(stored), strict=True):
        if tuple(t.shape) != tuple(np.shape(s)):
            raise ConfigError(
                f"{spec}: parameters of shape {tuple(np.shape(s))} where the model "
                f"has {tuple(t.shape)}; allowed: points of the same model"
            )


@dataclasses.dataclass(frozen=True)
class _Source:
    spec: str
    path: Path
    chain: int
    sample: int
    record: dict | None  # run.json of a run directory; None for a sample file


def _source(spec: str) -> _Source:
    from bnnkit.runs import RunDir

    path, chain, sample = split_point(spec)
    p = Path(path)
    if p.is_dir():
        rundir = RunDir(p)
        if not rundir.run_file.is_file():
            raise ConfigError(
                f"{path!r} is not a bnnkit run directory (no run.json); allowed: "
                "a run directory or a .npz file of `bnnkit samples`"
            )
        record = rundir.read_record()
        if not isinstance(record.get("problem"), dict):
            raise ConfigError(f"{str(rundir.run_file)!r} is damaged: it has no 'problem' object")
        return _Source(spec, p, chain, sample, record)
    if p.is_file() and p.suffix == ".npz":
        return _Source(spec, p, chain, sample, None)
    raise ConfigError(
        f"point {spec!r} does not exist or is neither a run directory nor a .npz "
        "file; allowed: RUN[:SAMPLE], RUN:CHAIN:SAMPLE or FILE.npz[:...]"
    )


def _problem_config(record: dict, where: str) -> problem_lib.ProblemConfig:
    from bnnkit.runs.stored import recorded_problem

    return recorded_problem(record, where)


def common_problem(
    sources: Sequence[_Source], problem: problem_lib.ProblemConfig | str | os.PathLike | None
) -> problem_lib.ProblemConfig:
    """The one problem of the points: the runs' (and ``problem``'s), which must agree.

    Raises:
        ConfigError: two of them target different posteriors (naming the setting), or only
            sample files and no ``problem``.
    """
    named: list[tuple[str, problem_lib.ProblemConfig]] = []
    if isinstance(problem, problem_lib.ProblemConfig):
        named.append(("the given problem", problem))
    elif problem is not None:
        given = _source(os.fspath(problem))
        if given.record is None:
            raise ConfigError(
                f"--problem {os.fspath(problem)!r} is a file; allowed: a run directory"
            )
        named.append((f"--problem {given.path}", _problem_config(given.record, str(given.path))))
    named += [(s.spec, _problem_config(s.record, s.spec)) for s in sources if s.record]
    if not named:
        raise ConfigError(
            "sample files carry no problem; allowed: --problem RUN_DIR (the run "
            "they come from) or a run directory among the points"
        )
    first_name, first = named[0]
    for name, other in named[1:]:
        differ = problem_lib.differences(other, first, SAME_POSTERIOR, first_name)
        if differ:
            raise ConfigError(
                f"{name} targets another posterior: {differ[0]}; allowed: points "
                "of one posterior (same data, model, likelihood, prior and "
                "temperature)"
            )
    return first


def points_problem(
    points: Sequence[str | os.PathLike], problem: str | os.PathLike | None = None
) -> problem_lib.ProblemConfig:
    """The problem settings of three points (:func:`common_problem`), nothing loaded.

    Raises:
        ConfigError: as :func:`load_points`.
    """
    return common_problem([_source(os.fspath(p)) for p in points], problem)


def _load_position(source: _Source, template: Params) -> Params:
    from bnnkit.posterior import Samples
    from bnnkit.runs import RunDir
    from bnnkit.runs.stored import stored_posterior

    if source.record is not None:
        posterior = stored_posterior(RunDir(source.path), source.record, template)
    else:
        arrays = storage.load_arrays(source.path)
        params = storage.unflatten_tree(template, arrays)
        if any(np.ndim(x) < 2 for x in jax.tree.leaves(params)):
            raise ConfigError(
                f"{source.spec}: not a file of `bnnkit samples` (arrays of chains, samples, ...)"
            )
        posterior = Samples(params)
    position = _pick(posterior, source.chain, source.sample, source.spec)
    _check_shapes(position, template, source.spec)
    return position


def load_points(
    points: Sequence[str | os.PathLike],
    problem: problem_lib.ProblemConfig | str | os.PathLike | None = None,
) -> tuple[problem_lib.Problem, list[Params]]:
    """The built problem and the three positions.

    Args:
        points: three of ``RUN``, ``RUN:SAMPLE``, ``RUN:CHAIN:SAMPLE`` (the last sample of
            chain 0 by default; an approximate posterior's member mean) or the same with a
            ``.npz`` file written by ``bnnkit samples``.
        problem: the problem for sample files, or a run directory holding it; the runs among
            ``points`` must agree with it.

    Raises:
        ConfigError: not three points, a missing or unreadable one, an index out of range,
            or points of different posteriors.
    """
    specs = [os.fspath(p) for p in points]
    if len(specs) != 3:
        raise ConfigError(f"{len(specs)} points given; allowed: exactly three (A, B, C)")
    sources = [_source(s) for s in specs]
    config = common_problem(sources, problem)
    # A run made from arrays in memory rebuilds its problem from the arrays it stored.
    runs = [s for s in sources if s.record is not None]
    if isinstance(problem, (str, os.PathLike)):
        runs.insert(0, _source(os.fspath(problem)))
    built = (
        problem_lib.build_recorded(config, runs[0].path, runs[0].record.get("dataset"))
        if runs
        else problem_lib.build(config)
    )
    template = jax.eval_shape(built.init_params, jax.random.PRNGKey(0))
    return built, [_load_position(s, template) for s in sources]
