"""A run made of runs: named stages in one folder, each a run directory, with one life.

``bnnkit reference`` is a deep ensemble, then one chain per member started from it; a study
reuses such references and runs of its own. Each stage is an ordinary run
(:func:`bnnkit.runs.run`: its lock, manifest and bit-exact resume), and the composite adds
what a run of runs needs above them, the same way for every recipe:

1. every stage's settings are checked, and every stage already there is judged (its status,
   method and settings, and a finished one's files against its manifest), before the first
   file is written, so a refused call changes nothing;
2. one lock on the parent folder, and a parent record (``reference.json`` for a reference)
   holding the recipe's settings, its stages and their outcomes, with the statuses of a
   single run: "starting", "running", "stopped", "finished", "diverged";
3. the stages run in order on one problem, built once and handed down; a stage that starts
   from another (``starts_from``) is given that stage's folder as its source run;
4. each stage's outcome is lifted into the parent: a stage stopped by its time budget (or
   extended ``until`` a level it did not reach) stops the composite there, a stage that
   diverged marks it diverged; ``resume`` continues it, bit for bit the uninterrupted one;
5. a resume may change only the recipe's resumable settings (budgets: ``max_time``,
   ``until``, more kept draws), as a single run's resume may; the stages' own
   ``resumable()`` rules then apply to each.

Inside the folder every path is relative: a stage names the stage it starts from, and a run
started from another records that run's identity (:func:`bnnkit.runs.initial.source_identity`),
so a copied composite resumes from its own copy.

Example:
    >>> from bnnkit.inference import hmc, nuts
    >>> from bnnkit.problem import ProblemConfig
    >>> warm = Stage("warm", hmc.Config(num_iterations=20))
    >>> chains = Stage("chains", nuts.Config(num_iterations=40), starts_from="warm")
    >>> recipe = Recipe("reference", ProblemConfig("yacht_0", "linear"), None, (warm, chains))
    >>> [(s.name, c.init_checkpoint) for s, c in configured(recipe, Path("/data/ref"))]
    [('warm', None), ('chains', '/data/ref/warm')]
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bnnkit import problem as problem_lib
from bnnkit import runs, storage
from bnnkit.errors import ConfigError
from bnnkit.inference.base import RunSettings
from bnnkit.metrics.findings import Remedy
from bnnkit.problem import ProblemConfig, shown
from bnnkit.runs import blocks, faults, lock
from bnnkit.runs.composite_folder import check_folder, stage_dir
from bnnkit.runs.directory import RUN_FILE, RunDir, composite_record_name
from bnnkit.runs.divergence import DivergenceError
from bnnkit.runs.lock import LOCK_FILE
from bnnkit.runs.loop import compile_ahead
from bnnkit.runs.provenance import now
from bnnkit.runs.resumable import check_resume
from bnnkit.runs.verification import verify
from bnnkit.settings import check_dtype, flag

#: The parent record's statuses, those of a single run.
STATUSES = ("starting", "running", "stopped", "finished", "diverged")


@dataclasses.dataclass(frozen=True)
class Stage:
    """One run of a composite.

    Attributes:
        name: its folder inside the composite (and how it is opened: :func:`stage_dir`).
        config: the method's Config.
        starts_from: the stage whose run it starts from (its source run), if any.
        settings: which of the recipe's settings sets each of the stage's (``{stage setting:
            recipe setting}``), so that what the stage's errors advise is said in the recipe's
            settings; a stage setting the recipe does not set is left out of the advice.
    """

    name: str
    config: RunSettings
    starts_from: str | None = None
    settings: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def remedy(self, remedy: Remedy) -> Remedy:
        """``remedy`` (in the stage's settings) in the recipe's settings.

        Example:
            >>> from bnnkit.inference import hmc
            >>> stage = Stage("e", hmc.Config(), settings={"step_size": "ensemble_step_size"})
            >>> stage.remedy(Remedy("a smaller step", (("step_size", "smaller"),
            ...                                        ("clip_grad_norm", "smaller")))).text()
            'a smaller step: a smaller ensemble_step_size'
        """
        changes = tuple((self.settings[n], c) for n, c in remedy.changes if n in self.settings)
        return dataclasses.replace(remedy, changes=changes)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What a composite is: its kind, its settings and its stages.

    Attributes:
        kind: ``"reference"``, ...; its parent record is
            :func:`~bnnkit.runs.directory.composite_record_name` of it.
        problem: the problem every stage runs on.
        settings: the recipe's own settings (a frozen dataclass of :func:`bnnkit.settings.setting`
            fields, so that a refusal names their flags).
        stages: the stages, in the order they run.
        resumable: the names of ``settings`` a resume may change.
    """

    kind: str
    problem: Any
    settings: Any
    stages: tuple[Stage, ...]
    resumable: tuple[str, ...] = ()

    @property
    def record_file(self) -> str:
        return composite_record_name(self.kind)

    def record(self) -> dict[str, Any]:
        """The parent record's settings part, as JSON holds it."""
        stages = [
            {"name": s.name, "method": s.config.METHOD, "starts_from": s.starts_from}
            for s in self.stages
        ]
        return json.loads(
            json.dumps(
                {
                    "kind": self.kind,
                    "problem": dataclasses.asdict(self.problem),
                    "config": dataclasses.asdict(self.settings),
                    "stages": stages,
                }
            )
        )


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a stage ended in this call: "finished", "stopped" or "reused" (finished before),
    its run's record and the seconds it took here."""

    status: str
    record: dict[str, Any]
    seconds: float


@dataclasses.dataclass(frozen=True)
class Result:
    """What :func:`run` returns: the folder, the composite's status and each stage's outcome
    (stages after a stopped one are absent)."""

    folder: Path
    status: str
    outcomes: dict[str, Outcome]

    @property
    def stopped_stage(self) -> str | None:
        """The stage whose budget ended this call (``None``: the composite finished)."""
        for name, outcome in self.outcomes.items():
            if outcome.status == "stopped":
                return name
        return None


def resume_refusal(stored: Any, recipe: Recipe) -> str | None:
    """Why a composite whose parent record is ``stored`` cannot be resumed as ``recipe``,
    naming the first setting that differs by its flag and both values; ``None`` when only
    ``recipe.resumable`` settings differ.

    Example:
        >>> from bnnkit.experiments.reference import Config
        >>> from bnnkit.problem import ProblemConfig
        >>> made = Recipe("reference", ProblemConfig("yacht_0", "linear"), Config(members=2), ())
        >>> resume_refusal(made.record(), dataclasses.replace(made, settings=Config(members=3)))
        'was made with --members 2; this call gives 3'
    """
    if not isinstance(stored, dict) or stored.get("kind") != recipe.kind:
        return f"holds no readable {recipe.record_file}"
    given = recipe.record()
    for part, cls in (("problem", ProblemConfig), ("config", type(recipe.settings))):
        was, now_ = stored.get(part) or {}, given[part]
        for name in sorted(set(was) | set(now_)):
            if part == "config" and name in recipe.resumable:
                continue
            if was.get(name) != now_.get(name):
                known = name in {f.name for f in dataclasses.fields(cls)}
                label = flag(cls, name) if known else name
                return (
                    f"was made with {label} {shown(name, was.get(name))}; this call gives "
                    f"{shown(name, now_.get(name))}"
                )
    return None


def configured(recipe: Recipe, folder: Path) -> list[tuple[Stage, RunSettings]]:
    """Each stage with its Config as it runs in ``folder``: one that starts from another stage
    gets that stage's folder as its source (its Config's ``SOURCE_FIELD``: ``init_checkpoint``,
    Laplace's ``map_run``), absolute, as a run reads its source from any working folder."""
    out = []
    for stage in recipe.stages:
        config = stage.config
        if stage.starts_from is not None:
            source = os.fspath(stage_dir(folder, stage.starts_from).absolute())
            config = dataclasses.replace(config, **{type(config).SOURCE_FIELD: source})
        out.append((stage, config))
    return out


def _check_new_stage(built: Any, config: RunSettings) -> None:
    """The checks of a stage that will start afresh and that need no file of another stage:
    its numbers as the run computes them and its loop on this problem."""
    check_dtype(config, built.dtype)
    config.loop(built.dataset.num_train)


def stage_action(built: Any, stage: Stage, config: RunSettings, run_dir: Path) -> str:
    """What a stage needs, decided writing nothing: ``"new"`` (nothing there, or a run that
    never started), ``"resume"`` (cut off, stopped, or finished with settings a resume may
    extend) or ``"reuse"`` (finished with these settings, its files intact).

    Raises:
        ConfigError: the stage holds a run of another method or of settings a resume may not
            change, a run that diverged, or a finished run whose files are damaged; named
            with the stage.
    """
    rundir = RunDir(run_dir)
    if not rundir.run_file.is_file():
        if run_dir.exists() and any(e.name != LOCK_FILE for e in run_dir.iterdir()):
            raise ConfigError(
                f"stage {stage.name!r}: {str(run_dir)!r} holds files but no {RUN_FILE}; "
                "allowed: --overwrite (replace the whole folder)"
            )
        _check_new_stage(built, config)
        return "new"
    try:
        record = rundir.read_record()
    except ConfigError as err:
        raise ConfigError(f"stage {stage.name!r}: {err}") from None
    status = record.get("status")
    if status == "starting":
        _check_new_stage(built, config)
        return "new"
    refusal = _stage_refusal(record, dataclasses.asdict(built.config), config)
    if refusal is not None:
        raise ConfigError(f"stage {stage.name!r} ({str(run_dir)!r}) {refusal}")
    if status == "finished" and not _differs(record, built, config):
        findings, _ = verify(run_dir)
        lost = [f for f in findings if not f.repairable]
        if lost:
            raise ConfigError(
                f"stage {stage.name!r} ({str(run_dir)!r}) is damaged: {lost[0].file} "
                f"{lost[0].problem}; allowed: --overwrite (make the whole folder again)"
            )
        # What a resume recomputes from the last intact state, it recomputes bit for bit.
        return "resume" if findings else "reuse"
    return "resume"


def _stage_refusal(record: dict, problem: dict, config: RunSettings) -> str | None:
    """Why a stage's stored run cannot be resumed as ``config`` on ``problem`` (``None``: it
    can), as a single run's resume refuses it."""
    if record.get("method") != config.METHOD:
        return f"holds a {record.get('method')!r} run, not {config.METHOD!r}"
    try:
        check_resume(record, config, problem)
    except ConfigError as err:
        return str(err)
    return None


def _differs(record: dict, built: Any, config: RunSettings) -> bool:
    """Whether ``config`` differs from the stage's stored settings in those a resume may
    change (the refusal has checked the others, the source among them: the same path, or the
    same run by identity under another)."""
    stored = type(config).current_names(record.get("method_config") or {})
    given = json.loads(json.dumps(config.to_dict()))
    field = type(config).SOURCE_FIELD
    if given.get(field) is not None:
        given[field] = stored.get(field)
    return stored != given


def _write(folder: Path, recipe: Recipe, **state: Any) -> None:
    storage.write_json(folder / recipe.record_file, {**recipe.record(), **state})


def run(
    recipe: Recipe,
    folder: str | os.PathLike,
    *,
    built: Any = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    describe_stop: Callable[[str, dict[str, Any]], str] | None = None,
) -> Result:
    """Make (or continue) the composite ``recipe`` in ``folder``.

    Args:
        recipe: the composite's kind, settings and stages.
        folder: its folder (created).
        built: ``recipe.problem`` built (:func:`bnnkit.problem.build`), if the caller has it;
            built here otherwise, once for every stage.
        resume: continue the composite in ``folder`` (only ``recipe.resumable`` may differ).
        overwrite: replace what ``folder`` holds.
        progress: show each stage's progress.
        describe_stop: how a stopped stage's progress reads (stage name, its run's record),
            recorded in the parent's ``stopped`` entry.

    Returns:
        A :class:`Result`.

    Raises:
        ConfigError: any refusal, named in one line, before anything is written.
        DivergenceError: a stage diverged (the parent record then says "diverged").
    """
    folder = Path(folder)
    names = tuple(s.name for s in recipe.stages)
    check_folder(folder, recipe.kind, names, resume=resume, overwrite=overwrite)
    stored = storage.read_json(folder / recipe.record_file) if resume else None
    if resume:
        refusal = resume_refusal(stored, recipe)
        if refusal is not None:
            raise ConfigError(
                f"--resume: the {recipe.kind} in {str(folder)!r} {refusal}; allowed: the same "
                f"value (a resume may change only {_resumable_flags(recipe)}), or --overwrite"
            )
    if built is None:
        built = problem_lib.build(recipe.problem)
    stages = configured(recipe, folder)
    actions = (
        {stage.name: "new" for stage, _ in stages}
        if overwrite
        else {s.name: stage_action(built, s, c, stage_dir(folder, s.name)) for s, c in stages}
    )
    if overwrite:
        for _, config in stages:
            _check_new_stage(built, config)
    folder.mkdir(parents=True, exist_ok=True)
    with lock.hold(folder):
        if overwrite:
            _clear(folder, recipe)
        started = stored.get("started") if isinstance(stored, dict) else None
        _write(folder, recipe, status="running", started=started or now())
        faults.point("composite-started")
        return _run_stages(
            recipe, folder, built, stages, actions, started or now(), progress, describe_stop
        )


def _resumable_flags(recipe: Recipe) -> str:
    return ", ".join(flag(type(recipe.settings), k) for k in recipe.resumable) or "nothing"


def _clear(folder: Path, recipe: Recipe) -> None:
    """Remove what a composite of this kind wrote in ``folder`` (under its lock)."""
    import shutil

    for name in (recipe.record_file, *(s.name for s in recipe.stages)):
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _run_stages(recipe, folder, built, stages, actions, started, progress, describe_stop):
    # The later stages' block programs compile while the first stage runs: an optimisation,
    # so a stage that cannot be compiled ahead is left to compile (and to refuse) itself.
    for stage, config in stages[1:]:
        if actions[stage.name] != "reuse":
            with contextlib.suppress(Exception):
                compile_ahead(built, config)
    try:
        return _each_stage(recipe, folder, built, stages, actions, started, progress, describe_stop)
    finally:
        blocks.forget(built)


def _left_of_budget(config: RunSettings, start: float) -> RunSettings:
    """``config`` with what is left since ``start`` (a :func:`time.monotonic` time) of its time
    budget, when it has one: a composite's budget is the whole call's, so the stages before
    the one that has it, and their compilation, count in it. At least a millisecond is left:
    a budget spent before the stage begins stops it after its first iteration."""
    budget = config.budget().max_time
    if budget is None:
        return config
    return dataclasses.replace(config, max_time=max(budget - (time.monotonic() - start), 1e-3))


def _each_stage(recipe, folder, built, stages, actions, started, progress, describe_stop):
    outcomes: dict[str, Outcome] = {}
    start = time.monotonic()
    for stage, given in stages:
        config = _left_of_budget(given, start)
        run_dir = stage_dir(folder, stage.name)
        action = actions[stage.name]
        t0 = time.perf_counter()
        if action == "reuse":
            outcomes[stage.name] = Outcome("reused", RunDir(run_dir).read_record(), 0.0)
            continue
        try:
            with faults.within(stage.name):
                result = runs.run(
                    built, config, run_dir, resume=action == "resume", progress=progress
                )
        except DivergenceError as error:
            _write(
                folder,
                recipe,
                status="diverged",
                started=started,
                diverged={"stage": stage.name, "at": now()},
                outcomes=_statuses(outcomes),
            )
            # What to try, in the recipe's settings: its command takes no stage's flags.
            raise DivergenceError(
                f"the {stage.name} stage of the {recipe.kind}: {error.what}",
                stage.remedy(error.remedy),
                recipe.settings,
            ) from error
        status = _stage_status(result.record, config)
        outcomes[stage.name] = Outcome(status, result.record, time.perf_counter() - t0)
        faults.point("stage-done")
        if status == "stopped":
            progress_line = describe_stop(stage.name, result.record) if describe_stop else None
            _write(
                folder,
                recipe,
                status="stopped",
                started=started,
                stopped={"stage": stage.name, "progress": progress_line, "at": now()},
                outcomes=_statuses(outcomes),
            )
            return Result(folder, "stopped", outcomes)
    _write(
        folder,
        recipe,
        status="finished",
        started=started,
        finished=now(),
        outcomes=_statuses(outcomes),
    )
    return Result(folder, "finished", outcomes)


def _statuses(outcomes: dict[str, Outcome]) -> dict[str, str]:
    return {name: o.status for name, o in outcomes.items()}


def _stage_status(record: dict[str, Any], config: RunSettings) -> str:
    """A stage's outcome from its run's record: "stopped" when its time budget ended it, or
    when it was extended until its chains mix and they did not; "finished" otherwise."""
    if record.get("status") == "stopped":
        return "stopped"
    until = record.get("until_converged") if config.budget().until is not None else None
    if isinstance(until, dict) and until.get("holds") is False:
        return "stopped"
    return "finished"
