"""Recompute predictions, metrics and diagnostics from a stored run directory.

``evaluate(run_dir)`` reads the run back, forms its predictive on the test set and returns
(and stores as ``evaluation.json`` plus ``predictions/test.npz``) what can be said of it: the
test metrics, the reliability diagram's bins, the baseline a fit must beat, the sampler's
statistics, R-hat and ESS and the convergence verdict for Markov chains, and whatever the
options ask for (a reference run or table of probabilities to compare with, covariate shift,
temperature scaling, conformal prediction, out-of-distribution detection). It is what
``bnnkit evaluate`` prints, what a report shows of a run and what the experiments score runs by.

The work is in three steps, one module each, so that a new measure touches only its own:

- :mod:`~bnnkit.evaluation.context`: every check and every read, then the test predictive,
  in one :class:`~bnnkit.evaluation.context.Context` (refusals come before any computing);
- :mod:`~bnnkit.evaluation.sections`: the measures, one function each, run in order over the
  context (:data:`~bnnkit.evaluation.sections.SECTIONS`; the module's docstring states the
  interface);
- :mod:`~bnnkit.evaluation.files`: the files written into the run, the result last.

The runs' draws and predictive (:mod:`~bnnkit.evaluation.predictions`), the comparisons with a
reference (:mod:`~bnnkit.evaluation.comparison`) and the checks
(:mod:`~bnnkit.evaluation.checks`) are importable from here too, as the experiments and
commands that share them import them.
"""

from __future__ import annotations

import os
from typing import Any

from bnnkit import problem as problem_lib
from bnnkit import storage
from bnnkit.entry_points import check_call
from bnnkit.evaluation import files
from bnnkit.evaluation.checks import (
    check_images,
    check_out_file,
    check_reference,
    check_reference_probs,
    check_writable_folder,
)
from bnnkit.evaluation.comparison import compare, compare_probs
from bnnkit.evaluation.context import Options, load
from bnnkit.evaluation.files import ood_file
from bnnkit.evaluation.predictions import (
    corrupted_inputs,
    run_prediction,
    run_samples,
    weight_draws,
)
from bnnkit.evaluation.sections import SECTIONS, run_sections
from bnnkit.runs.stored import load_run

__all__ = [
    "check_images",
    "check_out_file",
    "check_reference",
    "check_reference_probs",
    "check_writable_folder",
    "compare",
    "compare_probs",
    "corrupted_inputs",
    "evaluate",
    "export_samples",
    "ood_file",
    "run_prediction",
    "run_samples",
    "weight_draws",
]


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

    Args:
        run_dir: the run directory.
        reference: another run on the same data (e.g. HMC's) to compare the predictive with; a
            run on other data is refused.
        reference_probs: ``"cifar10_hmc"``, ``"imdb_hmc"`` or the file of a table of
            reference probabilities (:mod:`bnnkit.data.reference_probs`), classification.
        corruption: a CIFAR-10-C-style corruption of the test images, at ``severity`` (1-5);
            stored as ``evaluation_<name>_<severity>.json``.
        calibrate: temperature scaling fitted on the run's validation set.
        conformal: α of split conformal prediction calibrated on that set.
        ood: another dataset whose test inputs the predictive should tell apart.
        write: store the result and the predictions in the run.
        problem: the run's problem (settings and arrays), for a run made by
            :meth:`bnnkit.Problem.from_arrays` whose model cannot be rebuilt in this process (a
            class of ``__main__``, an ``apply`` function); else the run is rebuilt.
        trust_model: (``--model``) allows importing the model the run records when its module
            is outside bnnkit (``"mymod:Net"``), which reading a run never does unasked
            (:func:`bnnkit.runs.load_run`); the reference run may record the same model.

    Returns:
        A JSON-serialisable dict, one group of keys per section of
        :mod:`bnnkit.evaluation.sections`, in order (each section's docstring says what its
        keys hold): ``run`` to ``num_test``, ``test``, ``prior_check``, ``calibration``,
        ``corruption`` or ``baseline``, ``sampler`` or ``training``, ``independent_draws`` or
        ``diagnostics`` and ``convergence``, then those asked for: ``reference``,
        ``reference_probs``, ``temperature_scaling``, ``conformal`` and ``ood``.

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
    options = Options(
        reference=reference,
        reference_probs=reference_probs,
        corruption=corruption,
        severity=severity,
        calibrate=calibrate,
        conformal=conformal,
        ood=ood,
        write=write,
        trust_model=trust_model,
    )
    context = load(run_dir, options, problem)
    result = run_sections(context, SECTIONS)
    if write:
        files.write(
            context.run_dir,
            context.options.suffix,
            context.prediction,
            context.arrays,
            context.result,
        )
    return result


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
    check_out_file(out, ".npz", "samples", where="bnnkit.export_samples")
    record, _, posterior, _ = load_run(
        run_dir, network=True, rebuild=False, trust_model=trust_model
    )
    arrays = storage.flatten_tree(run_samples(record, posterior).params)
    storage.save_arrays(out, arrays)
    return {k: v.shape for k, v in arrays.items()}
