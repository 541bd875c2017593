"""The measures of an evaluation, one function each: :data:`SECTIONS`.

:func:`bnnkit.evaluate` loads a run once into a :class:`~bnnkit.evaluation.context.Context`
(the run's record, problem, posterior and draws, its test predictive, and the options asked
for) and runs :data:`SECTIONS` over it in order. Measures are added over time (post-hoc
calibration, OOD detection, more verdicts); as sections, each is one function beside the
others, not one more flag tested inside ``evaluate``.

The interface, :data:`Section`: ``section(context) -> dict`` of the keys it adds to the
result. A section

- returns its keys in the order they are stored (``evaluation.json`` and the tables keep the
  order of the sections, then of each section's keys), or ``{}`` where it does not apply
  (another task, an option not asked for);
- reads the keys that the sections before it added in ``context.result`` (the baseline
  judges the test metrics);
- adds arrays to store in the run's ``predictions/`` to ``context.arrays`` (file name to
  arrays), and writes no file itself, so that ``evaluate(..., write=False)`` writes nothing;
- refuses nothing: every check is made when the context is loaded, before any predictive.

A new measure is a function of that signature inserted into :data:`SECTIONS` where its keys
belong, with its rows in :func:`bnnkit.report.tables.rows`.

Example:
    >>> from types import SimpleNamespace
    >>> def kept(context):
    ...     samples = context.samples
    ...     return {"num_kept": samples.num_chains * samples.num_samples}
    >>> def enough(context):  # reads what the section before it added
    ...     return {"enough": context.result["num_kept"] >= 100}
    >>> context = SimpleNamespace(samples=SimpleNamespace(num_chains=4, num_samples=50), result={})
    >>> run_sections(context, (kept, enough))
    {'num_kept': 200, 'enough': True}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bnnkit import posthoc, prior_check
from bnnkit.command_flags import spelling
from bnnkit.evaluation.comparison import compare, compare_probs, noise_floor
from bnnkit.evaluation.context import Context
from bnnkit.evaluation.files import ood_file
from bnnkit.evaluation.predictions import run_prediction, weight_draws
from bnnkit.likelihoods import Gaussian
from bnnkit.metrics import baseline, diagnostics, measured_advice, predictive
from bnnkit.metrics.mcmc import MIN_DRAWS
from bnnkit.metrics.predictive import metrics_for
from bnnkit.metrics.sampler_health import capped_warning
from bnnkit.posterior import Samples
from bnnkit.runs import RunDir
from bnnkit.runs import verdict as run_verdict

#: A measure of an evaluation: the keys it adds to the result, in order.
Section = Callable[[Context], dict[str, Any]]


def run_sections(context: Context, sections: Sequence[Section]) -> dict[str, Any]:
    """Run ``sections`` in order, each adding its keys to ``context.result``; that result."""
    for section in sections:
        context.result.update(section(context))
    return context.result


def run_summary(context: Context) -> dict[str, Any]:
    """``run``, ``dataset``, ``model``, ``num_chains``, ``num_samples_per_chain``,
    ``num_test``: what was evaluated."""
    return {
        "run": str(context.run_dir),
        "dataset": context.problem.dataset.name,
        "model": context.problem.config.model,
        "num_chains": context.samples.num_chains,
        "num_samples_per_chain": context.samples.num_samples,
        "num_test": len(context.y_test),
    }


def test_metrics(context: Context) -> dict[str, Any]:
    """``test``: the model average's metrics on the test set, in the targets' units
    (classification: accuracy, NLL, ECE, Brier; regression: RMSE and NLL)."""
    return {"test": metrics_for(context.prediction, context.y_test)}


def recorded_prior_check(context: Context) -> dict[str, Any]:
    """``prior_check``: what the prior said against the data before the run
    (:mod:`bnnkit.prior_check`), as the run recorded it before its chains, or ``None``
    for a run made before runs recorded it."""
    return {"prior_check": context.record.get(prior_check.RECORD_KEY)}


def calibration(context: Context) -> dict[str, Any]:
    """``calibration`` (classification): the reliability diagram's bins of the test predictive
    (:func:`bnnkit.metrics.predictive.calibration_bins`), beside ``test`` so that every value
    there stays one number."""
    if context.prediction.task != "classification":
        return {}
    return {"calibration": predictive.calibration_bins(context.prediction.probs, context.y_test)}


def corruption(context: Context) -> dict[str, Any]:
    """``corruption``: the covariate shift the test inputs are under (``--corruption``,
    ``--severity``)."""
    options = context.options
    if options.corruption is None:
        return {}
    return {"corruption": {"name": options.corruption, "severity": options.severity}}


def baseline_fit(context: Context) -> dict[str, Any]:
    """``baseline`` (clean test set): the test figures of the predictor that ignores the inputs
    (``constant``) and, for regression on real-valued inputs, of least squares
    (``least_squares``), with ``poor_fit``, the one warning line of a fit that is not clearly
    better, or ``None`` (:mod:`bnnkit.metrics.baseline` states the rule)."""
    if context.options.corruption is not None:
        return {}  # under a corruption a poor fit is the shift's doing, not the run's
    bars = baseline.of_dataset(context.problem.dataset)
    if bars is None:
        return {}
    poor = baseline.poor_fit(context.result["test"], bars, context.record.get("method"))
    return {"baseline": {**bars, "poor_fit": poor}}


def sampler(context: Context) -> dict[str, Any]:
    """``sampler``: a Markov chain sampler's statistics after burn-in, from its log, with
    ``warning`` where trajectories hit their cap (slower mixing, not a failure in itself)."""
    stats = context.sampler
    if stats is None:
        return {}
    command = run_verdict.run_command(RunDir(context.run_dir), context.record)
    method = context.record.get("method")
    spell = spelling(command)
    capped = capped_warning(stats["num_capped"], stats["num_transitions"], method, spell)
    return {"sampler": {**stats, **({} if capped is None else {"warning": capped})}}


def training(context: Context) -> dict[str, Any]:
    """``training`` (a method trained by epochs): the method, its epochs and the mean seconds
    per epoch."""
    log = context.log
    if context.sampler is not None or not (log and "epoch" in log[-1]):
        return {}
    return {
        "training": {
            "method": context.record.get("method"),
            "epochs": int(log[-1]["epoch"]),
            "seconds_per_epoch": float(np.mean([r["seconds"] for r in log])),
        }
    }


def _markov_chains(context: Context) -> bool:
    """Whether the draws are Markov chains long enough for R-hat and ESS."""
    return isinstance(context.posterior, Samples) and context.samples.num_samples >= MIN_DRAWS


def independent_draws(context: Context) -> dict[str, Any]:
    """``independent_draws``: ``True`` for an approximate posterior's draws, which have no
    R-hat or ESS (they measure Markov chains)."""
    return {} if isinstance(context.posterior, Samples) else {"independent_draws": True}


def chain_diagnostics(context: Context) -> dict[str, Any]:
    """``diagnostics``: split R-hat and ESS across chains, over all weights and over the test
    predictions (function space), summarised by median / 90th percentile / max (min for
    ESS); for Markov chains with at least 4 samples each."""
    if not _markov_chains(context):
        return {}
    weights = weight_draws(context.samples)
    per_sample = context.prediction.per_sample
    function = per_sample.reshape((*per_sample.shape[:2], -1))
    return {
        "diagnostics": {
            space: {
                "rhat": diagnostics.summarize(diagnostics.split_rhat(draws)),
                "ess": diagnostics.summarize(diagnostics.ess(draws)),
            }
            for space, draws in (("weights", weights), ("function", function))
        }
    }


def reference_comparison(context: Context) -> dict[str, Any]:
    """``reference`` (``--reference``): the reference run, how close the predictive is to its
    (:func:`bnnkit.evaluation.comparison.compare`), and ``settings_differ``, each posterior
    setting (such as ``--noise-std``) in which the reference run differs; then
    ``reference_noise_floor``, the same scores between two halves of the reference's own chains
    (:func:`bnnkit.evaluation.comparison.noise_floor`), beside which the method's are read."""
    ref = context.reference
    if ref is None:
        return {}
    theirs = run_prediction(ref.record, ref.problem, ref.posterior, context.x_test)
    return {
        "reference": {
            "run": str(context.options.reference),
            **compare(context.prediction, theirs),
            "settings_differ": ref.settings_differ,
        },
        "reference_noise_floor": noise_floor(context.prediction, theirs, context.y_test),
    }


def verdict(context: Context) -> dict[str, Any]:
    """``levels``: the verdict of a run of Markov chains (certified, reproducible, or not a
    reference), level by level, with what would help (:mod:`bnnkit.metrics.levels`; L2
    judges the halves against the run's own deep ensemble,
    :func:`bnnkit.runs.verdict.own_ensemble`), and
    ``command``, the command that made the run, whose flags spell the advice; for Markov chains
    with at least 4 samples each."""
    if not _markov_chains(context):
        return {}
    rundir = RunDir(context.run_dir)
    record = context.record
    found_evidence = run_verdict.evidence(
        rundir,
        record,
        context.log,
        context.prediction,
        context.problem,
        (context.x_test, context.y_test),
        context.options.trust_model,
    )
    found = run_verdict.judged(found_evidence, rundir, record, context.problem, context.x_test)
    command = run_verdict.run_command(rundir, record)
    likelihood = context.problem.likelihood
    learned_noise = isinstance(likelihood, Gaussian) and likelihood.noise_std is None
    found = dataclasses.replace(
        found, unhelpful=measured_advice.unhelpful(command, learned_noise=learned_noise)
    )
    spell = run_verdict.python_spelling(rundir, record)
    return {"levels": {**found.to_dict(spell), "command": command}}


def reference_probs(context: Context) -> dict[str, Any]:
    """``reference_probs`` (``--reference-probs``): agreement and total variation against a
    table of reference probabilities, with its description (for a released reference, the
    test-set order its rows follow)."""
    if context.reference_table is None:
        return {}
    table, info = context.reference_table
    return {"reference_probs": {**info, **compare_probs(context.prediction.probs, table)}}


def temperature_scaling(context: Context) -> dict[str, Any]:
    """``temperature_scaling`` (``--calibrate``): the temperature (or std stretch) fitted on
    the validation set, its size and the test metrics after it (:mod:`bnnkit.posthoc`)."""
    if not context.options.calibrate:
        return {}
    found = posthoc.temperature_scaling(
        context.validation, context.held_out[1], context.prediction, context.y_test
    )
    return {"temperature_scaling": found}


def conformal(context: Context) -> dict[str, Any]:
    """``conformal`` (``--conformal α``): split conformal sets or intervals calibrated on the
    validation set: α, the score, the threshold, test coverage and mean set size or interval
    width (:mod:`bnnkit.posthoc`)."""
    alpha = context.options.conformal
    if alpha is None:
        return {}
    found = posthoc.split_conformal(
        context.validation, context.held_out[1], context.prediction, context.y_test, alpha
    )
    return {"conformal": found}


def ood(context: Context) -> dict[str, Any]:
    """``ood`` (``--ood DATASET``): how well predictive entropy and mutual information tell the
    other dataset's test inputs from this one's (AUROC, FPR at 95 % TPR); the scores go to
    ``predictions/ood_<dataset>.npz`` for the report's histograms."""
    name = context.options.ood
    if name is None:
        return {}
    found, scores = posthoc.ood_detection(context.prediction, context.predict, context.ood_x, name)
    context.arrays[ood_file(name, context.options.suffix)] = scores
    return {"ood": found}


#: The sections of every evaluation, in the order of the result's keys.
SECTIONS: tuple[Section, ...] = (
    run_summary,
    test_metrics,
    recorded_prior_check,
    calibration,
    corruption,
    baseline_fit,
    sampler,
    training,
    independent_draws,
    chain_diagnostics,
    verdict,
    reference_comparison,
    reference_probs,
    temperature_scaling,
    conformal,
    ood,
)
