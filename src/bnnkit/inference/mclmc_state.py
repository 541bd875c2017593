"""MCLMC's chain state, its diagnostics per iteration, and a chain's initial state.

Stored runs are read back by the fields' names and order of :class:`MCLMCState` (the tuning's,
:class:`~bnnkit.inference.mclmc_tuning.MCLMCTuning`, included) and the run log's keys are
:class:`MCLMCInfo`'s: both layouts are kept as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.adaptation.metric_estimators import fisher_score_diagonal_from_moments
from blackjax.util import generate_unit_vector
from jax.flatten_util import ravel_pytree

from bnnkit.errors import ConfigError
from bnnkit.inference.mclmc_tuning import MCLMCTuning, Schedule, Tuner, centred_averaging
from bnnkit.types import Batch, Key, Params


class MCLMCState(NamedTuple):
    """What the next MCLMC iteration needs.

    Stored runs are read back by these fields' names and order: keep both.

    Attributes:
        position: current parameters.
        momentum: the unit velocity (of the unadjusted sampler; the adjusted one draws a fresh
            one per transition).
        logdensity: tempered log posterior at ``position``; ``logdensity_grad`` its gradient.
        step_size: ε of the next transition.
        L: the decoherence length (unadjusted) or trajectory's integration time (adjusted).
        inverse_mass_matrix: the diagonal preconditioner Σ (flattened; BlackJAX's name).
        tuning: the tuning's state.
        iteration: iterations done.
    """

    position: Params
    momentum: Params
    logdensity: jax.Array
    logdensity_grad: Params
    step_size: jax.Array
    L: jax.Array
    inverse_mass_matrix: jax.Array
    tuning: MCLMCTuning
    iteration: jax.Array


class MCLMCInfo(NamedTuple):
    """Diagnostics of one iteration (the run log's keys).

    Attributes:
        acceptance_rate: mean Metropolis acceptance probability of the iteration's trajectories
            (1 for the unadjusted sampler, which takes every step).
        divergent: whether a transition of the iteration diverged.
        num_divergent: how many did.
        num_leapfrog: integrator steps of the iteration (the key HMC's log uses; each costs
            :data:`~bnnkit.inference.mclmc.GRADIENTS_PER_STEP` gradient evaluations).
        step_size: ε the iteration started with.
        L: L the iteration started with.
        energy_var: mean of ΔE²/d over the iteration's transitions that did not diverge (per
            step unadjusted, where ε is tuned on it; per trajectory adjusted).
        log_posterior: tempered log posterior at the iteration's end.
        num_retried: the iteration's steps taken again with a shorter step for an energy
            error past the cap (unadjusted; 0 adjusted). Last, so that the earlier keys keep
            their order; runs made before it was logged lack it.
    """

    acceptance_rate: jax.Array
    divergent: jax.Array
    num_divergent: jax.Array
    num_leapfrog: jax.Array
    step_size: jax.Array
    L: jax.Array
    energy_var: jax.Array
    log_posterior: jax.Array
    num_retried: jax.Array


def init(
    key: Key,
    params: Params,
    batch: Batch,
    *,
    log_posterior: Callable,
    schedule: Schedule,
    step_size: float | None = None,
    coordinates: int = 1000,
) -> MCLMCState:
    """A chain's state at ``params``: a random unit velocity, the log posterior and its
    gradient there, ε (given, or 0.25·√d, BlackJAX's), L = √d, the identity preconditioner,
    and the random subset of coordinates whose autocorrelation will set L.

    Raises:
        ConfigError: fewer than 2 parameters (the velocity lives on a sphere of dimension d − 1).
    """
    flat, _ = ravel_pytree(params)
    dim, dtype = flat.size, flat.dtype
    if dim < 2:
        raise ConfigError(
            f"MCLMC needs at least 2 parameters (its velocity is a unit vector "
            f"of dimension d - 1); this model has {dim}"
        )
    key_momentum, key_subset = jax.random.split(key)
    logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
    eps = jnp.asarray(0.25 * math.sqrt(dim) if step_size is None else step_size, dtype)
    size = min(dim, coordinates)
    subset = jnp.sort(jax.random.choice(key_subset, dim, (size,), replace=False)).astype(jnp.int32)
    tuning = MCLMCTuning(
        log_weight=jnp.asarray(-jnp.inf, dtype),
        log_estimate=jnp.asarray(-jnp.inf, dtype),
        step_size_max=jnp.asarray(jnp.inf, dtype),
        averaging=centred_averaging(eps),
        variance_weight=jnp.zeros((), dtype),
        mean=jnp.zeros(dim, dtype),
        m2=jnp.zeros(dim, dtype),
        gradient_mean=jnp.zeros(dim, dtype),
        gradient_m2=jnp.zeros(dim, dtype),
        subset=subset,
        trace=jnp.zeros((schedule.rows, size), dtype),
        window_time=jnp.zeros((), dtype),
    )
    return MCLMCState(
        position=params,
        momentum=generate_unit_vector(key_momentum, params),
        logdensity=logdensity,
        logdensity_grad=grad,
        step_size=eps,
        L=jnp.asarray(math.sqrt(dim), dtype),
        inverse_mass_matrix=jnp.ones(dim, dtype),
        tuning=tuning,
        iteration=jnp.zeros((), jnp.int32),
    )


def set_preconditioner(state: MCLMCState, dim: int, tuner: Tuner) -> MCLMCState:
    """At the end of the variance part: Σ (``tuner.preconditioner``) and L from the
    positions' variance, and the step size tuning restarted in the new units."""
    tuning = state.tuning
    weight = jnp.where(tuning.variance_weight > 0, tuning.variance_weight, 1.0)
    variance = tuning.m2 / weight
    if tuner.preconditioner == "fisher":
        # √(Var[θ]/Var[∇ log p]): exact for a Gaussian whatever the chain has explored.
        variance = fisher_score_diagonal_from_moments(variance, tuning.gradient_m2 / weight)
    valid = jnp.logical_and(jnp.isfinite(variance), variance > 0)
    usable = jnp.logical_and(tuning.variance_weight > 0, jnp.any(valid))
    # A coordinate without a usable variance takes the mean of the others.
    fallback = jnp.sum(jnp.where(valid, variance, 0.0)) / jnp.maximum(jnp.sum(valid), 1)
    variance = jnp.where(valid, variance, fallback)
    if tuner.preconditioner == "none":
        inverse_mass = state.inverse_mass_matrix
        L = jnp.where(usable, jnp.sqrt(jnp.sum(variance)), state.L)
    else:
        inverse_mass = jnp.where(usable, variance, state.inverse_mass_matrix)
        L = jnp.where(usable, jnp.asarray(math.sqrt(dim), variance.dtype), state.L)
        dtype = state.step_size.dtype
        tuning = tuning._replace(
            log_weight=jnp.asarray(-jnp.inf, dtype),
            log_estimate=jnp.asarray(-jnp.inf, dtype),
            step_size_max=jnp.asarray(jnp.inf, dtype),
            averaging=centred_averaging(state.step_size),
        )
    return state._replace(
        inverse_mass_matrix=inverse_mass.astype(state.L.dtype),
        L=L.astype(state.L.dtype),
        tuning=tuning,
    )
