"""Divergence: a member's loss, log density or parameters that became NaN or infinite.

What a run computes after a non-finite value is meaningless, so the run driver checks every
unit before it keeps anything of it (:func:`finite_members` on the device, :func:`non_finite`
on the host) and stops with :class:`DivergenceError`, whose message names what to try
(:func:`divergence_advice`); the directory keeps the last finite state, marked "diverged"
(:meth:`bnnkit.runs.lifecycle.Lifecycle.diverged`), and a resume, which would repeat the same
steps bit for bit, is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.inference.base import RunSettings
from bnnkit.metrics.findings import Remedy
from bnnkit.settings import flag


class DivergenceError(ConfigError):
    """A run stopped because a member's loss, log density or parameters became NaN or
    infinite (:func:`non_finite`): what it computed from there on would be meaningless, so it
    stops keeping its last finite state, and the command line exits non-zero (code 2).

    Attributes:
        what: what happened, in a sentence without advice.
        remedy: what to try, in the run's settings (:func:`divergence_remedy`); a composite
            that ran the run as a stage says it in its own settings.
    """

    def __init__(self, what: str, remedy: Remedy, config: RunSettings):
        super().__init__(f"{what} {remedy.text(lambda name: flag(type(config), name))}")
        self.what = what
        self.remedy = remedy


def finite_members(position: Any, num_members: int) -> jax.Array:
    """Whether each member's parameters are all finite (jit-able; members on the leading
    axis of every leaf).

    Example:
        >>> finite_members({"w": jnp.array([[0.0, 1.0], [jnp.nan, 2.0]])}, 2)
        Array([ True, False], dtype=bool)
    """
    ok = jnp.ones(num_members, bool)
    for leaf in jax.tree.leaves(position):
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf.reshape(num_members, -1)), axis=1)
    return ok


def non_finite(info: Any, finite: np.ndarray) -> tuple[list[str], list[int]] | None:
    """What became non-finite in a unit, and in which members (``None``: nothing).

    Every method reports its loss or log density in its ``Info`` and its parameters through
    ``method.position``, so this one check covers every method: a real-valued ``Info`` field
    that is NaN or infinite, or a parameter that is. (A sampler's rejected proposal is not in
    its ``Info``: HMC and NUTS reject a non-finite trajectory as a divergence and report its
    acceptance as 0, so their chains stay finite.)

    Args:
        info: the unit's ``Info``, on the host, members on the leading axis.
        finite: :func:`finite_members` of the unit's state.

    Example:
        >>> from typing import NamedTuple
        >>> class Info(NamedTuple):
        ...     log_posterior: np.ndarray
        >>> non_finite(Info(np.array([1.0, np.nan])), np.array([True, True]))
        (['log_posterior'], [1])
    """
    finite = np.asarray(finite, bool).reshape(-1)
    bad = ~finite
    what = ["the parameters"] if bad.any() else []
    for name, value in info._asdict().items():
        value = np.asarray(value)
        if not np.issubdtype(value.dtype, np.floating):
            continue
        rows = (
            value.reshape(len(finite), -1)
            if value.size and value.ndim
            else value.reshape(1, -1).repeat(len(finite), axis=0)
        )
        broken = ~np.isfinite(rows).all(axis=1)
        if broken.any():
            what.append(name)
            bad |= broken
    return (what, [int(m) for m in np.flatnonzero(bad)]) if what else None


def divergence_remedy(config: RunSettings) -> Remedy:
    """What to try after a divergence, in ``config``'s settings: a smaller step size, gradient
    clipping, a larger prior precision, as it has them.

    Example:
        >>> from bnnkit.inference import ensemble
        >>> config = ensemble.Config(init_step_size=1e-3, num_epochs=2, batch_size=8,
        ...                          num_members=2)
        >>> divergence_remedy(config).text()
        'a smaller step: a smaller init_step_size or a smaller clip_grad_norm'
    """
    names = [f.name for f in dataclasses.fields(config)]
    changes = [
        (name, "smaller")
        for name in names
        if name.endswith("step_size") and getattr(config, name) is not None
    ]
    changes += [("clip_grad_norm", "smaller")] if "clip_grad_norm" in names else []
    changes += [("prior_precision", "larger")] if "prior_precision" in names else []
    return Remedy("a smaller step", tuple(changes))


def divergence_advice(config: RunSettings) -> str:
    """What to try after a divergence, in the flags of ``config``'s command."""
    return divergence_remedy(config).text(lambda name: flag(type(config), name))
