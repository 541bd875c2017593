"""Recompute predictions, metrics and diagnostics from a stored run directory.

``evaluate(run_dir)`` rebuilds the problem from ``run.json``, reads the kept samples, forms the
BMA predictive on the test set and returns (and stores as ``evaluation.json`` plus
``predictions/test.npz``):

- classification: accuracy, NLL, ECE; regression: RMSE and NLL in original units;
- split R-hat and ESS across chains, over all weights and over test-set predictions
  (function space), summarised by median / 90th percentile / max (min for ESS);
- with ``reference=`` another run on the same data (e.g. HMC): agreement and total variation of
  the two BMA predictives (classification), and the RMSE between their predictive means
  (regression);
- with ``corruption=`` and ``severity=``: all of the above on the test images under a
  CIFAR-10-C-style corruption (covariate shift), stored as ``evaluation_<name>_<severity>.json``.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from bnnkit import io
from bnnkit import problem as problem_lib
from bnnkit.errors import ConfigError
from bnnkit.metrics import diagnostics, predictive
from bnnkit.posterior import Samples
from bnnkit.predict import Prediction, predict


def load_run(run_dir: str | os.PathLike) -> tuple[dict, problem_lib.Problem, Samples]:
    """The run record, the rebuilt problem and the kept samples of a run directory.

    Raises:
        ConfigError: not a run directory, or no kept samples yet.

    Example:
        >>> record, problem, samples = load_run("runs/demo_yacht_0")  # doctest: +SKIP
        >>> samples.num_chains, samples.num_samples  # doctest: +SKIP
    """
    rundir = io.RunDir(run_dir)
    if not rundir.run_file.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a bnnkit run directory (no run.json)")
    record = io.read_json(rundir.run_file)
    problem = problem_lib.build(problem_lib.ProblemConfig.from_dict(record["problem"]))
    kind = record.get("posterior", "samples")
    if kind != "samples":
        # Approximate posteriors (VI, Laplace) store their own parameters; they are evaluated
        # through samples drawn from them with the run's fixed evaluation key.
        from bnnkit.posterior import loaders

        return record, problem, loaders.load(kind, record, problem, rundir)
    iterations = rundir.sample_iterations()
    if not iterations:
        raise ConfigError(f"run {str(run_dir)!r} has no kept samples yet")
    template = problem.init_params(jax.random.PRNGKey(0))
    draws = [
        io.unflatten_tree(template, io.load_arrays(rundir.sample_file(it))) for it in iterations
    ]
    # Each file holds every chain at one iteration: stack to (chains, samples, ...).
    params = jax.tree.map(lambda *leaves: np.stack(leaves, axis=1), *draws)
    return record, problem, Samples(params)


def run_prediction(record: dict, problem: problem_lib.Problem, samples: Samples,
                   run_dir: str | os.PathLike, x: np.ndarray) -> Prediction:
    """The run's predictive at ``x``: the BMA over its samples, or its linearised (GLM)
    predictive for a Laplace run stored with ``"predictive": "glm"``."""
    if record.get("predictive") == "glm":
        from bnnkit.posterior import laplace

        return laplace.glm_prediction(record, problem, io.RunDir(run_dir), x)
    return predict(problem, samples, x)


def _weight_diagnostics(samples: Samples) -> dict[str, Any]:
    leaves = [np.asarray(leaf).reshape((*leaf.shape[:2], -1))
              for leaf in jax.tree.leaves(samples.params)]
    draws = np.concatenate(leaves, axis=-1)
    return {"rhat": diagnostics.summarize(diagnostics.split_rhat(draws)),
            "ess": diagnostics.summarize(diagnostics.ess(draws))}


def _function_diagnostics(prediction: Prediction) -> dict[str, Any]:
    draws = prediction.per_sample.reshape((*prediction.per_sample.shape[:2], -1))
    return {"rhat": diagnostics.summarize(diagnostics.split_rhat(draws)),
            "ess": diagnostics.summarize(diagnostics.ess(draws))}


def metrics_for(prediction: Prediction, targets: np.ndarray) -> dict[str, float]:
    """Predictive metrics of a BMA prediction against targets in original units."""
    if prediction.task == "classification":
        return {
            "accuracy": predictive.accuracy(prediction.probs, targets),
            "nll": predictive.nll_categorical(prediction.probs, targets),
            "ece": predictive.ece(prediction.probs, targets),
        }
    return {
        "rmse": predictive.rmse(prediction.mean, targets),
        "nll": predictive.nll_gaussian_mixture(prediction.means, prediction.stds, targets),
    }


def compare(prediction: Prediction, reference: Prediction) -> dict[str, float]:
    """How close a predictive is to a reference one (e.g. HMC's)."""
    if prediction.task != reference.task:
        raise ConfigError("the reference run is for another task")
    if prediction.task == "classification":
        if prediction.probs.shape != reference.probs.shape:
            raise ConfigError(
                f"reference predictions have shape {reference.probs.shape}, expected "
                f"{prediction.probs.shape}: the runs use different test sets"
            )
        return {"agreement": predictive.agreement(prediction.probs, reference.probs),
                "total_variation": predictive.total_variation(prediction.probs, reference.probs)}
    if prediction.mean.shape != reference.mean.shape:
        raise ConfigError("the reference run uses a different test set")
    return {"rmse_to_reference_mean": predictive.rmse(prediction.mean, reference.mean)}


def corrupted_inputs(dataset, corruption: str, severity: int, seed: int = 0) -> np.ndarray:
    """The test images of ``dataset`` under one corruption at one severity (1-5).

    Raises:
        ConfigError: the dataset's inputs are not uint8 images, or an unknown corruption or
            severity.
    """
    from bnnkit.data import corruptions

    x = np.asarray(dataset.x_test)
    if x.dtype != np.uint8 or x.ndim != 4:
        raise ConfigError(
            f"--corruption applies to image datasets; {dataset.name!r} has test inputs of shape "
            f"{x.shape} and dtype {x.dtype}"
        )
    if corruption not in corruptions.CORRUPTIONS:
        raise ConfigError(f"unknown corruption {corruption!r}; allowed: "
                          f"{', '.join(corruptions.CORRUPTIONS)}")
    if severity not in corruptions.SEVERITIES:
        raise ConfigError(f"severity {severity} out of range: allowed 1..5")
    return corruptions.corrupt(x, corruption, severity, seed=seed)


def evaluate(
    run_dir: str | os.PathLike,
    *,
    reference: str | os.PathLike | None = None,
    corruption: str | None = None,
    severity: int | None = None,
    write: bool = True,
) -> dict[str, Any]:
    """Metrics and diagnostics of a stored run, optionally against a reference run.

    Returns:
        A JSON-serialisable dict: ``test`` metrics, ``diagnostics`` (weights / function space,
        when every chain has at least 4 samples), ``sampler`` statistics from the log, and
        ``reference`` comparison if asked.

    Example:
        >>> result = evaluate("runs/demo_yacht_0")  # doctest: +SKIP
        >>> result["test"]["rmse"]  # doctest: +SKIP
    """
    if (corruption is None) != (severity is None):
        raise ConfigError("--corruption and --severity go together")
    record, problem, samples = load_run(run_dir)
    x_test = problem.dataset.x_test
    if corruption is not None:
        x_test = corrupted_inputs(problem.dataset, corruption, severity)
    prediction = run_prediction(record, problem, samples, run_dir, x_test)
    result: dict[str, Any] = {
        "run": str(run_dir),
        "dataset": problem.dataset.name,
        "model": problem.config.model,
        "num_chains": samples.num_chains,
        "num_samples_per_chain": samples.num_samples,
        "test": metrics_for(prediction, problem.dataset.y_test_original),
    }
    if corruption is not None:
        result["corruption"] = {"name": corruption, "severity": severity}
    log = io.RunDir(run_dir).read_log()
    kept = [r for r in log if not r.get("burn_in", False)]
    if kept and "acceptance_rate" in kept[0]:
        result["sampler"] = {
            "acceptance_rate": float(np.mean([r["acceptance_rate"] for r in kept])),
            "num_divergent": int(sum(sum(r["divergent"]) for r in kept)),
            "step_size": [float(s) for s in kept[-1]["step_size"]],
            "num_leapfrog": [int(n) for n in kept[-1]["num_leapfrog"]],
            "seconds_per_iteration": float(np.mean([r["seconds"] for r in kept])),
        }
    elif log and "epoch" in log[-1]:
        result["training"] = {
            "method": record.get("method"),
            "epochs": int(log[-1]["epoch"]),
            "seconds_per_epoch": float(np.mean([r["seconds"] for r in log])),
        }
    if samples.num_samples >= 4:
        result["diagnostics"] = {
            "weights": _weight_diagnostics(samples),
            "function": _function_diagnostics(prediction),
        }
    if reference is not None:
        ref_record, ref_problem, ref_samples = load_run(reference)
        if ref_problem.dataset.name != problem.dataset.name:
            raise ConfigError(
                f"reference run {str(reference)!r} is on {ref_problem.dataset.name!r}, not "
                f"{problem.dataset.name!r}"
            )
        ref_prediction = run_prediction(ref_record, ref_problem, ref_samples, reference, x_test)
        result["reference"] = {"run": str(reference), **compare(prediction, ref_prediction)}
    if write:
        rundir = io.RunDir(run_dir)
        suffix = "" if corruption is None else f"_{corruption}_{severity}"
        io.write_json(rundir.path / f"evaluation{suffix}.json", result)
        (rundir.path / "predictions").mkdir(exist_ok=True)
        arrays = ({"probs": prediction.probs} if prediction.task == "classification"
                  else {"means": prediction.means, "stds": prediction.stds})
        io.save_arrays(rundir.path / "predictions" / f"test{suffix}.npz", arrays)
    return result


def export_samples(run_dir: str | os.PathLike, out: str | os.PathLike) -> dict[str, tuple]:
    """Write the kept samples as plain arrays keyed by parameter path, (chains, samples, ...).

    The file is a pickle-free ``.npz`` that ArviZ or any NumPy user can read:
    ``np.load(out)["params/Dense_0/kernel"]``.

    Returns:
        The shape of every exported array, by key.
    """
    _, _, samples = load_run(run_dir)
    arrays = io.flatten_tree(samples.params)
    out = os.fspath(out)
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ConfigError(f"output folder {parent!r} does not exist")
    io.save_arrays(out, arrays)
    return {k: v.shape for k, v in arrays.items()}
