"""The verdict of a run of chains (:mod:`bnnkit.metrics.levels`), from its stored pieces.

One place turns a run's stored pieces into the levels' :class:`~bnnkit.metrics.levels.
Evidence`, for ``bnnkit evaluate`` (:func:`bnnkit.evaluation.evaluate`) and for a run that
extends itself until its verdict reaches a level (:mod:`bnnkit.runs.extension`):

- the sampler's statistics after burn-in (:func:`sampler_statistics`): mean acceptance,
  divergences, last step sizes and leapfrog steps, seconds per iteration;
- its kept log lines (:func:`kept_lines`), which level 0 judges;
- the log posterior of each kept iteration, per chain (:func:`log_posterior_trace`), for
  full-batch samplers, whose log posterior is exact (the minibatch methods' is a noisy
  estimate under a step-size schedule, so its trend is no signal);
- the per-draw predictions on the test inputs and their log predictive density at the targets
  (:func:`bnnkit.predict.draw_log_density`);
- the predictive of the run's own deep ensemble (:func:`own_ensemble`), which level 2 judges
  the halves' distance against.

Example:
    >>> log = [{"burn_in": True, "acceptance_rate": [0.5], "divergent": [True]},
    ...        {"burn_in": False, "acceptance_rate": [0.9], "divergent": [False],
    ...         "step_size": [0.1], "num_leapfrog": [10], "seconds": 0.5}]
    >>> sampler_statistics(log)["acceptance_rate"], sampler_statistics(log)["num_divergent"]
    (0.9, 0)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bnnkit import problem as problem_lib
from bnnkit import storage
from bnnkit.command_flags import speaks_command_line, spelling
from bnnkit.errors import ConfigError
from bnnkit.metrics import levels
from bnnkit.models import imported
from bnnkit.predict import Prediction, draw_log_density, posterior_predictive
from bnnkit.runs import step_check
from bnnkit.runs.directory import RunDir, composite_record, composite_stages
from bnnkit.runs.keys import evaluation_key
from bnnkit.runs.sources import split_source
from bnnkit.runs.stored import load_run, stored_posterior


def kept_lines(log: list[dict]) -> list[dict]:
    """The log lines of the iterations after burn-in."""
    return [line for line in log if not line.get("burn_in", False)]


def sampler_statistics(log: list[dict]) -> dict[str, Any] | None:
    """A Markov chain sampler's statistics after burn-in (``None`` for a method that logs no
    acceptance rate)."""
    kept = kept_lines(log)
    if not kept or "acceptance_rate" not in kept[0]:
        return None
    return {
        "acceptance_rate": float(np.mean([r["acceptance_rate"] for r in kept])),
        "num_divergent": int(sum(sum(r["divergent"]) for r in kept)),
        # Logs written before samplers reported capped trajectories count none.
        "num_capped": int(sum(sum(r.get("capped", ())) for r in kept)),
        "num_transitions": int(sum(len(r["acceptance_rate"]) for r in kept)),
        "step_size": [float(s) for s in kept[-1]["step_size"]],
        "num_leapfrog": [int(n) for n in kept[-1]["num_leapfrog"]],
        "seconds_per_iteration": float(np.mean([r["seconds"] for r in kept])),
    }


def log_posterior_trace(log: list[dict]) -> np.ndarray | None:
    """The log posterior of each kept iteration of a full-batch sampler, (chains, iterations)
    (``None`` for other methods)."""
    kept = kept_lines(log)
    if not kept or "acceptance_rate" not in kept[0] or "log_posterior" not in kept[0]:
        return None
    return np.asarray([r["log_posterior"] for r in kept], np.float64).T


def _seed(record: dict) -> int:
    return int(record.get("method_config", {}).get("seed", record.get("seed", 0)))


def run_command(run_dir: RunDir, record: dict) -> str | None:
    """The ``bnnkit`` command that made a stored run: a composite's kind for a stage of a
    composite run (``reference`` for a reference's chains), else the run's method (``None``
    when it records none)."""
    path = run_dir.path
    parent = composite_record(path.parent)
    if parent is not None:
        made = storage.read_json(parent)
        if path.name in composite_stages(made):
            return made["kind"]
    return record.get("method")


def run_spelling(run_dir: RunDir, record: dict) -> Callable[[str], str | None]:
    """How the sampler's warnings name a stored run's settings: on the command line as the
    flags of the command that made it (:func:`run_command`), from Python as the settings the
    call that made it takes (:func:`python_spelling`), so that every suggestion is one that
    interface takes."""
    if speaks_command_line():
        return spelling(run_command(run_dir, record))
    return python_spelling(run_dir, record)


def python_spelling(run_dir: RunDir, record: dict) -> Callable[[str], str | None]:
    """How a caller in Python names a stored run's settings: the fields of the Config that
    made it (of a composite's own settings for one of its stages, as ``reference``'s
    ``members``) and of its problem; ``None`` for a setting that call does not take."""
    parent = composite_record(run_dir.path.parent)
    made = storage.read_json(parent) if parent is not None else None
    if made is not None and run_dir.path.name in composite_stages(made):
        settings = made.get("config") or {}
    else:
        settings = record.get("method_config") or {}
    names = set(settings) | set(record.get("problem") or {})
    return lambda setting: setting if setting in names else None


def own_ensemble(
    run_dir: RunDir, record: dict, problem: problem_lib.Problem, x: np.ndarray, trust_model=None
) -> tuple[Prediction | None, str | None]:
    """The predictive of a run's own deep ensemble at ``x``, and where it is: the run its
    chains started from (``init_checkpoint``; a reference's ``ensemble/`` stage, looked for
    beside its chains first, so that a moved reference finds its own) when that is an ensemble
    that can be read; ``(None, None)`` otherwise. Read on ``problem`` where it is the
    ensemble's (a reference's is; no data loaded again), else rebuilt (``trust_model``: the
    model import path the user allowed)."""
    source = (record.get("method_config") or {}).get("init_checkpoint")
    if not source:
        return None, None
    path = Path(split_source(source)[0])
    chains = run_dir.path
    beside = chains.parent / path.name
    for candidate in (beside, path) if composite_record(chains.parent) else (path,):
        if not RunDir(candidate).run_file.is_file():
            continue
        try:
            if RunDir(candidate).read_record().get("method") != "ensemble":
                return None, None
        except ConfigError:
            return None, None
        with imported.trusting_model(trust_model):
            for built in (problem, None):
                try:
                    stored, rebuilt, posterior, _ = load_run(candidate, network=True, problem=built)
                except ConfigError:
                    continue
                key = evaluation_key(_seed(stored))
                return posterior_predictive(rebuilt, posterior, x, key), str(candidate)
        return None, None
    return None, None


def evidence(
    run_dir: RunDir,
    record: dict,
    log: list[dict],
    prediction: Prediction,
    problem: problem_lib.Problem,
    inputs: tuple[np.ndarray, np.ndarray],
    trust_model: str | None = None,
) -> levels.Evidence:
    """What the levels judge a stored run by: its predictive ``prediction`` at the test
    inputs and targets ``inputs`` (x, y in original units)."""
    x, y = inputs
    ensemble, where = own_ensemble(run_dir, record, problem, x, trust_model)
    return levels.Evidence(
        prediction,
        y,
        draw_log_density(prediction, y),
        kept=kept_lines(log),
        method=record.get("method"),
        method_config=record.get("method_config") or {},
        log_posterior=log_posterior_trace(log),
        ensemble=ensemble,
        ensemble_run=where,
    )


def judged(
    found_evidence: levels.Evidence,
    run_dir: RunDir,
    record: dict,
    problem: problem_lib.Problem,
    x: np.ndarray,
) -> levels.Verdict:
    """The levels' verdict on a stored run's :func:`evidence` (its test inputs ``x``); for
    unadjusted MCLMC, where the step's bias decides it (:func:`bnnkit.runs.step_check.
    decides`), judged again with its chains continued at half their step, level 0 measured
    rather than counted."""
    found = levels.judge(found_evidence)
    if not (step_check.applies(record) and step_check.decides(found)):
        return found
    half = step_check.continuation(run_dir, record, problem, x)
    if half is None:
        return found
    return levels.judge(dataclasses.replace(found_evidence, half_step=half))


def of_stored_run(run_dir: RunDir, built: problem_lib.Problem) -> tuple[levels.Verdict, float]:
    """The verdict of a run of the driver on its test set, as ``bnnkit evaluate`` gives it,
    and the seconds it took (reading the samples, predicting, judging)."""
    start = time.perf_counter()
    record = run_dir.read_record()
    template = jax.eval_shape(built.init_params, jax.random.PRNGKey(0))
    posterior = stored_posterior(run_dir, record, template)
    key = evaluation_key(_seed(record))
    prediction = posterior_predictive(built, posterior, built.dataset.x_test, key)
    test = (built.dataset.x_test, built.dataset.y_test_original)
    found_evidence = evidence(run_dir, record, run_dir.read_log(), prediction, built, test)
    found = judged(found_evidence, run_dir, record, built, test[0])
    return found, time.perf_counter() - start
