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
from the last complete chunk and refuses a damaged or edited directory or other settings; the
directory's life, the rules over several processes (only process 0 reads and writes it) and the
sampler warnings are the driver's, from :mod:`bnnkit.runs.lifecycle`, which also says why the
chunks are files of their own. ``bnnkit verify`` checks such a directory and
:func:`bnnkit.runs.load_chains` (:mod:`bnnkit.runs.stored`) reads it back.

The result carries the kept positions, every iteration's sampler info and the convergence
verdict of :mod:`bnnkit.metrics.convergence` on the positions themselves (for an identifiable
target the parameters are the quantities of interest; for a network use the run driver, whose
verdict is in function space), and the warning of a stuck or unstable sampler, if any.

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
    >>> table = chains.summary()  # per parameter: MCSE, bulk and tail ESS, R-hat
    >>> bool(table["mu"].r_hat < 1.01), bool(table["z[0]"].ess_bulk > 400)
    (True, True)
    >>> folder = tempfile.mkdtemp() + "/eight_schools"
    >>> stored = sample(log_density, start, config, run_dir=folder, name="eight_schools")
    >>> bool(jnp.all(stored.positions["z"] == chains.positions["z"]))
    True
    >>> from bnnkit.runs import load_chains
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

from bnnkit import distributed, storage
from bnnkit.entry_points import check_call
from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.metrics import convergence
from bnnkit.metrics.vocabulary import PARAMETERS_PYTHON
from bnnkit.runs import faults, lifecycle, manifest
from bnnkit.runs.directory import RunDir
from bnnkit.runs.lifecycle import INIT_STREAM, NOISE_STREAM, Lifecycle, SamplerTally, member_keys
from bnnkit.runs.progress import ProgressBar
from bnnkit.settings import check_dtype
from bnnkit.types import Params


class Chains(NamedTuple):
    """What :func:`sample` returns.

    Attributes:
        positions: the kept positions, every leaf shaped (chains, samples, ...).
        info: the sampler's info of every iteration, burn-in included, (chains, iterations).
        state: the final sampler state of every chain (adapted step size, mass matrix, ...).
        convergence: the verdict on the positions (see :mod:`bnnkit.metrics.convergence`).
        warnings: what a user should act on: a stuck or unstable sampler after burn-in (the
            driver's warning, :class:`bnnkit.runs.lifecycle.SamplerTally`), already shown
            when progress was.
    """

    positions: Params
    info: Any
    state: Any
    convergence: dict[str, Any]
    warnings: tuple[str, ...] = ()

    def summary(self):
        """Per-parameter diagnostics of the kept positions: mean, sd, quantiles, MCSE, bulk and
        tail ESS and rank-normalised R-hat (:func:`bnnkit.metrics.mcmc_summary.summary`)."""
        from bnnkit.metrics.mcmc_summary import summary

        return summary(self.positions)


def check_density(log_density: Callable[[Params], jax.Array], initial_positions: Params) -> None:
    """Refuse, in one line, starting positions that are not real numbers and a log density
    that does not give one real number per position (what the samplers differentiate).

    Raises:
        ConfigError: naming the leaf and its dtype, or the density's output shape and dtype.

    Example:
        >>> check_density(lambda p: p["x"] ** 2, {"x": jnp.zeros((2, 3))})
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: log_density gives shape (3,) float32 for one position; ...
    """
    for path, leaf in jax.tree_util.tree_flatten_with_path(initial_positions)[0]:
        dtype = jnp.result_type(leaf)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ConfigError(
                f"initial position {storage.path_to_str(path) or 'leaf'!r} has "
                f"dtype {dtype}; allowed: real numbers (float32 or float64), e.g. "
                "jnp.asarray(x, float)"
            )
    one = jax.tree.map(
        lambda leaf: jax.ShapeDtypeStruct(jnp.shape(leaf)[1:], jnp.result_type(leaf)),
        initial_positions,
    )
    out = jax.eval_shape(log_density, one)
    if not (hasattr(out, "shape") and out.shape == () and jnp.issubdtype(out.dtype, jnp.floating)):
        shape = getattr(out, "shape", None)
        what = (
            f"shape {tuple(shape)} {out.dtype}" if shape is not None else f"a {type(out).__name__}"
        )
        raise ConfigError(
            f"log_density gives {what} for one position; allowed: a scalar "
            "(shape ()) of a real dtype, the log density of that position"
        )


def sample(
    log_density: Callable[[Params], jax.Array],
    initial_positions: Params,
    config: RunSettings,
    *,
    run_dir: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    name: str | None = None,
    progress: bool = False,
) -> Chains:
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
        progress: show progress, one update per checkpoint (with ``run_dir``; in memory one
            at the end), and the warning of a stuck or unstable sampler.

    Returns:
        :class:`Chains`, the same bit for bit with or without ``run_dir``, however the run was
        interrupted and resumed with the same settings.

    Raises:
        ConfigError: a Config of a minibatch method, starting positions whose leading axis
            is not the number of chains, or (before anything is written) a ``run_dir`` that
            may not be started or resumed: other settings, initial positions or shapes than
            the stored run's, or a damaged or edited file the resume would keep.
    """
    check_call("bnnkit.sample", locals())
    module = METHODS.get(config.METHOD)
    if module is None or config.loop(1).kind != "iterations":
        raise ConfigError(f"sample() runs full-batch samplers (hmc, nuts), not {config.METHOD!r}")
    extending = [
        name
        for name in ("until_converged", "max_time")
        if getattr(config, name, None) not in (None, False)
    ]
    if extending:
        raise ConfigError(
            f"{' and '.join(extending)} extend or stop runs of the run driver "
            "(bnnkit.run, bnnkit hmc); sample() runs num_iterations: leave "
            f"{'them' if len(extending) > 1 else 'it'} unset"
        )
    leaves = jax.tree.leaves(initial_positions)
    if config.num_chains is None and leaves and jnp.ndim(leaves[0]) >= 1:
        # One chain per starting position.
        config = dataclasses.replace(config, num_chains=int(jnp.shape(leaves[0])[0]))
    loop = config.loop(1)
    if not leaves or any(
        jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != loop.num_members for leaf in leaves
    ):
        raise ConfigError(
            f"initial positions need a leading axis of length --num-chains "
            f"{loop.num_members} on every leaf, got shapes "
            f"{[jnp.shape(leaf) for leaf in leaves]}"
        )
    check_density(log_density, initial_positions)
    check_dtype(config, jnp.result_type(*leaves))
    init_all, advance = _programs(log_density, config)
    if run_dir is None:
        bar = ProgressBar(
            config.METHOD.upper(), loop.num_units, enabled=progress, unit_name="iterations"
        )
        state = init_all(initial_positions)
        state, positions, info = advance(state, 0, loop.num_units)
        chains = chains_of(
            jax.tree.map(lambda x: x[:, loop.burn_in :], positions),
            info,
            state,
            loop,
            config.METHOD,
        )
        bar.update(loop.num_units, f"accept {np.mean(info.acceptance_rate):.2f}")
        for warning in chains.warnings:
            bar.message(f"bnnkit: warning: {warning}")
        bar.close()
        return chains
    return _sample_into(
        RunDir(run_dir),
        initial_positions,
        config,
        loop,
        init_all,
        advance,
        resume=resume,
        overwrite=overwrite,
        name=name,
        progress=progress,
    )


def shapes(config: RunSettings, positions: Params) -> tuple[Any, Any, Any]:
    """The shapes and dtypes of a run's sampler state, and of the kept positions and the info
    of one iteration (chains first), for ``positions`` of one position per chain.

    The state's structure does not depend on the density's values, so none is needed.
    """
    init_all, advance = _programs(_zero_density, config)
    state = jax.eval_shape(init_all, positions)
    _, kept, info = jax.eval_shape(lambda state: advance(state, 0, 1), state)
    return state, kept, info


def _zero_density(params: Params) -> jax.Array:
    return jnp.zeros(())


def _programs(
    log_density: Callable[[Params], jax.Array], config: RunSettings
) -> tuple[Callable, Callable]:
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


def _build_programs(
    log_density: Callable[[Params], jax.Array], config: RunSettings
) -> tuple[Callable, Callable]:
    method = METHODS[config.METHOD].build(lambda params, batch: log_density(params), config)
    seed, num_members = config.seed, config.loop(1).num_members
    init_keys = member_keys(seed, INIT_STREAM, num_members)
    noise_keys = member_keys(seed, NOISE_STREAM, num_members)

    @jax.jit
    def init_all(initial_positions):
        return jax.vmap(lambda k, p: method.init(k, p, None), axis_name=MEMBERS)(
            init_keys, initial_positions
        )

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


def chains_of(kept: Params, info: Any, state: Any, loop: Loop, method: str | None = None) -> Chains:
    """The :class:`Chains` of the kept positions and every iteration's info (chains first),
    with the verdict and the sampler warnings (``method``'s advice) computed from them."""
    draws = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(kept)
    after = jax.tree.map(lambda x: np.asarray(x)[:, loop.burn_in :], info)
    trace = getattr(after, "log_posterior", None)
    verdict = (
        convergence.verdict(
            np.asarray(draws),
            acceptance_rate=float(np.mean(after.acceptance_rate)),
            num_divergent=int(np.sum(after.divergent)),
            log_posterior=None if trace is None else np.asarray(trace),
            vocabulary=PARAMETERS_PYTHON,
        )
        if draws.shape[1] >= 4
        else {
            "converged": False,
            "level": "not-mixed",
            "problems": ["fewer than 4 kept samples per chain"],
            "advice": ["run more iterations after burn-in (a larger num_iterations)"],
        }
    )
    tally = SamplerTally(loop, method, PARAMETERS_PYTHON)
    tally_chunk(tally, 0, info, loop)
    warning = tally.warning()
    return Chains(kept, info, state, verdict, () if warning is None else (warning,))


def tally_chunk(tally: SamplerTally, first: int, info: Any, loop: Loop) -> None:
    """Count iterations ``first, first + 1, ...`` of ``info`` (chains first) in ``tally``."""
    accepted, divergent = np.asarray(info.acceptance_rate), np.asarray(info.divergent)
    capped = getattr(info, "capped", None)
    for i in range(accepted.shape[1]):
        tally.add(
            {
                "burn_in": first + i < loop.burn_in,
                "acceptance_rate": accepted[:, i],
                "divergent": divergent[:, i],
                **({} if capped is None else {"capped": np.asarray(capped)[:, i]}),
            }
        )


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


def _problem(initial_positions: Params, name: str | None) -> dict[str, Any]:
    """What ``run.json`` records of the density: what a resume must give again."""
    flat = storage.flatten_tree(initial_positions)
    return {
        "log_density": name,
        "structure": str(jax.tree.structure(initial_positions)),
        "initial_positions": {
            path: [list(leaf.shape), leaf.dtype.str] for path, leaf in flat.items()
        },
        "initial_positions_sha256": positions_digest(initial_positions),
    }


def _sample_into(
    rundir: RunDir,
    initial_positions: Params,
    config: RunSettings,
    loop: Loop,
    init_all: Callable,
    advance: Callable,
    *,
    resume: bool,
    overwrite: bool,
    name: str | None,
    progress: bool,
) -> Chains:
    """:func:`sample` into ``rundir``: every check first, then chunk by chunk under its lock."""
    lifecycle.check_target(rundir, resume=resume, overwrite=overwrite)
    problem = _problem(initial_positions, name)
    found = lifecycle.resume_checks(rundir, config, problem, loop, chunks=True) if resume else None
    # Traced, not run: an error of the density shows here, before anything is written.
    template = jax.eval_shape(init_all, initial_positions)
    _, kept_template, info_template = jax.eval_shape(lambda s: advance(s, 0, 1), template)
    record = None if resume else lifecycle.new_record(config, loop, problem, chunks=True)
    with lifecycle.opened(rundir, found, record=record, overwrite=overwrite) as life:
        start, state = life.resume_state(template)
        kept, info = _chunks_before(life, start, kept_template, info_template, loop)
        if found is not None and life.record["status"] == "finished" and (start == loop.num_units):
            # Nothing to run: the stored chains, read and checked; nothing is written.
            return chains_of(_concatenate(kept), _concatenate(info), state, loop, config.METHOD)
        if not start:
            state = init_all(initial_positions)
        life.begin(start, config, loop, iterations_done=start)
        tally = SamplerTally(
            loop,
            config.METHOD,
            PARAMETERS_PYTHON,
            given_step_size=getattr(config, "step_size", None),
        )
        for part in info:
            tally_chunk(tally, 0, part, loop)
        bar = ProgressBar(
            config.METHOD.upper(),
            loop.num_units,
            start,
            enabled=progress and life.writer,
            unit_name="iterations",
        )
        try:
            for first in range(start, loop.num_units, loop.save_every):
                length = min(loop.save_every, loop.num_units - first)
                state, chunk_positions, chunk_info = advance(state, first, length)
                chunk_kept = jax.tree.map(
                    lambda x, f=first: x[:, max(loop.burn_in - f, 0) :], chunk_positions
                )
                _save_chunk(life, first, first + length, chunk_kept, chunk_info, state)
                kept.append(chunk_kept)
                info.append(chunk_info)
                tally_chunk(tally, first, chunk_info, loop)
                bar.update(length, f"accept {np.mean(chunk_info.acceptance_rate):.2f}")
                warning = tally.news()
                if warning is not None:
                    bar.message(f"bnnkit: warning: {warning}")
        finally:
            bar.close()
        life.finish(iterations_done=loop.num_units, **tally.record())
    return chains_of(_concatenate(kept), _concatenate(info), state, loop, config.METHOD)


def _save_chunk(life: Lifecycle, first: int, end: int, kept: Params, info: Any, state: Any) -> None:
    """Write the chunk of iterations ``first .. end - 1`` (its kept positions and info), then
    the state after it, each recorded in the manifest before it is renamed into place."""
    if life.writer:
        name = manifest.chunk_name(end)
        storage.save_arrays(
            life.rundir.path / name,
            {**storage.flatten_tree(kept, "positions/"), **storage.flatten_tree(info, "info/")},
            before_rename=life.recorder(name, unit=end, first=first),
        )
    life.save_state(state, end)
    if life.writer:
        life.rundir.write_record({**life.record, "iterations_done": end})
    faults.point("unit-done")


def _chunks_before(
    life: Lifecycle, start: int, kept_template: Any, info_template: Any, loop: Loop
) -> tuple[list[Any], list[Any]]:
    """The kept positions and info of the iterations before ``start``, as lists of one part
    (none when ``start`` is 0): read by process 0, handed to every process bit for bit."""
    if not start:
        return [], []
    stored = load_chunks(life.rundir, start, kept_template, info_template) if life.writer else None
    template = (_along(kept_template, max(start - loop.burn_in, 0)), _along(info_template, start))
    _, (kept, info) = distributed.from_first(start, stored, template)
    return [kept], [info]


def _along(template: Any, length: int) -> Any:
    """``template`` (chains, 1, ...) with ``length`` iterations instead of one."""
    return jax.tree.map(
        lambda t: jax.ShapeDtypeStruct((t.shape[0], length, *t.shape[2:]), t.dtype), template
    )


def load_chunks(
    rundir: RunDir, upto: int, positions: Params, info_template: Any
) -> tuple[Params, Any]:
    """The kept positions and info of iterations ``0 .. upto - 1`` from the chunk files,
    each checked against its recorded digest.

    Args:
        rundir: a :func:`sample` run's directory.
        upto: the iterations to read.
        positions: a pytree of the positions' structure.
        info_template: a pytree of the info's structure.

    Raises:
        ConfigError: a damaged or edited chunk, or chunks that do not cover those iterations.
    """
    lines = sorted(
        (
            line
            for file, line in manifest.Manifest(rundir.manifest_file).latest().items()
            if manifest.chunk_unit(file) is not None and line["unit"] <= upto
        ),
        key=lambda line: line["unit"],
    )
    kept, info, done = [], [], 0
    for line in lines:
        if line.get("first") != done:
            break
        arrays = storage.load_arrays(rundir.path / line["file"], sha256=line["sha256"])
        if "info/capped" not in arrays and "info/num_leapfrog" in arrays:
            # Written before samplers reported capped trajectories: none is counted.
            arrays["info/capped"] = np.zeros(np.shape(arrays["info/num_leapfrog"]), bool)
        kept.append(storage.unflatten_tree(positions, arrays, "positions/"))
        info.append(storage.unflatten_tree(info_template, arrays, "info/"))
        done = line["unit"]
    if done != upto:
        raise ConfigError(
            f"{str(rundir.manifest_file)!r} records no chunk from iteration "
            f"{done}; `bnnkit verify {rundir.path}` lists every problem"
        )
    return _concatenate(kept), _concatenate(info)


def _concatenate(parts: list[Any]) -> Any:
    """Chunks of a chains-first pytree joined along their iteration axis."""
    return jax.tree.map(lambda *leaves: jnp.concatenate(leaves, axis=1), *parts)
