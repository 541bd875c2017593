r"""Level 3 of a reference's verdict: whether its model average has stopped changing.

Two figures of the model average are taken twice, from all kept draws of every chain and from
the second half of each chain's draws alone:

- the **test LPD** (nats per test point, ``mean_i log mean_s p(y_i | x_i, θ_s)``), which must
  change by at most ``lpd_tolerance`` (tables report test log-likelihoods to two decimals);
- the **mean predictive std** (regression: the mean over test points of the predictive
  mixture's std), which must change by at most ``std_tolerance`` of itself; for
  classification, where a predictive has no std, the **mean predictive entropy**, within
  ``entropy_tolerance`` nats (all in :data:`~bnnkit.metrics.findings.THRESHOLDS`).

If doubling the draws (from the second half to all of them) moves neither by more than the
precision it is reported at, more draws will not either: the figures have reached their
plateau. The LPD of a model average of more draws is higher on its own (log is concave), by
about the draws' spread over their number; at the hundreds of draws a reference keeps, that is
well below the tolerance, so a chain that has settled passes.

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

import numpy as np
from scipy import special

from bnnkit.metrics.findings import THRESHOLDS, Finding
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
    second = np.mean(s**2 + m**2, axis=0) - np.mean(m, axis=0) ** 2
    return "mean predictive std", float(np.mean(np.sqrt(np.maximum(second, 0.0))))


def plateau(
    log_density: np.ndarray,
    *,
    means: np.ndarray | None = None,
    stds: np.ndarray | None = None,
    probs: np.ndarray | None = None,
) -> Finding:
    """Level 3: the test LPD and the predictive's spread, from the second half of each chain's
    draws and from all of them.

    Args:
        log_density: ``log p(y_i | x_i, θ_cs)``, (chains, samples, points).
        means, stds: regression: each draw's predictive mean and std, (chains, samples,
            points).
        probs: classification: each draw's class probabilities, (chains, samples, points,
            classes).

    Returns:
        The finding; its figures: ``lpd`` and the spread (``std`` or ``entropy``), each with
        ``all``, ``second_half`` and ``change`` (all minus second half), and the
        ``tolerances``.
    """
    x = np.asarray(log_density, np.float64)
    half = x.shape[1] // 2
    later = slice(x.shape[1] - half, None)
    lpd = {"all": pooled_lpd(x), "second_half": pooled_lpd(x[:, later])}
    if probs is not None:
        name, whole = _spread(None, None, probs)
        _, part = _spread(None, None, np.asarray(probs)[:, later])
        key, tolerance, relative = "entropy", THRESHOLDS.entropy_tolerance, False
    else:
        name, whole = _spread(means, stds, None)
        _, part = _spread(np.asarray(means)[:, later], np.asarray(stds)[:, later], None)
        key, tolerance, relative = "std", THRESHOLDS.std_tolerance, True
    spread = {"all": whole, "second_half": part}
    problems = []
    for what, found, allowed, unit in (
        ("test LPD", lpd, THRESHOLDS.lpd_tolerance, " nats"),
        (name, spread, tolerance * (abs(whole) if relative else 1.0), ""),
    ):
        found["change"] = found["all"] - found["second_half"]
        if not abs(found["change"]) <= allowed:
            limit = f"{tolerance:.0%} of it" if relative and what == name else f"{allowed:g}"
            problems.append(
                f"the {what} moves by {found['change']:+.3g}{unit} from the second half of the "
                f"kept draws to all of them (at most {limit})"
            )
    return Finding(
        "fail" if problems else "pass",
        tuple(problems),
        {"lpd": lpd, key: spread, "tolerances": {"lpd": THRESHOLDS.lpd_tolerance, key: tolerance}},
        (MORE_DRAWS,) if problems else (),
    )
