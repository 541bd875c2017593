r"""Per-quantity MCMC diagnostics of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021).

"Rank-normalization, folding, and localization: an improved R-hat for assessing convergence of
MCMC" (Bayesian Analysis 16(2)): rank-normalised split R-hat, bulk and tail effective sample
sizes (ESS) and Monte Carlo standard errors (MCSE), computed as Stan and ArviZ compute them, in
NumPy (no ArviZ needed) and for any number of quantities at once.

Every function takes draws shaped (chains, samples, ...): M chains of N draws of any number of
scalar quantities, and returns an array shaped like one draw (``draws.shape[2:]``). The
quantities are handled together, a block of them at a time (to bound memory): one sort, one
rank and one FFT over the sample axis per block, no Python loop per quantity. This module checks
the draws and cuts them into blocks; the estimators (split chains, rank normalisation, folding,
R-hat, Geyer's ESS, the Monte Carlo errors) work on a block, in
:mod:`bnnkit.metrics.mcmc_blocks`, whose docstring states their formulas.

What each quantity is:

- :func:`rhat`: max(bulk R-hat, tail R-hat), the R-hat of the rank-normalised split draws and of
  the rank-normalised folded split draws; below 1.01 is Vehtari et al.'s bar for final results;
- :func:`ess_bulk`: the ESS of the rank-normalised split draws, for the centre of the
  distribution; :func:`ess_tail`: the smaller ESS of the indicators I(θ ≤ q_5%) and
  I(θ ≤ q_95%), for the 5 % and 95 % quantiles;
- :func:`ess_mean`, :func:`ess_sd`, :func:`ess_quantile`: the split-chain ESS of θ, of
  (θ − θ̄)² and of I(θ ≤ q_p), without rank normalisation (``ess_mean(split=False)``: of the
  chains as they are);
- :func:`mcse_mean` = sd(θ)/√ESS_mean; :func:`mcse_sd` by the delta method on the variance;
  :func:`mcse_quantile` from the Beta distribution of the quantile's rank.

Where this differs from ArviZ 0.23 (on purpose; everything else agrees to float rounding):

- a constant quantity (its range within float64 resolution, 1e-15, of its magnitude) gives NaN
  everywhere: it has no R-hat, ESS or Monte Carlo error (ArviZ reports ESS = S and MCSE 0);
  so does one with a NaN draw (as in ArviZ) or an infinite one;
- :func:`rhat` of a single chain is the R-hat of its two halves (ArviZ: NaN);
- fewer than 4 draws per chain raise :class:`bnnkit.ConfigError` (ArviZ: NaN and a warning);
- a series is taken as constant relative to its magnitude, not below ArviZ's absolute 1e-15,
  so quantities of tiny scale (a probability of 1e-9) keep their ESS.

Example:
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(4, 1000, 3))  # 4 chains, 3 quantities
    >>> rhat(draws).shape, bool(np.all(rhat(draws) < 1.01))
    ((3,), True)
    >>> stuck = draws + np.arange(4)[:, None, None]  # every chain somewhere else
    >>> bool(np.all(rhat(stuck) > 1.5))
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from bnnkit.arguments import array_argument, number_argument
from bnnkit.errors import ConfigError
from bnnkit.metrics import mcmc_blocks as blocks
from bnnkit.metrics.mcmc_blocks import TAIL_PROB

#: Fewest draws per chain: each split half needs two for a variance.
MIN_DRAWS = 4
#: Draws per block of quantities computed together (8 MiB of float64): it bounds the
#: temporaries; docs/performance.md (Evaluation) has the timings of other sizes.
_BLOCK = 1 << 20


def _as_draws(draws: np.ndarray, what: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Draws as float64 (chains, samples, quantities) and the shape of one draw."""
    x = array_argument(draws, "draws", where=what, kinds="biuf").astype(np.float64)
    if x.ndim < 2 or x.shape[0] < 1 or x.shape[1] < MIN_DRAWS:
        raise ConfigError(
            f"{what} needs draws shaped (chains, samples, ...) with at least "
            f"{MIN_DRAWS} samples per chain, got shape {x.shape}"
        )
    shape = x.shape[2:]
    return x.reshape(*x.shape[:2], math.prod(shape)), shape


def _blockwise(
    x: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], *, mask: bool = True
) -> np.ndarray:
    """``statistic`` of every quantity of (M, N, K) draws, (..., K).

    ``statistic`` takes (K', M, N) with each quantity's draws contiguous, so that the sorts,
    ranks and FFTs along the last axis read memory in order, and returns (..., K'); with
    ``mask`` its values are NaN for a constant quantity. The quantities go a block of about
    ``_BLOCK`` draws at a time, which bounds the temporaries (ranks, sorted copies, spectra)
    however many quantities there are.
    """
    chains, samples, k = x.shape
    step = max(1, _BLOCK // (chains * samples))
    parts = []
    for start in range(0, max(k, 1), step):
        block = np.ascontiguousarray(x[:, :, start : start + step].transpose(2, 0, 1))
        # NaN or infinite draws make invalid operations; their results are masked (NaN).
        with np.errstate(invalid="ignore", divide="ignore"):
            values = statistic(block)
        parts.append(np.where(blocks.is_constant(block), np.nan, values) if mask else values)
    return np.concatenate(parts, axis=-1)


def _check_prob(prob: float, what: str) -> float:
    if not 0.0 < number_argument(prob, "prob", where=what) < 1.0:
        raise ConfigError(f"{what} needs probabilities in (0, 1), got {prob!r}")
    return float(prob)


def rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat: max(bulk R-hat, tail R-hat) (Vehtari et al. 2021, §4.2).

    Bulk R-hat is the R-hat of z = Φ⁻¹((r − 3/8)/(S + 1/4)) of the split chains; tail R-hat
    that of the rank-normalised folded draws |θ − median(θ)|. It flags chains whose locations
    or spreads differ, and (through the split) a chain that drifts.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> rng = np.random.default_rng(1)
        >>> mixed = rng.standard_cauchy(size=(4, 500))  # heavy tails: ranks do not mind
        >>> bool(rhat(mixed) < 1.01)
        True
        >>> drifting = np.cumsum(rng.normal(size=(4, 500)), axis=1)  # random walks
        >>> bool(rhat(drifting) > 1.1)
        True
    """
    x, shape = _as_draws(draws, "rhat")
    return _blockwise(x, blocks.rank_rhat).reshape(shape)


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size: the ESS of the rank-normalised split chains.

    ESS = S/τ̂ of z = Φ⁻¹((r − 3/8)/(S + 1/4)), τ̂ = −1 + 2 Σ ρ̂ from Geyer's initial monotone
    sequence (see the module docstring); it measures how well the centre of the distribution
    (mean, median) is estimated, even for heavy tails.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> rng = np.random.default_rng(2)
        >>> iid = rng.normal(size=(4, 1000))
        >>> bool(3000 < ess_bulk(iid) < 5000)  # about 4 × 1000
        True
        >>> sticky = np.repeat(iid[:, :100], 10, axis=1)  # each draw kept 10 times
        >>> bool(ess_bulk(sticky) < 600)
        True
    """
    x, shape = _as_draws(draws, "ess_bulk")
    return _blockwise(x, blocks.bulk_ess).reshape(shape)


def ess_tail(draws: np.ndarray, prob: tuple[float, float] = TAIL_PROB) -> np.ndarray:
    """Tail effective sample size: min over q ∈ ``prob`` of the split ESS of I(θ ≤ θ_q).

    θ_q is the q-quantile of all draws (R's type 7); the indicators' ESS says how well the
    quantiles, and so the tails, are estimated (Vehtari et al. 2021, §4.3).

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.
        prob: the two quantiles' probabilities, each in (0, 1).

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain, or a probability outside (0, 1).

    Example:
        >>> rng = np.random.default_rng(3)
        >>> iid = rng.normal(size=(4, 1000))
        >>> bool(3000 < ess_tail(iid) < 5000)
        True
    """
    x, shape = _as_draws(draws, "ess_tail")
    low, high = (_check_prob(p, "ess_tail") for p in prob)
    return _blockwise(
        x, lambda block: blocks.tail_ess(block, blocks.ascending(block), (low, high))
    ).reshape(shape)


def ess_mean(draws: np.ndarray, *, split: bool = True) -> np.ndarray:
    """Effective sample size of the mean: the split-chain ESS of θ itself (ArviZ "mean").

    The ESS for which Var(θ̄) ≈ Var(θ)/ESS; it needs θ to have a finite variance.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.
        split: split the chains (the default). ``False`` takes them as they are (ArviZ
            "identity"): for a test of whether a chain drifts, whose standard error the split
            would inflate by counting that drift as disagreement between halves.

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> rng = np.random.default_rng(4)
        >>> ar1 = np.zeros((4, 2000))  # AR(1) with ρ = 0.5: ESS ≈ S (1 − ρ)/(1 + ρ)
        >>> for t in range(1, 2000):
        ...     ar1[:, t] = 0.5 * ar1[:, t - 1] + rng.normal(size=4)
        >>> bool(2000 < ess_mean(ar1) < 3300)  # 8000 / 3 ≈ 2667
        True
        >>> bool(2000 < ess_mean(ar1, split=False) < 3300)
        True
    """
    x, shape = _as_draws(draws, "ess_mean")
    chains = blocks.split_chains if split else (lambda block: block)
    return _blockwise(x, lambda block: blocks.geyer_ess(chains(block))).reshape(shape)


def ess_sd(draws: np.ndarray) -> np.ndarray:
    """Effective sample size of the standard deviation: the split ESS of (θ − θ̄)² (ArviZ "sd").

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> iid = np.random.default_rng(5).normal(size=(4, 1000))
        >>> bool(3000 < ess_sd(iid) < 5000)
        True
    """
    x, shape = _as_draws(draws, "ess_sd")
    return _blockwise(x, blocks.sd_ess).reshape(shape)


def ess_quantile(draws: np.ndarray, prob: float) -> np.ndarray:
    """Effective sample size of the ``prob``-quantile: the split ESS of I(θ ≤ θ_prob).

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.
        prob: the quantile's probability, in (0, 1).

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain, or ``prob`` outside (0, 1).

    Example:
        >>> iid = np.random.default_rng(6).normal(size=(4, 1000))
        >>> bool(3000 < ess_quantile(iid, 0.5) < 5000)
        True
    """
    x, shape = _as_draws(draws, "ess_quantile")
    prob = _check_prob(prob, "ess_quantile")
    return _blockwise(x, lambda block: blocks.quantile_ess(block, prob)).reshape(shape)


def mcse_mean(draws: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of the mean: sd(θ)/√ESS_mean (sd with ddof 1).

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> iid = np.random.default_rng(7).normal(size=(4, 2500))  # 1/√10000 = 0.01
        >>> bool(0.009 < mcse_mean(iid) < 0.011)
        True
    """
    x, shape = _as_draws(draws, "mcse_mean")
    return _blockwise(x, blocks.mean_mcse).reshape(shape)


def mcse_sd(draws: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of the standard deviation, by the delta method.

    With s = (θ − θ̄)² and σ̂² = mean(s): Var(σ̂²) ≈ Var(s)/ESS_mean(s) and
    MCSE(σ̂) = √(Var(σ̂²)/(4σ̂²)), as ArviZ computes it.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> iid = np.random.default_rng(8).normal(size=(4, 2500))
        >>> bool(0.006 < mcse_sd(iid) < 0.008)  # √(2/10000)/2 ≈ 0.0071 for normal draws
        True
    """
    x, shape = _as_draws(draws, "mcse_sd")
    return _blockwise(x, blocks.sd_mcse).reshape(shape)


def mcse_quantile(draws: np.ndarray, prob: float) -> np.ndarray:
    """Monte Carlo standard error of the ``prob``-quantile.

    The rank of the quantile among ESS effective draws is Beta(ESS·p + 1, ESS·(1 − p) + 1)
    distributed, with ESS that of I(θ ≤ θ_p); the MCSE is half the distance between the draws
    at that distribution's 15.9 % and 84.1 % points (±1 sd of a normal).

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.
        prob: the quantile's probability, in (0, 1).

    Returns:
        An array shaped like one draw; NaN for a constant quantity.

    Raises:
        ConfigError: fewer than 4 samples per chain, or ``prob`` outside (0, 1).

    Example:
        >>> iid = np.random.default_rng(9).normal(size=(4, 2500))
        >>> # √(p(1 − p)/S)/φ(Φ⁻¹(p)) = 0.0125 for the median of 10000 normal draws; the
        >>> # estimate is a difference of two draws, so it scatters by about 11 % around that
        >>> bool(0.0075 < mcse_quantile(iid, 0.5) < 0.0175)
        True
    """
    x, shape = _as_draws(draws, "mcse_quantile")
    prob = _check_prob(prob, "mcse_quantile")
    return _blockwise(x, lambda block: blocks.quantile_mcse(block, prob)).reshape(shape)


#: What :func:`diagnose` returns, in order: the summary statistics of every quantity.
COLUMNS = ("mean", "sd", "q5", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")


def diagnose(draws: np.ndarray) -> dict[str, np.ndarray]:
    """Every per-quantity statistic of a posterior summary at once, in one pass over the draws.

    The mean, the standard deviation (ddof 1), the 5 % and 95 % quantiles (R's type 7), and
    :func:`mcse_mean`, :func:`mcse_sd`, :func:`ess_bulk`, :func:`ess_tail` and :func:`rhat`,
    equal to what those functions return; the five ESS series share one FFT.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        ``{column: array shaped like one draw}`` for every name in :data:`COLUMNS`; a constant
        quantity has its mean, sd and quantiles and NaN diagnostics.

    Raises:
        ConfigError: fewer than 4 samples per chain.

    Example:
        >>> draws = np.random.default_rng(10).normal(size=(4, 1000, 2))
        >>> table = diagnose(draws)
        >>> list(table) == list(COLUMNS), table["r_hat"].shape
        (True, (2,))
        >>> bool(np.array_equal(table["ess_bulk"], ess_bulk(draws)))
        True
    """
    x, shape = _as_draws(draws, "diagnose")
    table = _blockwise(x, blocks.summary_table, mask=False)
    return {name: column.reshape(shape) for name, column in zip(COLUMNS, table, strict=True)}
