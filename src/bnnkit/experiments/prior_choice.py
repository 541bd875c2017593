"""The prior of a point-estimate method, picked on held-out training data.

A prior fixed by a rule before any data are seen (the fan-in Gaussian of
:data:`bnnkit.experiments.paper.scales.IMAGE_PRIOR`) is what a sampler should target, but its
maximum a posteriori point can be degenerate: on a few hundred images its weight decay, the
precision 2/fan_in⁻¹ on every weight, outweighs the likelihood, and the MAP of a deep ReLU
network is the zero network (the prior's penalty grows as the square of the weights' scale,
the fit of an L-layer product as its L-th power, so the origin is a local optimum). The
posterior's typical set is not there: a sampler still finds functions that fit. Comparing
that posterior with a collapsed optimiser would say nothing about either, so the
optimisers get their weight decay as practitioners choose it, on validation data:

    prior* = argmin over candidates p of NLL_val(SGD run under p),

with the validation set the last ``validation_size`` examples of the training set, carved
off before the training subset is taken (:func:`bnnkit.data.splits.carve`), so the runs
train on the same examples as every other method, and the test set is never seen.

Example:
    >>> pick({"a": 1.3, "b": 0.9, "c": float("nan")})
    'b'
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bnnkit.errors import ConfigError
from bnnkit.problem import ProblemConfig

#: Each candidate's run: ``<root>/<index>``, in the order the candidates are given.
CHOICE_FILE = "choice.json"


@dataclasses.dataclass(frozen=True)
class Choice:
    """The prior picked and every candidate's validation NLL (NaN: the run diverged).

    Attributes:
        prior: the candidate with the lowest validation NLL.
        validation_nll: candidate → its SGD run's mean NLL on the validation set.
        validation_size: the held-out examples.
    """

    prior: str
    validation_nll: dict[str, float]
    validation_size: int

    def note(self) -> str:
        """One line for a table: the prior and what it beat."""
        scores = ", ".join(f"{p} {v:.3f}" for p, v in self.validation_nll.items())
        return (
            f"prior {self.prior}, picked by SGD's NLL on {self.validation_size} held-out "
            f"training examples ({scores})"
        )


def pick(validation_nll: Mapping[str, float]) -> str:
    """The candidate of lowest validation NLL (a non-finite one never wins; ties: first).

    Raises:
        ConfigError: every candidate's run diverged.
    """
    finite = {p: v for p, v in validation_nll.items() if math.isfinite(v)}
    if not finite:
        raise ConfigError(
            "every candidate prior's SGD run diverged on the validation set; "
            "allowed: candidates under which SGD trains"
        )
    return min(finite, key=finite.get)


def validation_nll(run_dir: str | os.PathLike) -> float:
    """Mean NLL per example of a stored run's predictive on its problem's validation set."""
    from bnnkit import posthoc
    from bnnkit.evaluation import run_prediction
    from bnnkit.metrics.predictive import metrics_for
    from bnnkit.runs.stored import load_run

    record, problem, posterior, _ = load_run(run_dir, network=True)
    x, y = posthoc.validation_set(problem, "the prior choice")
    return float(metrics_for(run_prediction(record, problem, posterior, x), y)["nll"])


def choose(
    problem: ProblemConfig,
    candidates: Sequence[str],
    config: Any,
    root: str | os.PathLike,
    *,
    validation_size: int,
    progress: bool = True,
) -> Choice:
    """Run ``config`` (an optimiser's) under each candidate prior with ``validation_size``
    training examples held out, in ``root/<index>``, and pick by validation NLL.

    Finished runs are reused (:func:`~bnnkit.experiments.run_reuse.run_or_reuse_stable`),
    so a cut-off choice continues.

    Raises:
        ConfigError: no candidates, or every run diverged.
    """
    from bnnkit.experiments.run_reuse import run_or_reuse_stable
    from bnnkit.runs.divergence import DivergenceError

    if not candidates:
        raise ConfigError("the prior choice needs at least one candidate prior")
    root = Path(root)
    scores: dict[str, float] = {}
    for index, prior in enumerate(candidates):
        on = dataclasses.replace(problem, prior=prior, validation_size=validation_size)
        try:
            run_or_reuse_stable(on, config, root / str(index), progress=progress)
        except DivergenceError:
            scores[prior] = math.nan
            continue
        scores[prior] = validation_nll(root / str(index))
    return Choice(pick(scores), scores, validation_size)
