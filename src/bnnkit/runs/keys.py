"""The random keys of a run: pure functions of (seed, stream, member, unit).

Stream 0 initialises, 1 drives the method's noise, 2 orders the data, 3 draws evaluation
samples, 4 augments minibatches; member m's key at unit u is
``fold_in(fold_in(fold_in(key(seed), stream), m), u)`` (:func:`member_keys`). Nothing else is
random, which is what makes a resume reproduce the uninterrupted run bit for bit: the run driver
(:mod:`bnnkit.runs.loop`) and :func:`bnnkit.runs.sample` draw every key here.

Example:
    >>> keys = member_keys(0, NOISE_STREAM, 3)
    >>> keys.shape, bool((keys[0] != keys[1]).any())
    ((3, 2), True)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

INIT_STREAM, NOISE_STREAM, DATA_STREAM, EVAL_STREAM, AUGMENT_STREAM = 0, 1, 2, 3, 4

#: The entry of ``state.npz`` holding the units the state covers.
UNIT_KEY = "__unit__"


def member_keys(seed: int, stream: int, num_members: int) -> jax.Array:
    """Member m's root key of ``stream``: ``fold_in(fold_in(key(seed), stream), m)``."""
    base = jax.random.fold_in(jax.random.PRNGKey(seed), stream)
    return jax.vmap(lambda m: jax.random.fold_in(base, m))(jnp.arange(num_members))


def evaluation_key(seed: int) -> jax.Array:
    """The key of a run's evaluation draws (stream 3), so repeated evaluations agree."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_STREAM)
