"""Sample any log density over a pytree with bnnkit's full-batch samplers, in memory or into a
run directory.

:func:`sample` is the run driver's multi-chain loop without a dataset or a model: the chains of
a full-batch sampler (``hmc`` or ``nuts``, with every adaptation mode) advance together under
one ``jax.vmap`` (named :data:`~bnnkit.inference.adaptation.MEMBERS`, so ChEES can pool across
chains) inside a compiled ``lax.scan``. Keys follow the driver's scheme: chain m's key at
iteration u is ``fold_in(fold_in(fold_in(key(seed), 1), m), u)``.

In memory the iterations are one scan. With ``run_dir`` they are chunks of
``config.checkpoint_every`` iterations, each one call of the same scan over its iterations
with the same keys, so the stored chains equal the in-memory ones bit for bit. After each chunk
its kept positions and every iteration's info go to ``samples/chunk_<iterations done>.npz``,
then every chain's sampler state (adapted step size, mass matrix, adaptation state) to
``state.npz``, each recorded with its sha256 in the manifest (:mod:`bnnkit.runs.manifest`)
before it is renamed into place. ``run.json`` holds the method, its Config, the density's
``name``, the sha256 and shapes of the initial positions and the status; ``resume`` continues
from the last complete chunk and refuses a damaged or edited directory or other settings,
exactly like the driver (:mod:`bnnkit.runs.loop`); ``bnnkit verify`` checks such a directory.

The result carries the kept positions, every iteration's sampler info and the convergence
verdict of :mod:`bnnkit.metrics.convergence` on the positions themselves (for an identifiable
target the parameters are the quantities of interest; for a network use the run driver, whose
verdict is in function space).

Example (a hierarchical normal model, the eight schools, non-centred):
    >>> import tempfile
    >>> import jax.numpy as jnp
    >>> from bnnkit.inference import hmc
    >>> y = jnp.array([28., 8., -3., 7., -1., 1., 18., 12.])
    >>> sigma = jnp.array([15., 10., 16., 11., 9., 11., 10., 18.])
    >>> def log_density(p):
    ...     tau = jnp.exp(p["log_tau"])
    ...     theta = p["mu"] + tau * p["z"]
    ...     return (-0.5 * jnp.sum(((y - theta) / sigma) ** 2) - 0.5 * jnp.sum(p["z"] ** 2)
    ...             - 0.5 * (p["mu"] / 5) ** 2 - 0.5 * (tau / 5) ** 2 + p["log_tau"])
    >>> config = hmc.Config(step_size=0.1, trajectory_len=3.0, adapt="mass", num_chains=4,
    ...                     num_iterations=600, num_burn_in=300, checkpoint_every=300)
    >>> start = {"mu": jnp.zeros(4), "log_tau": jnp.zeros(4), "z": jnp.zeros((4, 8))}
    >>> chains = sample(log_density, start, config)
    >>> chains.positions["z"].shape  # (chains, kept samples, ...)
    (4, 300, 8)
    >>> chains.convergence["converged"], chains.convergence["problems"]
    (True, [])
    >>> folder = tempfile.mkdtemp() + "/eight_schools"
    >>> stored = sample(log_density, start, config, run_dir=folder, name="eight_schools")
    >>> bool(jnp.all(stored.positions["z"] == chains.positions["z"]))
    True
    >>> bool(jnp.all(load_chains(folder).positions["mu"] == chains.positions["mu"]))
    True
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS, _noise
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.metrics import convergence
from bnnkit.runs import directory, faults, manifest
from bnnkit.runs.directory import STATE_FILE, RunDir
from bnnkit.runs.loop import (
    INIT_STREAM,
    NOISE_STREAM,
    UNIT_KEY,
    _check_resume,
    _load_state,
    _recorder,
    _resume_point,
    member_keys,
)
from bnnkit.runs.progress import ProgressBar
from bnnkit.types import Params


class Chains(NamedTuple):
    """What :func:`sample` returns.

    Attributes:
        positions: the kept positions, every leaf shaped (chains, samples, ...).
        info: the sampler's info of every iteration, burn-in included, (chains, iterations).
        state: the final sampler state of every chain (adapted step size, mass matrix, ...).
        convergence: the verdict on the positions (see :mod:`bnnkit.metrics.convergence`).
    """

    positions: Params
    info: Any
    state: Any
    convergence: dict[str, Any]


def sample(log_density: Callable[[Params], jax.Array], initial_positions: Params,
           config: RunSettings, *, run_dir: str | os.PathLike | None = None,
           resume: bool = False, overwrite: bool = False, name: str | None = None,
           progress: bool = False) -> Chains:
    """Run ``config.num_chains`` chains of a full-batch sampler on ``log_density``.

    Args:
        log_density: position -> log density (unnormalised), differentiable by JAX.
        initial_positions: one starting position per chain: a pytree whose leaves have a
            leading axis of length ``config.num_chains``.
        config: a full-batch sampler's Config (:class:`bnnkit.inference.hmc.Config` or
            :class:`bnnkit.inference.nuts.Config`); its seed, iterations, burn-in, chains and
            adaptation are used, and with ``run_dir`` its ``checkpoint_every``.
        run_dir: store the run here (created; an existing non-empty one needs ``resume`` or
            ``overwrite``), a checkpoint every ``config.checkpoint_every`` iterations;
            ``None``: in memory.
        resume: continue the run stored in ``run_dir`` from its last checkpoint (only
            ``num_iterations`` and ``checkpoint_every`` may differ; more iterations extend a
            finished run, the same return it without computing).
        overwrite: replace the run stored in ``run_dir``.
        name: a label of the density stored in ``run.json`` (e.g. ``"eight_schools"``);
            a resume must give the same.
        progress: show progress, one update per checkpoint (with ``run_dir``).

    Returns:
        :class:`Chains`, the same bit for bit with or without ``run_dir``, however the run was
        interrupted and resumed with the same settings.

    Raises:
        ConfigError: a Config of a minibatch method, starting positions whose leading axis
            is not the number of chains, or (before anything is written) a ``run_dir`` that
            may not be started or resumed: other settings, initial positions or shapes than
            the stored run's, or a damaged or edited file the resume would keep.
    """
    module = METHODS.get(config.METHOD)
    loop = config.loop(1)
    if module is None or loop.kind != "iterations":
        raise ConfigError(f"sample() runs full-batch samplers (hmc, nuts), not "
                          f"{config.METHOD!r}")
    leaves = jax.tree.leaves(initial_positions)
    if not leaves or any(jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != loop.num_members
                         for leaf in leaves):
        raise ConfigError(f"initial positions need a leading axis of length --num-chains "
                          f"{loop.num_members} on every leaf, got shapes "
                          f"{[jnp.shape(leaf) for leaf in leaves]}")
    init_all, advance = _programs(log_density, config)
    if run_dir is None:
        state = init_all(initial_positions)
        state, positions, info = advance(state, 0, loop.num_units)
        return _chains(jax.tree.map(lambda x: x[:, loop.burn_in:], positions), info, state,
                       loop)
    return _sample_into(RunDir(run_dir), initial_positions, config, loop, init_all, advance,
                        resume=resume, overwrite=overwrite, name=name, progress=progress)


def load_chains(run_dir: str | os.PathLike, like: Params | None = None) -> Chains:
    """The chains a finished :func:`sample` run stored, each file checked against its digest.

    Args:
        run_dir: the run directory.
        like: a pytree of the positions' structure (e.g. the initial positions); ``None``
            rebuilds nested dictionaries from the stored names, which fits positions that are
            dictionaries.

    Raises:
        ConfigError: not a finished :func:`sample` run, a damaged or edited file, or positions
            that are not dictionaries without ``like``.
    """
    rundir = RunDir(run_dir)
    record = rundir.read_record()
    if not record.get("chunks") or record.get("method") not in METHODS:
        raise ConfigError(f"{str(rundir.path)!r} is not a run of bnnkit.runs.sample")
    if record.get("status") != "finished":
        raise ConfigError(f"{str(rundir.path)!r} is not finished (status "
                          f"{record.get('status')!r}); resume it with sample(..., "
                          "resume=True)")
    config = METHODS[record["method"]].Config.from_dict(record["method_config"])
    loop = config.loop(1)
    stored = record["problem"]["initial_positions"]
    if like is None:
        like = _nested({path: 0 for path in stored})
        if str(jax.tree.structure(like)) != record["problem"]["structure"]:
            raise ConfigError(f"the positions stored in {str(rundir.path)!r} are a "
                              f"{record['problem']['structure']}, not dictionaries; pass "
                              "like= a pytree of their structure")
    given = sorted(jax.tree.leaves(_paths(like)))
    if given != sorted(stored):
        raise ConfigError(f"like= has the leaves {given}, the positions stored in "
                          f"{str(rundir.path)!r} {sorted(stored)}")
    positions = jax.tree.map(lambda _, path: jax.ShapeDtypeStruct(tuple(stored[path][0]),
                                                                  np.dtype(stored[path][1])),
                             like, _paths(like))
    # Shapes only: the state's structure does not depend on the density's values.
    init_all, advance = _programs(_zero_density, config)
    template = jax.eval_shape(init_all, positions)
    info_template = jax.eval_shape(lambda state: advance(state, 0, 1)[2], template)
    found = manifest.check(rundir, record, hash_samples=False)
    problem = manifest.first_problem(rundir, found)
    if problem is not None:
        raise ConfigError(f"cannot load: {problem}")
    _, state = _load_state(rundir, template, found.state_sha256)
    return _chains(*_load_chunks(rundir, loop.num_units, positions, info_template), state,
                   loop)


def _zero_density(params: Params) -> jax.Array:
    return jnp.zeros(())


def _programs(log_density: Callable[[Params], jax.Array],
              config: RunSettings) -> tuple[Callable, Callable]:
    """The compiled programs of every chain: ``init(positions) -> state`` and
    ``advance(state, first, length) -> (state, positions, info)`` over iterations
    ``first .. first + length - 1``, chains first in the outputs.

    Cached, so that calls with the same density and Config (a resume in the same process, the
    in-memory and the stored run) compile once.
    """
    # Checkpoints change where the iterations stop, not what they compute.
    config = dataclasses.replace(config, checkpoint_every=1)
    try:
        hash(log_density)
    except TypeError:  # a density object that cannot be a cache key is compiled afresh
        return _build_programs(log_density, config)
    return _cached_programs(log_density, config)


def _build_programs(log_density: Callable[[Params], jax.Array],
                    config: RunSettings) -> tuple[Callable, Callable]:
    method = METHODS[config.METHOD].build(lambda params, batch: log_density(params), config)
    seed, num_members = config.seed, config.loop(1).num_members
    init_keys = member_keys(seed, INIT_STREAM, num_members)
    noise_keys = member_keys(seed, NOISE_STREAM, num_members)

    @jax.jit
    def init_all(initial_positions):
        return jax.vmap(lambda k, p: method.init(k, p, None), axis_name=MEMBERS)(
            init_keys, initial_positions)

    step = jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS)

    @jax.jit
    def scan(state, units):
        def body(state, unit):
            keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
            state, info = step(keys, state, None)
            return state, (method.position(state), info)

        state, (positions, info) = jax.lax.scan(body, state, units)
        # scan stacks iterations first: put chains first, as everywhere else.
        return state, *jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), (positions, info))

    def advance(state, first: int, length: int):
        # The iteration numbers are data, so every chunk of one length shares one program.
        return scan(state, jnp.arange(first, first + length))

    return init_all, advance


_cached_programs = functools.lru_cache(maxsize=8)(_build_programs)


def _chains(kept: Params, info: Any, state: Any, loop: Loop) -> Chains:
    draws = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(kept)
    after = jax.tree.map(lambda x: np.asarray(x)[:, loop.burn_in:], info)
    verdict = (convergence.verdict(np.asarray(draws),
                                   acceptance_rate=float(np.mean(after.acceptance_rate)),
                                   num_divergent=int(np.sum(after.divergent)))
               if draws.shape[1] >= 4 else
               {"converged": False, "problems": ["fewer than 4 kept samples per chain"],
                "advice": ["run more iterations after burn-in"]})
    return Chains(kept, info, state, verdict)


def positions_digest(positions: Params) -> str:
    """The sha256 of a pytree's leaves: each one's path, dtype, shape and bytes, in order.

    Example:
        >>> positions_digest({"a": np.zeros(2)}) == positions_digest({"a": np.zeros(2)})
        True
        >>> positions_digest({"a": np.zeros(2)}) == positions_digest({"a": np.ones(2)})
        False
    """
    digest = hashlib.sha256()
    for path, leaf in storage.flatten_tree(positions).items():
        leaf = np.ascontiguousarray(leaf)
        digest.update(f"{path}|{leaf.dtype.str}|{leaf.shape}|".encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()


def _paths(tree: Any) -> Any:
    """``tree`` with each leaf replaced by its path as :func:`bnnkit.storage.flatten_tree`
    names it."""
    return jax.tree_util.tree_map_with_path(lambda path, _: storage.path_to_str(path), tree)


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a/b": x}`` as ``{"a": {"b": x}}``."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, last = path.split("/")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _problem(initial_positions: Params, name: str | None) -> dict[str, Any]:
    """What ``run.json`` records of the density: what a resume must give again."""
    flat = storage.flatten_tree(initial_positions)
    return {"log_density": name,
            "structure": str(jax.tree.structure(initial_positions)),
            "initial_positions": {path: [list(leaf.shape), leaf.dtype.str]
                                  for path, leaf in flat.items()},
            "initial_positions_sha256": positions_digest(initial_positions)}


def _sample_into(rundir: RunDir, initial_positions: Params, config: RunSettings, loop: Loop,
                 init_all: Callable, advance: Callable, *, resume: bool, overwrite: bool,
                 name: str | None, progress: bool) -> Chains:
    """:func:`sample` into ``rundir``: every check first, then chunk by chunk under its lock."""
    rundir.check_target(resume=resume, overwrite=overwrite)
    problem = _problem(initial_positions, name)
    config_dict = config.to_dict()
    found = None
    if resume:
        record = rundir.read_record()
        if not record.get("chunks"):
            raise ConfigError(f"{rundir.given!r} is a run of the driver (bnnkit.runs.run), "
                              "not of sample(); resume it with bnnkit.runs.run")
        _check_resume(record, config, problem, config_dict)
        found = _resume_point(rundir, record, loop)
    # Traced, not run: an error of the density shows here, before anything is written.
    template = jax.eval_shape(init_all, initial_positions)
    info_template = jax.eval_shape(lambda state: advance(state, 0, 1)[2], template)
    positions = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                             initial_positions)
    if found is not None:
        if record["status"] == "finished" and found.state_unit == loop.num_units:
            # Nothing to run: the stored chains, read and checked, written nothing.
            _, state = _load_state(rundir, template, found.state_sha256)
            return _chains(*_load_chunks(rundir, loop.num_units, positions, info_template),
                           state, loop)
        record.update(method_config=config_dict, loop=dataclasses.asdict(loop))
    if not resume:
        record = {"method": config.METHOD, "layout": directory.LAYOUT, "problem": problem,
                  "method_config": config_dict, "loop": dataclasses.asdict(loop),
                  "manifest": True, "chunks": True, "versions": directory.versions(),
                  "git": directory.git_hash(), "gaussian_noise": _noise.GENERATOR,
                  "started": directory.now()}
    files = manifest.Manifest(rundir.manifest_file)
    with rundir.lock():
        faults.point("locked")
        start, kept, info = 0, [], []
        if found is None:
            rundir.prepare(overwrite=overwrite)
            # The directory is a run from here on: a crash leaves a run that never started.
            rundir.write_record({**record, "status": "starting"})
            faults.point("started")
            files.rewrite([])
        elif found.state_sha256 is not None:
            start, state = _load_state(rundir, template, found.state_sha256)
            kept, info = (list(part) for part in zip(
                _load_chunks(rundir, start, positions, info_template), strict=True))
        if not start:
            state = init_all(initial_positions)
        if found is not None:
            _forget_after(rundir, files, start, found.state_sha256)
        record.update(status="running", resumed_at=start if found is not None else None,
                      iterations_done=start)
        rundir.write_record(record)
        bar = ProgressBar(config.METHOD.upper(), loop.num_units, start, enabled=progress,
                          unit_name="iterations")
        try:
            for first in range(start, loop.num_units, loop.save_every):
                length = min(loop.save_every, loop.num_units - first)
                state, chunk_positions, chunk_info = advance(state, first, length)
                chunk_kept = jax.tree.map(lambda x, f=first: x[:, max(loop.burn_in - f, 0):],
                                          chunk_positions)
                end = first + length
                storage.save_arrays(
                    rundir.path / manifest.chunk_name(end),
                    {**storage.flatten_tree(chunk_kept, "positions/"),
                     **storage.flatten_tree(chunk_info, "info/")},
                    before_rename=_chunk_recorder(files, first, end))
                storage.save_arrays(rundir.state_file,
                                    {**storage.flatten_tree(state), UNIT_KEY: np.asarray(end)},
                                    before_rename=_recorder(files, STATE_FILE, unit=end,
                                                            point="state-recorded"))
                rundir.write_record({**record, "iterations_done": end})
                faults.point("unit-done")
                kept.append(chunk_kept)
                info.append(chunk_info)
                bar.update(length, f"accept {np.mean(chunk_info.acceptance_rate):.2f}")
        finally:
            bar.close()
        record.update(status="finished", finished=directory.now(),
                      iterations_done=loop.num_units)
        files.rewrite(files.latest().values())
        rundir.write_record(record)
    return _chains(_concatenate(kept), _concatenate(info), state, loop)


def _chunk_recorder(files: manifest.Manifest, first: int,
                    end: int) -> Callable[[storage.Written], None]:
    """Writes a chunk's manifest line before the chunk is renamed into place."""

    def record(written: storage.Written) -> None:
        files.append(manifest.entry(manifest.chunk_name(end), written, unit=end, first=first))
        faults.point("sample-recorded")

    return record


def _forget_after(rundir: RunDir, files: manifest.Manifest, start: int,
                  state_sha256: str | None) -> None:
    """Delete the chunks after iteration ``start`` (recomputed identically from the state)
    and rewrite the manifest with one line per file kept."""
    for path in rundir.samples_dir.glob("chunk_*.npz"):
        unit = manifest.chunk_unit(f"samples/{path.name}")
        if unit is None or unit > start:
            path.unlink()
    files.rewrite(line for file, line in files.latest().items()
                  if (file == STATE_FILE and line["sha256"] == state_sha256)
                  or (manifest.chunk_unit(file) is not None and line["unit"] <= start))


def _load_chunks(rundir: RunDir, upto: int, positions: Params,
                 info_template: Any) -> tuple[Params, Any]:
    """The kept positions and info of iterations ``0 .. upto - 1`` from the chunk files,
    each checked against its recorded digest.

    Raises:
        ConfigError: a damaged or edited chunk, or chunks that do not cover those iterations.
    """
    lines = sorted((line for file, line in manifest.Manifest(rundir.manifest_file)
                    .latest().items()
                    if manifest.chunk_unit(file) is not None and line["unit"] <= upto),
                   key=lambda line: line["unit"])
    kept, info, done = [], [], 0
    for line in lines:
        if line.get("first") != done:
            break
        arrays = storage.load_arrays(rundir.path / line["file"], sha256=line["sha256"])
        kept.append(storage.unflatten_tree(positions, arrays, "positions/"))
        info.append(storage.unflatten_tree(info_template, arrays, "info/"))
        done = line["unit"]
    if done != upto:
        raise ConfigError(f"{str(rundir.manifest_file)!r} records no chunk from iteration "
                          f"{done}; `bnnkit verify {rundir.path}` lists every problem")
    return _concatenate(kept), _concatenate(info)


def _concatenate(parts: list[Any]) -> Any:
    """Chunks of a chains-first pytree joined along their iteration axis."""
    return jax.tree.map(lambda *leaves: jnp.concatenate(leaves, axis=1), *parts)
