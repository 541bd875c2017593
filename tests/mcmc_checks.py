"""Monte Carlo checks with tolerances derived from effective sample size."""

from __future__ import annotations

import numpy as np
from scipy import stats

from bnnkit.metrics import diagnostics


def z_threshold(num_checks: int, family_error: float = 1e-3) -> float:
    """Two-sided z for ``num_checks`` simultaneous checks at family-wise error ``family_error``
    (Bonferroni): a correct sampler fails the whole test with probability < family_error."""
    return float(stats.norm.ppf(1 - family_error / (2 * num_checks)))


def assert_expectations(draws: np.ndarray, truths: np.ndarray, label: str, z: float) -> None:
    """Check E[f] for each column of ``draws`` (chains, samples, k) against ``truths`` (k,).

    The Monte Carlo standard error of each estimate is ``sd(f) / sqrt(ESS(f))`` with the ESS
    across chains, so the tolerance follows from the chains themselves, not from a chosen seed.
    """
    means = draws.mean(axis=(0, 1))
    sds = draws.std(axis=(0, 1))
    ess = diagnostics.ess(draws)
    mcse = sds / np.sqrt(ess)
    err = np.abs(means - truths) / mcse
    worst = int(np.argmax(err))
    assert np.all(err < z), (
        f"{label}: estimate {means[worst]:.5g} vs exact {truths[worst]:.5g} is {err[worst]:.2f} "
        f"MCSE away (MCSE {mcse[worst]:.3g}, ESS {ess[worst]:.0f}); allowed {z:.2f}"
    )


def assert_gaussian_moments(
    draws: np.ndarray, mean: np.ndarray, cov: np.ndarray, label: str
) -> None:
    """Means and every covariance entry of draws (chains, samples, d) against exact values."""
    d = mean.shape[0]
    centred = draws - mean
    iu = np.triu_indices(d)
    products = centred[..., iu[0]] * centred[..., iu[1]]
    z = z_threshold(d + len(iu[0]))
    assert_expectations(draws, mean, f"{label} mean", z)
    assert_expectations(products, cov[iu], f"{label} covariance", z)
