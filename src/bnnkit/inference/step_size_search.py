"""Hoffman & Gelman's search for a first step size, where a chain starts.

The adaptive samplers (HMC's ``"mass"``, ``"chees"`` and ``"auto"``, and NUTS) start their dual
averaging from an ε found where each chain stands rather than from a fixed guess: doubling or
halving ε until one leapfrog step's acceptance crosses the target
(``blackjax.adaptation.step_size.find_reasonable_step_size``), then keeping the largest ε seen to
accept.
"""

from __future__ import annotations

from collections.abc import Callable

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.step_size import find_reasonable_step_size

from bnnkit.inference.adaptation import size_and_dtype


def reasonable_step_size(
    key: jax.Array,
    start,
    logdensity_fn: Callable,
    step_size: jax.Array,
    *,
    target: float,
    divergence_threshold: float,
) -> jax.Array:
    """Hoffman & Gelman's doubling and halving of ε from ``start`` (identity mass) until one
    leapfrog step's acceptance crosses ``target``, so that adaptation starts where the chain
    stands (``blackjax.adaptation.step_size.find_reasonable_step_size``)."""
    size, dtype = size_and_dtype(start.position)
    base = blackjax.hmc.build_kernel(divergence_threshold=divergence_threshold)
    ones = jnp.ones(size, dtype)

    def kernel_at(eps):
        return lambda k, s: base(k, s, logdensity_fn, eps, ones, 1)

    found = find_reasonable_step_size(key, kernel_at, start, step_size, target_accept=target)
    # Doubling stops at the first ε whose acceptance fell below the target, which can be past
    # the leapfrog's stability limit (a stiff start accepted 0.9 at ε and 1e-34 at 2ε, and every
    # first trajectory was rejected); the ε before it is the largest one seen to accept.
    return jnp.where(found > step_size, found / 2, found)
