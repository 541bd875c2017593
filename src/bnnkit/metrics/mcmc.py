r"""Per-quantity MCMC diagnostics of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021).

"Rank-normalization, folding, and localization: an improved R-hat for assessing convergence of
MCMC" (Bayesian Analysis 16(2)): rank-normalised split R-hat, bulk and tail effective sample
sizes (ESS) and Monte Carlo standard errors (MCSE), computed as Stan and ArviZ compute them, in
NumPy (no ArviZ needed) and for any number of quantities at once.

Every function takes draws shaped (chains, samples, ...): M chains of N draws of any number of
scalar quantities, and returns an array shaped like one draw (``draws.shape[2:]``). The
quantities are handled together, a block of them at a time (to bound memory): one sort, one
rank and one FFT over the sample axis per block, no Python loop per quantity.

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
from collections.abc import Callable, Sequence

import numpy as np
from scipy import fft, special, stats

from bnnkit.arguments import array_argument, number_argument
from bnnkit.errors import ConfigError

#: Fewest draws per chain: each split half needs two for a variance.
MIN_DRAWS = 4
#: The quantiles whose indicators the tail ESS looks at (Vehtari et al. 2021, §4.3).
TAIL_PROB = (0.05, 0.95)
#: Blom's (1958) offset in the rank normalisation (r − 3/8)/(S + 1/4).
_BLOM = 3.0 / 8.0
#: A series whose range is below this share of its magnitude is constant (float64 rounding).
_RESOLUTION = float(np.finfo(np.float64).resolution)
#: Draws per block of quantities computed together (8 MiB of float64; larger blocks were slower).
_BLOCK = 1 << 20
#: Φ(−1) and Φ(1): the Beta quantiles of a quantile's rank that span ±1 standard error.
_ONE_SD = (0.1586553, 0.8413447)


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
        parts.append(np.where(_constant(block), np.nan, values) if mask else values)
    return np.concatenate(parts, axis=-1)


def _check_prob(prob: float, what: str) -> float:
    if not 0.0 < number_argument(prob, "prob", where=what) < 1.0:
        raise ConfigError(f"{what} needs probabilities in (0, 1), got {prob!r}")
    return float(prob)


def _constant(x: np.ndarray) -> np.ndarray:
    """Per quantity of (K, M, N): its range is rounding, or a draw is NaN or infinite (then
    neither its variance nor its diagnostics are defined either)."""
    low, high = x.min(axis=(1, 2)), x.max(axis=(1, 2))
    with np.errstate(invalid="ignore"):
        constant = (high - low) <= _RESOLUTION * np.maximum(np.abs(low), np.abs(high))
    return constant | ~np.isfinite(low) | ~np.isfinite(high)


def _split(x: np.ndarray) -> np.ndarray:
    """(K, M, N) -> (K, 2M, ⌊N/2⌋): every chain's first and last halves as chains.

    The halves of chain m are chains 2m and 2m + 1 (ArviZ puts all first halves before all
    second ones; every diagnostic is symmetric in the chains). For even N that is a view.
    """
    k, m, n = x.shape
    half = n // 2
    if n % 2:
        x = np.concatenate([x[:, :, :half], x[:, :, n - half :]], axis=2)
    return x.reshape(k, 2 * m, half)


def _z_scale(x: np.ndarray) -> np.ndarray:
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


def _flat(x: np.ndarray) -> np.ndarray:
    """(K, M, N) -> (K, S): each quantity's draws in one row."""
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2])


def _sorted(x: np.ndarray) -> np.ndarray:
    """Each quantity's draws of (K, M, N) in ascending order, (K, S)."""
    return np.sort(_flat(x), axis=1)


def _quantiles(values: np.ndarray, probs: Sequence[float]) -> np.ndarray:
    """R's type-7 quantiles of sorted draws (K, S), (len(probs), K), computed exactly as
    ``scipy.stats.mstats.mquantiles(alphap=1, betap=1)`` (what ArviZ uses)."""
    size = values.shape[1]
    p = np.asarray(probs, dtype=np.float64)
    aleph = size * p + (1.0 - p)
    index = np.floor(np.clip(aleph, 1, size - 1)).astype(np.intp)
    gamma = np.clip(aleph - index, 0, 1)[:, None]
    return (1.0 - gamma) * values[:, index - 1].T + gamma * values[:, index].T


def _mean_autocov(x: np.ndarray) -> np.ndarray:
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


def _geyer_ess(x: np.ndarray) -> np.ndarray:
    """ESS per quantity of (K, M, N) chains with Geyer's initial monotone sequence.

    ArviZ's ``_ess`` without its Python loop over lags: the pair sums, their running minimum
    and the truncation point are array operations over all quantities at once. A constant
    series (an indicator that is always true) gets ESS = S, as in ArviZ.
    """
    _, m, n = x.shape
    acov = _mean_autocov(x)
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
    return np.where(_constant(x), float(size), size / tau)


def _rhat_of(x: np.ndarray) -> np.ndarray:
    """Classic R-hat per quantity of (K, M, N) chains."""
    n = x.shape[2]
    between = n * x.mean(axis=2).var(axis=1, ddof=1)
    within = x.var(axis=2, ddof=1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _rhat_rank(x: np.ndarray, z_split: np.ndarray | None = None) -> np.ndarray:
    """Rank-normalised split R-hat of (K, M, N); ``z_split``: the split draws' z if known."""
    split = _split(x)
    bulk = _rhat_of(_z_scale(split) if z_split is None else z_split)
    median = np.median(_flat(split), axis=1)[:, None, None]
    tail = _rhat_of(_z_scale(np.abs(split - median)))
    # A folded series can be constant when the quantity is not (two values either side of the
    # median); then only the bulk R-hat is defined, as in ArviZ.
    return np.where(np.isnan(tail), bulk, np.maximum(bulk, tail))


def _below(x: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """Indicators I(θ ≤ q) of (K, M, N) for quantiles (P, K), stacked as (P·K, M, N)."""
    return np.concatenate([x <= q[:, None, None] for q in quantiles]).astype(np.float64)


def _tail_ess(x: np.ndarray, values: np.ndarray, prob: tuple[float, float]) -> np.ndarray:
    low, high = np.split(_geyer_ess(_split(_below(x, _quantiles(values, prob)))), 2)
    return np.minimum(low, high)


def _sd_terms(x: np.ndarray) -> np.ndarray:
    """(θ − θ̄)² with θ̄ the mean over all chains and samples."""
    return (x - x.mean(axis=(1, 2), keepdims=True)) ** 2


def _mcse_sd_from(squares: np.ndarray, ess: np.ndarray) -> np.ndarray:
    """MCSE of sd(θ) from s = (θ − θ̄)² and ESS_mean(s): Var(σ̂²) ≈ Var(s)/ESS, and by the delta
    method Var(σ̂) ≈ Var(σ̂²)/(4σ²)."""
    variance = squares.mean(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        var_of_var = ((squares**2).mean(axis=(1, 2)) - variance**2) / ess
        return np.sqrt(var_of_var / variance / 4)


def _sd(x: np.ndarray) -> np.ndarray:
    return _flat(x).std(axis=1, ddof=1)


def _mcse_quantile_from(values: np.ndarray, prob: float, ess: np.ndarray) -> np.ndarray:
    """Half the distance between the sorted draws (K, S) at the ±1 sd points of the
    ``prob``-quantile's rank, Beta(ESS·p + 1, ESS·(1 − p) + 1), as ArviZ computes it."""
    with np.errstate(invalid="ignore"):
        ppf = stats.beta.ppf(np.asarray(_ONE_SD)[:, None], ess * prob + 1, ess * (1 - prob) + 1)
    size = values.shape[1]
    at = ppf * size - 1
    lower = np.floor(np.fmax(at[0], 0)).astype(np.intp)
    upper = np.ceil(np.fmin(at[1], size - 1)).astype(np.intp)
    rows = np.arange(values.shape[0])
    return (values[rows, upper] - values[rows, lower]) / 2


def _bulk_ess(x: np.ndarray) -> np.ndarray:
    return _geyer_ess(_z_scale(_split(x)))


def _mcse_mean(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return _sd(x) / np.sqrt(_geyer_ess(_split(x)))


def _mcse_sd(x: np.ndarray) -> np.ndarray:
    squares = _sd_terms(x)
    return _mcse_sd_from(squares, _geyer_ess(_split(squares)))


def _mcse_quantile(x: np.ndarray, prob: float) -> np.ndarray:
    values = _sorted(x)
    ess = _geyer_ess(_split(_below(x, _quantiles(values, [prob]))))
    return _mcse_quantile_from(values, prob, ess)


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
    return _blockwise(x, _rhat_rank).reshape(shape)


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
    return _blockwise(x, _bulk_ess).reshape(shape)


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
    return _blockwise(x, lambda block: _tail_ess(block, _sorted(block), (low, high))).reshape(shape)


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
    chains = _split if split else (lambda block: block)
    return _blockwise(x, lambda block: _geyer_ess(chains(block))).reshape(shape)


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
    return _blockwise(x, lambda block: _geyer_ess(_split(_sd_terms(block)))).reshape(shape)


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
    return _blockwise(
        x, lambda block: _geyer_ess(_split(_below(block, _quantiles(_sorted(block), [prob]))))
    ).reshape(shape)


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
    return _blockwise(x, _mcse_mean).reshape(shape)


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
    return _blockwise(x, _mcse_sd).reshape(shape)


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
    return _blockwise(x, lambda block: _mcse_quantile(block, prob)).reshape(shape)


#: What :func:`diagnose` returns, in order: the summary statistics of every quantity.
COLUMNS = ("mean", "sd", "q5", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")


def _table(x: np.ndarray) -> np.ndarray:
    """Every column of :data:`COLUMNS` for (K, M, N), (len(COLUMNS), K): one sort, one rank of
    the split draws (and one of the folded ones) and one FFT for all five ESS series."""
    values = _sorted(x)
    quantiles = _quantiles(values, TAIL_PROB)
    split = _split(x)
    z_split = _z_scale(split)
    squares = _sd_terms(x)
    series = np.concatenate([z_split, _split(_below(x, quantiles)), split, _split(squares)])
    bulk, low, high, of_mean, of_squares = np.split(_geyer_ess(series), 5)
    sd = _sd(x)
    with np.errstate(invalid="ignore"):
        mcse = sd / np.sqrt(of_mean)
    diagnostics = np.stack(
        [
            mcse,
            _mcse_sd_from(squares, of_squares),
            bulk,
            np.minimum(low, high),
            _rhat_rank(x, z_split),
        ]
    )
    diagnostics[:, _constant(x)] = np.nan
    return np.concatenate([np.stack([x.mean(axis=(1, 2)), sd, *quantiles]), diagnostics])


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
    table = _blockwise(x, _table, mask=False)
    return {name: column.reshape(shape) for name, column in zip(COLUMNS, table, strict=True)}
