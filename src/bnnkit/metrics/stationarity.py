r"""Level 1 of a reference's verdict: whether each chain is stationary, on its own.

Three checks per chain (thresholds in :data:`~bnnkit.metrics.findings.THRESHOLDS`):

- **R-hat within the chain**: the rank-normalised R-hat of its 4 consecutive pieces
  (:func:`quarter_rhat`) below ``within_rhat_threshold`` on
  at least ``within_rhat_share`` of the test predictions;
- **bulk ESS of the chain** at least ``min_chain_ess`` on ``chain_ess_share`` of them;
- **no drift of its slow functionals** from its first quarter to its last
  (:func:`quarter_drift`): the training log posterior of each kept iteration (the samplers log
  it, full batch, rather than the log-likelihood alone: the training fit plus the log prior),
  the test LPD of each draw (the mean over test points of
  ``log p(y_i | x_i, θ_s)``) and, where the network has a noise head (the draws' noise stds
  differ), the mean log predicted noise std of each draw. These are the quantities that move
  last when a chain is still settling (the fit to the data, the noise the posterior attributes
  to it); the difference of the two quarters' means must be within ``drift_z`` standard
  errors, or within the functional's own tolerance (:data:`DRIFT_TOLERANCE`). A log
  posterior that rises means burn-in ended before the chain reached the typical set.

What helps a chain that fails is usually more draws. But a chain whose ESS hardly grows as it
runs longer (a posterior whose geometry the sampler cannot cross at this step size) fails the
same way after ten times the budget: each failing chain is judged on its first
1/``stall_length`` too, and where every one failed there already and its ESS grew less than
``stall_gain`` times since (``stalled`` among the figures), the remedy is another posterior
(a fixed noise, a tighter prior, another model), not more draws.

A chain none of whose test predictions changes over its kept draws did not move, and fails
(its R-hat and ESS are undefined, not good). The per-test-point R-hat within chains is kept as
a histogram (:func:`rhat_histogram`): one value per test point, its worst chain's.

Example:
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.normal(size=(2, 400, 30))
    >>> drifting = rng.normal(size=(2, 400)) + np.array([[0.0], [1.0]]) * np.linspace(0, 3, 400)
    >>> found = stationarity(draws, functionals={"test LPD": drifting})
    >>> found.status, [c["stationary"] for c in found.figures["chains"]]
    ('fail', [True, False])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnnkit.metrics import mcmc
from bnnkit.metrics.findings import THRESHOLDS, Finding, Remedy
from bnnkit.metrics.numerics import LONGER_BURN_IN

#: Consecutive pieces each chain is cut into for its own R-hat (MILE's 4 splits).
NUM_SPLITS = 4
#: Fewest kept draws per chain to judge it on its own: 4 per piece, the fewest
#: :func:`bnnkit.metrics.mcmc.rhat` takes.
MIN_WITHIN_DRAWS = NUM_SPLITS * mcmc.MIN_DRAWS
#: Changes below these count as no drift whatever their standard error (the thresholds of
#: :data:`THRESHOLDS`); the log posterior has none (its scale is the data's size).
DRIFT_TOLERANCE = {
    "log posterior": 0.0,
    "test LPD": THRESHOLDS.lpd_tolerance,
    "mean log noise std": THRESHOLDS.noise_std_tolerance,
}
#: The draws a run's budget gives, in each command's setting.
MORE_DRAWS = Remedy(
    "more draws",
    (("num_samples", "larger"), ("num_iterations", "larger"), ("num_epochs", "larger")),
)
#: What helps chains that more draws will not: another posterior.
ANOTHER_POSTERIOR = Remedy(
    "another posterior",
    (("noise_std", "0.35"), ("prior", "gaussian:scale=0.5"), ("model", "another")),
    "more draws will not help: the chains' ESS hardly grows with their length; a fixed noise "
    "std on standardised targets, a tighter prior or another model (docs/concepts/reference.md)",
)
#: What helps chains whose log posterior still rises.
LONGER_START = Remedy(
    "a longer burn-in, or chains started from an ensemble",
    (*LONGER_BURN_IN, ("init_checkpoint", "ENSEMBLE_RUN")),
    "the log posterior still rises while draws are kept",
)
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
    the ESS of a mean takes it), between 1 and the
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


def quarter_rhat(chain: np.ndarray) -> np.ndarray:
    """Rank-normalised R-hat of one chain's :data:`NUM_SPLITS` consecutive pieces taken as
    chains (:func:`bnnkit.metrics.mcmc.rhat`, which splits each piece again), per quantity; the
    first N mod 4 draws, nearest the burn-in, are dropped.

    Args:
        chain: (S, quantities), S >= :data:`MIN_WITHIN_DRAWS`.

    Returns:
        (quantities,), NaN where a quantity does not vary.

    Example:
        >>> walk = np.cumsum(np.random.default_rng(0).normal(size=(400, 3)), axis=0)
        >>> bool((quarter_rhat(walk) > 1.1).all())  # a random walk's quarters disagree
        True
    """
    x = np.asarray(chain, np.float64)
    piece = x.shape[0] // NUM_SPLITS
    kept = x[x.shape[0] - NUM_SPLITS * piece :]
    return mcmc.rhat(kept.reshape(NUM_SPLITS, piece, *x.shape[1:]))


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
                "ok": bool(z <= THRESHOLDS.drift_z or abs(change[c]) <= tolerance),
            }
    return out


def _chain(c: int, x: np.ndarray, drift: dict[str, dict]) -> tuple[dict[str, Any], np.ndarray]:
    """One chain's checks on its draws ``x`` (samples, quantities), and its R-hat per
    quantity."""
    rhat = quarter_rhat(x)
    defined = rhat[~np.isnan(rhat)]
    ess = mcmc.ess_bulk(x[None])
    ess = ess[np.isfinite(ess)]
    check = {
        "chain": c,
        "moved": bool(defined.size),  # a chain none of whose predictions change is stuck
        "rhat_share_below": float(np.mean(defined < THRESHOLDS.within_rhat_threshold))
        if defined.size
        else 1.0,
        "ess_p5": float(np.quantile(ess, 1.0 - THRESHOLDS.chain_ess_share)) if ess.size else None,
        "ess_min": float(ess.min()) if ess.size else None,
        "drift": drift,
    }
    check["stationary"] = bool(
        check["moved"]
        and check["rhat_share_below"] >= THRESHOLDS.within_rhat_share
        and (check["ess_p5"] is None or check["ess_p5"] >= THRESHOLDS.min_chain_ess)
        and all(d["ok"] for d in drift.values())
    )
    return check, rhat


def stalled(x: np.ndarray, found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failing chains that more draws will not make stationary: each failed already on
    its first 1/``stall_length`` of draws, and its ESS grew less than ``stall_gain`` times
    since. ``None`` when no chain fails, a failing one is still gaining, or the first part is
    too short to judge.

    Args:
        x: the draws, (chains, samples, quantities).
        found: each chain's checks on all of them.

    Example:
        >>> walk = np.cumsum(np.random.default_rng(0).normal(size=(2, 1000, 5)), axis=1)
        >>> stalled(walk, stationarity(walk).figures["chains"])["chains"]
        [0, 1]
    """
    failing = [c for c in found if not c["stationary"]]
    early = x.shape[1] // THRESHOLDS.stall_length
    if not failing or early < max(THRESHOLDS.stall_min_draws, MIN_WITHIN_DRAWS):
        return None
    gains, before = [], []
    for check in failing:
        first, _ = _chain(check["chain"], x[check["chain"], :early], {})
        if first["stationary"]:
            return None  # it passed on its first part: what it fails now is no stall
        then, now = first["ess_p5"], check["ess_p5"]
        known = then is not None and now is not None and then > 0
        gains.append(now / then if known else 1.0)
        before.append(then if then is not None else np.inf)
    if max(gains) >= THRESHOLDS.stall_gain:
        return None
    return {
        "chains": [c["chain"] for c in failing],
        "draws": int(x.shape[1]),
        "early": int(early),
        "ess_early": float(np.min(before)),
        "ess": float(min(c["ess_p5"] if c["ess_p5"] is not None else np.inf for c in failing)),
    }


def stationarity(
    draws: np.ndarray,
    *,
    functionals: dict[str, np.ndarray] | None = None,
    quantities: str = "test predictions",
) -> Finding:
    """Level 1: whether each chain is stationary on its own.

    Args:
        draws: the quantities judged, (chains, samples, ...): the test predictions, or the
            parameters of a log density.
        functionals: slow functionals by name, each (chains, draws): ``"log posterior"``,
            ``"test LPD"``, ``"mean log noise std"`` (:data:`DRIFT_TOLERANCE` names their
            tolerances); those shorter than 16 draws are not judged.
        quantities: what ``draws`` are, in the problems' words.

    Returns:
        The finding; its figures: ``chains`` (per chain: ``moved``, whether any test
        prediction changes; ``rhat_share_below``, ``ess_p5``, ``ess_min``, ``drift`` of each
        functional, ``stationary``), ``rhat_histogram`` (:func:`rhat_histogram` of each test
        prediction's worst chain) and ``stalled`` (:func:`stalled`).
    """
    x = np.asarray(draws, np.float64)
    chains, samples = x.shape[:2]
    if samples < MIN_WITHIN_DRAWS:
        return Finding(
            "fail",
            (
                f"{samples} kept draws per chain are too few to judge a chain on its own "
                f"(needs {MIN_WITHIN_DRAWS})",
            ),
            {"chains": None, "rhat_histogram": None, "stalled": None},
            (MORE_DRAWS,),
        )
    x = x.reshape(chains, samples, -1)
    drifts = _drifts(functionals or {}, chains)
    found, rhats = zip(*(_chain(c, x[c], drifts[c]) for c in range(chains)), strict=True)
    found = list(found)
    stacked = np.stack(rhats)
    defined = np.isfinite(stacked)
    worst = np.where(defined.any(0), np.where(defined, stacked, -np.inf).max(0), np.nan)
    problems = _problems(found, quantities)
    stall = stalled(x, found) if problems else None
    remedies = []
    if any(not c["drift"].get("log posterior", {"ok": True})["ok"] for c in found):
        remedies.append(LONGER_START)
    if problems:
        remedies.append(ANOTHER_POSTERIOR if stall else MORE_DRAWS)
    if stall:
        problems.append(
            f"{chain_names(stall['chains'])} kept {stall['draws']} draws each, "
            f"{THRESHOLDS.stall_length} times their first {stall['early']}, and their ESS grew "
            f"only from {stall['ess_early']:.1f} to {stall['ess']:.1f}: more draws will not help"
        )
    return Finding(
        "fail" if problems else "pass",
        tuple(problems),
        {"chains": found, "rhat_histogram": rhat_histogram(worst), "stalled": stall},
        tuple(remedies),
    )


def chain_names(indices: list[int]) -> str:
    """``chain 2`` or ``chains 0, 1 and 3``.

    Example:
        >>> chain_names([2]), chain_names([0, 1, 3])
        ('chain 2', 'chains 0, 1 and 3')
    """
    names = [str(i) for i in indices]
    if len(names) == 1:
        return f"chain {names[0]}"
    return f"chains {', '.join(names[:-1])} and {names[-1]}"


def _problems(found: list[dict[str, Any]], quantities: str) -> list[str]:
    """One sentence per check that some chain fails, naming the chains and the figures."""
    t = THRESHOLDS
    problems = []
    bad = [c for c in found if not c["moved"]]
    if bad:
        problems.append(
            f"none of the {quantities} of {chain_names([c['chain'] for c in bad])} changes "
            "over its kept draws: the chain did not move"
        )
    bad = [c for c in found if c["rhat_share_below"] < t.within_rhat_share]
    if bad:
        problems.append(
            f"R-hat within {chain_names([c['chain'] for c in bad])} is below "
            f"{t.within_rhat_threshold} on only "
            + ", ".join(f"{c['rhat_share_below']:.0%}" for c in bad)
            + f" of the {quantities} (needs {t.within_rhat_share:.0%})"
        )
    bad = [c for c in found if c["ess_p5"] is not None and c["ess_p5"] < t.min_chain_ess]
    if bad:
        problems.append(
            f"the bulk ESS of {chain_names([c['chain'] for c in bad])} is "
            + ", ".join(f"{c['ess_p5']:.0f}" for c in bad)
            + f" on {t.chain_ess_share:.0%} of the {quantities} (needs {t.min_chain_ess:.0f})"
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
                + f" (at most {t.drift_z:g} standard errors)"
            )
    return problems
