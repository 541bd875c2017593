"""Sample any log density over a pytree with bnnkit's full-batch samplers, in memory or into a
run directory.

:func:`sample` is the run driver's multi-chain loop without a dataset or a model: the chains of
a full-batch sampler (``hmc`` or ``nuts``, with every adaptation mode) advance together under
one ``jax.vmap`` (named :data:`~bnnkit.inference.adaptation.MEMBERS`, so ChEES can pool across
chains) inside a compiled ``lax.scan``. Keys follow the driver's scheme: chain m's key at
iteration u is ``fold_in(fold_in(fold_in(key(seed), 1), m), u)``.

In memory the iterations are one scan. With ``run_dir`` (:mod:`bnnkit.runs.chunks`) they are
chunks of ``config.checkpoint_every`` iterations, each one call of the same scan over its
iterations with the same keys, so the stored chains equal the in-memory ones bit for bit.
After each chunk its kept positions and every iteration's info go to
``samples/chunk_<iterations done>.npz``, then every chain's sampler state (adapted step size,
mass matrix, adaptation state) to ``state.npz``, each recorded with its sha256 in the manifest
(:mod:`bnnkit.runs.manifest`) before it is renamed into place. ``run.json`` holds the method,
its Config, the density's ``name``, the sha256 and shapes of the initial positions and the
status; ``resume`` continues from the last complete chunk and refuses a damaged or edited
directory or other settings; the directory's life, the rules over several processes (only
process 0 reads and writes it) and the sampler warnings are the driver's, from
:mod:`bnnkit.runs.lifecycle` and :mod:`bnnkit.runs.tally`; :mod:`bnnkit.runs.chunks` says why
the chunks are files of their own. ``bnnkit verify`` checks such a directory and
:func:`bnnkit.runs.load_chains` (:mod:`bnnkit.runs.stored`) reads it back.

The result carries the kept positions, every iteration's sampler info and the verdict on the
positions themselves at the levels a log density has (numerics and stationary chains,
:mod:`bnnkit.runs.chains`; for a network use the run driver, whose verdict is in function
space and has every level), and the warning of a stuck or unstable sampler, if any.

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
    >>> chains.verdict.outcome, chains.verdict.problems
    ('certified', [])
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
import os
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import storage
from bnnkit.entry_points import check_call
from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.runs.chains import Chains, chains_of
from bnnkit.runs.chunks import sample_into
from bnnkit.runs.directory import RunDir
from bnnkit.runs.keys import INIT_STREAM, NOISE_STREAM, member_keys
from bnnkit.runs.progress import ProgressBar
from bnnkit.settings import check_dtype
from bnnkit.types import Params

# What sample() returns, and the chunks of a stored run, which bnnkit.runs.stored reads from
# here with the programs' shapes.
__all__ = ["check_density", "sample", "shapes"]


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
    config, loop, leaves = _checked_config(config, initial_positions)
    check_density(log_density, initial_positions)
    check_dtype(config, jnp.result_type(*leaves))
    init_all, advance = _programs(log_density, config)
    if run_dir is None:
        return _in_memory(initial_positions, config, loop, init_all, advance, progress=progress)
    return sample_into(
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


def _checked_config(
    config: RunSettings, initial_positions: Params
) -> tuple[RunSettings, Loop, list[Any]]:
    """``config`` with one chain per starting position when it leaves the number open, its
    loop and the positions' leaves, after refusing what :func:`sample` does not run.

    Raises:
        ConfigError: a Config of a minibatch method, a setting of the run driver's, or
            starting positions whose leading axis is not the number of chains.
    """
    module = METHODS.get(config.METHOD)
    if module is None or config.loop(1).kind != "iterations":
        raise ConfigError(f"sample() runs full-batch samplers (hmc, nuts), not {config.METHOD!r}")
    extending = [
        name for name in ("until", "max_time") if getattr(config, name, None) not in (None, False)
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
    return config, loop, leaves


def _in_memory(
    initial_positions: Params,
    config: RunSettings,
    loop: Loop,
    init_all: Callable,
    advance: Callable,
    *,
    progress: bool,
) -> Chains:
    """:func:`sample` in memory: every iteration in one scan."""
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
