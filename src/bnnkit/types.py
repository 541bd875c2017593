"""The types every module shares, defined once.

- :data:`Params`: a pytree of arrays (a network's flax variables, or a whole *position*:
  variables plus a prior's latent scales and an inferred noise std).
- :class:`Batch`: inputs and targets; the full training set for full-batch methods, a minibatch
  or a chunk otherwise.
- :data:`Key`: a JAX PRNG key. Keys always come in as arguments; nothing draws hidden randomness.
- :data:`Schedule`: a step size as a function of the update count (optax's convention), so a
  hyperparameter may be a number or a schedule.

Example:
    >>> import jax.numpy as jnp
    >>> batch = Batch(jnp.zeros((4, 2)), jnp.zeros(4))
    >>> batch.x.shape, batch.y.shape
    ((4, 2), (4,))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

Params = Any
"""A pytree of arrays: network variables or a whole position."""

Key = jax.Array
"""A JAX PRNG key (``jax.random.PRNGKey(0)`` or ``jax.random.key(0)``)."""

Schedule = Callable[[Any], Any]
"""``step count -> value``; ``optax.Schedule`` is one."""


class Batch(NamedTuple):
    """Inputs and targets; the full training set for HMC, a minibatch otherwise."""

    x: jax.Array
    y: jax.Array
