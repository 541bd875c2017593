r"""Level 3 of a reference's verdict: whether its model average has stopped changing.

Two figures of the model average are taken twice, from all kept draws of every chain and from
the second half of each chain's draws alone:

- the **test LPD** (nats per test point, ``mean_i log mean_s p(y_i | x_i, θ_s)``);
- the **mean predictive std** (regression: the mean over test points of the predictive
  mixture's std); for classification, where a predictive has no std, the **mean predictive
  entropy** (nats).

If doubling the draws (from the second half to all of them) moves neither by more than the
reference must resolve, more draws will not either: the figures have reached their plateau.
What it must resolve is, as for level 2 (:mod:`bnnkit.metrics.halves`), the distance to the
cheapest approximation it ranks, its own deep ensemble: each figure may move by at most
``plateau_ratio`` of the run's difference to the ensemble's same figure,

.. math::

    |F_\text{all} - F_\text{second half}| \le \max\bigl(\tau_F,\;
    r\,|F_\text{all} - F_\text{ensemble}|\bigr),

with ``τ`` the absolute tolerance below which no change counts (``lpd_tolerance`` nats;
``std_tolerance`` of the std itself; ``entropy_tolerance`` nats), which is all a run without
an ensemble is judged by (all in :data:`~bnnkit.metrics.findings.THRESHOLDS`). A reference
whose LPD still creeps by 0.02 nats, half a nat from its ensemble, ranks the approximations as
a longer one does: the calibration against a 16-member long reference
(``benchmarks/reference_calibration.py``, docs/uci-benchmark.md "Does the verdict say what a
reference is for?") found every reference that the absolute tolerances alone failed ranking
them as the truth does. The LPD of a model average of more draws is higher on its own (log is
concave), by about the draws' spread over their number; at the hundreds of draws a reference
keeps, that is well below the tolerance, so a chain that has settled passes.

Example:
    >>> rng = np.random.default_rng(0)
    >>> means = rng.normal(size=(4, 200, 10)) * 0.1
    >>> stds = np.full_like(means, 0.5)
    >>> log_density = -0.5 * (means / 0.5) ** 2 - np.log(0.5) - 0.5 * np.log(2 * np.pi)
    >>> plateau(log_density, means=means, stds=stds).status
    'pass'
    >>> drifting = means + np.linspace(0.0, 2.0, 200)[None, :, None]  # still moving
    >>> log_density = -0.5 * (drifting / 0.5) ** 2 - np.log(0.5) - 0.5 * np.log(2 * np.pi)
    >>> plateau(log_density, means=drifting, stds=stds).status
    'fail'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import special

from bnnkit.metrics.findings import THRESHOLDS, Finding
from bnnkit.metrics.halves import mean_std, mixture_lpd, probs_lpd
from bnnkit.metrics.stationarity import MORE_DRAWS


def pooled_lpd(log_density: np.ndarray) -> float:
    """The test LPD of the model average of every draw of every chain, from
    ``log p(y_i | x_i, θ_cs)`` (chains, samples, points)."""
    x = np.asarray(log_density, np.float64)
    x = x.reshape(-1, x.shape[-1])
    return float(np.mean(special.logsumexp(x, axis=0) - math.log(x.shape[0])))


def _spread(
    means: np.ndarray | None, stds: np.ndarray | None, probs: np.ndarray | None
) -> tuple[str, float]:
    """The model average's spread: its mean predictive std, or its mean entropy."""
    if probs is not None:
        p = np.asarray(probs, np.float64)
        p = p.reshape(-1, *p.shape[2:]).mean(axis=0)
        return "mean predictive entropy", float(np.mean(-np.sum(p * np.log(p + 1e-300), -1)))
    m = np.asarray(means, np.float64).reshape(-1, means.shape[-1])
    s = np.asarray(stds, np.float64).reshape(-1, stds.shape[-1])
    return "mean predictive std", mean_std(m, s)


def ensemble_figures(ensemble: Any, y: np.ndarray, points: int | None = None) -> dict[str, float]:
    """The figures level 3 compares, of a run's own deep ensemble's predictive (a
    :class:`bnnkit.predict.Prediction`): its test LPD at targets ``y`` and its mean predictive
    std (regression) or mean entropy (classification, on its first ``points`` test points,
    those whose per-draw probabilities a run keeps).

    Example:
        >>> from types import SimpleNamespace
        >>> two = SimpleNamespace(task="regression", means=np.zeros((2, 3)), stds=np.ones((2, 3)))
        >>> {k: round(v, 4) for k, v in ensemble_figures(two, np.zeros(3)).items()}
        {'lpd': -0.9189, 'std': 1.0}
    """
    if ensemble.task == "classification":
        probs = np.asarray(ensemble.probs, np.float64)[:points]
        lpd = probs_lpd(probs, np.asarray(y)[: probs.shape[0]])
        return {"lpd": lpd, "entropy": _spread(None, None, probs[None, None])[1]}
    return {
        "lpd": mixture_lpd(ensemble.means, ensemble.stds, y),
        "std": mean_std(ensemble.means, ensemble.stds),
    }


def allowed(figures: Mapping[str, Any]) -> dict[str, float]:
    """How far each figure of level 3 may move (``lpd`` in nats, the spread in its units), from
    the figures :func:`plateau` stores: the absolute tolerance, or ``plateau_ratio`` of the
    run's difference to its ensemble's same figure where that is larger.

    Example:
        >>> figures = {"lpd": {"all": 0.86}, "std": {"all": 0.314},
        ...            "ensemble": {"lpd": 0.33, "std": 0.40}}
        >>> {k: round(v, 4) for k, v in allowed(figures).items()}
        {'lpd': 0.265, 'std': 0.043}
        >>> {k: round(v, 4) for k, v in allowed({**figures, "ensemble": None}).items()}
        {'lpd': 0.01, 'std': 0.0031}
    """
    t = THRESHOLDS
    key = "entropy" if "entropy" in figures else "std"
    whole = figures[key]["all"]
    found = {
        "lpd": t.lpd_tolerance,
        key: t.std_tolerance * abs(whole) if key == "std" else t.entropy_tolerance,
    }
    theirs = figures.get("ensemble")
    if theirs:
        for name in found:
            scaled = t.plateau_ratio * abs(figures[name]["all"] - theirs[name])
            found[name] = max(found[name], scaled)
    return found


def judge(figures: Mapping[str, Any]) -> Finding:
    """Level 3's finding from its figures (those :func:`plateau` stores, a stored evaluation's
    included): each figure's change within what :func:`allowed` gives it."""
    key = "entropy" if "entropy" in figures else "std"
    names = {"lpd": "test LPD", "std": "mean predictive std", "entropy": "mean predictive entropy"}
    limits = allowed(figures)
    against = "its ensemble's" if figures.get("ensemble") else None
    problems = []
    for name in ("lpd", key):
        change = figures[name]["change"]
        if not abs(change) <= limits[name]:
            unit = " nats" if name == "lpd" else ""
            problems.append(
                f"the {names[name]} moves by {change:+.3g}{unit} from the second half of the "
                f"kept draws to all of them (at most {limits[name]:.3g}"
                + (f", half its difference to {against}" if against else "")
                + ")"
            )
    return Finding(
        "fail" if problems else "pass",
        tuple(problems),
        {**figures, "allowed": limits},
        (MORE_DRAWS,) if problems else (),
    )


def plateau(
    log_density: np.ndarray,
    *,
    means: np.ndarray | None = None,
    stds: np.ndarray | None = None,
    probs: np.ndarray | None = None,
    ensemble: Mapping[str, float] | None = None,
) -> Finding:
    """Level 3: the test LPD and the predictive's spread, from the second half of each chain's
    draws and from all of them.

    Args:
        log_density: ``log p(y_i | x_i, θ_cs)``, (chains, samples, points).
        means, stds: regression: each draw's predictive mean and std, (chains, samples,
            points).
        probs: classification: each draw's class probabilities, (chains, samples, points,
            classes).
        ensemble: the same figures of the run's own deep ensemble (:func:`ensemble_figures`),
            if any: the figures may then move by up to ``plateau_ratio`` of their difference
            to them.

    Returns:
        The finding; its figures: ``lpd`` and the spread (``std`` or ``entropy``), each with
        ``all``, ``second_half`` and ``change`` (all minus second half), ``ensemble`` (its
        figures or ``None``), the ``tolerances`` (the absolute ones) and ``allowed`` (what
        each change was judged against).
    """
    x = np.asarray(log_density, np.float64)
    half = x.shape[1] // 2
    later = slice(x.shape[1] - half, None)
    lpd = {"all": pooled_lpd(x), "second_half": pooled_lpd(x[:, later])}
    if probs is not None:
        _, whole = _spread(None, None, probs)
        _, part = _spread(None, None, np.asarray(probs)[:, later])
        key, tolerance = "entropy", THRESHOLDS.entropy_tolerance
    else:
        _, whole = _spread(means, stds, None)
        _, part = _spread(np.asarray(means)[:, later], np.asarray(stds)[:, later], None)
        key, tolerance = "std", THRESHOLDS.std_tolerance
    spread = {"all": whole, "second_half": part}
    for found in (lpd, spread):
        found["change"] = found["all"] - found["second_half"]
    return judge(
        {
            "lpd": lpd,
            key: spread,
            "ensemble": None if ensemble is None else dict(ensemble),
            "tolerances": {"lpd": THRESHOLDS.lpd_tolerance, key: tolerance},
        }
    )
