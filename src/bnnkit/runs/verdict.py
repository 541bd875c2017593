"""The convergence verdict of a run of the driver, from its log and its predictions.

One place turns a run's stored pieces into the arguments of
:func:`bnnkit.metrics.convergence.verdict`, for ``bnnkit evaluate``
(:func:`bnnkit.evaluation.evaluate`) and for a run that extends itself until each chain mixes
(:mod:`bnnkit.runs.extension`):

- the sampler's statistics after burn-in (:func:`sampler_statistics`): mean acceptance,
  divergences, last step sizes and leapfrog steps, seconds per iteration;
- the log posterior of each kept iteration, per chain (:func:`log_posterior_trace`), for
  full-batch samplers, whose log posterior is exact (the minibatch methods' is a noisy
  estimate under a step-size schedule, so its trend is no signal);
- the per-draw predictions on the test inputs and their log predictive density at the targets
  (:func:`bnnkit.predict.draw_log_density`), for the checks in function space and each chain's
  running log predictive density.

Example:
    >>> log = [{"burn_in": True, "acceptance_rate": [0.5], "divergent": [True]},
    ...        {"burn_in": False, "acceptance_rate": [0.9], "divergent": [False],
    ...         "step_size": [0.1], "num_leapfrog": [10], "seconds": 0.5}]
    >>> sampler_statistics(log)["acceptance_rate"], sampler_statistics(log)["num_divergent"]
    (0.9, 0)
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

from bnnkit import problem as problem_lib
from bnnkit.metrics import convergence
from bnnkit.metrics.vocabulary import FUNCTION_CLI, Vocabulary, cli_vocabulary
from bnnkit.predict import Prediction, draw_log_density, posterior_predictive
from bnnkit.runs.directory import RunDir
from bnnkit.runs.lifecycle import evaluation_key
from bnnkit.runs.stored import stored_posterior


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


def run_command(run_dir: RunDir, record: dict) -> str | None:
    """The ``bnnkit`` command that made a stored run: ``reference`` for a reference folder's
    chains, else the run's method (``None`` when it records none)."""
    from bnnkit.runs.directory import REFERENCE_CHAINS, REFERENCE_FILE

    path = run_dir.path
    if path.name == REFERENCE_CHAINS and (path.parent / REFERENCE_FILE).is_file():
        return "reference"
    return record.get("method")


def run_vocabulary(run_dir: RunDir, record: dict) -> Vocabulary:
    """The verdict's words for a stored run: the flags of the command that made it, so that
    every suggestion is one that command takes. A reference folder's chains were made by
    ``bnnkit reference`` (its budget is ``--num-samples``, its chains start from its ensemble);
    any other run by its method's command.
    """
    command = run_command(run_dir, record)
    started = command == "reference" or bool(
        (record.get("method_config") or {}).get("init_checkpoint")
    )
    return cli_vocabulary(command, from_ensemble=started)


def of_prediction(
    record: dict,
    log: list[dict],
    prediction: Prediction,
    y: np.ndarray,
    *,
    vocabulary: Vocabulary = FUNCTION_CLI,
) -> dict[str, Any]:
    """The verdict of a run's Markov chains from its predictive on test inputs.

    Args:
        record: the run's ``run.json``.
        log: its log lines (:meth:`bnnkit.runs.RunDir.read_log`).
        prediction: its model average at the test inputs (at least 4 draws per chain).
        y: the targets (original units) or labels of those inputs.
        vocabulary: the words of the verdict.
    """
    sampler = sampler_statistics(log) or {}
    steps = sampler.get("step_size")
    return convergence.verdict(
        prediction.per_sample,
        acceptance_rate=sampler.get("acceptance_rate"),
        num_divergent=sampler.get("num_divergent"),
        finished=record.get("status") == "finished",
        log_posterior=log_posterior_trace(log),
        log_density=draw_log_density(prediction, y),
        vocabulary=vocabulary,
        method=record.get("method"),
        # A stuck sampler's advice follows the step size it ran at against the given one.
        step_size=float(np.mean(steps)) if steps else None,
        given_step_size=(record.get("method_config") or {}).get("step_size"),
        burn_in=(record.get("loop") or {}).get("burn_in"),
    )


def within_holds(verdict: dict[str, Any]) -> bool:
    """Whether every chain mixed on its own (the level is ``converged`` or
    ``mixed-multimodal``)."""
    return verdict["level"] != "not-mixed"


def of_stored_run(
    run_dir: RunDir, built: problem_lib.Problem, *, vocabulary: Vocabulary | None = None
) -> tuple[dict[str, Any], float]:
    """The verdict of a run of the driver on its test set, as ``bnnkit evaluate`` gives it,
    and the seconds it took (reading the samples, predicting, judging).

    Args:
        run_dir: the run directory.
        built: its problem, built.
        vocabulary: the words of the verdict (default: the flags of the command that made the
            run, :func:`run_vocabulary`).
    """
    start = time.perf_counter()
    record = run_dir.read_record()
    if vocabulary is None:
        vocabulary = run_vocabulary(run_dir, record)
    template = jax.eval_shape(built.init_params, jax.random.PRNGKey(0))
    posterior = stored_posterior(run_dir, record, template)
    seed = int(record.get("method_config", {}).get("seed", record.get("seed", 0)))
    prediction = posterior_predictive(built, posterior, built.dataset.x_test, evaluation_key(seed))
    result = of_prediction(
        record, run_dir.read_log(), prediction, built.dataset.y_test_original, vocabulary=vocabulary
    )
    return result, time.perf_counter() - start
