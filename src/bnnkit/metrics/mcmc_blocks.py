r"""The estimators of Vehtari et al. (2021) on a block of quantities at once, (K, M, N).

:mod:`bnnkit.metrics.mcmc` checks the draws, cuts the quantities into blocks (to bound memory)
and calls these; each takes K quantities' M chains of N draws with each quantity's draws
contiguous, (K, M, N), so that the sorts, ranks and FFTs along the last axis read memory in
order, and returns one value per quantity, (..., K). There is no Python loop per quantity or per
lag: they are array operations over the block.

The pieces:

- **Split chains.** Each chain is cut into its first and last ⌊N/2⌋ draws (the middle one is
  dropped when N is odd): M' = 2M chains of N' = ⌊N/2⌋ draws, S = M'N' in all. A chain that
  drifts then looks like two chains that disagree.
- **Rank normalisation.** With r the rank of a draw among all S (ties get their average rank),
  z = Φ⁻¹((r − 3/8)/(S + 1/4)) (Blom 1958). Ranks need no finite mean or variance (Cauchy
  draws are fine) and do not change under monotone transforms.
- **Folding.** ζ = |θ − median(θ)|; its rank-normalised R-hat compares the chains' spreads
  (tails) where the plain one compares their locations.
- **R-hat** of M' chains of N' draws with chain means θ̄_m and variances s²_m:
  W = mean_m s²_m, B = N'·Var_m(θ̄_m) (both with ddof 1),
  var⁺ = (N' − 1)/N' · W + B/N', R̂ = √(var⁺/W).
- **ESS.** Autocorrelations across chains ρ̂_t = 1 − (W − mean_m γ̂_{m,t})/var⁺, with each
  chain's autocovariance γ̂_{m,t} (divided by N') from one zero-padded FFT, and ρ̂_0 = 1.
  Geyer's initial positive sequence: sum the pairs P_k = ρ̂_{2k} + ρ̂_{2k+1} while they are
  positive (up to the first non-positive pair K, or lag N' − 2); Geyer's initial monotone
  sequence: replace each P_k by min(P_0, …, P_k). Then
  τ̂ = −1 + 2 Σ_{k<K} P_k + ρ̂_{2K} (that last term when positive), floored at 1/log10(S), and
  ESS = S/τ̂, so ESS ≤ S·log10(S) (antithetic chains can beat independent draws, but not by
  more), as ArviZ caps it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import fft, special

#: The quantiles whose indicators the tail ESS looks at (Vehtari et al. 2021, §4.3).
TAIL_PROB = (0.05, 0.95)
#: Blom's (1958) offset in the rank normalisation (r − 3/8)/(S + 1/4).
_BLOM = 3.0 / 8.0
#: A series whose range is below this share of its magnitude is constant (float64 rounding).
_RESOLUTION = float(np.finfo(np.float64).resolution)
#: Φ(−1) and Φ(1): the Beta quantiles of a quantile's rank that span ±1 standard error.
_ONE_SD = (0.1586553, 0.8413447)


def is_constant(x: np.ndarray) -> np.ndarray:
    """Per quantity of (K, M, N): its range is rounding, or a draw is NaN or infinite (then
    neither its variance nor its diagnostics are defined either)."""
    low, high = x.min(axis=(1, 2)), x.max(axis=(1, 2))
    with np.errstate(invalid="ignore"):
        constant = (high - low) <= _RESOLUTION * np.maximum(np.abs(low), np.abs(high))
    return constant | ~np.isfinite(low) | ~np.isfinite(high)


def split_chains(x: np.ndarray) -> np.ndarray:
    """(K, M, N) -> (K, 2M, ⌊N/2⌋): every chain's first and last halves as chains.

    The halves of chain m are chains 2m and 2m + 1 (ArviZ puts all first halves before all
    second ones; every diagnostic is symmetric in the chains). For even N that is a view.
    """
    k, m, n = x.shape
    half = n // 2
    if n % 2:
        x = np.concatenate([x[:, :, :half], x[:, :, n - half :]], axis=2)
    return x.reshape(k, 2 * m, half)


def z_scale(x: np.ndarray) -> np.ndarray:
    """Rank normalisation over chains and samples together, per quantity of (K, M, N)."""
    k, m, n = x.shape
    size = m * n
    flat = x.reshape(k, size)
    order = np.argsort(flat, axis=1)
    ordered = np.sort(flat, axis=1)  # sorting again is cheaper than gathering by ``order``
    # Tied draws share their average rank r = (first + last)/2 + 1 (0-based positions in the
    # sorted order), so 2r − 2 = first + last indexes a table of Φ⁻¹ at every half rank: the
    # same float operations as evaluating it per draw, at a fraction of the cost.
    position = np.arange(size)
    if np.any(ordered[:, 1:] == ordered[:, :-1]):
        new = np.ones((k, size), dtype=bool)
        new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        first = np.maximum.accumulate(np.where(new, position, 0), axis=1)
        ends = np.ones((k, size), dtype=bool)
        ends[:, :-1] = new[:, 1:]
        # The last of a group is the first of it read backwards.
        from_end = np.maximum.accumulate(np.where(ends[:, ::-1], position, 0), axis=1)
        index = first + (size - 1 - from_end[:, ::-1])
    else:
        index = np.broadcast_to(2 * position, (k, size))
    half_ranks = np.arange(1.0, size + 0.5, 0.5)
    table = special.ndtri((half_ranks - _BLOM) / (size - 2 * _BLOM + 1))
    z = np.empty_like(flat)
    np.put_along_axis(z, order, table[index], axis=1)
    return z.reshape(k, m, n)


def flat(x: np.ndarray) -> np.ndarray:
    """(K, M, N) -> (K, S): each quantity's draws in one row."""
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2])


def ascending(x: np.ndarray) -> np.ndarray:
    """Each quantity's draws of (K, M, N) in ascending order, (K, S)."""
    return np.sort(flat(x), axis=1)


def type7_quantiles(values: np.ndarray, probs: Sequence[float]) -> np.ndarray:
    """R's type-7 quantiles of sorted draws (K, S), (len(probs), K), computed exactly as
    ``scipy.stats.mstats.mquantiles(alphap=1, betap=1)`` (what ArviZ uses)."""
    size = values.shape[1]
    p = np.asarray(probs, dtype=np.float64)
    aleph = size * p + (1.0 - p)
    index = np.floor(np.clip(aleph, 1, size - 1)).astype(np.intp)
    gamma = np.clip(aleph - index, 0, 1)[:, None]
    return (1.0 - gamma) * values[:, index - 1].T + gamma * values[:, index].T


def mean_autocov(x: np.ndarray) -> np.ndarray:
    """The chains' mean autocovariance at every lag (each divided by N), (K, N) from (K, M, N).

    One real FFT per chain and quantity, zero-padded to ≥ 2N − 1 so no lag wraps around; the
    chains' power spectra are averaged before the one inverse FFT, which is linear.
    """
    _, m, n = x.shape
    length = fft.next_fast_len(2 * n, real=True)
    padded = np.zeros((*x.shape[:2], length))
    np.subtract(x, x.mean(axis=2, keepdims=True), out=padded[:, :, :n])
    # |F|² summed over chains, squaring the real and imaginary parts in place: the spectra are
    # the largest arrays here, so no temporary of their size.
    parts = fft.rfft(padded, axis=2, overwrite_x=True).view(np.float64)
    np.square(parts, out=parts)
    summed = parts.sum(axis=1)
    power = (summed[:, 0::2] + summed[:, 1::2]) / m
    return fft.irfft(power, n=length, axis=1)[:, :n] / n


def geyer_ess(x: np.ndarray) -> np.ndarray:
    """ESS per quantity of (K, M, N) chains with Geyer's initial monotone sequence.

    ArviZ's ``_ess`` without its Python loop over lags: the pair sums, their running minimum
    and the truncation point are array operations over all quantities at once. A constant
    series (an indicator that is always true) gets ESS = S, as in ArviZ.
    """
    _, m, n = x.shape
    acov = mean_autocov(x)
    within = acov[:, :1] * n / (n - 1.0)
    var_plus = within * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + x.mean(axis=2).var(axis=1, ddof=1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within - acov) / var_plus
    rho[:, 0] = 1.0
    # Geyer's loop evaluates the pairs k = 1, 2, ... while 2k − 1 < N − 3.
    last_pair = len(range(1, n - 3, 2))
    even = rho[:, 0 : 2 * last_pair + 1 : 2]
    pairs = even + rho[:, 1 : 2 * last_pair + 2 : 2]
    positive = pairs > 0
    # K: the first pair that is not positive, or the last one evaluated.
    stop = np.where(positive.all(axis=1), last_pair, np.argmin(positive, axis=1))[:, None]
    monotone = np.minimum.accumulate(pairs, axis=1)
    pair_sum = np.where(np.arange(last_pair + 1) < stop, monotone, 0.0).sum(axis=1)
    # ArviZ adds ρ̂_{2K} when it is positive, or when pair K was kept (a sum of exactly 0, or
    # the last pair evaluated), as Stan does to improve the estimate of the truncated tail.
    even_stop = np.take_along_axis(even, stop, axis=1)[:, 0]
    pair_stop = np.take_along_axis(pairs, stop, axis=1)[:, 0]
    tail = np.where((even_stop > 0) | (pair_stop >= 0), even_stop, 0.0)
    size = m * n
    tau = np.maximum(-1.0 + 2.0 * pair_sum + tail, 1.0 / np.log10(size))
    return np.where(is_constant(x), float(size), size / tau)


def classic_rhat(x: np.ndarray) -> np.ndarray:
    """Classic R-hat per quantity of (K, M, N) chains."""
    n = x.shape[2]
    between = n * x.mean(axis=2).var(axis=1, ddof=1)
    within = x.var(axis=2, ddof=1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def rank_rhat(x: np.ndarray, z_split: np.ndarray | None = None) -> np.ndarray:
    """Rank-normalised split R-hat of (K, M, N); ``z_split``: the split draws' z if known."""
    split = split_chains(x)
    bulk = classic_rhat(z_scale(split) if z_split is None else z_split)
    median = np.median(flat(split), axis=1)[:, None, None]
    tail = classic_rhat(z_scale(np.abs(split - median)))
    # A folded series can be constant when the quantity is not (two values either side of the
    # median); then only the bulk R-hat is defined, as in ArviZ.
    return np.where(np.isnan(tail), bulk, np.maximum(bulk, tail))


def indicators_below(x: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """Indicators I(θ ≤ q) of (K, M, N) for quantiles (P, K), stacked as (P·K, M, N)."""
    return np.concatenate([x <= q[:, None, None] for q in quantiles]).astype(np.float64)


def tail_ess(x: np.ndarray, values: np.ndarray, prob: tuple[float, float]) -> np.ndarray:
    """Tail ESS: the smaller split ESS of the indicators at the two quantiles ``prob`` of the
    sorted draws ``values``."""
    low, high = np.split(
        geyer_ess(split_chains(indicators_below(x, type7_quantiles(values, prob)))), 2
    )
    return np.minimum(low, high)


def sd_terms(x: np.ndarray) -> np.ndarray:
    """(θ − θ̄)² with θ̄ the mean over all chains and samples."""
    return (x - x.mean(axis=(1, 2), keepdims=True)) ** 2


def mcse_sd_from(squares: np.ndarray, ess: np.ndarray) -> np.ndarray:
    """MCSE of sd(θ) from s = (θ − θ̄)² and ESS_mean(s): Var(σ̂²) ≈ Var(s)/ESS, and by the delta
    method Var(σ̂) ≈ Var(σ̂²)/(4σ²)."""
    variance = squares.mean(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        var_of_var = ((squares**2).mean(axis=(1, 2)) - variance**2) / ess
        return np.sqrt(var_of_var / variance / 4)


def std(x: np.ndarray) -> np.ndarray:
    """Standard deviation (ddof 1) over all chains and samples."""
    return flat(x).std(axis=1, ddof=1)


def mcse_quantile_from(values: np.ndarray, prob: float, ess: np.ndarray) -> np.ndarray:
    """Half the distance between the sorted draws (K, S) at the ±1 sd points of the
    ``prob``-quantile's rank, Beta(ESS·p + 1, ESS·(1 − p) + 1), as ArviZ computes it."""
    # Imported here: scipy.stats takes most of a second to import, on every command's start.
    from scipy import stats

    with np.errstate(invalid="ignore"):
        ppf = stats.beta.ppf(np.asarray(_ONE_SD)[:, None], ess * prob + 1, ess * (1 - prob) + 1)
    size = values.shape[1]
    at = ppf * size - 1
    lower = np.floor(np.fmax(at[0], 0)).astype(np.intp)
    upper = np.ceil(np.fmin(at[1], size - 1)).astype(np.intp)
    rows = np.arange(values.shape[0])
    return (values[rows, upper] - values[rows, lower]) / 2


def bulk_ess(x: np.ndarray) -> np.ndarray:
    """Bulk ESS: the ESS of the rank-normalised split chains."""
    return geyer_ess(z_scale(split_chains(x)))


def sd_ess(x: np.ndarray) -> np.ndarray:
    """ESS of the standard deviation: the split ESS of (θ − θ̄)²."""
    return geyer_ess(split_chains(sd_terms(x)))


def quantile_ess(x: np.ndarray, prob: float) -> np.ndarray:
    """ESS of the ``prob``-quantile: the split ESS of I(θ ≤ θ_prob)."""
    return geyer_ess(split_chains(indicators_below(x, type7_quantiles(ascending(x), [prob]))))


def mean_mcse(x: np.ndarray) -> np.ndarray:
    """MCSE of the mean: sd/√ESS of the split chains."""
    with np.errstate(invalid="ignore"):
        return std(x) / np.sqrt(geyer_ess(split_chains(x)))


def sd_mcse(x: np.ndarray) -> np.ndarray:
    """MCSE of the standard deviation (:func:`mcse_sd_from`)."""
    squares = sd_terms(x)
    return mcse_sd_from(squares, geyer_ess(split_chains(squares)))


def quantile_mcse(x: np.ndarray, prob: float) -> np.ndarray:
    """MCSE of the ``prob``-quantile (:func:`mcse_quantile_from`)."""
    values = ascending(x)
    ess = geyer_ess(split_chains(indicators_below(x, type7_quantiles(values, [prob]))))
    return mcse_quantile_from(values, prob, ess)


def summary_table(x: np.ndarray) -> np.ndarray:
    """Every column of :data:`bnnkit.metrics.mcmc.COLUMNS` for (K, M, N), (9, K): one sort, one
    rank of the split draws (and one of the folded ones) and one FFT for all five ESS series."""
    values = ascending(x)
    quantiles = type7_quantiles(values, TAIL_PROB)
    split = split_chains(x)
    z_split = z_scale(split)
    squares = sd_terms(x)
    series = np.concatenate(
        [z_split, split_chains(indicators_below(x, quantiles)), split, split_chains(squares)]
    )
    bulk, low, high, of_mean, of_squares = np.split(geyer_ess(series), 5)
    sd = std(x)
    with np.errstate(invalid="ignore"):
        mcse = sd / np.sqrt(of_mean)
    diagnostics = np.stack(
        [
            mcse,
            mcse_sd_from(squares, of_squares),
            bulk,
            np.minimum(low, high),
            rank_rhat(x, z_split),
        ]
    )
    diagnostics[:, is_constant(x)] = np.nan
    return np.concatenate([np.stack([x.mean(axis=(1, 2)), sd, *quantiles]), diagnostics])
