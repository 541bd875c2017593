"""The one run driver: any method of ``METHODS`` on a problem, into a run directory.

``run(problem, config, run_dir)`` builds the problem and the method (``config.METHOD`` names it
in :data:`bnnkit.inference.METHODS`), checks everything, and only then creates the directory.
It then advances every member (chain) unit by unit, where a unit is whatever
``config.loop(N)`` says (:class:`~bnnkit.inference.base.Loop`):

- ``iterations``: one ``method.step`` on the full training set (HMC, NUTS); the training set
  is put on the device(s) once, split over several devices with ``shard`` if asked;
- ``epochs``: ``N // batch_size`` minibatch steps of a fresh permutation in one ``lax.scan``
  inside one jitted call (SGD, ensembles, SGMCMC, VI); the last incomplete batch is dropped, so
  every step sees exactly ``batch_size`` examples and the ``N/|B|`` scaling is exact; with
  several devices ``shard`` splits the members, or each minibatch, over them;
- ``chunks``: one step per consecutive chunk of the training set, one pass (Laplace).

Members run in one vmapped step (or one after the other), vmapped under the axis name
:data:`~bnnkit.inference.adaptation.MEMBERS`, over which a method may share statistics between
its chains (ChEES adaptation). Keys, the directory's life (lock, "starting", resume,
"finished"), the rules over several processes and the sampler warnings are those of
:mod:`bnnkit.runs.lifecycle`, which :func:`bnnkit.runs.sample` shares.

After each unit, in this order: the posterior ``method.posterior`` returns for each member is
stored through :mod:`bnnkit.posterior.store` when the unit is kept; one log line is appended;
every ``save_every`` units (and at the end) the full state is written. A crash between those
writes loses at most the units after the last state, which a resume recomputes identically.

Before any of that, every unit is checked (:func:`bnnkit.runs.lifecycle.non_finite`): a member
whose loss, log density (anything real its ``Info`` reports) or parameters became NaN or
infinite stops the run with :class:`~bnnkit.runs.lifecycle.DivergenceError` (exit code 2 on
the command line), naming the unit and what to try; nothing of that unit is stored, so the
directory keeps the last finite state, marked "diverged" (a run that kept nothing yet is
removed). A posterior that is not finite is not stored either.

Example:
    >>> from bnnkit.inference import hmc
    >>> from bnnkit.problem import ProblemConfig
    >>> import tempfile
    >>> result = run(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35),
    ...              hmc.Config(step_size=1e-3, trajectory_len=5e-3, num_iterations=3,
    ...                         num_burn_in=1, num_chains=2),
    ...              tempfile.mkdtemp() + "/run", progress=False)
    >>> result.record["status"], result.run_dir.sample_units()
    ('finished', [1, 2])
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from bnnkit import distributed, storage
from bnnkit import problem as problem_lib
from bnnkit.data.augment import random_crop_flip
from bnnkit.entry_points import check_call
from bnnkit.errors import ConfigError
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, Method, RunSettings
from bnnkit.models import num_params
from bnnkit.posterior import store
from bnnkit.priors import prior_check
from bnnkit.runs import faults, lifecycle, manifest, sharding
from bnnkit.runs.directory import RunDir
from bnnkit.runs.extension import until_converged
from bnnkit.runs.initial import (
    positions_from_run,
    problem_of_run,
    source_differences,
    with_chains,
)
from bnnkit.runs.lifecycle import (
    AUGMENT_STREAM,
    DATA_STREAM,
    INIT_STREAM,
    NOISE_STREAM,
    Lifecycle,
    SamplerTally,
    member_keys,
)
from bnnkit.runs.progress import ProgressBar
from bnnkit.runs.verdict import run_vocabulary
from bnnkit.settings import check_dtype
from bnnkit.types import Batch, Params


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What :func:`run` returns.

    Attributes:
        run_dir: the run directory.
        record: its ``run.json``.
        num_units: units (iterations, epochs, chunks) of the whole run.
        seconds: wall time of the units run by this call (compilation included).
        seconds_per_unit: the same per unit run by this call.
        last_log: the log line of the last unit run.
        warnings: sentences about the run a user should act on (a stuck or unstable
            sampler, a start from a run with another posterior), already shown during the
            run when progress was.
        stopped: why the run stopped before its last unit (its time budget, ``max_time``)
            and where, in a sentence; ``None`` when it ran them all. A stopped run resumes.
        until_converged: with ``until_converged``, what the blocks did
            (:func:`bnnkit.runs.extension.until_converged`): ``outcome`` (a sentence),
            ``holds``, ``blocks`` and the last ``verdict``; ``None`` otherwise.
    """

    run_dir: RunDir
    record: dict
    num_units: int
    seconds: float
    seconds_per_unit: float
    last_log: dict
    warnings: tuple[str, ...] = ()
    units_run: int | None = None  # by this call (fewer than num_units after a resume)
    stopped: str | None = None
    until_converged: dict | None = None

    @property
    def status(self) -> str:
        """``"stopped"`` when the time budget ended the run before it did what it was asked
        (:attr:`stopped`, or ``until_converged`` before every chain mixed: ``resume=True``
        continues it), else the status ``run.json`` records (``"finished"``)."""
        from bnnkit.runs.budget import budget_ended

        return "stopped" if budget_ended(self) else self.record.get("status", "finished")


def minibatch_indices(key: jax.Array, num_train: int, batch_size: int) -> jax.Array:
    """A random partition of ``range(num_train)`` into ``num_train // batch_size`` batches.

    Returns:
        ``(num_batches, batch_size)`` indices; the ``num_train % batch_size`` left over are
        dropped for this epoch.

    Example:
        >>> minibatch_indices(jax.random.PRNGKey(0), 10, 3).shape
        (3, 3)
    """
    num_batches = num_train // batch_size
    perm = jax.random.permutation(key, num_train)
    return perm[: num_batches * batch_size].reshape(num_batches, batch_size)


def make_epoch(
    method: Method, batch_size: int, minibatch_sharding=None, *, augment: bool = False
) -> Callable:
    """One member's epoch: ``(state, noise_key, data_key, epoch, train[, augment_key]) ->
    (state, info)``.

    ``info`` is the method's per-step info averaged over the epoch. With ``augment``, step b's
    images are cropped and flipped by :func:`~bnnkit.data.augment.random_crop_flip` with the
    key ``fold_in(fold_in(augment_key, epoch), b)``: a fresh draw every step, on the device, and
    the same again on resume. With ``minibatch_sharding`` (a ``jax.sharding.Sharding`` splitting
    the leading axis over devices) each minibatch is split over the devices, so a minibatch
    gradient is a sum of per-device sums that XLA adds across devices. Pure and jit-able; vmap
    it over members.
    """

    def epoch_fn(state, noise_key, data_key, epoch, train: Batch, augment_key=None):
        if augment and augment_key is None:
            raise ValueError("an augmented epoch needs an augment_key")
        idx = minibatch_indices(jax.random.fold_in(data_key, epoch), train.x.shape[0], batch_size)
        epoch_key = jax.random.fold_in(noise_key, epoch)

        def body(state, inputs):
            b, batch_idx = inputs
            batch = Batch(train.x[batch_idx], train.y[batch_idx])
            if augment:
                crop_key = jax.random.fold_in(jax.random.fold_in(augment_key, epoch), b)
                batch = batch._replace(x=random_crop_flip(crop_key, batch.x))
            if minibatch_sharding is not None:
                batch = jax.lax.with_sharding_constraint(batch, minibatch_sharding)
            return method.step(jax.random.fold_in(epoch_key, b), state, batch)

        state, infos = jax.lax.scan(body, state, (jnp.arange(idx.shape[0]), idx))
        return state, jax.tree.map(lambda a: jnp.mean(a, axis=0), infos)

    return epoch_fn


def method_module(config: RunSettings):
    """The module of ``METHODS`` that ``config`` configures.

    Raises:
        ConfigError: a Config of no registered method.
    """
    from bnnkit.inference import METHODS

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


def run(
    problem: problem_lib.ProblemConfig | problem_lib.Problem | None,
    config: RunSettings,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log_every: int | None = None,
    shard: str = "auto",
    on_unit: Callable[[int, dict], None] | None = None,
) -> RunResult:
    """Run (or resume) the method ``config`` configures on ``problem`` into ``run_dir``.

    Args:
        problem: data, model, likelihood, prior, temperature: a
            :class:`~bnnkit.problem.ProblemConfig`, or a built
            :class:`~bnnkit.problem.Problem` (e.g. :meth:`~bnnkit.problem.Problem.from_arrays`
            on arrays in memory, whose arrays the run stores as ``data.npz``); ``None`` takes
            it from the run the config starts from (Laplace's ``map_run``).
        config: a method's Config (``bnnkit.inference.hmc.Config(...)``, ...).
        run_dir: the run directory (created; an existing non-empty one needs ``resume`` or
            ``overwrite``).
        resume: continue the run stored in ``run_dir`` (only resumable settings may differ).
        overwrite: replace the run stored in ``run_dir``.
        progress: show progress (a bar on a terminal, plain lines otherwise).
        log_every: with plain progress lines, one every this many units (default: every
            10 % of the run or 30 s).
        shard: with several devices, split members (``"chains"``) or the training data
            (``"data"``; each minibatch of a minibatch method) over them; ``"auto"`` picks,
            ``"none"`` uses one device. After :func:`bnnkit.distributed.initialize`, the
            devices are every process's; only process 0 then reads and writes ``run_dir``, and
            the others' ``record`` holds only the status.
        on_unit: called with (unit, log line) after each unit.

    With a full-batch sampler's ``max_time`` the run stops cleanly after the unit at which
    that much wall time has passed in this call (its state saved, status "stopped",
    resumable); with ``until_converged`` it extends itself in blocks until every chain mixes or
    that time ends (:mod:`bnnkit.runs.extension`).

    Returns:
        A :class:`RunResult`.

    Raises:
        ConfigError: any bad input, named in one line, before anything is written.
    """
    check_call("bnnkit.run", locals())
    max_time = getattr(config, "max_time", None)
    deadline = None if max_time is None else time.monotonic() + max_time
    if getattr(config, "until_converged", False):
        # Built here, once: every block and every verdict runs on this one problem.
        return until_converged(
            built_problem(problem, config),
            config,
            run_dir,
            run_block=run_block,
            deadline=deadline,
            resume=resume,
            overwrite=overwrite,
            progress=progress,
            log_every=log_every,
            shard=shard,
            on_unit=on_unit,
        )
    return run_block(
        problem,
        config,
        run_dir,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        log_every=log_every,
        shard=shard,
        on_unit=on_unit,
        deadline=deadline,
    )


def run_block(
    problem: problem_lib.ProblemConfig | problem_lib.Problem | None,
    config: RunSettings,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log_every: int | None = None,
    shard: str = "auto",
    on_unit: Callable[[int, dict], None] | None = None,
    deadline: float | None = None,
) -> RunResult:
    """:func:`run` up to ``config``'s last unit, or until ``deadline`` (a
    :func:`time.monotonic` time) has passed after a unit: the run is then "stopped" there,
    its state saved so that ``--resume`` continues it bit for bit."""
    module = method_module(config)
    sharding.check_mode(shard)
    rundir = RunDir(run_dir)
    # The directory first: cheap, and nothing is built for a run that cannot start there.
    lifecycle.check_target(rundir, resume=resume, overwrite=overwrite)
    config = with_chains(config)
    built = built_problem(problem, config)
    problem = built.config
    check_dtype(config, built.dtype)  # every real setting as the run computes it
    loop = config.loop(built.dataset.num_train)
    if loop.augment and len(built.dataset.input_shape) != 3:
        shape = " x ".join(["N", *map(str, built.dataset.input_shape)])
        raise ConfigError(
            f"--augment crops and flips images, inputs of shape N x H x W x C; "
            f"{built.dataset.name!r} has inputs of shape {shape}"
        )
    if hasattr(module, "check_problem"):  # a method that needs something of the network
        module.check_problem(built)
    method = module.build(built.log_posterior, config)
    init_params = _initial_params(built, config, loop)
    notes = (
        []
        if config.source_run() is None or type(config).PROBLEM_FROM_SOURCE
        else (source_differences(config.source_run(), problem, flag=type(config).SOURCE_FLAG))
    )
    batch, placements = _placed_batch(built, loop, shard)
    init_keys = member_keys(config.seed, INIT_STREAM, loop.num_members)
    first = _first_batch(built, loop) if batch is None else batch

    def init_all(keys, first):
        return jax.vmap(lambda k, p: method.init(k, p, first), axis_name=MEMBERS)(
            keys, init_params(keys)
        )

    # Everything the run needs is checked here, by tracing, before the directory is touched.
    template = jax.eval_shape(init_all, init_keys, first)
    problem_dict = dataclasses.asdict(problem)
    found, record = None, None
    if resume:
        found = lifecycle.resume_checks(
            rundir,
            config,
            problem_dict,
            loop,
            chunks=False,
            data=built.dataset.info,
            template=template,
        )
    else:
        record = _new_record(built, config, loop, method.position(template), problem_dict)
        # What the prior says against the data, before any chain runs (a key of its own).
        record[prior_check.RECORD_KEY] = prior_check.before_run(
            built, announce=distributed.is_writer()
        )
    with lifecycle.opened(rundir, found, record=record, overwrite=overwrite) as life:
        _store_arrays(life, built)
        return _run_locked(
            life,
            built,
            method,
            config,
            loop,
            lambda: jax.jit(init_all)(init_keys, first),
            template,
            batch,
            placements,
            progress=progress and life.writer,
            log_every=log_every,
            on_unit=on_unit,
            notes=notes,
            deadline=deadline,
        )


def _store_arrays(life: Lifecycle, built: problem_lib.Problem) -> None:
    """A problem made from arrays in memory: keep them in the run directory (once), so the
    run can be evaluated in another process; ``run.json`` records their sha256."""
    path = life.rundir.path / problem_lib.DATA_FILE
    if built.arrays is not None and life.writer and not path.is_file():
        storage.save_arrays(path, dict(built.arrays))


def _placed_batch(built: problem_lib.Problem, loop: Loop, shard: str):
    """The full training set of a full-batch method, placed on the devices (``None`` for the
    others), and the placements of (members, data) over the devices (``None``: one device)."""
    if loop.kind == "iterations":
        batch = built.train_batch()
        placements = sharding.placement(shard, loop.num_members, built.dataset.num_train)
        if placements is not None:
            batch = distributed.place(batch, placements[1])
        return batch, placements
    if loop.kind == "epochs":
        # The training set is replicated; each minibatch (data) or the members (chains) split.
        return None, sharding.placement(
            shard,
            loop.num_members,
            loop.batch_size,
            data_label="examples per minibatch (--batch-size)",
        )
    return None, None


def _initial_params(built: problem_lib.Problem, config: RunSettings, loop: Loop):
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


def _first_batch(built: problem_lib.Problem, loop: Loop) -> Batch:
    """A batch of the loop's size, for methods whose ``init`` reads the data's shapes."""
    n = min(loop.batch_size or built.dataset.num_train, built.dataset.num_train)
    return built.batch(built.dataset.x_train[:n], built.dataset.y_train[:n])


def _unit_function(
    method: Method, loop: Loop, built: problem_lib.Problem, seed: int, placements=None
):
    """``(state, unit, batch) -> (state, info)`` advancing every member by one unit."""
    noise_keys = member_keys(seed, NOISE_STREAM, loop.num_members)
    data_keys = member_keys(seed, DATA_STREAM, loop.num_members)
    # A stream of its own: split(k)[i] is fold_in(k, i) (partitionable threefry), so keys
    # folded from an epoch's data key would repeat those its permutation draws.
    augment_keys = member_keys(seed, AUGMENT_STREAM, loop.num_members)

    if loop.kind == "epochs":
        split_members = placements is not None and not placements[0].is_fully_replicated
        split_data = placements is not None and not placements[1].is_fully_replicated
        if placements is not None:
            # Each member's keys lie where its state does.
            noise_keys, data_keys, augment_keys = distributed.place(
                (noise_keys, data_keys, augment_keys), placements[0]
            )
        one = make_epoch(
            method, loop.batch_size, placements[1] if split_data else None, augment=loop.augment
        )
        if loop.vmap_members:
            vmapped = jax.jit(jax.vmap(one, in_axes=(0, 0, 0, None, None, 0), axis_name=MEMBERS))
            return lambda state, unit, batch: vmapped(
                state, noise_keys, data_keys, unit, batch, augment_keys
            )
        single = jax.jit(one)
        if split_members:
            return _sequential_per_device(
                single, placements[0], loop.num_members, noise_keys, data_keys, augment_keys
            )

        def sequential(state, unit, batch):
            outs = [
                single(
                    jax.tree.map(lambda a, m=m: a[m], state),
                    noise_keys[m],
                    data_keys[m],
                    unit,
                    batch,
                    augment_keys[m],
                )
                for m in range(loop.num_members)
            ]
            return jax.tree.map(lambda *a: jnp.stack(a), *outs)

        return sequential

    if method.step_members is not None:  # it compiles its own pieces

        def host_driven(state, unit, batch):
            keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
            return method.step_members(keys, state, batch)

        return host_driven

    @jax.jit
    def step_all(state, unit, batch):
        keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
        return jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS)(keys, state, batch)

    return step_all


def _sequential_per_device(
    single: Callable,
    members: NamedSharding,
    num_members: int,
    noise_keys: jax.Array,
    data_keys: jax.Array,
    augment_keys: jax.Array,
) -> Callable:
    """Members one after another on each device, the devices side by side.

    Each device runs the members that ``members`` places on it, on its own copy of the
    training set, through the same one-member program as on one device; asynchronous dispatch
    lets the devices run concurrently. The results are assembled into arrays split as before.
    """

    def on_device(tree, device):
        # A member-stacked leaf's block of members, or a replicated leaf's copy, on `device`.
        return jax.tree.map(
            lambda a: next(s.data for s in a.addressable_shards if s.device == device), tree
        )

    def sequential(state, unit, batch):
        per_device = []
        for device in sorted(members.addressable_devices, key=lambda d: d.id):
            block, noise, data, crops, train = on_device(
                (state, noise_keys, data_keys, augment_keys, batch), device
            )
            outs = [
                single(
                    jax.tree.map(lambda a, m=m: a[m], block),
                    noise[m],
                    data[m],
                    unit,
                    train,
                    crops[m],
                )
                for m in range(noise.shape[0])
            ]
            per_device.append(jax.tree.map(lambda *a: jnp.stack(a), *outs))
        return jax.tree.map(
            lambda *a: jax.make_array_from_single_device_arrays(
                (num_members, *a[0].shape[1:]), members, list(a)
            ),
            *per_device,
        )

    return sequential


def _unit_batch(built: problem_lib.Problem, loop: Loop, unit: int, full: Batch | None):
    if loop.kind == "iterations":
        return full
    if loop.kind == "epochs":
        return full
    start = unit * loop.batch_size
    stop = min(start + loop.batch_size, built.dataset.num_train)
    return built.batch(built.dataset.x_train[start:stop], built.dataset.y_train[start:stop])


def _new_record(built, config, loop, position, problem_dict) -> dict:
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


def _run_locked(
    life: Lifecycle,
    built,
    method,
    config,
    loop,
    initial_state,
    template,
    batch,
    placements,
    *,
    progress,
    log_every,
    on_unit,
    notes=(),
    deadline=None,
) -> RunResult:
    if loop.kind == "epochs":
        batch = built.train_batch()
        if placements is not None:
            batch = distributed.place(batch, NamedSharding(placements[0].mesh, PartitionSpec()))
    start, state = life.resume_state(template)
    if state is None:
        state = initial_state()
    if placements is not None:
        state = distributed.place(state, placements[0])
    life.begin(start, config, loop)
    step_all = _unit_function(method, loop, built, config.seed, placements)
    finite = jax.jit(lambda s: lifecycle.finite_members(method.position(s), loop.num_members))
    label = {
        "iterations": config.METHOD.upper(),
        "epochs": f"{config.METHOD} epoch",
        "chunks": f"{config.METHOD} chunk",
    }[loop.kind]
    # A sampler's burn-in tunes its step size, and with it the cost of an iteration.
    bar = ProgressBar(
        label,
        loop.num_units,
        start,
        enabled=progress,
        log_every=log_every,
        unit_name=loop.kind,
        settle_after=loop.burn_in if loop.kind == "iterations" else 0,
    )
    # A warning's advice names the flags of the command that made the run (a reference's
    # chains: bnnkit reference's), so that each suggestion is one that command takes.
    tally = SamplerTally(
        loop,
        config.METHOD,
        run_vocabulary(life.rundir, life.record),
        given_step_size=getattr(config, "step_size", None),
    )
    for line in life.rundir.read_log() if life.writer else ():  # counted from its first unit
        tally.add(line)
    for note in notes:
        bar.message(f"bnnkit: warning: {note}")
    log: dict = {}
    meta: dict = {}
    stopped = None
    done = start
    t0 = time.perf_counter()
    try:
        for unit in range(start, loop.num_units):
            t_unit = time.perf_counter()
            state, info = step_all(state, unit, _unit_batch(built, loop, unit, batch))
            info = jax.device_get(distributed.fetch(info))
            # Before anything of this unit is kept: a NaN loss or parameter stops the run.
            broken = lifecycle.non_finite(info, jax.device_get(distributed.fetch(finite(state))))
            if broken is not None:
                raise life.diverged(config, loop, unit, *broken)
            save = (unit + 1) % loop.save_every == 0 or unit + 1 == loop.num_units
            evaluate = loop.eval_every and (
                (unit + 1) % loop.eval_every == 0 or unit + 1 == loop.num_units
            )
            # Over several processes, every one gathers the state at the same units.
            whole = distributed.fetch(state) if loop.keeps(unit) or save or evaluate else state
            if loop.keeps(unit):
                # Process 0 stores it; every process stops if its posterior is not finite.
                stored = distributed.first_decides(
                    lambda unit=unit, whole=whole: _store_posterior(
                        life, unit, method, whole, config, loop
                    )
                )
                meta = stored if life.writer else meta
            log = _log_line(unit, loop, info, time.perf_counter() - t_unit)
            if evaluate:
                log["test"] = _test_metrics(built, method.position(whole))
            if life.writer:
                life.rundir.append_log([log])
            if save:
                life.save_state(whole, unit + 1)
            faults.point("unit-done")
            tally.add(log)
            bar.update(1, tally.status(log))
            warning = tally.news()
            if warning is not None:
                bar.message(f"bnnkit: warning: {warning}")
            if on_unit is not None:
                on_unit(unit, log)
            done = unit + 1
            if (
                deadline is not None
                and done < loop.num_units
                and distributed.first_says(time.monotonic() >= deadline)
            ):
                if not save:  # so that a resume starts exactly here
                    life.save_state(distributed.fetch(state), done)
                stopped = f"the time budget ended after {done} of {loop.num_units} {loop.kind}"
                break
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    if stopped is None:
        life.finish(
            **({"posterior_info": meta["info"]} if meta.get("info") else {}), **tally.record()
        )
    else:
        life.stop(stopped, units_done=done)
    warning = tally.warning()
    return RunResult(
        life.rundir,
        life.record,
        loop.num_units,
        seconds,
        seconds / max(done - start, 1),
        log,
        warnings=(*notes, *([] if warning is None else [warning])),
        units_run=done - start,
        stopped=stopped,
    )


def _store_posterior(
    life: Lifecycle, unit: int, method: Method, state, config: RunSettings, loop: Loop
) -> dict[str, Any]:
    """Store ``method.posterior`` of each member's state (a kept axis of one) in one file.

    Returns:
        Member 0's posterior metadata (e.g. a Laplace approximation's evidence).

    Raises:
        DivergenceError: a member's posterior holds a NaN or infinite value (a Laplace
            precision that overflowed, say): it is not stored.
    """
    # One transfer, then NumPy slices: slicing device arrays costs a dispatch per leaf and
    # member (on yacht with 8 chains, 50 ms of every kept iteration).
    host = jax.device_get(state)
    members = [
        method.posterior(jax.tree.map(lambda a, m=m: a[m][None], host))
        for m in range(loop.num_members)
    ]
    broken = [
        m
        for m, posterior in enumerate(members)
        if not all(
            np.isfinite(a).all()
            for a in posterior.arrays().values()
            if np.issubdtype(np.asarray(a).dtype, np.floating)
        )
    ]
    if broken:
        raise life.diverged(config, loop, unit, ["the posterior"], broken)
    store.save(
        life.rundir.sample_file(unit),
        members,
        before_rename=life.recorder(manifest.sample_name(unit), unit=unit),
    )
    faults.point("sample-written")
    return members[0].meta()


def _log_line(unit: int, loop: Loop, info, seconds: float) -> dict[str, Any]:
    log: dict[str, Any] = {"iteration": unit, "burn_in": unit < loop.burn_in}
    if loop.kind == "epochs":
        log["epoch"] = unit + 1
    for name, value in info._asdict().items():
        value = np.asarray(value)
        log[name] = (
            value.tolist()
            if value.dtype == bool
            else (
                value.astype(int).tolist()
                if np.issubdtype(value.dtype, np.integer)
                else value.astype(float).tolist()
            )
        )
    log["seconds"] = seconds
    return log


def _test_metrics(built, position: Params) -> dict[str, float]:
    """Metrics of the members' current positions, ensembled, on the test set."""
    from bnnkit.metrics.predictive import metrics_for
    from bnnkit.posterior import Samples
    from bnnkit.predict import predict

    samples = Samples(jax.tree.map(lambda a: np.asarray(a)[:, None], position))
    prediction = predict(built, samples, built.dataset.x_test, max_diagnostic_points=1)
    return metrics_for(prediction, built.dataset.y_test_original)
