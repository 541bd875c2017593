"""A diagonal plus low-rank Gaussian over a params pytree: the SWAG posterior (Maddox et al.
2019, "A Simple Baseline for Bayesian Uncertainty in Deep Learning").

SWAG collects, along SGD iterates θ_1..θ_n, their mean θ̄, the diagonal of their covariance
``Σ_diag = diag(mean(θ²) − θ̄²)`` and the last K deviations ``D = [θ_i − θ̄_i]`` (each iterate
minus the running mean at its collection), and stands for

    q(θ) = N(θ̄, ½ (Σ_diag + D Dᵀ / (K − 1))),

sampled as ``θ = θ̄ + (1/√2) Σ_diag^{1/2} z₁ + (1/√(2(K − 1))) D z₂`` with
``z₁ ~ N(0, I_d)``, ``z₂ ~ N(0, I_K)``: the two independent terms have covariances
``½ Σ_diag`` and ``½ D Dᵀ / (K − 1)``, which add up to the covariance above.

Example:
    >>> import jax, jax.numpy as jnp
    >>> q = LowRankGaussian({"w": jnp.zeros(3)}, {"w": jnp.ones(3)},
    ...                     {"w": jnp.eye(3)[:2]}, num_draws=4)  # K = 2 deviations
    >>> q.rank, q.sample(jax.random.PRNGKey(0), 5)["w"].shape
    (2, (5, 3))
    >>> q.covariance()  # ½ (I + D Dᵀ / 1)
    array([[1. , 0. , 0. ],
           [0. , 1. , 0. ],
           [0. , 0. , 0.5]])
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import storage
from bnnkit.posterior.diag_gaussian import standard_normal_like
from bnnkit.posterior.samples import DrawnFromSample
from bnnkit.types import Key, Params


@dataclasses.dataclass(frozen=True)
class LowRankGaussian(DrawnFromSample):
    """``N(μ, ½ (diag(v) + D Dᵀ / (K − 1)))`` over a params pytree.

    Attributes:
        mean: μ (SWAG's θ̄), shaped like one position.
        diag_var: ``v ≥ 0``, the diagonal covariance estimate, same structure.
        deviations: D's K columns, each leaf stacked ``(K, ...)``; K ≥ 2 for the low-rank
            term, which is left out when K < 2 (no spread can be estimated from one deviation).
        num_draws: weight samples a Bayesian model average over q uses (:meth:`draws`).
    """

    mean: Params
    diag_var: Params
    deviations: Params
    num_draws: int | None = None

    kind: ClassVar[str] = "low_rank_gaussian"

    @property
    def rank(self) -> int:
        """K, the number of deviation columns."""
        return int(jax.tree.leaves(self.deviations)[0].shape[0])

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws ``μ + (1/√2) v^{1/2} ⊙ z₁ + (1/√(2(K − 1))) D z₂``, stacked ``(n, ...)``:
        :meth:`transform` of standard normal ``z₁`` (shaped like μ) and ``z₂`` (n, K)."""
        k1, k2 = jax.random.split(key)
        z1 = standard_normal_like(k1, self.mean, n)
        dtype = jax.tree.leaves(self.mean)[0].dtype
        return self.transform(z1, jax.random.normal(k2, (n, self.rank), dtype))

    def transform(self, z_diag: Params, z_rank: jax.Array) -> Params:
        """The affine map from standard normal noise to draws:
        ``μ + (1/√2) v^{1/2} ⊙ z₁ + (1/√(2(K − 1))) D z₂`` (without the D term when K < 2).

        Args:
            z_diag: z₁, shaped like μ with a leading axis of n draws.
            z_rank: z₂, ``(n, K)``.
        """
        diag = jax.tree.map(
            lambda m, v, z: m + math.sqrt(0.5) * jnp.sqrt(v) * z, self.mean, self.diag_var, z_diag
        )
        rank = self.rank
        if rank < 2:
            return diag
        scale = 1.0 / math.sqrt(2.0 * (rank - 1))
        return jax.tree.map(
            lambda t, d: t + scale * jnp.tensordot(z_rank, d, axes=1).astype(t.dtype),
            diag,
            self.deviations,
        )

    def covariance(self) -> np.ndarray:
        """The dense covariance ``½ (diag(v) + D Dᵀ / (K − 1))`` over the flattened
        parameters (leaves in tree order), in float64: for checks on small models only."""
        v = np.concatenate(
            [np.asarray(a, np.float64).ravel() for a in jax.tree.leaves(self.diag_var)]
        )
        cov = np.diag(v)
        rank = self.rank
        if rank >= 2:
            d = np.concatenate(
                [
                    np.asarray(a, np.float64).reshape(rank, -1)
                    for a in jax.tree.leaves(self.deviations)
                ],
                axis=1,
            )
            cov = cov + d.T @ d / (rank - 1)
        return 0.5 * cov

    # --- storage (bnnkit.posterior.store) ---

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            **storage.flatten_tree(self.mean, "mean/"),
            **storage.flatten_tree(self.diag_var, "diag_var/"),
            **storage.flatten_tree(self.deviations, "deviations/"),
        }

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> LowRankGaussian:
        def part(prefix: str) -> Params:
            return jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, prefix))

        return cls(part("mean/"), part("diag_var/"), part("deviations/"), meta.get("num_draws"))
