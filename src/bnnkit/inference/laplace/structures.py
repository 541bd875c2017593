"""The three Laplace structures, built from θ* and the full-data GGN.

Each function forms the tempered precision ``Λ = (G + Λ_prior) / T`` (through the log
posterior's ``temper``), damps it when it is not positive definite, and reports what it did:

- :func:`diagonal`: ``diag Λ`` over every parameter, the prior's curvature by autodiff of its
  ``log_prob`` (:mod:`~bnnkit.inference.laplace.prior_curvature`);
- :func:`last_layer`: the full Λ over the last Dense layer;
- :func:`kronecker`: per Dense layer ``(A ⊗ B + δ I)/T`` with δ the layer mean of the prior's
  curvature diagonal (exact for an isotropic Gaussian).

``prior_precision`` replaces the prior by ``N(0, α⁻¹ I)``: a number α, or ``"auto"`` for the α
that maximises the Laplace evidence (:mod:`~bnnkit.inference.laplace.evidence`).

Example:
    >>> import jax.numpy as jnp
    >>> from bnnkit.priors import Gaussian
    >>> mean = {"w": jnp.ones(2)}
    >>> post = diagonal(mean, {"w": jnp.array([3.0, 1.0])}, log_prior=Gaussian(1.0).log_prob,
    ...                 temper=lambda v: v / 0.5)
    >>> post.precision["w"].tolist()  # (G + 1) / T
    [8.0, 4.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit.errors import ConfigError
from bnnkit.inference.laplace import prior_curvature
from bnnkit.inference.laplace.evidence import (
    Damping,
    damp,
    optimize_prior_precision,
    sqrt_covariance,
)
from bnnkit.log_posterior import network_variables
from bnnkit.param_blocks import Path, get_block
from bnnkit.posterior.laplace import DiagLaplace, KFACLaplace, LastLayerLaplace
from bnnkit.types import Params

Temper = Callable[[Any], Any]


def _flat(tree: Params) -> np.ndarray:
    return np.concatenate([np.asarray(leaf, np.float64).ravel() for leaf in jax.tree.leaves(tree)])


def _check_finite(values: np.ndarray, what: str) -> None:
    bad = int(np.sum(~np.isfinite(values)))
    if bad:
        raise ConfigError(
            f"the {what} holds {bad} non-finite values; the MAP parameters or the "
            "data give an undefined Hessian"
        )


def _alpha(
    prior_precision, ggn_eigenvalues, theta: np.ndarray, log_likelihood: float, temper: Temper
) -> float:
    if prior_precision == "auto":
        return optimize_prior_precision(
            ggn_eigenvalues, float(theta @ theta), log_likelihood, temper
        )
    return float(prior_precision)


def _evidence(
    info: dict,
    *,
    num: int,
    log_det: float,
    theta: np.ndarray,
    log_likelihood: float | None,
    log_prior: float | None,
    temper: Temper,
) -> dict:
    """Fill in the log marginal likelihood (when the covered prior is known) and counts."""
    if "alpha" in info:
        log_prior = 0.5 * num * math.log(info["alpha"] / (2 * math.pi)) - 0.5 * info[
            "alpha"
        ] * float(theta @ theta)
    info["num_params"] = num
    info["log_likelihood"] = log_likelihood
    info["log_marginal_likelihood"] = (
        None
        if log_prior is None or log_likelihood is None
        else temper(log_likelihood + log_prior) + 0.5 * num * math.log(2 * math.pi) - 0.5 * log_det
    )
    return info


def _eigen_evidence(info: dict, eigenvalues: np.ndarray, **evidence: Any) -> dict:
    """:func:`_evidence` of a precision given by its eigenvalues (the diagonal's entries,
    K-FAC's products of its factors' eigenvalues): ``log det = Σ log e``."""
    return _evidence(
        info,
        num=int(eigenvalues.size),
        log_det=float(np.sum(np.log(eigenvalues))),
        **evidence,
    )


def diagonal(
    mean: Params,
    ggn: Params,
    *,
    log_prior: Callable[[Params], jax.Array],
    temper: Temper,
    prior_precision: float | str | None = None,
    log_likelihood: float | None = None,
    **fields,
) -> DiagLaplace:
    """``DiagLaplace`` from the GGN diagonal (shaped like ``mean``, over all N examples).

    Args:
        mean: θ*.
        ggn: the untempered GGN diagonal over the whole position.
        log_prior: the untempered prior's ``log_prob``, for its curvature.
        temper: ``value -> value / T``.
        prior_precision: ``None`` (prior's own curvature), a number α, or ``"auto"``.
        log_likelihood: ``log p(D | θ*)``, for the evidence (and ``"auto"``; 0 if unknown).
        **fields: ``num_draws`` and ``predictive`` of the posterior.
    """
    dtype = jax.tree.leaves(mean)[0].dtype
    ll = 0.0 if log_likelihood is None else float(log_likelihood)
    info: dict[str, Any] = {"prior_precision": prior_precision}
    g = _flat(ggn)
    _check_finite(g, "GGN")
    theta = _flat(mean)
    if prior_precision is None:
        prior_c, separable = prior_curvature.diag_curvature(log_prior, mean)
        prior_flat = _flat(prior_c)
        _check_finite(prior_flat, "prior curvature")
        info["prior_leaf_blocks_diagonal"] = separable
        e = temper(g + prior_flat)
    else:
        info["alpha"] = _alpha(prior_precision, g, theta, ll, temper)
        e = temper(g + info["alpha"])
    e, damping = damp(e, dtype)
    info["damping"] = damping.as_dict()
    flat_mean, unravel = ravel_pytree(mean)
    precision = unravel(jnp.asarray(e, flat_mean.dtype))
    known = None if prior_precision is not None else float(jax.jit(log_prior)(mean))
    info = _eigen_evidence(
        info, e, theta=theta, log_likelihood=log_likelihood, log_prior=known, temper=temper
    )
    return DiagLaplace(mean, precision, info=info, **fields)


def last_layer(
    mean: Params,
    ggn: np.ndarray,
    path: Path,
    *,
    log_prior: Callable[[Params], jax.Array],
    temper: Temper,
    prior_precision: float | str | None = None,
    log_likelihood: float | None = None,
    **fields,
) -> LastLayerLaplace:
    """``LastLayerLaplace`` from the untempered GGN over the block at ``path``.

    The block's own prior is not available in general (it is part of a joint prior), so the
    evidence is reported only with an isotropic ``prior_precision``.
    """
    dtype = jax.tree.leaves(mean)[0].dtype
    ll = 0.0 if log_likelihood is None else float(log_likelihood)
    info: dict[str, Any] = {"prior_precision": prior_precision, "last_layer": "/".join(path)}
    theta = np.asarray(ravel_pytree(get_block(mean, path))[0], np.float64)
    G = np.asarray(ggn, np.float64)
    _check_finite(G, "GGN")
    G = 0.5 * (G + G.T)
    if prior_precision is None:
        H = np.asarray(prior_curvature.block_curvature(log_prior, mean, path), np.float64)
        _check_finite(H, "prior curvature")
        precision = temper(G + 0.5 * (H + H.T))
    else:
        # The evidence needs the GGN's eigenvalues; a fixed α needs none.
        g = np.linalg.eigvalsh(G) if prior_precision == "auto" else None
        info["alpha"] = _alpha(prior_precision, g, theta, ll, temper)
        precision = temper(G + info["alpha"] * np.eye(len(G)))
    sqrt_cov, log_det, damping = sqrt_covariance(precision, dtype)
    info["damping"] = damping.as_dict()
    info = _evidence(
        info,
        num=len(G),
        log_det=log_det,
        theta=theta,
        log_likelihood=log_likelihood,
        log_prior=None,
        temper=temper,
    )
    return LastLayerLaplace(mean, tuple(path), jnp.asarray(sqrt_cov), info=info, **fields)


def kronecker(
    mean: Params,
    factors: dict[str, tuple[Any, Any]],
    *,
    log_prior: Callable[[Params], jax.Array],
    temper: Temper,
    prior_precision: float | str | None = None,
    log_likelihood: float | None = None,
    **fields,
) -> KFACLaplace:
    """``KFACLaplace`` from per-layer factors ``(A, B)`` whose Kronecker product is the
    layer's untempered full-data GGN block."""
    dtype = jax.tree.leaves(mean)[0].dtype
    ll = 0.0 if log_likelihood is None else float(log_likelihood)
    info: dict[str, Any] = {"prior_precision": prior_precision}
    eig = {}
    for name, (A, B) in sorted(factors.items()):
        A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
        _check_finite(np.concatenate([A.ravel(), B.ravel()]), "GGN")
        a, ua = np.linalg.eigh(0.5 * (A + A.T))
        b, ub = np.linalg.eigh(0.5 * (B + B.T))
        eig[name] = (np.clip(a, 0, None), ua, np.clip(b, 0, None), ub)
    g = np.concatenate([np.outer(a, b).ravel() for a, _, b, _ in eig.values()])
    theta = _flat(mean)
    if prior_precision is None:
        prior_c, separable = prior_curvature.diag_curvature(log_prior, mean)
        info["prior_leaf_blocks_diagonal"] = separable
        deltas = {
            name: float(np.mean(_flat(get_block(prior_c, ("params", *name.split("/"))))))
            for name in eig
        }
        _check_finite(np.array(list(deltas.values())), "prior curvature")
    else:
        info["alpha"] = _alpha(prior_precision, g, theta, ll, temper)
        deltas = dict.fromkeys(eig, info["alpha"])
    parts = [temper(np.outer(a, b) + deltas[n]) for n, (a, _, b, _) in eig.items()]
    flat, damping = damp(np.concatenate([p.ravel() for p in parts]), dtype)
    info["damping"] = damping.as_dict()
    layers, start = {}, 0
    for (name, (_, ua, _, ub)), part in zip(eig.items(), parts, strict=True):
        e = flat[start : start + part.size].reshape(part.shape)
        start += part.size
        layers[name] = (jnp.asarray(ua), jnp.asarray(ub), jnp.asarray(e))
    # The prior of the Dense weights is the whole prior only when the position is the network.
    known = (
        float(jax.jit(log_prior)(mean))
        if prior_precision is None and network_variables(mean) is mean
        else None
    )
    info = _eigen_evidence(
        info, flat, theta=theta, log_likelihood=log_likelihood, log_prior=known, temper=temper
    )
    return KFACLaplace(mean, layers, info=info, **fields)


def damping_message(info: dict) -> str | None:
    """The one warning line when damping lifted eigenvalues, else ``None``."""
    damping = Damping(**info["damping"])
    return damping.message(info["num_params"]) if damping.num_lifted else None
