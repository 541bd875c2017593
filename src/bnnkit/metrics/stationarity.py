r"""Level 1 of a reference's verdict: whether each chain is stationary, on its own.

Three checks per chain, the first two those of the within-chain verdict
(:mod:`bnnkit.metrics.within_chain`, with its thresholds):

- **R-hat within the chain**: the rank-normalised R-hat of its 4 consecutive pieces
  (:func:`~bnnkit.metrics.within_chain.quarter_rhat`) below
  :data:`~bnnkit.metrics.within_chain.WITHIN_RHAT_THRESHOLD` on at least
  :data:`~bnnkit.metrics.within_chain.WITHIN_RHAT_SHARE` of the test predictions;
- **bulk ESS of the chain** at least :data:`~bnnkit.metrics.within_chain.MIN_CHAIN_ESS` on
  :data:`~bnnkit.metrics.within_chain.CHAIN_ESS_SHARE` of them;
- **no drift of its slow functionals** from its first quarter to its last
  (:func:`quarter_drift`): the training log posterior of each kept iteration (the samplers log
  it, full batch, rather than the log-likelihood alone: the training fit plus the log prior),
  the test LPD of each draw (the mean over test points of
  ``log p(y_i | x_i, θ_s)``) and, where the network has a noise head (the draws' noise stds
  differ), the mean log predicted noise std of each draw. These are the quantities that move
  last when a chain is still settling (the fit to the data, the noise the posterior attributes
  to it); the difference of the two quarters' means must be within :data:`DRIFT_Z` standard
  errors, or within the functional's own tolerance (:data:`DRIFT_TOLERANCE`).

A chain none of whose test predictions changes over its kept draws did not move, and fails
(its R-hat and ESS are undefined, not good). The per-test-point R-hat within chains is kept as
a histogram (:func:`rhat_histogram`): one value per test point, its worst chain's.

Example:
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.normal(size=(2, 400, 30))
    >>> drifting = rng.normal(size=(2, 400)) + np.array([[0.0], [1.0]]) * np.linspace(0, 3, 400)
    >>> found = stationarity(draws, functionals={"test LPD": drifting})
    >>> found["status"], [c["stationary"] for c in found["chains"]]
    ('fail', [True, False])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnnkit.metrics import mcmc
from bnnkit.metrics.within_chain import (
    CHAIN_ESS_SHARE,
    LPD_TOLERANCE,
    LPD_Z,
    MIN_CHAIN_ESS,
    MIN_WITHIN_DRAWS,
    WITHIN_RHAT_SHARE,
    WITHIN_RHAT_THRESHOLD,
    quarter_rhat,
)

#: A functional's last quarter this many standard errors from its first is a drift (two-sided;
#: the within-chain verdict's bar, about 6e-5 per test of a stationary chain: with 3
#: functionals on 8 chains, a false alarm on a stationary reference about once in 700).
DRIFT_Z = LPD_Z
#: Changes below these count as no drift whatever their standard error: the test LPD's is the
#: within-chain verdict's (tables report it to two decimals), the mean log noise std's is 1 %
#: of the std. The log posterior has none (its scale is the data's size).
DRIFT_TOLERANCE = {"log posterior": 0.0, "test LPD": LPD_TOLERANCE, "mean log noise std": 0.01}
#: Bin edges of the R-hat histogram: equal bins of 0.02 from 1 to 1.2 (the within-chain
#: threshold, 1.1, in the middle), then one more of the same width that holds every value above
#: 1.2 (values below 1 count in the first).
RHAT_EDGES = tuple(round(1.0 + 0.02 * i, 2) for i in range(12))


def quarter_drift(trace: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The last quarter's mean minus the first quarter's, per chain, and its standard error.

    .. math:: \mathrm{se} = \sqrt{\operatorname{Var}(a)/\mathrm{ESS}(a)
              + \operatorname{Var}(b)/\mathrm{ESS}(b)},

    ``a`` and ``b`` the first and last quarters, ESS that of a quarter's mean on its own
    (:func:`bnnkit.metrics.mcmc.ess_mean`, not split, as
    :func:`~bnnkit.metrics.within_chain.half_difference` takes it), between 1 and the
    quarter's length. Quarters rather than halves, as Geweke's test takes the first tenth and
    last half: a chain still settling differs most between its ends.

    Args:
        trace: (chains, T), T >= 16.

    Returns:
        ``(b̄ − ā, se)``, each (chains,).

    Example:
        >>> rng = np.random.default_rng(1)
        >>> change, se = quarter_drift(rng.normal(size=(3, 400)) + np.linspace(0, 2, 400))
        >>> (change / se > 4).tolist()  # a rise of 1.5 between the quarters' means
        [True, True, True]
    """
    trace = np.asarray(trace, np.float64)
    quarter = trace.shape[1] // 4
    means, variances = [], []
    for part in (trace[:, :quarter], trace[:, trace.shape[1] - quarter :]):
        ess = mcmc.ess_mean(part.T[None], split=False)
        ess = np.where(np.isfinite(ess), np.clip(ess, 1.0, quarter), 1.0)
        means.append(part.mean(axis=1))
        variances.append(part.var(axis=1, ddof=1) / ess)
    return means[1] - means[0], np.sqrt(variances[0] + variances[1])


def rhat_histogram(rhat: np.ndarray) -> dict[str, Any]:
    """A histogram of R-hat values on :data:`RHAT_EDGES` (its last bin holds every value above
    its lower edge, ``open``): ``edges``, ``counts``, ``log_bins`` (False), ``undefined`` (NaN:
    a prediction that does not vary) and ``open``, as
    :func:`bnnkit.report.convergence_plots.rhat_histograms_png` draws them.

    Example:
        >>> rhat_histogram(np.array([1.001, 1.03, 1.3, np.nan]))["counts"]
        [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    """
    values = np.asarray(rhat, np.float64).ravel()
    finite = values[np.isfinite(values)]
    counts, _ = np.histogram(np.clip(finite, RHAT_EDGES[0], RHAT_EDGES[-1]), bins=RHAT_EDGES)
    return {
        "edges": list(RHAT_EDGES),
        "counts": [int(c) for c in counts],
        "log_bins": False,
        "undefined": int(values.size - finite.size),
        "open": True,
    }


def _drifts(functionals: dict[str, np.ndarray], chains: int) -> list[dict[str, dict]]:
    """Each chain's drift of each functional long enough to cut in quarters of 4 draws."""
    out: list[dict[str, dict]] = [{} for _ in range(chains)]
    for name, trace in functionals.items():
        trace = np.asarray(trace, np.float64)
        if trace.shape[0] != chains or trace.shape[1] < MIN_WITHIN_DRAWS:
            continue
        change, se = quarter_drift(trace)
        tolerance = DRIFT_TOLERANCE.get(name, 0.0)
        for c in range(chains):
            z = abs(change[c]) / se[c] if se[c] > 0 else (0.0 if change[c] == 0 else np.inf)
            out[c][name] = {
                "change": float(change[c]),
                "se": float(se[c]),
                "ok": bool(z <= DRIFT_Z or abs(change[c]) <= tolerance),
            }
    return out


def stationarity(
    draws: np.ndarray, *, functionals: dict[str, np.ndarray] | None = None
) -> dict[str, Any]:
    """Level 1: whether each chain is stationary on its own.

    Args:
        draws: the test predictions, (chains, samples, ...).
        functionals: slow functionals by name, each (chains, draws): ``"log posterior"``,
            ``"test LPD"``, ``"mean log noise std"`` (:data:`DRIFT_TOLERANCE` names their
            tolerances); those shorter than 16 draws are not judged.

    Returns:
        ``status`` ("pass" or "fail"), ``chains`` (per chain: ``moved``, whether any test
        prediction changes; ``rhat_share_below``, ``ess_p5``, ``ess_min``, ``drift`` of each
        functional, ``stationary``),
        ``rhat_histogram`` (:func:`rhat_histogram` of each test prediction's worst chain) and
        ``problems``.
    """
    x = np.asarray(draws, np.float64)
    chains, samples = x.shape[:2]
    if samples < MIN_WITHIN_DRAWS:
        return {
            "status": "fail",
            "chains": None,
            "rhat_histogram": None,
            "problems": [
                f"{samples} kept draws per chain are too few to judge a chain on its own "
                f"(needs {MIN_WITHIN_DRAWS})"
            ],
        }
    x = x.reshape(chains, samples, -1)
    drifts = _drifts(functionals or {}, chains)
    rhats, found = [], []
    for c in range(chains):
        rhat = quarter_rhat(x[c])
        rhats.append(rhat)
        defined = rhat[~np.isnan(rhat)]
        ess = mcmc.ess_bulk(x[c][None])
        ess = ess[np.isfinite(ess)]
        check = {
            "chain": c,
            "moved": bool(defined.size),  # a chain none of whose predictions change is stuck
            "rhat_share_below": float(np.mean(defined < WITHIN_RHAT_THRESHOLD))
            if defined.size
            else 1.0,
            "ess_p5": float(np.quantile(ess, 1.0 - CHAIN_ESS_SHARE)) if ess.size else None,
            "ess_min": float(ess.min()) if ess.size else None,
            "drift": drifts[c],
        }
        check["stationary"] = bool(
            check["moved"]
            and check["rhat_share_below"] >= WITHIN_RHAT_SHARE
            and (check["ess_p5"] is None or check["ess_p5"] >= MIN_CHAIN_ESS)
            and all(d["ok"] for d in drifts[c].values())
        )
        found.append(check)
    stacked = np.stack(rhats)
    defined = np.isfinite(stacked)
    worst = np.where(defined.any(0), np.where(defined, stacked, -np.inf).max(0), np.nan)
    problems = _problems(found)
    return {
        "status": "fail" if problems else "pass",
        "chains": found,
        "rhat_histogram": rhat_histogram(worst),
        "problems": problems,
    }


def _problems(found: list[dict[str, Any]]) -> list[str]:
    """One sentence per check that some chain fails, naming the chains and the figures."""
    from bnnkit.metrics.verdict_sentences import chain_names

    problems = []
    bad = [c for c in found if not c["moved"]]
    if bad:
        problems.append(
            f"no test prediction of {chain_names([c['chain'] for c in bad])} changes over its "
            "kept draws: the chain did not move"
        )
    bad = [c for c in found if c["rhat_share_below"] < WITHIN_RHAT_SHARE]
    if bad:
        problems.append(
            f"R-hat within {chain_names([c['chain'] for c in bad])} is below "
            f"{WITHIN_RHAT_THRESHOLD} on only "
            + ", ".join(f"{c['rhat_share_below']:.0%}" for c in bad)
            + f" of the test predictions (needs {WITHIN_RHAT_SHARE:.0%})"
        )
    bad = [c for c in found if c["ess_p5"] is not None and c["ess_p5"] < MIN_CHAIN_ESS]
    if bad:
        problems.append(
            f"the bulk ESS of {chain_names([c['chain'] for c in bad])} is "
            + ", ".join(f"{c['ess_p5']:.0f}" for c in bad)
            + f" on {CHAIN_ESS_SHARE:.0%} of the test predictions (needs {MIN_CHAIN_ESS:.0f})"
        )
    names = sorted({name for c in found for name in c["drift"]})
    for name in names:
        bad = [c for c in found if name in c["drift"] and not c["drift"][name]["ok"]]
        if bad:
            problems.append(
                f"the {name} of {chain_names([c['chain'] for c in bad])} drifts from the "
                "first quarter of the kept draws to the last by "
                + ", ".join(
                    f"{c['drift'][name]['change']:+.3g} (se {c['drift'][name]['se']:.2g})"
                    for c in bad
                )
                + f" (at most {DRIFT_Z:g} standard errors)"
            )
    return problems
