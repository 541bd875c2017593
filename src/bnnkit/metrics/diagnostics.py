"""Convergence diagnostics across chains: split R-hat and bulk effective sample size.

Split R-hat (Gelman et al., BDA3 §11.4) comes from BlackJAX: it cuts each chain in halves, so it
also flags a single chain that drifts; values near 1 (below ~1.01-1.1) mean the chains agree.
ESS is the bulk effective sample size of Vehtari et al. (2021), rank-normalised over split
chains and summed over them (:func:`bnnkit.metrics.mcmc.ess_bulk`). :mod:`bnnkit.metrics.mcmc`
has the rank-normalised R-hat, the tail ESS and the Monte Carlo standard errors per quantity.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from blackjax.diagnostics import potential_scale_reduction

from bnnkit.metrics import mcmc

# Compiled once per input shape: run op by op, BlackJAX's estimator compiles many small XLA
# programs per call, which made ``bnnkit evaluate`` take seconds on a few dozen draws.
_rhat = jax.jit(functools.partial(potential_scale_reduction, chain_axis=0, sample_axis=1))


def split_rhat(draws: np.ndarray) -> np.ndarray:
    """Split-R-hat per scalar quantity (the classic one, without rank normalisation).

    :func:`bnnkit.metrics.mcmc.rhat` is the rank-normalised version of Vehtari et al. (2021),
    which also compares the chains' tails and copes with heavy-tailed draws.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw (``draws.shape[2:]``).

    Example:
        >>> x = np.random.default_rng(0).normal(size=(4, 200))
        >>> float(split_rhat(x)) < 1.05
        True
    """
    draws = np.asarray(draws, np.float64)
    samples = draws.shape[1]
    half = samples // 2
    if half < 2:
        raise ValueError(f"split R-hat needs at least 4 samples per chain, got {samples}")
    split = np.concatenate([draws[:, :half], draws[:, half : 2 * half]], axis=0)
    # A quantity that never changes (e.g. a saturated class probability) has no defined R-hat:
    # it comes out NaN and summaries skip it.
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(_rhat(split))


def ess(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size per scalar quantity, all chains together.

    The ESS of the rank-normalised split chains (Vehtari et al. 2021), as ArviZ's
    ``ess(method="bulk")``: see :func:`bnnkit.metrics.mcmc.ess_bulk`.

    Args:
        draws: (chains, samples, ...) with at least 4 samples per chain.

    Returns:
        An array shaped like one draw (``draws.shape[2:]``); NaN for a constant quantity.

    Example:
        >>> x = np.random.default_rng(0).normal(size=(4, 500))
        >>> bool(1500 < ess(x) < 2500)  # about 4 × 500 independent draws
        True
    """
    return mcmc.ess_bulk(draws)


def summarize(values: np.ndarray) -> dict[str, float]:
    """Median, 90th percentile and max of a set of diagnostics (NaN-aware)."""
    v = np.asarray(values, np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {
            "median": float("nan"),
            "p90": float("nan"),
            "max": float("nan"),
            "min": float("nan"),
        }
    return {
        "median": float(np.median(v)),
        "p90": float(np.percentile(v, 90)),
        "max": float(v.max()),
        "min": float(v.min()),
    }
