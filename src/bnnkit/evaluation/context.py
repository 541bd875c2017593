"""Everything an evaluation's sections read, loaded once: :class:`Context`.

:func:`load` checks the options, reads the run (:func:`bnnkit.runs.load_run`: ``run.json``,
the rebuilt problem and the posterior of every kept unit), and whatever the options ask for
besides (a reference run, a table of reference probabilities, the held-out validation set,
another dataset's inputs, corrupted test images), and forms the run's test predictive. Every
refusal comes from here, before any section computes, so that a wrong flag costs no predictive;
the sections (:mod:`bnnkit.evaluation.sections`) then only compute. What costs time and is not
always needed (the run's log, the validation predictive) is read or formed on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from bnnkit import posthoc
from bnnkit import problem as problem_lib
from bnnkit.data import reference_probs as reference_files
from bnnkit.errors import ArgumentError, ConfigError
from bnnkit.evaluation.checks import check_images, check_options, check_reference_probs
from bnnkit.evaluation.files import check_writes
from bnnkit.evaluation.predictions import corrupted_inputs, run_prediction, run_samples
from bnnkit.models import imported
from bnnkit.posterior import Samples
from bnnkit.predict import Prediction
from bnnkit.runs import RunDir
from bnnkit.runs import verdict as run_verdict
from bnnkit.runs.stored import load_run


@dataclass(frozen=True)
class Options:
    """What an evaluation was asked for besides the test metrics: the keywords of
    :func:`bnnkit.evaluate`, which its sections read."""

    reference: str | os.PathLike | None = None
    reference_probs: str | os.PathLike | None = None
    corruption: str | None = None
    severity: int | None = None
    calibrate: bool = False
    conformal: float | None = None
    ood: str | None = None
    write: bool = True
    trust_model: str | None = None

    @property
    def suffix(self) -> str:
        """The ending of the evaluation's file names: ``""`` on the clean test set, else
        ``_<corruption>_<severity>``."""
        return "" if self.corruption is None else f"_{self.corruption}_{self.severity}"


class ReferenceRun(NamedTuple):
    """A reference run read back, and the posterior settings in which it differs from the
    evaluated run (the numbers then measure that difference too)."""

    record: dict[str, Any]
    problem: problem_lib.Problem
    posterior: Any
    settings_differ: list[str]


@dataclass
class Context:
    """A loaded run and what its evaluation was asked for: what every section reads.

    Attributes:
        run_dir: the run directory, as given.
        options: what was asked for.
        record: the run's ``run.json``.
        problem: the run's problem, rebuilt (or passed in).
        posterior: the run's posterior.
        samples: the draws its model average runs over.
        x_test: the test inputs predicted on (corrupted under ``options.corruption``).
        prediction: the run's predictive at ``x_test``.
        held_out: the validation set ``(x, y)``, targets in original units, when
            ``--calibrate`` or ``--conformal`` asks for it.
        ood_x: the other dataset's test inputs, as this run's model takes them (``--ood``).
        reference: the reference run (``--reference``).
        reference_table: the reference probabilities and their description
            (``--reference-probs``).
        result: the keys the sections have added so far, in order.
        arrays: arrays to store in the run's ``predictions/`` beside the test predictive, by
            file name (a section's, such as the OOD scores).
    """

    run_dir: str | os.PathLike
    options: Options
    record: dict[str, Any]
    problem: problem_lib.Problem
    posterior: Any
    samples: Samples
    x_test: np.ndarray
    prediction: Prediction
    held_out: tuple[np.ndarray, np.ndarray] | None = None
    ood_x: np.ndarray | None = None
    reference: ReferenceRun | None = None
    reference_table: tuple[np.ndarray, dict[str, str]] | None = None
    result: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    @property
    def y_test(self) -> np.ndarray:
        """The test targets in original units (labels for classification)."""
        return self.problem.dataset.y_test_original

    def predict(self, x: np.ndarray) -> Prediction:
        """The run's predictive at ``x``, with the run's evaluation key."""
        return run_prediction(self.record, self.problem, self.posterior, x)

    @cached_property
    def log(self) -> list[dict]:
        """The run's ``metrics.jsonl`` records."""
        return RunDir(self.run_dir).read_log()

    @cached_property
    def sampler(self) -> dict[str, Any] | None:
        """A Markov chain sampler's statistics after burn-in, ``None`` for other methods."""
        return run_verdict.sampler_statistics(self.log)

    @cached_property
    def validation(self) -> Prediction:
        """The run's predictive on the held-out validation set (read only where
        ``held_out`` is set)."""
        x, _ = self.held_out
        return self.predict(x)


def load(
    run_dir: str | os.PathLike, options: Options, problem: problem_lib.Problem | None = None
) -> Context:
    """The context of an evaluation: every check and every read, then the test predictive.

    The validation set is the last ``--validation-size`` examples of the training set (before
    ``--subset-train-to``), held out when the run was made: its size is in the run's
    ``run.json`` and the same examples are carved again here, so the split is reproducible.

    Raises:
        ConfigError: options that do not go together, files that could not be written, a run,
            reference or dataset that cannot be read or does not fit (see
            :mod:`bnnkit.evaluation.checks`).
    """
    check_options(options.corruption, options.severity, options.reference_probs, options.conformal)
    if options.write and os.path.isdir(run_dir):
        check_writes(RunDir(run_dir), options.suffix)
    table = None
    if options.reference_probs is not None:
        # Read (and, for a released reference, download and verify) before the run is loaded.

        table = reference_files.load(options.reference_probs)
    record, problem, posterior, _ = load_run(
        run_dir, network=True, problem=problem, trust_model=options.trust_model
    )
    if table is not None:
        check_reference_probs(table[0], problem.dataset, repr(os.fspath(options.reference_probs)))
    held_out = None
    if options.calibrate or options.conformal is not None:
        asked = ("calibrate", True) if options.calibrate else ("conformal", options.conformal)
        if not posthoc.has_validation(problem):
            raise ArgumentError(
                "bnnkit.evaluate",
                asked[0],
                f"{asked[1]!r} fits on held-out data, and this run was trained on all of its "
                "training set",
                "a run made with a validation size N (the last N training examples held out)",
            )
        held_out = posthoc.validation_set(problem, f"{asked[0]}={asked[1]!r}")
    ood_x = None if options.ood is None else posthoc.ood_inputs(problem, options.ood)
    x_test = problem.dataset.x_test
    if options.corruption is not None:
        check_images(problem.dataset, options.corruption, "bnnkit.evaluate")
        x_test = corrupted_inputs(problem.dataset, options.corruption, options.severity)
    reference = None
    if options.reference is not None:
        reference = load_reference(options.reference, problem, options.trust_model)
    return Context(
        run_dir=run_dir,
        options=options,
        record=record,
        problem=problem,
        posterior=posterior,
        samples=run_samples(record, posterior),
        x_test=x_test,
        prediction=run_prediction(record, problem, posterior, x_test),
        held_out=held_out,
        ood_x=ood_x,
        reference=reference,
        reference_table=table,
    )


def load_reference(
    reference: str | os.PathLike, problem: problem_lib.Problem, trust_model: str | None = None
) -> ReferenceRun:
    """The reference run, read back, once it is known to predict on the same data.

    Raises:
        ConfigError: a reference on another dataset, or on other data settings (the runs would
            predict on different data).
    """
    with imported.trusting_model(trust_model):
        record, ref_problem, posterior, _ = load_run(reference, network=True)
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
    differs = problem_lib.differences(
        problem.config, ref_problem.config, problem_lib.POSTERIOR_SETTINGS, other
    )
    return ReferenceRun(record, ref_problem, posterior, differs)
