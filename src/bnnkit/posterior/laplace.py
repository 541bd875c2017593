"""Laplace approximations ``N(θ*, Λ⁻¹)`` around a MAP estimate θ*: what they hold and sample.

The posterior precision follows the toolkit's tempered convention
(:mod:`bnnkit.log_posterior`), ``Λ = (G + Λ_prior) / T`` with G the generalised Gauss-Newton
matrix of the training data, in one of three structures:

- :class:`DiagLaplace` (``"diag"``): ``diag Λ`` over every parameter;
- :class:`LastLayerLaplace` (``"last_layer"``): the full Λ over the last Dense layer, every
  other parameter fixed at θ*;
- :class:`KFACLaplace` (``"kfac"``): per Dense layer ``Λ_l = (A_l ⊗ B_l + δ_l I)/T``
  (Kronecker-factored GGN, Ritter et al. 2018), for networks of Dense layers.

They are built by :mod:`bnnkit.inference.laplace`; their predictives are the Monte Carlo model
average over ``sample(key, n)`` and the linearised (GLM) predictive of
:func:`bnnkit.predict.glm_predict`, chosen by ``predictive``.

Example:
    >>> import jax.numpy as jnp
    >>> post = DiagLaplace({"w": jnp.zeros(3)}, {"w": jnp.full(3, 4.0)}, num_draws=2)
    >>> post.sample(jax.random.PRNGKey(0), 5)["w"].shape
    (5, 3)
    >>> post.variance()["w"].tolist()  # 1 / precision
    [0.25, 0.25, 0.25]
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit import storage
from bnnkit.param_blocks import Path, get_block, replace_block
from bnnkit.posterior.samples import DrawnFromSample
from bnnkit.types import Key, Params

STRUCTURES = ("diag", "last_layer", "kfac")
PREDICTIVES = ("mc", "glm")


def _normal_like(key: Key, n: int, tree: Params) -> Params:
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten(
        [
            jax.random.normal(k, (n, *leaf.shape), leaf.dtype)
            for k, leaf in zip(keys, leaves, strict=True)
        ]
    )


def _tile(tree: Params, n: int) -> Params:
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (n, *a.shape)), tree)


@dataclasses.dataclass(frozen=True)
class _Laplace(DrawnFromSample):
    """What every structure shares: θ*, how it predicts, and its record.

    Attributes:
        mean: θ*, a params pytree.
        info: prior precision, damping and log marginal likelihood, for ``run.json``.
        num_draws: network samples of the Monte Carlo predictive and of the diagnostics.
        predictive: ``"mc"`` (model average over ``sample``) or ``"glm"`` (linearised).

    ``mean`` comes first and the structure's own fields next (positional); the rest are
    keyword-only, declared here once for every structure.
    """

    mean: Params
    info: dict = dataclasses.field(default_factory=dict, kw_only=True)
    num_draws: int | None = dataclasses.field(default=None, kw_only=True)
    predictive: str = dataclasses.field(default="mc", kw_only=True)

    structure: ClassVar[str]

    def meta(self) -> dict[str, Any]:
        return {"info": self.info, "num_draws": self.num_draws, "predictive": self.predictive}


@dataclasses.dataclass(frozen=True)
class DiagLaplace(_Laplace):
    """``N(θ*, diag(precision)⁻¹)`` over every parameter.

    Attributes:
        mean: θ*, a params pytree.
        precision: the diagonal of Λ, shaped like ``mean`` (positive).
    """

    precision: Params

    structure: ClassVar[str] = "diag"
    kind: ClassVar[str] = "laplace_diag"

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws ``θ* + z / √precision``, stacked ``(n, ...)``."""
        return _diag_sample(key, n, self.mean, self.precision)

    def variance(self) -> Params:
        return jax.tree.map(lambda p: 1.0 / p, self.precision)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            **storage.flatten_tree(self.mean, "mean/"),
            **storage.flatten_tree(self.precision, "precision/"),
        }

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> DiagLaplace:
        mean = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, "mean/"))
        precision = storage.unflatten_tree(template, arrays, "precision/")
        return cls(mean, jax.tree.map(jnp.asarray, precision), **_fields(meta))


@dataclasses.dataclass(frozen=True)
class LastLayerLaplace(_Laplace):
    """``N(θ*_B, S Sᵀ)`` over the last layer's parameters B; the rest stays at θ*.

    Attributes:
        mean: θ*, a params pytree.
        path: where B is in the params tree (``("params", "Dense_2")``).
        sqrt_cov: ``S`` with ``S Sᵀ = Λ⁻¹``, indexed as ``ravel_pytree`` of B: ``L⁻ᵀ`` for the
            Cholesky factor ``Λ = L Lᵀ``, or ``V diag(e)^{-1/2}`` when Λ had to be damped.
    """

    path: Path
    sqrt_cov: jax.Array

    structure: ClassVar[str] = "last_layer"
    kind: ClassVar[str] = "laplace_last_layer"

    def ravel(self, block: Params) -> jax.Array:
        """A last-layer subtree as the flat vector the covariance is indexed by."""
        return ravel_pytree(block)[0]

    def covariance(self) -> jax.Array:
        return self.sqrt_cov @ self.sqrt_cov.T

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws ``θ*_B + S z``, stacked ``(n, ...)``; only the last layer varies."""
        return _block_sample(key, n, self.path, self.mean, self.sqrt_cov)

    def arrays(self) -> dict[str, np.ndarray]:
        return {**storage.flatten_tree(self.mean, "mean/"), "sqrt_cov": np.asarray(self.sqrt_cov)}

    def meta(self) -> dict[str, Any]:
        return {**super().meta(), "path": "/".join(self.path)}

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> LastLayerLaplace:
        mean = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, "mean/"))
        return cls(
            mean, tuple(meta["path"].split("/")), jnp.asarray(arrays["sqrt_cov"]), **_fields(meta)
        )


@dataclasses.dataclass(frozen=True)
class KFACLaplace(_Laplace):
    """Per Dense layer ``N(W̃*, (U_A ⊗ U_B) diag(e)⁻¹ (U_A ⊗ U_B)ᵀ)`` over ``W̃ = [kernel; bias]``.

    Attributes:
        mean: θ*, a params pytree.
        layers: layer key (``"Dense_0"``) -> ``(U_A, U_B, e)``: eigenvectors of the two factors
            and the eigenvalues (in[+1], out) of the layer's precision (positive).
    """

    layers: dict[str, tuple[jax.Array, jax.Array, jax.Array]]

    structure: ClassVar[str] = "kfac"
    kind: ClassVar[str] = "laplace_kfac"

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws ``W̃* + U_A (Z / √e) U_Bᵀ`` per layer, stacked ``(n, ...)``."""
        return _kfac_sample(key, n, self.mean, self.layers)

    def arrays(self) -> dict[str, np.ndarray]:
        out = storage.flatten_tree(self.mean, "mean/")
        for name, (ua, ub, e) in self.layers.items():
            out |= {
                f"kfac/{name}/ua": np.asarray(ua),
                f"kfac/{name}/ub": np.asarray(ub),
                f"kfac/{name}/eigvals": np.asarray(e),
            }
        return out

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> KFACLaplace:
        mean = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, "mean/"))
        names = sorted(
            {k[len("kfac/") :].rsplit("/", 1)[0] for k in arrays if k.startswith("kfac/")}
        )
        layers = {
            n: tuple(jnp.asarray(arrays[f"kfac/{n}/{part}"]) for part in ("ua", "ub", "eigvals"))
            for n in names
        }
        return cls(mean, layers, **_fields(meta))


def _fields(meta: dict) -> dict:
    return {
        "info": meta.get("info", {}),
        "num_draws": meta.get("num_draws"),
        "predictive": meta.get("predictive", "mc"),
    }


@functools.partial(jax.jit, static_argnums=1)
def _diag_sample(key, n, mean, precision):
    z = _normal_like(key, n, mean)
    return jax.tree.map(lambda m, p, e: m + e * jax.lax.rsqrt(p), mean, precision, z)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _block_sample(key, n, path, mean, sqrt_cov):
    block, unravel = ravel_pytree(get_block(mean, path))
    z = jax.random.normal(key, (n, block.shape[0]), block.dtype)
    sqrt_cov = sqrt_cov.astype(block.dtype)
    return replace_block(_tile(mean, n), path, jax.vmap(unravel)(block + z @ sqrt_cov.T))


@functools.partial(jax.jit, static_argnums=1)
def _kfac_sample(key, n, mean, layers):
    out = _tile(mean, n)
    for i, (name, (ua, ub, e)) in enumerate(sorted(layers.items())):
        path = ("params", *name.split("/"))
        layer = get_block(mean, path)
        dtype = layer["kernel"].dtype
        z = jax.random.normal(jax.random.fold_in(key, i), (n, *e.shape), dtype)
        delta = jnp.einsum(
            "di,nij,kj->ndk", ua.astype(dtype), z * jax.lax.rsqrt(e).astype(dtype), ub.astype(dtype)
        )
        rows = layer["kernel"].shape[0]
        new = {"kernel": layer["kernel"] + delta[:, :rows]}
        if "bias" in layer:
            new["bias"] = layer["bias"] + delta[:, rows]
        out = replace_block(out, path, new)
    return out


LaplacePosterior = DiagLaplace | LastLayerLaplace | KFACLaplace
