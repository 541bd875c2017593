r"""Whether a run's model average is reproducible: two independent halves of its chains, each
averaged, against each other and against the run's own deep ensemble.

A reference ranks approximations by their distance to its model average, so what it must be
is reproducible well below those distances. The chains are cut into two halves, chains
``0 … K/2 − 1`` and ``K/2 … K − 1`` (K/2 rounded down; for a reference, or any run started
from an ensemble, chain k starts from member k, so the halves share nothing), and the model
average of each half is compared with the other's:

- regression: the mean over test points of the Wasserstein-1 distance between the two
  predictive mixtures of Gaussians (:func:`mixture_w1`), the RMSE between their means, and the
  difference of their test log predictive densities (LPD, nats per point);
- classification: the mean total variation between the two predictive distributions, the
  agreement of their top classes, and the difference of their test LPDs, over the test points
  whose per-draw probabilities the prediction keeps (the first 1,000).

Each distance between halves is a conservative reading of the run's own Monte Carlo error: for
independent errors each half's distance to the limit is about the halves' distance over √2,
and the whole run's (twice the draws) about half of it.

**What it is judged against** (:func:`reproducibility`). The same distances from the whole run
to its own deep ensemble (a reference's ``ensemble/`` stage, evaluated as a model average): the
cheapest approximation a reference is asked to rank, and usually the closest. The halves must
differ by at most ``halves_ratio`` of it (W₁ for regression, total variation for
classification), and their LPDs by at most ``halves_ratio`` of the run's LPD difference to the
ensemble or ``lpd_tolerance``, whichever is larger (:data:`~bnnkit.metrics.findings.THRESHOLDS`).
A run without an ensemble is judged against absolute tolerances instead: W₁ at most
``absolute_w1`` of the mean predictive std, total variation at most ``absolute_tv``, and the
LPDs within the same
LPD tolerance.

**Why a grid for W₁.** W₁ between two 1-D distributions is ``∫ |F_A(y) − F_B(y)| dy``. From
M draws of each, as :func:`bnnkit.metrics.predictive.predictive_wasserstein_1` estimates it,
two samples of one distribution are already about σ/√M apart (σ the predictive's spread): a
floor of a few hundredths of σ at M = 1,000, the very size of the distances measured here. The
mixtures' CDFs are exact instead (an average of the components' normal CDFs), integrated on a
grid of :data:`W1_GRID` points spanning every component to ±:data:`W1_SPAN` of its std. The
trapezoid rule's error is second order in the grid's step and proportional to the distance
itself (both CDFs are smooth): against a grid 32 times finer it is below 0.1 % of W₁ on
mixtures of a few hundred components (the examples check known distances). The cost is
components × grid points per test point, so W₁ is taken on the first :data:`W1_POINTS` test
points (every point of the small UCI test sets; a mean over that many estimates the mean over
all of them well); the LPDs take every point.

Example:
    >>> import numpy as np
    >>> split_chains(5)
    ([0, 1], [2, 3, 4])
    >>> a = np.zeros((1, 3)), np.ones((1, 3))  # N(0, 1) at each of 3 points
    >>> b = np.full((1, 3), 0.3), np.ones((1, 3))  # N(0.3, 1): W₁ is the shift
    >>> mixture_w1(*a, *b).round(4).tolist()
    [0.3, 0.3, 0.3]
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from bnnkit.metrics.findings import THRESHOLDS, Finding, Remedy
from bnnkit.metrics.modes import HalfStatistics, group_modes
from bnnkit.metrics.predictive import agreement, rmse, total_variation

#: Points of the grid each test point's W₁ is integrated on.
W1_GRID = 128
#: W₁ is averaged over at most this many test points, the first.
W1_POINTS = 256
#: The grid spans every component's mean to this many of its stds on either side (a normal's
#: mass beyond 6 sds is 2e-9).
W1_SPAN = 6.0
#: What helps halves that disagree: chains in different modes need more chains to cover them,
#: noisy ones more draws.
MORE_CHAINS_OR_DRAWS = Remedy(
    "more chains or more draws",
    (
        ("members", "larger"),
        ("num_chains", "larger"),
        ("num_samples", "larger"),
        ("num_iterations", "larger"),
        ("num_epochs", "larger"),
    ),
)
#: Elements of one block of the W₁ computation (components × grid points × test points).
_BLOCK = 1 << 22


def split_chains(num_chains: int) -> tuple[list[int], list[int]] | None:
    """The two halves of ``num_chains`` chains: ``0 … K/2 − 1`` and ``K/2 … K − 1`` (``None``
    for a single chain)."""
    if num_chains < 2:
        return None
    half = num_chains // 2
    return list(range(half)), list(range(half, num_chains))


def _mixture_cdf(means: np.ndarray, stds: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The CDF of the equal mixture of ``N(means_s, stds_s²)`` (S, n) on ``grid`` (n, G)."""
    out = np.zeros(grid.shape)
    step = max(1, _BLOCK // grid.size)
    for s in range(0, means.shape[0], step):
        m, sd = means[s : s + step, :, None], stds[s : s + step, :, None]
        out += special.ndtr((grid[None] - m) / sd).sum(axis=0)
    return out / means.shape[0]


def mixture_w1(
    means_a: np.ndarray,
    stds_a: np.ndarray,
    means_b: np.ndarray,
    stds_b: np.ndarray,
    *,
    grid: int = W1_GRID,
) -> np.ndarray:
    """Per test point, W₁ between the equal mixtures of Gaussians ``(means_a, stds_a)`` and
    ``(means_b, stds_b)``, each (components, points): ``∫ |F_A − F_B| dy`` on a grid of ``grid``
    points (see the module's docstring).

    Example:
        >>> import numpy as np
        >>> ones = np.ones((1, 1))
        >>> w = mixture_w1(0 * ones, ones, 0 * ones, 2 * ones)  # stds 1 and 2: W₁ = √(2/π)
        >>> round(float(w[0]), 3), round(math.sqrt(2 / math.pi), 3)
        (0.798, 0.798)
    """
    arrays = [np.asarray(v, np.float64) for v in (means_a, stds_a, means_b, stds_b)]
    ma, sa, mb, sb = arrays
    lo = np.minimum((ma - W1_SPAN * sa).min(0), (mb - W1_SPAN * sb).min(0))
    hi = np.maximum((ma + W1_SPAN * sa).max(0), (mb + W1_SPAN * sb).max(0))
    out = np.empty(ma.shape[1])
    points = max(1, _BLOCK // (grid * (ma.shape[0] + mb.shape[0])))
    for i in range(0, ma.shape[1], points):
        cols = slice(i, i + points)
        y = np.linspace(lo[cols], hi[cols], grid, axis=1)  # (n, G)
        gap = np.abs(
            _mixture_cdf(ma[:, cols], sa[:, cols], y) - _mixture_cdf(mb[:, cols], sb[:, cols], y)
        )
        width = (hi[cols] - lo[cols]) / (grid - 1)
        out[cols] = width * (gap.sum(axis=1) - 0.5 * (gap[:, 0] + gap[:, -1]))  # trapezoids
    return out


def mixture_lpd(means: np.ndarray, stds: np.ndarray, y: np.ndarray) -> float:
    """The test LPD of an equal mixture of Gaussians (S, N) at targets ``y`` (N,): the mean over
    points of the log mixture density (nats per point)."""
    means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
    z = (np.asarray(y, np.float64)[None] - means) / stds
    log_density = -0.5 * z**2 - np.log(stds) - 0.5 * math.log(2 * math.pi)
    return float(np.mean(special.logsumexp(log_density, axis=0) - math.log(means.shape[0])))


def probs_lpd(probs: np.ndarray, labels: np.ndarray) -> float:
    """The test LPD of class probabilities (N, C) at ``labels`` (clipped at 1e-12, as the NLL
    is)."""
    picked = np.take_along_axis(np.asarray(probs, np.float64), labels[:, None].astype(int), 1)
    return float(np.mean(np.log(np.clip(picked[:, 0], 1e-12, None))))


def mean_std(means: np.ndarray, stds: np.ndarray) -> float:
    """The mean over test points of the std of an equal mixture of Gaussians (S, N)."""
    means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
    second = np.mean(stds**2 + means**2, axis=0) - np.mean(means, axis=0) ** 2
    return float(np.mean(np.sqrt(np.maximum(second, 0.0))))


class Average(NamedTuple):
    """A model average as its distances need it: for regression the mixture's components
    ``means`` and ``stds`` (draws, points), in the targets' units; for classification the
    averaged ``probs`` (points, classes)."""

    task: str
    means: np.ndarray | None = None
    stds: np.ndarray | None = None
    probs: np.ndarray | None = None

    @property
    def points(self) -> int:
        """How many test points it predicts at."""
        return (self.probs if self.task == "classification" else self.means.T).shape[0]

    def lpd(self, y: np.ndarray) -> float:
        """Its test LPD at the first :attr:`points` targets ``y`` (nats per point)."""
        y = np.asarray(y)[: self.points]
        if self.task == "classification":
            return probs_lpd(self.probs, y)
        return mixture_lpd(self.means, self.stds, y)


def averages(prediction: Any) -> tuple[Average, Average, Average] | None:
    """The whole model average of a prediction (:class:`bnnkit.predict.Prediction`) and those
    of its two halves of chains (:func:`split_chains`); ``None`` for one chain.

    Classification's halves are averaged from the per-draw probabilities the prediction keeps
    (its first test points); the whole average is cut to the same points.
    """
    chains, samples = prediction.per_sample.shape[:2]
    halves = split_chains(chains)
    if halves is None:
        return None
    if prediction.task == "classification":
        per_sample = np.asarray(prediction.per_sample, np.float64)
        whole = Average("classification", probs=np.asarray(prediction.probs)[: per_sample.shape[2]])
        parts = [Average("classification", probs=per_sample[h].mean(axis=(0, 1))) for h in halves]
        return whole, parts[0], parts[1]
    means = np.asarray(prediction.means, np.float64)
    stds = np.asarray(prediction.stds, np.float64)

    def rows(h: list[int]) -> np.ndarray:
        return (np.asarray(h)[:, None] * samples + np.arange(samples)[None]).ravel()

    whole = Average("regression", means=means, stds=stds)
    parts = [Average("regression", means=means[rows(h)], stds=stds[rows(h)]) for h in halves]
    return whole, parts[0], parts[1]


def of_prediction(prediction: Any, points: int | None = None) -> Average:
    """A prediction's whole model average (:class:`Average`), at its first ``points`` test
    points for classification."""
    if prediction.task == "classification":
        return Average("classification", probs=np.asarray(prediction.probs)[:points])
    return Average("regression", means=prediction.means, stds=prediction.stds)


def last_draws(prediction: Any, count: int) -> Average:
    """The model average of each chain's last ``count`` draws of a prediction (classification:
    at the test points whose per-draw probabilities it keeps).

    Example:
        >>> from bnnkit.predict import Prediction
        >>> means = np.arange(8.0)[:, None]  # 2 chains x 4 draws, one point, chain-major
        >>> p = Prediction("regression", means=means, stds=np.ones((8, 1)),
        ...                per_sample=np.zeros((2, 4, 1)))
        >>> last_draws(p, 2).means.ravel().tolist()
        [2.0, 3.0, 6.0, 7.0]
    """
    chains, samples = prediction.per_sample.shape[:2]
    if prediction.task == "classification":
        per_sample = np.asarray(prediction.per_sample, np.float64)
        return Average("classification", probs=per_sample[:, samples - count :].mean(axis=(0, 1)))
    rows = (np.arange(chains)[:, None] * samples + np.arange(samples - count, samples)).ravel()
    means, stds = np.asarray(prediction.means), np.asarray(prediction.stds)
    return Average("regression", means=means[rows], stds=stds[rows])


def distances(a: Average, b: Average, y: np.ndarray) -> dict[str, float]:
    """How far apart two model averages of one task are: ``wasserstein_1`` (the grid's, mean
    over the first :data:`W1_POINTS` points) and ``rmse_between_means`` for regression,
    ``total_variation`` and ``agreement`` for classification, and ``lpd_difference`` (a's test
    LPD minus b's)."""
    if a.task == "classification":
        points = min(a.points, b.points)
        found = {
            "total_variation": total_variation(a.probs[:points], b.probs[:points]),
            "agreement": agreement(a.probs[:points], b.probs[:points]),
        }
        a, b = a._replace(probs=a.probs[:points]), b._replace(probs=b.probs[:points])
    else:
        cols = slice(0, W1_POINTS)
        w1 = mixture_w1(a.means[:, cols], a.stds[:, cols], b.means[:, cols], b.stds[:, cols])
        found = {
            "wasserstein_1": float(np.mean(w1)),
            "rmse_between_means": rmse(a.means.mean(axis=0), b.means.mean(axis=0)),
        }
    return {**found, "lpd_difference": a.lpd(y) - b.lpd(y)}


#: How the problems name each distance.
WORDS = {"wasserstein_1": "W₁", "total_variation": "total variation", "lpd_difference": "test LPD"}


def _against(name: str, limit: float, ensemble: dict[str, float] | None) -> str:
    """What a tolerance is, in words."""
    if name == "lpd_difference" and limit == THRESHOLDS.lpd_tolerance:
        return "the LPD tolerance"
    if ensemble is None:
        return "the absolute tolerance; no ensemble to compare"
    share = THRESHOLDS.halves_ratio
    return f"{share:.0%} of the run's distance to its own ensemble, {abs(ensemble[name]):.3g}"


def tolerances(figures: dict[str, Any]) -> dict[str, float]:
    """The most the halves may differ by, in the task's distance and in LPD, from L2's
    figures (those :func:`reproducibility` stores): ``halves_ratio`` of the run's distances to
    its ensemble, or the absolute tolerances without one (W₁'s a share of ``scale``)."""
    t = THRESHOLDS
    distance = "total_variation" if "total_variation" in figures["halves"] else "wasserstein_1"
    ensemble = figures.get("ensemble")
    if ensemble:
        lpd = max(t.halves_ratio * abs(ensemble["lpd_difference"]), t.lpd_tolerance)
        return {distance: t.halves_ratio * ensemble[distance], "lpd_difference": lpd}
    if distance == "total_variation":
        return {distance: t.absolute_tv, "lpd_difference": t.lpd_tolerance}
    return {distance: t.absolute_w1 * figures["scale"], "lpd_difference": t.lpd_tolerance}


def judge(figures: dict[str, Any]) -> Finding:
    """Level 2's finding from its figures (those :func:`reproducibility` stores, a stored
    evaluation's included): each distance between the halves within :func:`tolerances`, and
    the modes named where they are not.

    Example:
        >>> figures = {
        ...     "halves": {"wasserstein_1": 0.3, "lpd_difference": 0.01},
        ...     "ensemble": {"wasserstein_1": 1.0, "lpd_difference": -0.4},
        ...     "modes": [[0, 1]],
        ... }
        >>> found = judge(figures)
        >>> found.status, {k: round(v, 6) for k, v in found.figures["tolerances"].items()}
        ('pass', {'wasserstein_1': 0.75, 'lpd_difference': 0.3})
    """
    allowed = tolerances(figures)
    theirs = figures.get("ensemble")
    problems = []
    for name, limit in allowed.items():
        apart = figures["halves"][name]
        if not abs(apart) <= limit:
            problems.append(
                f"the two halves' model averages differ by {abs(apart):.3g} in "
                f"{WORDS[name]}, more than {limit:.3g} ({_against(name, limit, theirs)})"
            )
    groups = figures.get("modes") or []
    if problems and len(groups) > 1:
        problems.append(
            f"the chains sit in {len(groups)} distinct modes ("
            + ", ".join(f"[{', '.join(str(c) for c in group)}]" for group in groups)
            + "): more chains cover more of them; longer chains rarely meet"
        )
    return Finding(
        "fail" if problems else "pass",
        tuple(problems),
        {**figures, "tolerances": allowed},
        (MORE_CHAINS_OR_DRAWS,) if problems else (),
    )


def modes(per_sample: np.ndarray) -> list[list[int]]:
    """The chains of each mode the chains sit in (:func:`bnnkit.metrics.modes.group_modes`
    with ``mode_rhat`` and ``mode_rhat_share``): evidence for halves that disagree, which more
    chains cover and longer ones rarely join.

    Example:
        >>> draws = np.random.default_rng(0).normal(size=(4, 200, 10))
        >>> modes(draws + 5.0 * (np.arange(4) % 2)[:, None, None])
        [[0, 2], [1, 3]]
    """
    x = np.asarray(per_sample, np.float64)
    stats = HalfStatistics.of(x.reshape(*x.shape[:2], -1))
    return group_modes(stats, threshold=THRESHOLDS.mode_rhat, share=THRESHOLDS.mode_rhat_share)


def reproducibility(
    prediction: Any,
    y: np.ndarray,
    ensemble: Any | None = None,
    *,
    ensemble_run: str | None = None,
) -> Finding:
    """Level 2: whether the two halves of a run's chains give the same model average, well
    within the run's distance to its own deep ensemble (or, without one, within the absolute
    tolerances); see the module's docstring.

    Args:
        prediction: the run's predictive at the test inputs (:class:`bnnkit.predict.
            Prediction`: per-draw values of at least 2 chains).
        y: the test targets (original units) or labels.
        ensemble: the predictive of the run's own deep ensemble at the same inputs, if any.
        ensemble_run: where that ensemble is (stored with the figures).

    Returns:
        The finding; its figures: ``halves`` (the chains of each half and their
        :func:`distances`), ``ensemble`` (the whole run's distances to its ensemble, with
        ``run``; ``None`` without one), ``tolerances``, ``judged_against`` ("ensemble" or
        "absolute"), ``scale`` (regression: the mean predictive std) and ``modes`` (the
        chains of each mode, :func:`modes`).
    """
    found = averages(prediction)
    if found is None:
        return Finding(
            "fail",
            ("one chain cannot be split into two independent halves",),
            {"halves": None, "ensemble": None, "modes": None},
            (MORE_CHAINS_OR_DRAWS,),
        )
    whole, a, b = found
    task = prediction.task
    theirs = None
    if ensemble is not None:
        theirs = distances(whole, of_prediction(ensemble, whole.points), y)
    figures = {
        "halves": {"chains": split_chains(prediction.per_sample.shape[0]), **distances(a, b, y)},
        "ensemble": None if theirs is None else {"run": ensemble_run, **theirs},
        "judged_against": "ensemble" if theirs else "absolute",
        "note": None
        if theirs
        else "no ensemble to compare: judged against absolute tolerances (W₁ "
        f"{THRESHOLDS.absolute_w1:.0%} of the mean predictive std, total variation "
        f"{THRESHOLDS.absolute_tv})",
        "scale": None if task == "classification" else mean_std(whole.means, whole.stds),
        "modes": modes(prediction.per_sample),
    }
    return judge(figures)
