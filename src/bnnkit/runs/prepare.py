"""Everything a run of the driver is made of, built and checked before its directory is touched.

:func:`bnnkit.runs.loop.run_block` first checks the run directory, then builds what the run
needs here, in this order: the method's module (:func:`method_module`), the problem, built once
(:func:`built_problem`), the checks of the problem against the method, the members' starting
positions (:func:`initial_params`: the model's initialiser, or a source run's), what differs
from the run it starts from (:func:`source_notes`), and, once the state's shapes are traced,
either every check of a resume or the record of a new run with what the prior says against the
data (:func:`resume_or_record`). Whatever of this fails is refused in one line before anything
is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from bnnkit import distributed, prior_check
from bnnkit import problem as problem_lib
from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, Method, RunSettings
from bnnkit.models import num_params
from bnnkit.runs import lifecycle, manifest, resumable, sharding
from bnnkit.runs.directory import RunDir
from bnnkit.runs.initial import positions_from_run, problem_of_run, source_differences


def method_module(config: RunSettings):
    """The module of ``METHODS`` that ``config`` configures.

    Raises:
        ConfigError: a Config of no registered method.
    """
    name = getattr(type(config), "METHOD", "")
    if name not in METHODS or not isinstance(config, METHODS[name].Config):
        raise ConfigError(
            f"{type(config).__name__} configures no registered method; "
            f"registered: {', '.join(sorted(METHODS))}"
        )
    return METHODS[name]


def built_problem(
    problem: problem_lib.ProblemConfig | problem_lib.Problem | None, config: RunSettings
) -> problem_lib.Problem:
    """The problem a run is on, built: ``problem`` itself when it is built already (a
    :class:`~bnnkit.problem.Problem`, e.g. from arrays in memory), the one of the run ``config``
    starts from when it is ``None``, else built from its settings."""
    if isinstance(problem, problem_lib.Problem):
        return problem
    if problem is None:
        return problem_of_run(config)
    return problem_lib.build(problem)


def check_augment(built: problem_lib.Problem, loop: Loop) -> None:
    """Refuse ``--augment`` on inputs that are not images.

    Raises:
        ConfigError: augmented minibatches of inputs not shaped N x H x W x C.
    """
    if loop.augment and len(built.dataset.input_shape) != 3:
        shape = " x ".join(["N", *map(str, built.dataset.input_shape)])
        raise ConfigError(
            f"--augment crops and flips images, inputs of shape N x H x W x C; "
            f"{built.dataset.name!r} has inputs of shape {shape}"
        )


def initial_params(built: problem_lib.Problem, config: RunSettings, loop: Loop):
    """``keys -> params`` stacked over members: the model's initialiser, or a source run's."""
    source = config.source_run()
    if source is None:
        return jax.vmap(built.init_params)
    member = getattr(config, "member", None)
    allowed = getattr(type(config), "SOURCE_METHODS", None)
    stacked = positions_from_run(
        source,
        built,
        loop.num_members,
        member=member,
        allowed_methods=allowed,
        flag=type(config).SOURCE_FLAG,
        source_name=type(config).SOURCE_NAME,
    )
    return lambda keys: stacked


def source_notes(config: RunSettings, problem: problem_lib.ProblemConfig) -> list[str]:
    """How ``problem`` differs from the problem of the run ``config`` starts from, as warnings
    (none without a source run, or for a method that takes its problem from there)."""
    return (
        []
        if config.source_run() is None or type(config).PROBLEM_FROM_SOURCE
        else (source_differences(config.source_run(), problem, flag=type(config).SOURCE_FLAG))
    )


def member_init(method: Method, init_params: Callable) -> Callable:
    """``(keys, first batch) -> state`` of every member, vmapped under
    :data:`~bnnkit.inference.adaptation.MEMBERS`, from :func:`initial_params`'s positions."""

    def init_all(keys, first):
        return jax.vmap(lambda k, p: method.init(k, p, first), axis_name=MEMBERS)(
            keys, init_params(keys)
        )

    return init_all


def resume_or_record(
    rundir: RunDir,
    built: problem_lib.Problem,
    config: RunSettings,
    loop: Loop,
    method: Method,
    template: Any,
    *,
    resume: bool,
) -> tuple[manifest.Check | None, dict | None]:
    """For a resume, every check of it and where it starts
    (:func:`bnnkit.runs.resumable.resume_checks`); for a new run, its record, with what the
    prior says against the data.

    Returns:
        ``(found, None)`` for a resume, ``(None, record)`` for a new run.
    """
    problem_dict = dataclasses.asdict(built.config)
    found, record = None, None
    if resume:
        found = resumable.resume_checks(
            rundir,
            config,
            problem_dict,
            loop,
            chunks=False,
            data=built.dataset.info,
            template=template,
        )
    else:
        record = driver_record(built, config, loop, method.position(template), problem_dict)
        # What the prior says against the data, before any chain runs (a key of its own).
        record[prior_check.RECORD_KEY] = prior_check.before_run(
            built, announce=distributed.is_writer()
        )
    return found, record


def driver_record(
    built: problem_lib.Problem, config: RunSettings, loop: Loop, position: Any, problem_dict: dict
) -> dict:
    """``run.json`` of a new run of the driver: :func:`bnnkit.runs.lifecycle.new_record` with
    the network's number of parameters and what the dataset is."""
    return lifecycle.new_record(
        config,
        loop,
        problem_dict,
        num_params=num_params(
            jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape[1:], s.dtype), position)
        ),
        dataset={
            "name": built.dataset.name,
            "task": built.dataset.task,
            "num_train": built.dataset.num_train,
            "num_test": len(built.dataset.x_test),
            **{k: v for k, v in built.dataset.info.items() if isinstance(v, (str, int, float))},
        },
    )


def placement_notes(rundir: RunDir, record: dict | None, placements) -> tuple[str, ...]:
    """Record in a new run's ``record`` the devices it runs on; for a resume (``record`` is
    ``None``), the warning when they differ from those it was made on
    (:func:`bnnkit.runs.sharding.resume_note`)."""
    where = sharding.described(placements)
    if record is not None:
        record[sharding.RECORD_KEY] = where
        return ()
    note = sharding.resume_note(rundir.read_record().get(sharding.RECORD_KEY), where)
    return () if note is None else (note,)
