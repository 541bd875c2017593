"""Damping and the Laplace evidence: what makes a precision usable, and what chooses its prior.

A precision that is not positive definite (a non-Gaussian prior's curvature can be zero or
negative) is damped: each eigenvalue (diagonal entry) below ``floor = 10 ε · max |eigenvalue|``
(ε the machine epsilon of the run's dtype) is lifted to the floor, the least change that makes
Λ positive definite at that precision. A full precision is first tried by Cholesky, which
succeeds exactly when it is numerically positive definite; only otherwise are its eigenvalues
computed and damped. The number lifted and the largest amount added are reported; variances
are never NaN.

For an isotropic Gaussian prior ``N(0, α⁻¹ I)`` the Laplace approximation of the marginal
likelihood over the P parameters a structure covers, with θ* held fixed (MacKay 1992), is

    log Z(α) = [log p(D | θ*) + log N(θ*; 0, α⁻¹ I)] / T + (P/2) log 2π − ½ log det Λ(α),
    Λ(α) = (G + α I) / T,

and ``"auto"`` picks the α that maximises it. The temperature comes in as the log posterior's
``temper`` (``value -> value / T``), the one function that applies it.

Example:
    >>> round(optimize_prior_precision(np.array([10.0, 1.0]), sq_norm=0.5), 4)
    2.2485
    >>> e, d = damp(np.array([4.0, -1.0, 2.0]))
    >>> d.num_lifted, bool(np.all(e > 0))
    (1, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from bnnkit.errors import ConfigError

#: Search range of the prior precision α.
ALPHA_BOUNDS = (1e-8, 1e8)


def _untempered(value: Any) -> Any:
    return value


@dataclasses.dataclass(frozen=True)
class Damping:
    """What was added to make a precision positive definite.

    Attributes:
        floor: the smallest eigenvalue (diagonal entry) allowed (``None`` when a Cholesky
            factorisation showed the precision positive definite without eigenvalues).
        num_lifted: how many were below it and lifted to it.
        max_added: the largest amount added to one of them (0 when none was).
        min_before: the smallest eigenvalue before damping (``None`` likewise).
    """

    floor: float | None
    num_lifted: int
    max_added: float
    min_before: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return dataclasses.asdict(self)

    def message(self, total: int) -> str:
        return (
            f"posterior precision not positive definite: {self.num_lifted} of {total} "
            f"eigenvalues (smallest {self.min_before:.3g}) lifted to {self.floor:.3g} "
            f"(largest damping added {self.max_added:.3g})"
        )


def damp(eigenvalues: np.ndarray, dtype: Any = np.float32) -> tuple[np.ndarray, Damping]:
    """Lift eigenvalues below ``10 ε max|e|`` to that floor.

    Raises:
        ConfigError: non-finite eigenvalues (NaN or infinite curvature cannot be damped).
    """
    e = np.asarray(eigenvalues, np.float64)
    if not np.all(np.isfinite(e)):
        raise ConfigError(
            f"the curvature holds {int(np.sum(~np.isfinite(e)))} non-finite values; the MAP "
            "parameters or the data give an undefined Hessian"
        )
    top = float(np.max(np.abs(e))) if e.size else 0.0
    floor = 10 * float(np.finfo(dtype).eps) * top if top > 0 else 1.0
    low = e < floor
    added = floor - e[low]
    damping = Damping(
        floor=floor,
        num_lifted=int(np.sum(low)),
        max_added=float(np.max(added)) if added.size else 0.0,
        min_before=float(np.min(e)) if e.size else 0.0,
    )
    return np.where(low, floor, e), damping


def sqrt_covariance(precision: np.ndarray, dtype: Any) -> tuple[np.ndarray, float, Damping]:
    """``S`` with ``S Sᵀ = Λ⁻¹``, ``log det Λ`` and the damping used.

    A Cholesky factorisation (several times cheaper than an eigendecomposition) succeeds
    exactly when Λ is numerically positive definite, and then nothing is damped; otherwise the
    eigendecomposition is damped as in :func:`damp`.

    Example:
        >>> s, log_det, d = sqrt_covariance(np.diag([4.0, 1.0]), np.float64)
        >>> np.round(s @ s.T, 6).tolist(), round(log_det, 6), d.num_lifted
        ([[0.25, 0.0], [0.0, 1.0]], 1.386294, 0)
    """
    from scipy.linalg import cholesky, solve_triangular

    try:
        lower = cholesky(precision, lower=True)
        diag = np.diag(lower)
        if np.all(np.isfinite(lower)) and np.all(diag > 0):
            inv = solve_triangular(lower, np.eye(len(diag)), lower=True)
            return inv.T, 2.0 * float(np.sum(np.log(diag))), Damping(None, 0, 0.0, None)
    except np.linalg.LinAlgError:
        pass
    w, V = np.linalg.eigh(precision)
    w, damping = damp(w, dtype)
    return V / np.sqrt(w)[None, :], float(np.sum(np.log(w))), damping


def log_evidence(
    alpha: float,
    ggn_eigenvalues: np.ndarray,
    sq_norm: float,
    log_likelihood: float,
    temper: Callable[[Any], Any] = _untempered,
) -> float:
    """Laplace ``log Z(α)`` for the isotropic Gaussian prior ``N(0, α⁻¹ I)``.

    Args:
        alpha: prior precision α > 0.
        ggn_eigenvalues: eigenvalues of the (untempered) GGN over the P parameters covered.
        sq_norm: ``‖θ*‖²`` over those parameters.
        log_likelihood: ``log p(D | θ*)``.
        temper: ``value -> value / T`` (default T = 1).
    """
    e = np.clip(np.asarray(ggn_eigenvalues, np.float64), 0.0, None)
    p = e.size
    log_prior = 0.5 * p * math.log(alpha / (2 * math.pi)) - 0.5 * alpha * sq_norm
    return (
        temper(log_likelihood + log_prior)
        + 0.5 * p * math.log(2 * math.pi)
        - 0.5 * float(np.sum(np.log(temper(e + alpha))))
    )


def optimize_prior_precision(
    ggn_eigenvalues: np.ndarray,
    sq_norm: float,
    log_likelihood: float = 0.0,
    temper: Callable[[Any], Any] = _untempered,
) -> float:
    """The α in :data:`ALPHA_BOUNDS` that maximises :func:`log_evidence`.

    A grid over log α brackets the maximum; the root of the derivative

        d log Z / dα = [P/α − ‖θ*‖²] / (2T) − ½ Σ_k 1/(e_k + α)

    in that bracket (Brent) pins it down to machine precision, which maximising the value
    itself could not (its argmax is only determined to about √ε).
    """
    from scipy.optimize import brentq

    e = np.clip(np.asarray(ggn_eigenvalues, np.float64), 0.0, None)

    def slope(log_alpha):  # d log Z / d log α
        alpha = math.exp(log_alpha)
        return alpha * (
            temper((e.size / alpha - sq_norm) / 2) - 0.5 * float(np.sum(1 / (e + alpha)))
        )

    lo, hi = (math.log(b) for b in ALPHA_BOUNDS)
    grid = np.linspace(lo, hi, 161)
    values = [log_evidence(math.exp(g), e, sq_norm, log_likelihood, temper) for g in grid]
    best = int(np.argmax(values))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    if slope(a) > 0 > slope(b):
        return float(math.exp(brentq(slope, a, b, xtol=1e-14, rtol=4 * np.finfo(float).eps)))
    return float(math.exp(grid[best]))  # the maximum is at a bound of the search range


def check_prior_precision(value: Any) -> float | str | None:
    """``None`` (the prior's own curvature), ``"auto"``, or a finite α > 0.

    Raises:
        ConfigError: anything else.

    Example:
        >>> check_prior_precision("2.5"), check_prior_precision("auto")
        (2.5, 'auto')
    """
    if value is None or value == "auto":
        return value
    try:
        alpha = float(value)
    except (TypeError, ValueError):
        alpha = float("nan")
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ConfigError(f"--prior-precision {value!r} must be 'auto' or a finite number > 0")
    return alpha
