"""Recompute predictions, metrics and diagnostics from a stored run directory.

``evaluate(run_dir)`` reads the run back (:func:`bnnkit.runs.load_run`: ``run.json``, the
rebuilt problem and the posterior of every kept unit), forms its predictive on the test set
and returns (and stores as ``evaluation.json`` plus ``predictions/test.npz``):

- classification: accuracy, NLL, ECE, and the reliability diagram's bins of the model average
  (:func:`bnnkit.metrics.predictive.calibration_bins`); regression: RMSE and NLL in original
  units;
- split R-hat and ESS across chains, over all weights and over test-set predictions
  (function space), summarised by median / 90th percentile / max (min for ESS);
- with ``reference=`` another run on the same data (e.g. HMC): agreement and total variation of
  the two predictives (classification), and the RMSE between their predictive means and the
  mean over test points of the Wasserstein-1 distance between their predictive draws
  (regression: the approximate-inference competition's "W2", which scipy's
  ``wasserstein_distance`` computes as W₁; :mod:`bnnkit.metrics.predictive`);
- with ``reference_probs=`` a released table of reference probabilities (``"cifar10_hmc"``,
  ``"imdb_hmc"`` or a file, :mod:`bnnkit.data.reference_probs`): the competition's agreement and
  total variation against it (classification);
- with ``corruption=`` and ``severity=``: all of the above on the test images under a
  CIFAR-10-C-style corruption (covariate shift), stored as ``evaluation_<name>_<severity>.json``;
- with ``calibrate=True``: temperature scaling of the predictive
  (:mod:`bnnkit.metrics.recalibration`) fitted on the run's validation set and the test
  metrics after it; with ``conformal=α``: split conformal prediction sets or intervals
  (:mod:`bnnkit.metrics.conformal`) calibrated on that set, with their test coverage and mean
  size or width. The validation set is the last ``--validation-size`` examples of the training
  set (before ``--subset-train-to``), held out when the run was made: its size is in the run's
  ``run.json`` and the same examples are carved again here, so the split is reproducible;
- with ``ood=`` another dataset: how well predictive entropy and mutual information tell its
  test inputs from this dataset's (AUROC, FPR at 95 % TPR; :mod:`bnnkit.metrics.ood`), the
  scores stored in ``predictions/ood_<dataset>.npz`` for the report's histograms.

Approximate posteriors (VI, Laplace) are evaluated through draws taken with the run's fixed
evaluation key (:func:`bnnkit.runs.evaluation_key`), so repeated evaluations agree.
"""

from __future__ import annotations

import os
import re
from typing import Any

import jax
import numpy as np

from bnnkit import posthoc, storage
from bnnkit import problem as problem_lib
from bnnkit.entry_points import check_call
from bnnkit.errors import ConfigError
from bnnkit.metrics import baseline, convergence, diagnostics, predictive
from bnnkit.metrics.predictive import (
    agreement,
    metrics_for,
    predictive_wasserstein_1,
    rmse,
    total_variation,
)
from bnnkit.models import imported
from bnnkit.posterior import Samples
from bnnkit.predict import Prediction, posterior_predictive
from bnnkit.priors import prior_check
from bnnkit.runs import RunDir, evaluation_key
from bnnkit.runs import verdict as run_verdict
from bnnkit.runs.directory import PREDICTIONS_DIR, check_outside_runs
from bnnkit.runs.stored import kept_samples, load_run


def _seed(record: dict) -> int:
    return int(record.get("method_config", {}).get("seed", record.get("seed", 0)))


def check_reference(
    reference: str | os.PathLike, dataset: str, *, flag: str = "--reference"
) -> None:
    """Refuse, before anything runs, a reference that is no run, an unreadable one, or one on
    another dataset (its test set would not be this run's).

    Raises:
        ConfigError: naming the flag, the reference and what is allowed.
    """
    path = os.fspath(reference)
    if not os.path.isdir(path):
        raise ConfigError(
            f"{flag} {path!r} does not exist; allowed: a run directory on dataset {dataset!r}"
        )
    rundir = RunDir(path)
    record = rundir.read_record()
    theirs = (record.get("problem") or {}).get("dataset")
    if theirs != dataset:
        raise ConfigError(
            f"{flag} {path!r} is a run on dataset {theirs!r}; allowed: a run on dataset {dataset!r}"
        )
    try:
        samples = kept_samples(rundir, record)
    except ConfigError as err:
        raise ConfigError(f"{flag}: {err}") from None
    if not samples:
        raise ConfigError(f"{flag} {path!r} has no kept samples yet; allowed: a run with samples")


def check_writable_folder(path: str | os.PathLike, what: str) -> None:
    """Refuse a folder that this user cannot write into, before the work that writes there.

    Raises:
        ConfigError: naming the folder.
    """
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot write the {what} into {os.fspath(path)!r}: this user may not write there"
        )


def check_out_file(out: str | os.PathLike, suffix: str, what: str) -> None:
    """Refuse an ``--out`` that cannot become a new file, before any work that writes it.

    Args:
        out: the path given to ``--out``.
        suffix: the file ending named as allowed (``".npz"``, ``".nc"``).
        what: what is written, for the message (``"samples"``).

    Raises:
        ConfigError: an empty path, a directory, a missing or unwritable output folder, a path
            inside a run directory, or a symbolic link.
    """
    out = os.fspath(out)
    if not out.strip():
        raise ConfigError(f"--out '' names no file; allowed: a path ending in {suffix}")
    if os.path.isdir(out):
        raise ConfigError(f"--out {out!r} is a directory; allowed: a file path ending in {suffix}")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ConfigError(f"--out {out!r}: output folder {parent!r} does not exist")
    check_outside_runs(out, "--out")
    storage.refuse_link(out)
    check_writable_folder(parent, what)


def run_samples(record: dict, posterior: Any) -> Samples:
    """The samples a run's model average runs over: its own, or draws of its approximation
    with the run's evaluation key."""
    return posterior.draws(evaluation_key(_seed(record)))


def run_prediction(
    record: dict, problem: problem_lib.Problem, posterior: Any, x: np.ndarray
) -> Prediction:
    """The run's predictive at ``x`` (see :func:`bnnkit.predict.posterior_predictive`)."""
    return posterior_predictive(problem, posterior, x, evaluation_key(_seed(record)))


def weight_draws(samples: Samples) -> np.ndarray:
    """Every parameter of every sample as one array (chains, samples, parameters), the leaves
    in tree order: the weight space the diagnostics run over."""
    leaves = [
        np.asarray(leaf).reshape((*leaf.shape[:2], -1)) for leaf in jax.tree.leaves(samples.params)
    ]
    return np.concatenate(leaves, axis=-1)


def _weight_diagnostics(samples: Samples) -> dict[str, Any]:
    draws = weight_draws(samples)
    return {
        "rhat": diagnostics.summarize(diagnostics.split_rhat(draws)),
        "ess": diagnostics.summarize(diagnostics.ess(draws)),
    }


def _function_diagnostics(prediction: Prediction) -> dict[str, Any]:
    draws = prediction.per_sample.reshape((*prediction.per_sample.shape[:2], -1))
    return {
        "rhat": diagnostics.summarize(diagnostics.split_rhat(draws)),
        "ess": diagnostics.summarize(diagnostics.ess(draws)),
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
        return compare_probs(prediction.probs, reference.probs)
    if prediction.mean.shape != reference.mean.shape:
        raise ConfigError("the reference run uses a different test set")
    return {
        "rmse_to_reference_mean": rmse(prediction.mean, reference.mean),
        "wasserstein_1": predictive_wasserstein_1(prediction, reference),
    }


def check_reference_probs(probs: np.ndarray, dataset, source: str) -> None:
    """Refuse a reference table that does not have one row per test point and one column per
    class of ``dataset``.

    Raises:
        ConfigError: one line naming both shapes.
    """
    if dataset.task != "classification":
        raise ConfigError(
            f"--reference-probs applies to classification runs; {dataset.name!r} "
            f"is a {dataset.task} dataset"
        )
    expected = (int(np.shape(dataset.y_test)[0]), int(dataset.num_classes))
    if tuple(probs.shape) != expected:
        raise ConfigError(
            f"--reference-probs {source} has shape {probs.shape[0]} x {probs.shape[1]} but the "
            f"test set of {dataset.name!r} is {expected[0]} x {expected[1]} (test points x "
            "classes); allowed: a reference for this test set"
        )


def compare_probs(probs: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """The NeurIPS 2021 BDL competition's scores of ``probs`` against ``reference`` (N, C).

    ``agreement = mean_i [argmax_k p_ik = argmax_k q_ik]`` and
    ``total_variation = mean_i ½ Σ_k |p_ik − q_ik|``.

    Example:
        >>> p = np.array([[0.9, 0.1], [0.4, 0.6]])
        >>> q = np.array([[0.7, 0.3], [0.8, 0.2]])
        >>> {k: round(v, 3) for k, v in compare_probs(p, q).items()}
        {'agreement': 0.5, 'total_variation': 0.3}
    """
    return {
        "agreement": agreement(probs, reference),
        "total_variation": total_variation(probs, reference),
    }


def check_images(dataset, flag: str = "--corruption") -> None:
    """Refuse a dataset whose test inputs are not uint8 images (N, H, W, C): corruptions apply
    to images only.

    Raises:
        ConfigError: one line naming ``flag``, the dataset and its inputs' shape and dtype.
    """
    x = dataset.x_test
    if np.dtype(x.dtype) != np.uint8 or np.ndim(x) != 4:
        raise ConfigError(
            f"{flag} applies to image datasets; {dataset.name!r} has test inputs of shape "
            f"{tuple(np.shape(x))} and dtype {np.dtype(x.dtype)}"
        )


def corrupted_inputs(
    dataset, corruption: str, severity: int, seed: int = 0, count: int | None = None
) -> np.ndarray:
    """The test images of ``dataset`` (its first ``count``, default all) under one corruption at
    one severity (1-5).

    Raises:
        ConfigError: the dataset's inputs are not uint8 images, or an unknown corruption or
            severity.
    """
    from bnnkit.data import corruptions

    check_images(dataset)
    x = np.asarray(dataset.x_test)[:count]
    if corruption not in corruptions.CORRUPTIONS:
        raise ConfigError(
            f"unknown corruption {corruption!r}; allowed: {', '.join(corruptions.CORRUPTIONS)}"
        )
    if severity not in corruptions.SEVERITIES:
        raise ConfigError(f"severity {severity} out of range: allowed 1..5")
    return corruptions.corrupt(x, corruption, severity, seed=seed)


def evaluate(
    run_dir: str | os.PathLike,
    *,
    reference: str | os.PathLike | None = None,
    reference_probs: str | os.PathLike | None = None,
    corruption: str | None = None,
    severity: int | None = None,
    calibrate: bool = False,
    conformal: float | None = None,
    ood: str | None = None,
    write: bool = True,
    problem: problem_lib.Problem | None = None,
    trust_model: str | None = None,
) -> dict[str, Any]:
    """Metrics and diagnostics of a stored run, optionally against a reference run.

    ``problem`` passes the run's problem back in, for a run made by
    :meth:`bnnkit.Problem.from_arrays` whose model cannot be rebuilt in this process (a class
    of ``__main__``, an ``apply`` function); it must be the run's (settings and arrays).
    Without it, every run is rebuilt from its directory.

    ``trust_model`` (``--model``) allows importing the model the run records when its module
    is outside bnnkit (``"mymod:Net"``), which reading a run never does unasked
    (:func:`bnnkit.runs.load_run`); the reference run may record the same model.

    Returns:
        A JSON-serialisable dict: ``test`` metrics, for classification ``calibration`` (the
        reliability diagram's bins of the test predictive, beside ``test`` so that every value
        there stays one number), ``diagnostics`` (weights / function space,
        when every chain has at least 4 samples), ``sampler`` statistics from the log,
        ``convergence`` (Markov chains with at least 4 samples each: a verdict in function
        space and what to do, see :mod:`bnnkit.metrics.convergence`) and ``reference``
        comparison if asked (its ``settings_differ`` names each posterior setting, such as
        ``--noise-std``, in which the reference run differs; a reference on other data is
        refused); ``reference_probs`` (agreement, total variation, and for a released reference
        the test-set order its rows follow) if asked; ``temperature_scaling`` (the fitted
        temperature or std stretch, the validation size and the test metrics after it),
        ``conformal`` (α, the score, the threshold, test coverage and mean set size or interval
        width) and ``ood`` (the other dataset, AUROC and FPR at 95 % TPR of the entropy and the
        mutual information) if asked; see :mod:`bnnkit.posthoc`. On the clean test set,
        ``baseline``: the test figures of the predictor that ignores the inputs (``constant``:
        the training mean and std, or the training class frequencies) and, for regression on
        real-valued inputs, of least squares (``least_squares``), with ``poor_fit``, the one
        warning line of a fit that is not clearly better, or ``None``
        (:mod:`bnnkit.metrics.baseline` states the rule). ``prior_check``: what the prior said
        against the data before the run (:mod:`bnnkit.priors.prior_check`), as the run
        recorded it, or ``None`` for a run made before runs recorded it.

    Example:
        >>> import tempfile
        >>> from bnnkit.inference import sgd
        >>> from bnnkit.runs.loop import run
        >>> run_dir = tempfile.mkdtemp() + "/run"
        >>> _ = run(problem_lib.ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35),
        ...         sgd.Config(init_step_size=1e-4, num_epochs=2, batch_size=64), run_dir,
        ...         progress=False)
        >>> result = evaluate(run_dir)  # also stored as RUN_DIR/evaluation.json
        >>> sorted(result["test"])  # in the units of the targets
        ['nll', 'rmse']
    """
    check_call("bnnkit.evaluate", locals())
    if (corruption is None) != (severity is None):
        raise ConfigError("--corruption and --severity go together")
    if reference_probs is not None and corruption is not None:
        raise ConfigError(
            "--reference-probs scores predictions on the clean test set; it does "
            "not go with --corruption"
        )
    if conformal is not None:
        posthoc.check_alpha(conformal)
    suffix = "" if corruption is None else f"_{corruption}_{severity}"
    if write and os.path.isdir(run_dir):
        _check_writes(RunDir(run_dir), suffix)
    ref_table = None
    if reference_probs is not None:
        # Read (and, for a released reference, download and verify) before the run is loaded.
        from bnnkit.data import reference_probs as reference_files

        ref_table, ref_info = reference_files.load(reference_probs)
    record, problem, posterior, _ = load_run(
        run_dir, network=True, problem=problem, trust_model=trust_model
    )
    if ref_table is not None:
        check_reference_probs(ref_table, problem.dataset, repr(os.fspath(reference_probs)))
    held_out = None
    if calibrate or conformal is not None:
        held_out = posthoc.validation_set(problem, "--calibrate" if calibrate else "--conformal")
    ood_x = None if ood is None else posthoc.ood_inputs(problem, ood)
    x_test = problem.dataset.x_test
    if corruption is not None:
        x_test = corrupted_inputs(problem.dataset, corruption, severity)
    if reference is not None:
        with imported.trusting_model(trust_model):
            ref_record, ref_problem, ref_posterior, _ = load_run(reference, network=True)
        if ref_problem.dataset.name != problem.dataset.name:
            raise ConfigError(
                f"reference run {str(reference)!r} is on {ref_problem.dataset.name!r}, not "
                f"{problem.dataset.name!r}"
            )
        other = f"reference {reference}"
        refused = problem_lib.differences(
            problem.config, ref_problem.config, problem_lib.DATA_SETTINGS, other
        )
        if refused:
            raise ConfigError(
                f"{refused[0]}: the runs predict on different data; allowed: a "
                "reference run on the same data"
            )
        # Another posterior (noise, prior, temperature, ...) can be compared with, but the
        # numbers then measure that difference too.
        ref_differs = problem_lib.differences(
            problem.config, ref_problem.config, problem_lib.POSTERIOR_SETTINGS, other
        )
    samples = run_samples(record, posterior)
    prediction = run_prediction(record, problem, posterior, x_test)
    result: dict[str, Any] = {
        "run": str(run_dir),
        "dataset": problem.dataset.name,
        "model": problem.config.model,
        "num_chains": samples.num_chains,
        "num_samples_per_chain": samples.num_samples,
        "num_test": len(problem.dataset.y_test_original),
        "test": metrics_for(prediction, problem.dataset.y_test_original),
        # As the run recorded it before its chains (None: made before runs recorded it).
        "prior_check": record.get(prior_check.RECORD_KEY),
    }
    if prediction.task == "classification":
        result["calibration"] = predictive.calibration_bins(
            prediction.probs, problem.dataset.y_test_original
        )
    if corruption is not None:
        result["corruption"] = {"name": corruption, "severity": severity}
    else:  # under a corruption a poor fit is the shift's doing, not the run's
        bars = baseline.of_dataset(problem.dataset)
        if bars is not None:
            result["baseline"] = {
                **bars,
                "poor_fit": baseline.poor_fit(result["test"], bars, record.get("method")),
            }
    log = RunDir(run_dir).read_log()
    sampler = run_verdict.sampler_statistics(log)
    if sampler is not None:
        result["sampler"] = sampler
    elif log and "epoch" in log[-1]:
        result["training"] = {
            "method": record.get("method"),
            "epochs": int(log[-1]["epoch"]),
            "seconds_per_epoch": float(np.mean([r["seconds"] for r in log])),
        }
    if not isinstance(posterior, Samples):
        result["independent_draws"] = True  # no R-hat or ESS: they measure Markov chains
    elif samples.num_samples >= 4:
        result["diagnostics"] = {
            "weights": _weight_diagnostics(samples),
            "function": _function_diagnostics(prediction),
        }
        command = run_verdict.run_command(RunDir(run_dir), record)
        result["convergence"] = run_verdict.of_prediction(
            record,
            log,
            prediction,
            problem.dataset.y_test_original,
            vocabulary=run_verdict.run_vocabulary(RunDir(run_dir), record),
        )
        capped = (
            convergence.capped_warning(
                sampler["num_capped"], sampler["num_transitions"], record.get("method"), command
            )
            if sampler
            else None
        )
        if capped is not None:  # slower mixing, not a convergence failure: a warning
            result["convergence"].setdefault("warnings", []).append(capped)
    if reference is not None:
        ref_prediction = run_prediction(ref_record, ref_problem, ref_posterior, x_test)
        result["reference"] = {
            "run": str(reference),
            **compare(prediction, ref_prediction),
            "settings_differ": ref_differs,
        }
    if ref_table is not None:
        result["reference_probs"] = {**ref_info, **compare_probs(prediction.probs, ref_table)}
    y_test = problem.dataset.y_test_original
    if held_out is not None:
        validation = run_prediction(record, problem, posterior, held_out[0])
        if calibrate:
            result["temperature_scaling"] = posthoc.temperature_scaling(
                validation, held_out[1], prediction, y_test
            )
        if conformal is not None:
            result["conformal"] = posthoc.split_conformal(
                validation, held_out[1], prediction, y_test, conformal
            )
    ood_scores = None
    if ood is not None:
        result["ood"], ood_scores = posthoc.ood_detection(
            prediction, lambda x: run_prediction(record, problem, posterior, x), ood_x, ood
        )
    if write:
        rundir = RunDir(run_dir)
        rundir.check_links()  # again, just before writing
        (rundir.path / PREDICTIONS_DIR).mkdir(exist_ok=True)
        arrays = (
            {"probs": prediction.probs}
            if prediction.task == "classification"
            else {"means": prediction.means, "stds": prediction.stds}
        )
        storage.save_arrays(rundir.path / PREDICTIONS_DIR / f"test{suffix}.npz", arrays)
        if ood_scores is not None:
            storage.save_arrays(rundir.path / PREDICTIONS_DIR / ood_file(ood, suffix), ood_scores)
        # Last: an evaluation.json says every file of the evaluation is in place.
        storage.write_json(rundir.path / f"evaluation{suffix}.json", result)
    return result


def ood_file(dataset: str, suffix: str = "") -> str:
    """The file name, in a run's ``predictions/``, of the OOD scores against ``dataset`` (a name
    or a path; anything but letters, digits, ``._-`` becomes ``_``).

    Example:
        >>> ood_file("fashion_mnist"), ood_file("/data/my set.npz")
        ('ood_fashion_mnist.npz', 'ood_my_set.npz.npz')
    """
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(os.fspath(dataset)))
    return f"ood_{safe}{suffix}.npz"


def _check_writes(rundir: RunDir, suffix: str) -> None:
    """Refuse, before anything is computed, an evaluation that could not write its files:
    an unwritable run directory, a link or a file where they go.

    Raises:
        ConfigError: naming the path.
    """
    check_writable_folder(rundir.path, "evaluation")
    rundir.check_links()
    predictions = rundir.path / PREDICTIONS_DIR
    if predictions.exists() and not predictions.is_dir():
        raise ConfigError(
            f"{str(predictions)!r} is a file; allowed: the folder where bnnkit "
            "evaluate writes the predictions (remove the file)"
        )
    if predictions.is_dir():
        check_writable_folder(predictions, "predictions")
    for target in (rundir.path / f"evaluation{suffix}.json", predictions / f"test{suffix}.npz"):
        if target.is_dir():
            raise ConfigError(
                f"{str(target)!r} is a folder; allowed: the file bnnkit evaluate "
                "writes (remove the folder)"
            )


def export_samples(
    run_dir: str | os.PathLike, out: str | os.PathLike, *, trust_model: str | None = None
) -> dict[str, tuple]:
    """Write the run's samples as plain arrays keyed by parameter path, (chains, samples, ...).

    The file is a pickle-free ``.npz`` that ArviZ or any NumPy user can read:
    ``np.load(out)["params/Dense_0/kernel"]``. Approximate posteriors export the draws their
    model average uses.

    Only the stored arrays are read: no model is imported and no data loaded, so
    ``trust_model`` (``--model``) is only checked to be the run's model.

    Returns:
        The shape of every exported array, by key.
    """
    check_call("bnnkit.export_samples", locals())
    check_out_file(out, ".npz", "samples")
    record, _, posterior, _ = load_run(
        run_dir, network=True, rebuild=False, trust_model=trust_model
    )
    arrays = storage.flatten_tree(run_samples(record, posterior).params)
    storage.save_arrays(out, arrays)
    return {k: v.shape for k, v in arrays.items()}
