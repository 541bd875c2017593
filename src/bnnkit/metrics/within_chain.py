r"""Whether each Markov chain has mixed on its own, whatever the other chains do.

Chains started from the members of a deep ensemble sit in different modes, so agreement
between chains cannot be asked of them; each chain is judged by itself, as MILE (Sommer et al.,
ICLR 2025) does. A chain has mixed when all of these hold:

- **split R-hat within the chain**: its kept draws cut into ``NUM_SPLITS`` = 4 consecutive
  pieces (the first N mod 4 draws dropped), taken as 4 chains, give the rank-normalised R-hat
  of Vehtari et al. (2021) (:func:`bnnkit.metrics.mcmc.rhat`, which splits each piece again)
  below ``WITHIN_RHAT_THRESHOLD`` on at least ``WITHIN_RHAT_SHARE`` of the quantities: the
  chain's quarters agree, so it is not drifting or stuck in a region for a quarter of its run;
- **ESS of the chain**: its bulk ESS (:func:`bnnkit.metrics.mcmc.ess_bulk` of the chain alone)
  is at least ``MIN_CHAIN_ESS`` on at least ``CHAIN_ESS_SHARE`` of the quantities (the smallest
  is reported too);
- **running log predictive density flat over the last half** (when the predictive density of
  each draw at each test point is given): see :func:`lpd_drift`;
- **log posterior not rising** while samples are kept: see :func:`rising_chains`.

The two thresholds on R-hat and ESS were set together, from AR(1) chains of 2,000 quantities
(N draws, autocorrelation ρ, true ESS ≈ N(1 − ρ)/(1 + ρ)): a chain whose true ESS is about 100
or more passes both on ≥ 99 % of its quantities (independent draws, N = 100: 99 % below 1.1,
96 % with ESS ≥ 50; ρ = 0.5, N = 300: 99.5 % and 97 %), one whose true ESS is about 50 fails
both (ρ = 0.5, N = 150: 85 % and 61 %). That is Vehtari et al.'s (2021) 100 effective draws per
chain before its R-hat and Monte Carlo errors can be trusted.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.normal(size=(2, 400, 30))
    >>> draws[1] += np.linspace(0.0, 4.0, 400)[:, None]  # chain 1 drifts by 4 sds
    >>> [check.mixed for check in check_chains(draws)]
    [True, False]
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from bnnkit.errors import ConfigError
from bnnkit.metrics import mcmc

#: Consecutive pieces each chain is cut into for its own R-hat (MILE's 4 splits).
NUM_SPLITS = 4
#: Fewest kept draws per chain for the within-chain checks: 4 per piece, the fewest
#: :func:`bnnkit.metrics.mcmc.rhat` takes.
MIN_WITHIN_DRAWS = NUM_SPLITS * mcmc.MIN_DRAWS
#: R-hat within a chain below this counts as agreement of its quarters. Each piece is an eighth
#: of the chain once R-hat splits it again, so at a given ESS its R-hat scatters more than the
#: between-chain one of halves (1.05); 1.1 is Gelman et al.'s (BDA3) classic bar, and passes
#: chains of about 100 effective draws (see the module's docstring).
WITHIN_RHAT_THRESHOLD = 1.1
#: Share of quantities whose within-chain R-hat must be below the threshold (as between chains).
WITHIN_RHAT_SHARE = 0.95
#: Smallest bulk ESS of a chain on ``CHAIN_ESS_SHARE`` of its quantities: with the R-hat bar it
#: passes chains of about 100 effective draws, and two agreeing chains of 50 reach the
#: between-chain ``MIN_ESS`` of 100 together.
MIN_CHAIN_ESS = 50.0
#: Share of quantities whose per-chain ESS must reach ``MIN_CHAIN_ESS``. Not all of them: one
#: chain's ESS estimate rests on the difference of its two halves, whose left tail is long, so
#: the smallest of thousands of estimates is noise (independent draws, N = 100: the smallest of
#: 2,000 is about 3, the 5th percentile about 55).
CHAIN_ESS_SHARE = 0.95
#: A change of the running log predictive density this many standard errors from zero means
#: the chain has not settled (two-sided; under stationarity about 6e-5 per chain).
LPD_Z = 4.0
#: Changes of the log predictive density below this (nats per test point) count as flat
#: whatever their standard error: tables report test log-likelihoods to two decimals.
LPD_TOLERANCE = 0.01
#: A kept half's mean log posterior this many standard errors above the first half's means the
#: chain is still climbing. Under stationarity a one-sided excess of 4 standard errors has
#: probability about 3e-5 per chain, so the check practically never fires on a chain that has
#: settled; the standard errors come from each half's ESS, which a trend shrinks, so a trend
#: makes the check conservative rather than trigger-happy.
RISE_Z = 4.0
#: Points of each chain's running log predictive density kept for plots.
CURVE_POINTS = 64


def half_difference(trace: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The second half's mean minus the first half's, per chain, and its standard error.

    Each trace is cut in halves ``a`` and ``b`` (the middle value dropped for an odd length);

    .. math:: \mathrm{se} = \sqrt{\operatorname{Var}(a)/\mathrm{ESS}(a)
              + \operatorname{Var}(b)/\mathrm{ESS}(b)},

    with ESS the ESS of a half's mean on its own (:func:`bnnkit.metrics.mcmc.ess_mean`, not
    split: a drift within the half would count as disagreement between its halves and hide the
    very change this measures), between 1 and the half's length.

    Args:
        trace: (chains, T), T >= 8.

    Returns:
        ``(b̄ − ā, se)``, each (chains,).
    """
    trace = np.asarray(trace, np.float64)
    half = trace.shape[1] // 2
    a, b = trace[:, :half], trace[:, trace.shape[1] - half :]

    def mean_var(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ess = mcmc.ess_mean(x.T[None], split=False)
        ess = np.where(np.isfinite(ess), np.clip(ess, 1.0, x.shape[1]), 1.0)
        return x.mean(axis=1), x.var(axis=1, ddof=1) / ess

    (mean_a, var_a), (mean_b, var_b) = mean_var(a), mean_var(b)
    return mean_b - mean_a, np.sqrt(var_a + var_b)


def rising_chains(log_posterior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Which chains' log posterior still rises over the kept iterations.

    The rise ``b̄ − ā`` of each chain's second half over its first is compared with its Monte
    Carlo standard error (:func:`half_difference`), and a chain rises when
    ``b̄ − ā > RISE_Z · se``.

    Args:
        log_posterior: the log posterior of each kept iteration, shaped (chains, samples),
            at least 8 samples per chain.

    Returns:
        ``(rising, z)``: per chain, whether it rises and its rise in standard errors.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> settled = rng.normal(size=(2, 200))
        >>> climbing = settled + np.linspace(0.0, 10.0, 200)  # still rising by 10 nats
        >>> rising_chains(np.concatenate([settled, climbing]))[0].tolist()
        [False, False, True, True]
    """
    rise, se = half_difference(log_posterior)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = rise / se
    z = np.where(np.isfinite(z), z, 0.0)  # a constant trace (a stuck chain) does not rise
    return z > RISE_Z, z


def running_lpd(log_density: np.ndarray) -> np.ndarray:
    r"""The running log predictive density of one chain's model average.

    .. math:: \mathrm{lpd}_t = \frac1P \sum_{i=1}^P \log \frac1t \sum_{s=1}^t p(y_i \mid x_i,
              \theta_s), \qquad t = 1, \dots, S,

    as MILE plots it: the model average of the chain's first t draws, scored on the test set.

    Args:
        log_density: ``log p(y_i | x_i, θ_s)`` of each draw s at each test point i, (S, P).

    Returns:
        (S,).

    Example:
        >>> import numpy as np
        >>> running_lpd(np.log(np.array([[0.5, 0.5], [0.1, 0.1]]))).round(4).tolist()
        [-0.6931, -1.204]
    """
    x = np.asarray(log_density, np.float64)
    with np.errstate(divide="ignore"):
        cumulative = np.logaddexp.accumulate(x, axis=0)
    return (cumulative - np.log(np.arange(1, x.shape[0] + 1))[:, None]).mean(axis=1)


class LpdCheck(NamedTuple):
    """The running log predictive density of one chain and whether it is flat.

    Attributes:
        final: ``lpd_S``, of the chain's whole model average (nats per test point).
        change: ``lpd_S − lpd_{S/2}``, its change over the last half as plotted.
        drift: ``lpd(b) − lpd(a)``, the log predictive densities of the model averages of
            the chain's second and first halves.
        drift_se: the Monte Carlo standard error of ``drift``.
        curve_draws: draws t at which the curve is kept (at most ``CURVE_POINTS``).
        curve: ``lpd_t`` at those draws.
    """

    final: float
    change: float
    drift: float
    drift_se: float
    curve_draws: tuple[int, ...]
    curve: tuple[float, ...]

    @property
    def flat(self) -> bool:
        """``|drift| <= max(LPD_Z · se, LPD_TOLERANCE)``."""
        return bool(abs(self.drift) <= max(LPD_Z * self.drift_se, LPD_TOLERANCE))

    def to_dict(self) -> dict[str, Any]:
        return {
            "final": self.final,
            "change": self.change,
            "drift": self.drift,
            "drift_se": self.drift_se,
            "flat": self.flat,
            "curve": {"draws": list(self.curve_draws), "lpd": list(self.curve)},
        }


def lpd_drift(log_density: np.ndarray) -> LpdCheck:
    r"""Whether one chain's running log predictive density is flat over its last half.

    Over the last half the running curve changes by ``lpd_S − lpd_{S/2}``. Part of that change
    is the gain of averaging twice as many draws (log is concave, so a model average of more
    draws scores higher even when every draw comes from the same distribution); the rest,
    to first order half the drift, is whether the second half predicts differently from the
    first. So the rule compares the model averages of the two halves, each of ⌊S/2⌋ draws:

    .. math:: \mathrm{drift} = \mathrm{lpd}(b) - \mathrm{lpd}(a),

    flat when ``|drift| <= max(LPD_Z · se, LPD_TOLERANCE)``. Its standard error comes from the
    linearisation ``log p̄_i(h) ≈ log p̄_i + (p̄_i(h) − p̄_i)/p̄_i`` around the whole chain's
    average p̄_i: the drift is then the difference of the halves' means of one number per
    draw, ``g_s = (1/P) Σ_i p(y_i | x_i, θ_s)/p̄_i``, whose standard error
    :func:`half_difference` takes from each half's variance and ESS. Taking one number per draw
    counts the correlation between test points (every point sees the same draws), which
    per-point standard errors would not.

    Args:
        log_density: ``log p(y_i | x_i, θ_s)`` of each draw at each test point, (S, P),
            S >= 8.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> f = rng.normal(size=(400, 20))  # predictions scattered around y = 0
        >>> drifting = f + np.linspace(0.0, 3.0, 400)[:, None]  # moving away from it
        >>> lpd_drift(-0.5 * f**2).flat, lpd_drift(-0.5 * drifting**2).flat
        (True, False)
    """
    x = np.asarray(log_density, np.float64)
    samples = x.shape[0]
    if samples < 8:
        raise ConfigError(
            f"the running log predictive density needs at least 8 draws, got {samples}"
        )
    half = samples // 2

    def lpd(part: np.ndarray) -> float:
        return float(np.mean(special.logsumexp(part, axis=0) - math.log(part.shape[0])))

    drift = lpd(x[samples - half :]) - lpd(x[:half])
    log_mean = special.logsumexp(x, axis=0) - math.log(samples)
    with np.errstate(invalid="ignore", over="ignore"):
        g = np.mean(np.exp(x - log_mean), axis=1)
    _, se = half_difference(g[None])
    curve = running_lpd(x)
    at = np.unique(np.linspace(1, samples, min(samples, CURVE_POINTS)).round().astype(int))
    return LpdCheck(
        float(curve[-1]),
        float(curve[-1] - curve[half - 1]),
        drift,
        float(se[0]),
        tuple(int(t) for t in at),
        tuple(float(v) for v in curve[at - 1]),
    )


def quarter_rhat(chain: np.ndarray) -> np.ndarray:
    """Rank-normalised R-hat of one chain's ``NUM_SPLITS`` consecutive pieces, per quantity.

    Args:
        chain: (S, quantities), S >= ``MIN_WITHIN_DRAWS``.

    Returns:
        (quantities,), NaN where a quantity does not vary.
    """
    x = np.asarray(chain, np.float64)
    piece = x.shape[0] // NUM_SPLITS
    kept = x[x.shape[0] - NUM_SPLITS * piece :]  # the earliest draws go: nearest the burn-in
    return mcmc.rhat(kept.reshape(NUM_SPLITS, piece, *x.shape[1:]))


class ChainCheck(NamedTuple):
    """The within-chain checks of one chain.

    Attributes:
        chain: its index.
        rhat_share_below: share of quantities whose R-hat over its quarters is below
            ``WITHIN_RHAT_THRESHOLD`` (1.0 when none varies).
        ess_min: its smallest bulk ESS over the quantities.
        ess_low: the ESS that ``CHAIN_ESS_SHARE`` of the quantities reach (its 5th
            percentile); NaN when none varies.
        lpd: its running log predictive density (``None`` when not given).
        rise_z: its log posterior's rise in standard errors (``None`` when not given).
    """

    chain: int
    rhat_share_below: float
    ess_min: float
    ess_low: float
    lpd: LpdCheck | None
    rise_z: float | None

    @property
    def rhat_ok(self) -> bool:
        return self.rhat_share_below >= WITHIN_RHAT_SHARE

    @property
    def ess_ok(self) -> bool:
        return bool(self.ess_low >= MIN_CHAIN_ESS)

    @property
    def lpd_ok(self) -> bool:
        return self.lpd is None or self.lpd.flat

    @property
    def rising(self) -> bool | None:
        return None if self.rise_z is None else bool(self.rise_z > RISE_Z)

    @property
    def mixed(self) -> bool:
        """Every within-chain check passes."""
        return self.rhat_ok and self.ess_ok and self.lpd_ok and not self.rising

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable."""
        return {
            "chain": self.chain,
            "mixed": self.mixed,
            "rhat_share_below": self.rhat_share_below,
            "ess_min": self.ess_min,
            "ess_p5": self.ess_low,
            "lpd": None if self.lpd is None else self.lpd.to_dict(),
            "rise_z": self.rise_z,
            "rising": self.rising,
        }


def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, np.float64).ravel()
    return values[np.isfinite(values)]


def check_chains(
    draws: np.ndarray,
    *,
    log_density: np.ndarray | None = None,
    log_posterior: np.ndarray | None = None,
) -> list[ChainCheck]:
    """The within-chain checks of every chain.

    Args:
        draws: (chains, samples, ...): the quantities judged (predictions on test inputs, or
            parameters), at least ``MIN_WITHIN_DRAWS`` samples per chain.
        log_density: ``log p(y_i | x_i, θ_s)`` of each draw at each test point,
            (chains, samples, points), for the running log predictive density.
        log_posterior: the log posterior of each kept iteration, (chains, iterations); the
            rise is checked with at least 8 per chain (and a trace of other chains than
            ``draws``' is not attributed to them).

    Raises:
        ConfigError: fewer than ``MIN_WITHIN_DRAWS`` samples per chain.
    """
    x = np.asarray(draws, np.float64)
    chains, samples = x.shape[:2]
    if samples < MIN_WITHIN_DRAWS:
        raise ConfigError(
            f"the within-chain checks need at least {MIN_WITHIN_DRAWS} samples "
            f"per chain, got {samples}"
        )
    x = x.reshape(chains, samples, -1)
    rise = None
    if (
        log_posterior is not None
        and np.shape(log_posterior)[0] == chains
        and np.shape(log_posterior)[1] >= 8
    ):
        rise = rising_chains(log_posterior)[1]
    checks = []
    for c in range(chains):
        rhat = quarter_rhat(x[c])
        defined = rhat[~np.isnan(rhat)]
        share = float(np.mean(defined < WITHIN_RHAT_THRESHOLD)) if defined.size else 1.0
        ess = _finite(mcmc.ess_bulk(x[c][None]))
        low = float(np.quantile(ess, 1.0 - CHAIN_ESS_SHARE)) if ess.size else float("nan")
        checks.append(
            ChainCheck(
                c,
                share,
                float(ess.min()) if ess.size else float("nan"),
                low,
                None if log_density is None else lpd_drift(np.asarray(log_density)[c]),
                None if rise is None else float(rise[c]),
            )
        )
    return checks
