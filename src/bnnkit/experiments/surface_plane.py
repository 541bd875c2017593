"""The plane through three parameter vectors, in float64, for :mod:`bnnkit.experiments.surface`.

:func:`plane` spans it by Gram–Schmidt as bnn_hmc does (the formulas are in the surface
module's docstring) and :class:`Plane` maps plane coordinates back to a position. Positions are
flattened in NumPy float64 whatever the run's dtype, so that the plane, and the digest of its
points that a resumed grid checks, do not depend on whether JAX's double precision is on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.types import Params


@dataclasses.dataclass(frozen=True)
class Plane:
    """The plane through three positions, in float64.

    Attributes:
        origin: θ_A, flat.
        u: θ_B − θ_A, flat.
        v: the part of θ_C − θ_A orthogonal to ``u``, flat.
        unravel: a flat vector back to the position's tree.
        points: (3, 2) coordinates of A, B, C.
    """

    origin: np.ndarray
    u: np.ndarray
    v: np.ndarray
    unravel: Any
    points: np.ndarray

    @property
    def u_norm(self) -> float:
        return float(np.linalg.norm(self.u))

    @property
    def v_norm(self) -> float:
        return float(np.linalg.norm(self.v))

    def position(self, a: float, b: float) -> Params:
        """θ(a, b) = θ_A + a·u + b·v as a tree (float64)."""
        return self.unravel(self.origin + a * self.u + b * self.v)


def flatten(tree: Params) -> tuple[np.ndarray, Any]:
    """A tree as one float64 vector (NumPy: JAX would round it to float32 unless x64 is on),
    and the function that gives the tree back."""
    leaves, treedef = jax.tree.flatten(tree)
    shapes = [np.shape(x) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    vector = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in leaves])

    def unravel(flat: np.ndarray) -> Params:
        parts = np.split(np.asarray(flat), np.cumsum(sizes)[:-1])
        return treedef.unflatten([p.reshape(s) for p, s in zip(parts, shapes, strict=True)])

    return vector, unravel


def plane(a: Params, b: Params, c: Params) -> Plane:
    """Gram–Schmidt on θ_B − θ_A and θ_C − θ_A, in float64 (see the module docstring).

    Raises:
        ConfigError: the three points span no plane (two coincide, or C is on the line AB).
    """
    (origin, unravel), (end_b, _), (end_c, _) = (flatten(p) for p in (a, b, c))
    u, w = end_b - origin, end_c - origin
    uu = float(u @ u)
    if not uu > 0:
        raise ConfigError(
            "the points A and B are the same parameters; allowed: three points that span a plane"
        )
    along = float(u @ w) / uu
    v = w - along * u
    # Relative to C's own distance: rounding leaves a residue of ~1e-16 ‖w‖ on a collinear C.
    if not np.linalg.norm(v) > 1e-12 * max(np.linalg.norm(w), np.finfo(float).tiny):
        raise ConfigError(
            "the point C lies on the line through A and B; allowed: three points that span a plane"
        )
    points = np.array([[0.0, 0.0], [1.0, 0.0], [along, 1.0]])
    return Plane(origin, u, v, unravel, points)
