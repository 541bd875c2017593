"""The burn-in tuning of the full-batch samplers: its interface, and what its pieces share.

A sampler's burn-in tuning is an :class:`Adaptation`: two pure functions, ``init`` and
``update``, that answer one question after every iteration: the next ε, τ and M⁻¹
(:class:`Tuning`). All states are NamedTuples of arrays: they live in a sampler's state and
resume bit for bit. The pieces, on BlackJAX's estimators, each in a module of its own:

- :mod:`bnnkit.inference.step_size_search`: Hoffman & Gelman's search for a first step size
  where a chain starts (:func:`~bnnkit.inference.step_size_search.reasonable_step_size`).
- :mod:`bnnkit.inference.mass_windows`: Stan's warm-up windows (dual averaging of ε and a
  diagonal M⁻¹ per slow window, optionally pooled over the chains) and NUTS's adaptation
  (:func:`~bnnkit.inference.mass_windows.window_adaptation`).
- :mod:`bnnkit.inference.chees`: ε and τ tuned across chains by the ChEES criterion, and which
  chains may be pooled (:func:`~bnnkit.inference.chees.pooled_chains`).
- :mod:`bnnkit.inference.hmc_modes`: HMC's modes (:data:`~bnnkit.inference.hmc_modes.ADAPT_MODES`:
  none, the paper's dual averaging, Stan's windows, ChEES, ``"auto"``), assembled by
  :func:`~bnnkit.inference.hmc_modes.hmc_adaptation` with ``functools.partial`` from those
  pieces.

This module holds what they share: the vmapped axis of the chains (:data:`MEMBERS`) and the
predicate reduced over it (:func:`any_chain`), the jitter of a trajectory's length
(:func:`jitter`, a base-2 Halton sequence shared by all chains, so that draws are not
periodic), the update of a sampler that tunes nothing (:func:`kept`) and the wrapper that
tunes during burn-in only (:func:`during_burn_in`). MCLMC tunes per transition and keeps a
tuner of its own (:mod:`bnnkit.inference.mclmc_tuning`, which says why).

Example:
    >>> import jax.numpy as jnp
    >>> from bnnkit.inference.mass_windows import Windows
    >>> windows = Windows(num_burn_in=100, target=0.8)
    >>> state = windows.init(step_size=0.1, size=3, dtype=jnp.float32)
    >>> state, step_size, inverse_mass = windows.update(state, jnp.int32(0), jnp.ones(3), 0.9)
    >>> inverse_mass.shape
    (3,)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.mcmc.dynamic_hmc import halton_sequence

from bnnkit.types import Params

#: The axis name under which the run driver vmaps a method's members (chains).
MEMBERS = "members"


def like(new: Any, old: Any) -> Any:
    """``new`` with the dtypes of ``old`` (BlackJAX's constructors return Python scalars)."""
    return jax.tree.map(lambda n, o: jnp.asarray(n, jnp.result_type(o)), new, old)


def halton_bits(num_iterations: int) -> int:
    """Bits of the Halton sequence that cover ``num_iterations`` distinct values (< 32)."""
    return min(31, max(1, math.ceil(math.log2(num_iterations + 1))))


def jitter(iteration: jax.Array, bits: int) -> jax.Array:
    """The fraction in (0, 1) of the trajectory integrated at ``iteration``."""
    return halton_sequence(jnp.asarray(iteration, jnp.int32), bits)


def any_chain(flag: jax.Array, axis_name: str = MEMBERS) -> jax.Array:
    """Whether ``flag`` holds for any chain: unbatched when called inside the vmap over
    ``axis_name`` (as the run driver runs a method's step), else ``flag`` itself.

    A ``lax.cond`` whose predicate ``vmap`` batches runs both branches for every chain, at
    every step; with this predicate it runs one. The chains of a run are all at the same step,
    so a condition on the step count reduced over them is each chain's own; a branch that
    changes state still selects per chain with ``jnp.where(flag, ...)``, so what it computes
    is unchanged.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> jax.vmap(any_chain, axis_name=MEMBERS)(jnp.array([False, True])).tolist()
        [True, True]
        >>> bool(any_chain(jnp.array(False)))  # outside the vmap
        False
    """
    try:
        return jax.lax.psum(flag.astype(jnp.int32), axis_name) > 0
    except NameError:  # not inside a vmap over the chains' axis
        return flag


class Tuning(NamedTuple):
    """What an iteration integrates with.

    Attributes:
        step_size: the leapfrog step size ε.
        trajectory_len: the integration time τ (``None`` for NUTS, whose trajectories end
            where they turn back).
        inverse_mass_matrix: the diagonal of M⁻¹.
    """

    step_size: jax.Array
    trajectory_len: jax.Array | None
    inverse_mass_matrix: jax.Array


class Adaptation(NamedTuple):
    """A sampler's burn-in tuning of ε, τ and M⁻¹ as two pure functions.

    The sampler keeps the adaptation's state in its own and asks, after every iteration, what
    the next one integrates with; past burn-in the answer no longer changes.

    Attributes:
        init: ``(key, start, logdensity_fn, step_size, trajectory_len) -> (state, tuning)``:
            the adaptation's state and the first iteration's :class:`Tuning` at the chain's
            start (a ``blackjax.mcmc.hmc.HMCState``), from the given ε and τ.
        update: ``(state, iteration, start_position, proposal, info, tuning) -> (state,
            tuning)``: after iteration ``iteration`` (counted from 0), which started at
            ``start_position`` with ``tuning`` and moved to ``proposal`` (an ``HMCState``)
            with BlackJAX's ``info``, the state and the next iteration's tuning.
        jittered: each iteration integrates a quasi-random fraction (:func:`jitter`) of τ.
        tree_depth: ``iteration -> depth``: the iteration runs NUTS with trees at most this
            deep instead of static HMC where it is positive (``"auto"``'s burn-in, see
            :func:`~bnnkit.inference.hmc_modes.auto_tree_depth`); ``None``: static HMC
            throughout.
        early_until: the last iteration whose M⁻¹ is still the identity (-1: none), where a
            static trajectory takes at most 2^``EARLY_TREE_DEPTH`` − 1 steps
            (:data:`~bnnkit.inference.hmc_modes.EARLY_TREE_DEPTH`).

    Example:
        >>> import blackjax, jax, jax.numpy as jnp
        >>> def logdensity(x):
        ...     return -0.5 * jnp.sum(x ** 2)
        >>> from bnnkit.inference.hmc_modes import hmc_adaptation
        >>> adaptation = hmc_adaptation("step", num_burn_in=10, num_iterations=20, target=0.8)
        >>> start = blackjax.hmc.init(jnp.zeros(2), logdensity)
        >>> state, tuning = adaptation.init(None, start, logdensity, 0.1, 1.0)
        >>> info = blackjax.hmc.build_kernel()(jax.random.PRNGKey(0), start, logdensity,
        ...                                    tuning.step_size, tuning.inverse_mass_matrix, 10)[1]
        >>> state, tuning = adaptation.update(state, jnp.int32(0), start.position, start, info,
        ...                                   tuning)
        >>> bool(tuning.step_size > 0.1), float(tuning.trajectory_len)  # accepted: ε grows
        (True, 1.0)
    """

    init: Callable[..., tuple[Any, Tuning]]
    update: Callable[..., tuple[Any, Tuning]]
    jittered: bool = False
    tree_depth: Callable[[jax.Array], jax.Array] | None = None
    early_until: int = -1


def size_and_dtype(position: Params) -> tuple[int, Any]:
    """The number of parameters of ``position`` and their common float type."""
    leaves = jax.tree.leaves(position)
    return sum(leaf.size for leaf in leaves), jnp.result_type(*leaves)


def kept(
    state: Any, iteration: jax.Array, start_position: Params, proposal, info, tuning: Tuning
) -> tuple[Any, Tuning]:
    """The update of a sampler that adapts nothing: state and tuning as they are."""
    return state, tuning


def during_burn_in(
    state: Any,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    update: Callable,
    num_burn_in: int,
) -> tuple[Any, Tuning]:
    """``update`` during the first ``num_burn_in`` iterations; after them, state and tuning
    as they are (traced values: the same program serves the whole run)."""
    new = update(state, iteration, start_position, proposal, info, tuning)
    in_burn_in = iteration < num_burn_in
    return jax.tree.map(
        lambda n, o: jnp.where(in_burn_in, jnp.asarray(n, o.dtype), o), new, (state, tuning)
    )
