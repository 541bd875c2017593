"""Fit a Laplace approximation around the MAP of a stored SGD run, into a run directory.

``fit(map_run, run_dir)`` reads θ* (the last kept sample of one member of a finished
``bnnkit sgd`` or ``bnnkit ensemble`` run), rebuilds the same problem from its ``run.json``,
accumulates the GGN over the training set chunk by chunk (:mod:`bnnkit.inference.laplace`),
and stores:

    run.json      "method": "laplace", "posterior": "laplace", the MAP run's problem, the
                  structure, prior precision (α chosen or given), damping, log marginal
                  likelihood, the MAP run's path, the predictive and number of samples used by
                  ``bnnkit evaluate``, status
    laplace.npz   θ* and the posterior's arrays (precision diagonal, last-layer eigenvectors
                  and eigenvalues, or Kronecker factors' eigenvectors and eigenvalues)

The computation is one pass over the data: ``resume=True`` on a finished run changes nothing,
``overwrite=True`` recomputes it.

Example:
    >>> result = fit("runs/sgd_yacht", "runs/laplace_yacht", structure="last_layer",
    ...              prior_precision="auto")  # doctest: +SKIP
    >>> result.posterior.info["alpha"]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bnnkit import io
from bnnkit import problem as problem_lib
from bnnkit.errors import ConfigError
from bnnkit.inference import laplace as laplace_method
from bnnkit.posterior import laplace as laplace_posterior
from bnnkit.progress import ProgressBar

Params = Any

#: Methods whose runs hold a MAP estimate (a point per member).
MAP_METHODS = ("sgd", "ensemble")
PREDICTIVES = ("mc", "glm")


@dataclasses.dataclass(frozen=True)
class LaplaceResult:
    """What :func:`fit` returns.

    Attributes:
        posterior: the Laplace posterior (``sample(key, n)``, :func:`glm_predict`).
        problem: the problem rebuilt from the MAP run.
        record: the run record (what ``run.json`` holds, when written).
        seconds: time spent on the curvature and posterior.
        run_dir: the run directory, or ``None`` when nothing was written.
    """

    posterior: laplace_posterior.LaplacePosterior
    problem: problem_lib.Problem
    record: dict
    seconds: float
    run_dir: io.RunDir | None


def read_map_run(map_run: str | os.PathLike, *, member: int = 0, dataset: str | None = None,
                 model: str | None = None) -> tuple[dict, problem_lib.Problem, Params]:
    """The record, rebuilt problem and MAP parameters of a finished SGD/ensemble run.

    Raises:
        ConfigError: no run there, not finished, not a MAP method, another dataset or model
            than the ones given, no such member, or non-finite parameters.
    """
    from bnnkit.evaluate import load_run

    rundir = io.RunDir(map_run)
    if not rundir.run_file.is_file():
        raise ConfigError(f"--map-run {str(map_run)!r} is not a bnnkit run directory "
                          "(no run.json)")
    record = io.read_json(rundir.run_file)
    method = record.get("method")
    if method not in MAP_METHODS:
        raise ConfigError(f"--map-run {str(map_run)!r} is a {method!r} run; a Laplace "
                          f"approximation starts from a MAP run: {', '.join(MAP_METHODS)}")
    if record.get("status") != "finished":
        raise ConfigError(f"--map-run {str(map_run)!r} is not finished (status "
                          f"{record.get('status')!r}); finish it with --resume first")
    stored = record.get("problem", {})
    for flag, given in (("dataset", dataset), ("model", model)):
        if given is not None and given != stored.get(flag):
            raise ConfigError(f"--{flag} {given!r} does not match the MAP run, which is for "
                              f"{flag} {stored.get(flag)!r}")
    record, problem, samples = load_run(map_run)
    if not 0 <= member < samples.num_chains:
        raise ConfigError(f"--member {member} out of range: the MAP run has "
                          f"{samples.num_chains} member(s), allowed 0..{samples.num_chains - 1}")
    params = jax.tree.map(lambda a: np.asarray(a[member, -1], problem.dtype), samples.params)
    bad = sum(int(np.sum(~np.isfinite(leaf))) for leaf in jax.tree.leaves(params))
    if bad:
        raise ConfigError(f"--map-run {str(map_run)!r} holds {bad} non-finite parameters")
    return record, problem, params


def approximate(
    problem: problem_lib.Problem,
    params: Params,
    *,
    structure: str = "diag",
    prior_precision: float | str | None = None,
    chunk_size: int = 1000,
    progress: bool = False,
    on_warning=None,
) -> laplace_posterior.LaplacePosterior:
    """The Laplace posterior of ``problem`` around ``params``, one pass over the training set.

    Args:
        problem: data, model, likelihood, prior, temperature.
        params: θ*, the MAP.
        structure: ``"diag"``, ``"last_layer"`` or ``"kfac"``.
        prior_precision: ``None`` (prior's own curvature), α, or ``"auto"``.
        chunk_size: training examples per compiled step (host memory holds one chunk).
        progress: show a progress bar.
        on_warning: called with the message when the precision had to be damped (the
            warning is issued as a ``RuntimeWarning`` otherwise).

    Example:
        >>> post = approximate(problem, params, structure="last_layer")  # doctest: +SKIP
    """
    if chunk_size < 1:
        raise ConfigError(f"--chunk-size {chunk_size} must be >= 1")
    method = laplace_method.build(problem.log_posterior, structure, prior_precision,
                                  model=problem.config.model)
    x, y = problem.dataset.x_train, problem.dataset.y_train
    n = len(x)
    state = method.init(jax.random.PRNGKey(0), jax.tree.map(np.asarray, params),
                        problem.batch(x[:1], y[:1]))
    step = jax.jit(method.step)
    bar = ProgressBar(f"laplace ({structure}) examples", n, enabled=progress)
    try:
        for start in range(0, n, chunk_size):
            batch = problem.batch(x[start:start + chunk_size], y[start:start + chunk_size])
            state, _ = step(jax.random.PRNGKey(0), state, batch)
            bar.update(min(chunk_size, n - start))
    finally:
        bar.close()
    kept = jax.tree.map(lambda a: a[None], state)
    if on_warning is None:
        return method.posterior(kept)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        posterior = method.posterior(kept)
    for w in caught:
        on_warning(str(w.message))
    return posterior


def _config(structure, prior_precision, predictive, num_samples, chunk_size, seed, map_run,
            member) -> dict:
    return {"structure": structure, "prior_precision": prior_precision, "predictive": predictive,
            "num_samples": num_samples, "chunk_size": chunk_size, "seed": seed,
            "map_run": str(Path(map_run).resolve()), "member": member}


def _check(structure, predictive, num_samples) -> None:
    if structure not in laplace_posterior.STRUCTURES:
        raise ConfigError(f"unknown structure {structure!r}; allowed: "
                          f"{', '.join(laplace_posterior.STRUCTURES)}")
    if predictive not in PREDICTIVES:
        raise ConfigError(f"unknown predictive {predictive!r}; allowed: {', '.join(PREDICTIVES)}")
    if num_samples < 1:
        raise ConfigError(f"--num-samples {num_samples} must be >= 1")


def fit(
    map_run: str | os.PathLike,
    run_dir: str | os.PathLike | None = None,
    *,
    structure: str = "diag",
    prior_precision: float | str | None = None,
    predictive: str = "mc",
    num_samples: int = 30,
    chunk_size: int = 1000,
    member: int = 0,
    seed: int = 0,
    dataset: str | None = None,
    model: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> LaplaceResult:
    """Laplace approximation around the MAP of ``map_run``, stored in ``run_dir`` if given.

    Args:
        map_run: a finished ``bnnkit sgd`` (or ``ensemble``) run directory.
        run_dir: where to store the result; ``None`` to only return it.
        structure: ``"diag"``, ``"last_layer"`` or ``"kfac"``.
        prior_precision: ``None`` (the prior's own curvature), a number α (isotropic Gaussian),
            or ``"auto"`` (α maximising the Laplace marginal likelihood).
        predictive: what ``bnnkit evaluate`` uses: ``"mc"`` (BMA over ``num_samples`` draws of
            the network) or ``"glm"`` (linearised predictive).
        num_samples: draws for the Monte Carlo predictive and diagnostics.
        chunk_size: training examples per step of the curvature pass.
        member: which ensemble member's parameters are θ*.
        seed: seed of the evaluation draws.
        dataset, model: if given, must match the MAP run's.
        resume: a finished run is left as it is (its settings must match).
        overwrite: replace what ``run_dir`` holds.
        progress: show a progress bar.

    Raises:
        ConfigError: any bad input, named in the message.
    """
    _check(structure, predictive, num_samples)
    prior_precision = laplace_posterior.check_prior_precision(prior_precision)
    if chunk_size < 1:
        raise ConfigError(f"--chunk-size {chunk_size} must be >= 1")
    config = _config(structure, prior_precision, predictive, num_samples, chunk_size, seed,
                     map_run, member)
    map_record, problem, params = read_map_run(map_run, member=member, dataset=dataset,
                                               model=model)
    # Refuse a structure the network does not support before anything is written.
    method = laplace_method.build(problem.log_posterior, structure, prior_precision,
                                  model=problem.config.model)
    jax.eval_shape(method.init, jax.random.PRNGKey(0), params,
                   problem.batch(problem.dataset.x_train[:1], problem.dataset.y_train[:1]))
    rundir = None
    if run_dir is not None:
        rundir = io.RunDir(run_dir)
        if resume:
            rundir.prepare(resume=True, overwrite=False)
            stored = io.read_json(rundir.run_file)
            _check_resume(stored, config)
            if stored.get("status") == "finished":
                posterior = laplace_posterior.load_posterior(stored, problem, rundir)
                return LaplaceResult(posterior, problem, stored, 0.0, rundir)
        else:
            rundir.prepare(resume=False, overwrite=overwrite)
    record = {
        "method": "laplace", "posterior": "laplace", "problem": map_record["problem"],
        **config, "map_method": map_record.get("method"),
        "dataset": {"name": problem.dataset.name, "task": problem.dataset.task,
                    "num_train": problem.dataset.num_train,
                    "num_test": len(problem.dataset.x_test)},
        "versions": io.versions(), "git": io.git_hash(), "started": io.now(),
    }

    def report(message: str) -> None:
        print(f"bnnkit: warning: {message}", file=sys.stderr)

    if rundir is None:
        t0 = time.perf_counter()
        posterior = approximate(problem, params, structure=structure,
                                prior_precision=prior_precision, chunk_size=chunk_size,
                                progress=progress, on_warning=report)
        record.update(laplace=posterior.info, status="finished")
        return LaplaceResult(posterior, problem, record, time.perf_counter() - t0, None)
    with rundir.lock():
        arrays_file = rundir.path / laplace_posterior.ARRAYS_FILE
        arrays_file.unlink(missing_ok=True)
        record["status"] = "running"
        io.write_json(rundir.run_file, record)
        t0 = time.perf_counter()
        posterior = approximate(problem, params, structure=structure,
                                prior_precision=prior_precision, chunk_size=chunk_size,
                                progress=progress, on_warning=report)
        seconds = time.perf_counter() - t0
        laplace_posterior.save(posterior, arrays_file)
        record.update(laplace=posterior.info, seconds=seconds, status="finished",
                      finished=io.now())
        io.write_json(rundir.run_file, record)
    return LaplaceResult(posterior, problem, record, seconds, rundir)


def _check_resume(stored: dict, config: dict) -> None:
    if stored.get("method") != "laplace":
        raise ConfigError(f"cannot resume a {stored.get('method')!r} run as 'laplace'")
    for key, value in config.items():
        if stored.get(key) != value:
            raise ConfigError(f"--resume with a different config: {key} was "
                              f"{stored.get(key)!r} in the stored run but is {value!r} now")
