"""Laplace approximations ``N(θ*, Λ⁻¹)`` around a MAP estimate θ*, and their predictives.

The posterior precision follows the toolkit's tempered convention
(:mod:`bnnkit.log_posterior`):

    Λ = (G + Λ_prior) / T,     G = Σ_i J_iᵀ H_i J_i   (the GGN, :mod:`bnnkit.curvature`)

in one of three structures:

- :class:`DiagLaplace` (``"diag"``): ``diag Λ`` over every parameter;
- :class:`LastLayerLaplace` (``"last_layer"``): the full Λ over the last Dense layer, every
  other parameter fixed at θ*;
- :class:`KFACLaplace` (``"kfac"``): per Dense layer ``Λ_l = (A_l ⊗ B_l + δ_l I)/T``
  (Kronecker-factored GGN, Ritter et al. 2018), for networks of Dense layers.

``Λ_prior`` is the curvature of the prior's own ``log_prob`` (:mod:`bnnkit.prior_curvature`):
its diagonal for ``diag``, its exact block for ``last_layer``, and for ``kfac`` the layer mean
``δ_l`` of its diagonal (exact for the isotropic Gaussian). Alternatively the prior is the
isotropic Gaussian ``N(0, α⁻¹ I)`` with a given α, or with α chosen by maximising the Laplace
approximation of the marginal likelihood (as laplace-torch does; this search covers the
Gaussian family only)::

    log Z(α) = [log p(D | θ*) + log N(θ*_B; 0, α⁻¹ I)] / T + (P_B/2) log 2π − ½ log det Λ(α)

over the P_B parameters the structure covers (θ* held fixed, MacKay 1992). At T = 1 this is
the Laplace evidence; for a linear-Gaussian model it is the exact evidence whenever θ* is the
MAP for α.

A precision that is not positive definite (a non-Gaussian prior's curvature can be zero or
negative) is damped: each eigenvalue (diagonal entry) below ``floor = 10 ε · max |eigenvalue|``
(ε the machine epsilon of the run's dtype) is lifted to the floor, the least change that makes
Λ positive definite at that precision. A full last-layer precision is first tried by Cholesky,
which succeeds exactly when it is numerically positive definite; only otherwise are its
eigenvalues computed and damped. The number lifted and the largest amount added are
reported; variances are never NaN.

Predictives: ``sample(key, n)`` draws parameters for the Monte Carlo BMA of
:mod:`bnnkit.predict`; :func:`glm_predict` is the linearised (GLM) predictive
``f(x; θ) ≈ f(x; θ*) + J(x)(θ − θ*)``, Gaussian in output space with covariance ``J Λ⁻¹ Jᵀ``.
For regression it adds the observation noise, ``N(μ*, J Λ⁻¹ Jᵀ + σ²)``; for classification it
uses the probit approximation ``softmax(f*_k / √(1 + π/8 · (J Λ⁻¹ Jᵀ)_kk))`` (MacKay 1992).

Example:
    >>> post = make_posterior("diag", params, ggn, log_prior=prior.log_prob,
    ...                       prior_precision="auto", log_likelihood=ll)  # doctest: +SKIP
    >>> draws = post.sample(jax.random.PRNGKey(0), 30)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit import curvature, io, prior_curvature
from bnnkit.errors import ConfigError
from bnnkit.log_posterior import network_variables
from bnnkit.posterior.samples import Samples

Params = Any
Path = tuple[str, ...]

STRUCTURES = ("diag", "last_layer", "kfac")
ARRAYS_FILE = "laplace.npz"
#: Search range of the prior precision α.
ALPHA_BOUNDS = (1e-8, 1e8)


# --- damping and evidence -----------------------------------------------------------------------

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

    def as_dict(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)

    def message(self, total: int) -> str:
        return (f"posterior precision not positive definite: {self.num_lifted} of {total} "
                f"eigenvalues (smallest {self.min_before:.3g}) lifted to {self.floor:.3g} "
                f"(largest damping added {self.max_added:.3g})")


def damp(eigenvalues: np.ndarray, dtype: Any = np.float32) -> tuple[np.ndarray, Damping]:
    """Lift eigenvalues below ``10 ε max|e|`` to that floor.

    Raises:
        ConfigError: non-finite eigenvalues (NaN or infinite curvature cannot be damped).

    Example:
        >>> e, d = damp(np.array([4.0, -1.0, 2.0]))
        >>> d.num_lifted, bool(np.all(e > 0))
        (1, True)
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
    damping = Damping(floor=floor, num_lifted=int(np.sum(low)),
                      max_added=float(np.max(added)) if added.size else 0.0,
                      min_before=float(np.min(e)) if e.size else 0.0)
    return np.where(low, floor, e), damping


def log_evidence(alpha: float, ggn_eigenvalues: np.ndarray, sq_norm: float,
                 log_likelihood: float, temperature: float = 1.0) -> float:
    """Laplace ``log Z(α)`` for the isotropic Gaussian prior ``N(0, α⁻¹ I)``.

    Args:
        alpha: prior precision α > 0.
        ggn_eigenvalues: eigenvalues of the GGN over the P_B parameters covered.
        sq_norm: ``‖θ*_B‖²``.
        log_likelihood: ``log p(D | θ*)``.
        temperature: T.
    """
    e = np.clip(np.asarray(ggn_eigenvalues, np.float64), 0.0, None)
    p = e.size
    t = float(temperature)
    log_prior = 0.5 * p * math.log(alpha / (2 * math.pi)) - 0.5 * alpha * sq_norm
    return ((log_likelihood + log_prior) / t + 0.5 * p * math.log(2 * math.pi)
            - 0.5 * float(np.sum(np.log((e + alpha) / t))))


def optimize_prior_precision(ggn_eigenvalues: np.ndarray, sq_norm: float,
                             log_likelihood: float = 0.0, temperature: float = 1.0) -> float:
    """The α in :data:`ALPHA_BOUNDS` that maximises :func:`log_evidence`.

    A grid over log α brackets the maximum; the root of the derivative

        d log Z / dα = [P_B/α − ‖θ*_B‖²] / (2T) − ½ Σ_k 1/(e_k + α)

    in that bracket (Brent) pins it down to machine precision, which maximising the value
    itself could not (its argmax is only determined to about √ε).

    Example:
        >>> round(optimize_prior_precision(np.array([10.0, 1.0]), sq_norm=0.5), 4)
        2.2485
    """
    from scipy.optimize import brentq

    e = np.clip(np.asarray(ggn_eigenvalues, np.float64), 0.0, None)
    t = float(temperature)

    def slope(log_alpha):  # d log Z / d log α
        alpha = math.exp(log_alpha)
        return alpha * ((e.size / alpha - sq_norm) / (2 * t) - 0.5 * float(np.sum(1 / (e + alpha))))

    lo, hi = (math.log(b) for b in ALPHA_BOUNDS)
    grid = np.linspace(lo, hi, 161)
    values = [log_evidence(math.exp(g), e, sq_norm, log_likelihood, t) for g in grid]
    best = int(np.argmax(values))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    if slope(a) > 0 > slope(b):
        return float(math.exp(brentq(slope, a, b, xtol=1e-14, rtol=4 * np.finfo(float).eps)))
    return float(math.exp(grid[best]))  # the maximum is at a bound of the search range


# --- posteriors ---------------------------------------------------------------------------------

def _normal_like(key: jax.Array, n: int, tree: Params) -> Params:
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten([jax.random.normal(k, (n, *leaf.shape), leaf.dtype)
                              for k, leaf in zip(keys, leaves, strict=True)])


def _tile(tree: Params, n: int) -> Params:
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (n, *a.shape)), tree)


@dataclasses.dataclass(frozen=True)
class DiagLaplace:
    """``N(θ*, diag(precision)⁻¹)`` over every parameter.

    Attributes:
        mean: θ*, a params pytree.
        precision: the diagonal of Λ, shaped like ``mean`` (positive).
        info: prior precision, damping and log marginal likelihood, for ``run.json``.
    """

    mean: Params
    precision: Params
    info: dict = dataclasses.field(default_factory=dict)

    structure = "diag"

    def sample(self, key: jax.Array, n: int) -> Params:
        """``n`` draws ``θ* + z / √precision``, stacked ``(n, ...)``."""
        return _diag_sample(key, n, self.mean, self.precision)

    def variance(self) -> Params:
        return jax.tree.map(lambda p: 1.0 / p, self.precision)

    def output_covariance_fn(self, apply: Callable) -> Callable:
        fn = jax.jit(lambda mean, var, x: curvature.diag_output_covariance(apply, mean, x, var))
        mean, variance = network_variables(self.mean), network_variables(self.variance())
        return lambda x: fn(mean, variance, x)

    def arrays(self) -> dict[str, np.ndarray]:
        return io.flatten_tree(self.precision, "precision/")

    @classmethod
    def from_arrays(cls, mean: Params, arrays: dict, info: dict) -> DiagLaplace:
        return cls(mean, jax.tree.map(jnp.asarray, io.unflatten_tree(mean, arrays, "precision/")),
                   info)


@dataclasses.dataclass(frozen=True)
class LastLayerLaplace:
    """``N(θ*_B, S Sᵀ)`` over the last layer's parameters B; the rest stays at θ*.

    Attributes:
        mean: θ*, a params pytree.
        path: where B is in the params tree (``("params", "Dense_2")``).
        sqrt_cov: ``S`` with ``S Sᵀ = Λ⁻¹``, indexed as ``ravel_pytree`` of B: ``L⁻ᵀ`` for the
            Cholesky factor ``Λ = L Lᵀ``, or ``V diag(e)^{-1/2}`` when Λ had to be damped.
        info: prior precision, damping and log marginal likelihood, for ``run.json``.
    """

    mean: Params
    path: Path
    sqrt_cov: jax.Array
    info: dict = dataclasses.field(default_factory=dict)

    structure = "last_layer"

    def ravel(self, block: Params) -> jax.Array:
        """A last-layer subtree as the flat vector the covariance is indexed by."""
        return ravel_pytree(block)[0]

    def covariance(self) -> jax.Array:
        return self.sqrt_cov @ self.sqrt_cov.T

    def sample(self, key: jax.Array, n: int) -> Params:
        """``n`` draws ``θ*_B + S z``, stacked ``(n, ...)``; only the last layer varies."""
        return _block_sample(key, n, self.path, self.mean, self.sqrt_cov)

    def output_covariance_fn(self, apply: Callable) -> Callable:
        path = self.path
        fn = jax.jit(lambda mean, s, x: curvature.block_output_covariance(apply, mean, x, path, s))
        mean = network_variables(self.mean)
        s = self.sqrt_cov.astype(jax.tree.leaves(mean)[0].dtype)
        return lambda x: fn(mean, s, x)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"sqrt_cov": np.asarray(self.sqrt_cov)}

    @classmethod
    def from_arrays(cls, mean: Params, arrays: dict, info: dict) -> LastLayerLaplace:
        return cls(mean, tuple(info["last_layer"].split("/")), jnp.asarray(arrays["sqrt_cov"]),
                   info)


def _sqrt_covariance(precision: np.ndarray, dtype: Any) -> tuple[np.ndarray, float, Damping]:
    """``S`` with ``S Sᵀ = Λ⁻¹``, ``log det Λ`` and the damping used.

    A Cholesky factorisation (several times cheaper than an eigendecomposition) succeeds
    exactly when Λ is numerically positive definite, and then nothing is damped; otherwise the
    eigendecomposition is damped as in :func:`damp`.
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


@dataclasses.dataclass(frozen=True)
class KFACLaplace:
    """Per Dense layer ``N(W̃*, (U_A ⊗ U_B) diag(e)⁻¹ (U_A ⊗ U_B)ᵀ)`` over ``W̃ = [kernel; bias]``.

    Attributes:
        mean: θ*, a params pytree.
        layers: layer key (``"Dense_0"``) -> ``(U_A, U_B, e)``: eigenvectors of the two factors
            and the eigenvalues (in[+1], out) of the layer's precision (positive).
        info: prior precision, damping and log marginal likelihood, for ``run.json``.
    """

    mean: Params
    layers: dict[str, tuple[jax.Array, jax.Array, jax.Array]]
    info: dict = dataclasses.field(default_factory=dict)

    structure = "kfac"

    def sample(self, key: jax.Array, n: int) -> Params:
        """``n`` draws ``W̃* + U_A (Z / √e) U_Bᵀ`` per layer, stacked ``(n, ...)``."""
        return _kfac_sample(key, n, self.mean, self.layers)

    def output_covariance_fn(self, apply: Callable) -> Callable:
        fn = jax.jit(lambda mean, layers, x: curvature.kfac_output_covariance(apply, mean, x,
                                                                              layers))
        mean = network_variables(self.mean)
        dtype = jax.tree.leaves(mean)[0].dtype
        layers = jax.tree.map(lambda a: jnp.asarray(a, dtype), self.layers)
        return lambda x: fn(mean, layers, x)

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for name, (ua, ub, e) in self.layers.items():
            out |= {f"kfac/{name}/ua": np.asarray(ua), f"kfac/{name}/ub": np.asarray(ub),
                    f"kfac/{name}/eigvals": np.asarray(e)}
        return out

    @classmethod
    def from_arrays(cls, mean: Params, arrays: dict, info: dict) -> KFACLaplace:
        names = sorted({k[len("kfac/"):].rsplit("/", 1)[0] for k in arrays
                        if k.startswith("kfac/")})
        layers = {n: tuple(jnp.asarray(arrays[f"kfac/{n}/{part}"])
                           for part in ("ua", "ub", "eigvals")) for n in names}
        return cls(mean, layers, info)


@functools.partial(jax.jit, static_argnums=1)
def _diag_sample(key, n, mean, precision):
    z = _normal_like(key, n, mean)
    return jax.tree.map(lambda m, p, e: m + e * jax.lax.rsqrt(p), mean, precision, z)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _block_sample(key, n, path, mean, sqrt_cov):
    block, unravel = ravel_pytree(curvature.get_block(mean, path))
    z = jax.random.normal(key, (n, block.shape[0]), block.dtype)
    sqrt_cov = sqrt_cov.astype(block.dtype)
    return curvature.replace_block(_tile(mean, n), path, jax.vmap(unravel)(block + z @ sqrt_cov.T))


@functools.partial(jax.jit, static_argnums=1)
def _kfac_sample(key, n, mean, layers):
    out = _tile(mean, n)
    for i, (name, (ua, ub, e)) in enumerate(sorted(layers.items())):
        path = ("params", *name.split("/"))
        layer = curvature.get_block(mean, path)
        dtype = layer["kernel"].dtype
        z = jax.random.normal(jax.random.fold_in(key, i), (n, *e.shape), dtype)
        delta = jnp.einsum("di,nij,kj->ndk", ua.astype(dtype), z * jax.lax.rsqrt(e).astype(dtype),
                           ub.astype(dtype))
        rows = layer["kernel"].shape[0]
        new = {"kernel": layer["kernel"] + delta[:, :rows]}
        if "bias" in layer:
            new["bias"] = layer["bias"] + delta[:, rows]
        out = curvature.replace_block(out, path, new)
    return out


LaplacePosterior = DiagLaplace | LastLayerLaplace | KFACLaplace
_CLASSES = {"diag": DiagLaplace, "last_layer": LastLayerLaplace, "kfac": KFACLaplace}


# --- construction from curvature ----------------------------------------------------------------

def _flat(tree: Params) -> np.ndarray:
    return np.concatenate([np.asarray(leaf, np.float64).ravel()
                           for leaf in jax.tree.leaves(tree)])


def _check_finite(values: np.ndarray, what: str) -> None:
    bad = int(np.sum(~np.isfinite(values)))
    if bad:
        raise ConfigError(f"the {what} holds {bad} non-finite values; the MAP parameters or the "
                          "data give an undefined Hessian")


def _choose_alpha(prior_precision, ggn_eigs, sq_norm, log_likelihood, temperature):
    if prior_precision == "auto":
        return optimize_prior_precision(ggn_eigs, sq_norm, log_likelihood, temperature)
    return float(prior_precision)


def check_prior_precision(value: Any) -> float | str | None:
    """``None`` (the prior's own curvature), ``"auto"``, or a finite α > 0.

    Raises:
        ConfigError: anything else.
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


def make_posterior(
    structure: str,
    mean: Params,
    ggn: Any,
    *,
    log_prior: Callable[[Params], jax.Array],
    prior_precision: float | str | None = None,
    temperature: float = 1.0,
    log_likelihood: float | None = None,
    path: Path | None = None,
) -> LaplacePosterior:
    """The Laplace posterior from θ* and the (full-data) GGN.

    Args:
        structure: ``"diag"``, ``"last_layer"`` or ``"kfac"``.
        mean: θ*.
        ggn: the GGN over all N examples: the diagonal shaped like ``mean`` (diag), the matrix
            over the last layer (last_layer), or ``{layer: (A, B)}`` with ``A ⊗ B`` the layer's
            block (kfac).
        log_prior: the prior's ``log_prob``, for its curvature (``prior_precision=None``).
        prior_precision: ``None`` (prior's own curvature), a number α, or ``"auto"``.
        temperature: T.
        log_likelihood: ``log p(D | θ*)``, for the marginal likelihood (0 if unknown).
        path: the last layer's path (last_layer).

    Raises:
        ConfigError: unknown structure, bad prior precision, non-finite curvature.
    """
    if structure not in STRUCTURES:
        raise ConfigError(f"unknown structure {structure!r}; allowed: {', '.join(STRUCTURES)}")
    prior_precision = check_prior_precision(prior_precision)
    dtype = jax.tree.leaves(mean)[0].dtype
    t = float(temperature)
    ll = 0.0 if log_likelihood is None else float(log_likelihood)
    info: dict[str, Any] = {"prior_precision": prior_precision, "temperature": t}
    if structure == "diag":
        g = _flat(ggn)
        _check_finite(g, "GGN")
        theta = _flat(mean)
        if prior_precision is None:
            prior_c, separable = prior_curvature.diag_curvature(log_prior, mean)
            prior_flat = _flat(prior_c)
            _check_finite(prior_flat, "prior curvature")
            info["prior_leaf_blocks_diagonal"] = separable
            e = (g + prior_flat) / t
        else:
            alpha = _choose_alpha(prior_precision, g, float(theta @ theta), ll, t)
            info["alpha"] = alpha
            e = (g + alpha) / t
        e, damping = damp(e, dtype)
        flat_mean, unravel = ravel_pytree(mean)
        precision = unravel(jnp.asarray(e, flat_mean.dtype))
        post_cls, args = DiagLaplace, (mean, precision)
    elif structure == "last_layer":
        block = np.asarray(ravel_pytree(curvature.get_block(mean, path))[0], np.float64)
        G = np.asarray(ggn, np.float64)
        _check_finite(G, "GGN")
        G = 0.5 * (G + G.T)
        info["last_layer"] = "/".join(path)
        theta = block
        if prior_precision is None:
            H = np.asarray(prior_curvature.block_curvature(log_prior, mean, path), np.float64)
            _check_finite(H, "prior curvature")
            precision = (G + 0.5 * (H + H.T)) / t
        else:
            # The evidence needs the GGN's eigenvalues; a fixed α needs none.
            g = np.linalg.eigvalsh(G) if prior_precision == "auto" else None
            alpha = _choose_alpha(prior_precision, g, float(theta @ theta), ll, t)
            info["alpha"] = alpha
            precision = (G + alpha * np.eye(len(G))) / t
        sqrt_cov, log_det, damping = _sqrt_covariance(precision, dtype)
        num = len(G)
        post_cls, args = LastLayerLaplace, (mean, tuple(path), jnp.asarray(sqrt_cov))
    else:
        eig = {}
        for name, (A, B) in sorted(ggn.items()):
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
            deltas = {}
            for name in eig:
                layer = curvature.get_block(prior_c, ("params", *name.split("/")))
                deltas[name] = float(np.mean(_flat(layer)))
            _check_finite(np.array(list(deltas.values())), "prior curvature")
        else:
            alpha = _choose_alpha(prior_precision, g, float(theta @ theta), ll, t)
            info["alpha"] = alpha
            deltas = dict.fromkeys(eig, alpha)
        parts = [(np.outer(a, b) + deltas[n]) / t for n, (a, _, b, _) in eig.items()]
        flat, damping = damp(np.concatenate([p.ravel() for p in parts]), dtype)
        layers, start = {}, 0
        for (name, (_, ua, _, ub)), part in zip(eig.items(), parts, strict=True):
            e = flat[start:start + part.size].reshape(part.shape)
            start += part.size
            layers[name] = (jnp.asarray(ua), jnp.asarray(ub), jnp.asarray(e))
        post_cls, args = KFACLaplace, (mean, layers)
        e = flat
    if structure != "last_layer":
        num, log_det = int(e.size), float(np.sum(np.log(e)))
    info["damping"] = damping.as_dict()
    info["num_params"] = num
    if prior_precision is not None:
        log_p = 0.5 * num * math.log(info["alpha"] / (2 * math.pi)) \
            - 0.5 * info["alpha"] * float(theta @ theta)
    elif structure == "diag" or (structure == "kfac" and network_variables(mean) is mean):
        log_p = float(jax.jit(log_prior)(mean))
    else:
        # The structure covers part of the position (a layer, or the weights without a
        # hierarchical prior's latents), whose conditional prior is not available in general.
        log_p = None
    info["log_marginal_likelihood"] = (
        None if log_p is None or log_likelihood is None
        else (ll + log_p) / t + 0.5 * num * math.log(2 * math.pi) - 0.5 * log_det)
    info["log_likelihood"] = log_likelihood
    return post_cls(*args, info=info)


# --- predictives --------------------------------------------------------------------------------

def glm_predict(
    problem,
    posterior: LaplacePosterior,
    x: np.ndarray,
    *,
    key: jax.Array | None = None,
    num_samples: int = 30,
    test_chunk: int = 1024,
    max_diagnostic_points: int = 1000,
):
    """The linearised (GLM) predictive of ``problem``'s model at inputs ``x``.

    Returns:
        A :class:`bnnkit.predict.Prediction`: for regression one Gaussian per input
        (``means``/``stds`` of shape (1, N), original units); for classification the probit
        probabilities. ``per_sample`` holds ``num_samples`` draws of the linearised outputs on
        the first ``max_diagnostic_points`` inputs, for function-space diagnostics.

    Example:
        >>> pred = glm_predict(problem, posterior, problem.dataset.x_test)  # doctest: +SKIP
    """
    from bnnkit.predict import Prediction

    key = jax.random.PRNGKey(0) if key is None else key
    covariance = posterior.output_covariance_fn(problem.log_posterior.apply)
    outs, covs = [], []
    for start in range(0, len(x), test_chunk):
        out, cov = covariance(problem.to_device(x[start:start + test_chunk]))
        outs.append(np.asarray(out, np.float64))
        covs.append(np.asarray(cov, np.float64))
    out, cov = np.concatenate(outs), np.concatenate(covs)
    cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
    m = min(len(x), max_diagnostic_points)
    w, v = np.linalg.eigh(cov[:m])
    z = np.asarray(jax.random.normal(key, (num_samples, m, out.shape[-1])), np.float64)
    draws = out[None, :m] + np.einsum("nij,nj,snj->sni", v, np.sqrt(np.clip(w, 0, None)), z)
    if problem.dataset.task == "classification":
        kappa = 1.0 / np.sqrt(1.0 + math.pi / 8.0 * np.diagonal(cov, axis1=1, axis2=2))
        probs = np.asarray(jax.nn.softmax(jnp.asarray(out * kappa), axis=-1), np.float64)
        per_sample = np.asarray(jax.nn.softmax(jnp.asarray(draws), axis=-1), np.float64)
        return Prediction(task="classification", probs=probs, per_sample=per_sample[None])
    # An inferred noise std is taken at θ*; the linearisation covers the network's outputs.
    likelihood = problem.log_posterior.likelihood_for(posterior.mean)
    mean, noise = (np.asarray(a, np.float64) for a in likelihood.mean_std(jnp.asarray(out)))
    std = np.sqrt(np.clip(cov[:, 0, 0], 0, None) + noise**2)
    scale, shift = problem.dataset.target_scale, problem.dataset.target_shift
    per_sample = draws[..., 0] * scale + shift
    return Prediction(task="regression", means=(mean * scale + shift)[None],
                      stds=(std * scale)[None], per_sample=per_sample[None])


# --- storage ------------------------------------------------------------------------------------

def save(posterior: LaplacePosterior, path) -> None:
    """Write θ* and the posterior's arrays to one ``.npz`` (atomic, no pickle)."""
    io.save_arrays(path, {**io.flatten_tree(posterior.mean, "mean/"), **posterior.arrays()})


def load(path, template: Params, info: dict) -> LaplacePosterior:
    """Read back what :func:`save` wrote; ``info`` holds ``structure`` (and ``last_layer``)."""
    arrays = io.load_arrays(path)
    mean = jax.tree.map(jnp.asarray, io.unflatten_tree(template, arrays, "mean/"))
    structure = info.get("structure")
    if structure not in _CLASSES:
        raise ConfigError(f"unknown Laplace structure {structure!r} in the run record; allowed: "
                          f"{', '.join(STRUCTURES)}")
    return _CLASSES[structure].from_arrays(mean, arrays, info)


def load_posterior(record: dict, problem, rundir) -> LaplacePosterior:
    """The Laplace posterior stored in a run directory.

    Raises:
        ConfigError: the run has no stored posterior (not finished).
    """
    path = rundir.path / ARRAYS_FILE
    if record.get("status") != "finished" or not path.is_file():
        raise ConfigError(f"Laplace run {str(rundir.path)!r} is not finished "
                          f"(status {record.get('status')!r}); run bnnkit laplace again")
    template = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    return load(path, template, {**record.get("laplace", {}), "structure": record["structure"]})


def load_run_posterior(record: dict, problem, rundir) -> Samples:
    """``num_samples`` draws from the stored posterior with the run's fixed key, (1, n, ...)."""
    posterior = load_posterior(record, problem, rundir)
    key = jax.random.fold_in(jax.random.PRNGKey(record.get("seed", 0)), 1)
    draws = posterior.sample(key, int(record.get("num_samples", 30)))
    return Samples.from_single_chain(jax.tree.map(np.asarray, draws))


def glm_prediction(record: dict, problem, rundir, x: np.ndarray):
    """The linearised predictive of a stored Laplace run at ``x`` (for ``bnnkit evaluate``)."""
    posterior = load_posterior(record, problem, rundir)
    key = jax.random.fold_in(jax.random.PRNGKey(record.get("seed", 0)), 2)
    return glm_predict(problem, posterior, x, key=key,
                       num_samples=int(record.get("num_samples", 30)))
