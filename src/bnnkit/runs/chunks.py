"""A :func:`bnnkit.runs.sample` run in a directory: chunk by chunk, under the run's lock.

With ``run_dir`` the iterations are chunks of ``config.checkpoint_every`` iterations, each one
call of the same compiled scan over its iterations with the same keys, so the stored chains
equal the in-memory ones bit for bit. After each chunk its kept positions and every iteration's
info go to ``samples/chunk_<iterations done>.npz`` (:func:`bnnkit.runs.manifest.chunk_name`),
then every chain's sampler state to ``state.npz``, each recorded with its sha256 in the manifest
before it is renamed into place. ``run.json`` records the density's name and the sha256 and
shapes of the initial positions (:func:`density_record`), which a resume must give again; the
directory's life is the driver's (:mod:`bnnkit.runs.lifecycle`), and :func:`load_chunks` reads
the chunks back, each checked against its recorded digest.

The two kinds of runs keep two sample-file layouts, on purpose. The driver writes one
``samples/sample_<unit>.npz`` per kept unit, holding whatever ``method.posterior`` returned for
each member (:mod:`bnnkit.posterior.store`): a network's kept draw is large and rare (one per
iteration of a full-batch gradient over the whole training set), and a kept unit of VI or
Laplace is an approximation, not a draw. :func:`bnnkit.runs.sample` writes one
``samples/chunk_<iterations done>.npz`` per checkpoint, holding the chunk's kept positions and
every iteration's sampler info: its draws are cheap (a small density's iteration costs far less
than a file written and synced to disk) and many, and one fsynced file per draw would make the
disk, not the sampler, the cost of a run of thousands of draws per chain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import distributed, storage
from bnnkit.errors import ConfigError
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.metrics.findings import python_name
from bnnkit.runs import faults, lifecycle, manifest, manifest_lines, resumable
from bnnkit.runs.chains import Chains, chains_of, tally_chunk
from bnnkit.runs.directory import RunDir
from bnnkit.runs.lifecycle import Lifecycle
from bnnkit.runs.progress import ProgressBar
from bnnkit.runs.tally import SamplerTally
from bnnkit.types import Params


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


def density_record(initial_positions: Params, name: str | None) -> dict[str, Any]:
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


def sample_into(
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
    """:func:`bnnkit.runs.sample` into ``rundir``: every check first, then chunk by chunk
    under its lock."""
    lifecycle.check_target(rundir, resume=resume, overwrite=overwrite)
    problem = density_record(initial_positions, name)
    found = resumable.resume_checks(rundir, config, problem, loop, chunks=True) if resume else None
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
            python_name,
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
        rundir: a :func:`bnnkit.runs.sample` run's directory.
        upto: the iterations to read.
        positions: a pytree of the positions' structure.
        info_template: a pytree of the info's structure.

    Raises:
        ConfigError: a damaged or edited chunk, or chunks that do not cover those iterations.
    """
    lines = sorted(
        (
            line
            for file, line in manifest_lines.Manifest(rundir.manifest_file).latest().items()
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
