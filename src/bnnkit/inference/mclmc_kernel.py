"""MCLMC's iteration: its transitions in one scan, their sums and the tuning's end-of-part updates.

An iteration is ``steps_per_iteration`` transitions in one ``lax.scan`` (:func:`step`); each
transition moves the chain (:mod:`bnnkit.inference.mclmc_moves`: ``unadjusted_move``,
BlackJAX's isokinetic McLachlan step between partial velocity refreshments, retried shorter
past the energy cap; ``adjusted_move``, a MAMS trajectory and its Metropolis choice) and does
the tuning of the part it is in; the end of the iteration does the
tuning's end-of-part updates. The tuning itself is :mod:`bnnkit.inference.mclmc_tuning`'s, the
chain's state :mod:`bnnkit.inference.mclmc_state`'s; the method, its settings and its description
are :mod:`bnnkit.inference.mclmc`'s.

A step undone and a rejected trajectory (:mod:`bnnkit.inference.mclmc_moves` says when) are
divergences, logged per iteration (``divergent``: whether one happened; ``num_divergent``: how
many; ``num_retried``: the steps taken again, unadjusted).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.mcmc.integrators import IntegratorState
from jax.flatten_util import ravel_pytree

from bnnkit.inference.adaptation import any_chain
from bnnkit.inference.mclmc_moves import Move, adjusted_move, unadjusted_move
from bnnkit.inference.mclmc_state import MCLMCInfo, MCLMCState, set_preconditioner
from bnnkit.inference.mclmc_tuning import (
    Schedule,
    Tuner,
    autocorrelation_length,
    record,
    welford,
)
from bnnkit.types import Batch, Key


class Sums(NamedTuple):
    """What an iteration adds up over its transitions for its info."""

    accept: jax.Array
    divergent: jax.Array
    steps: jax.Array
    energy: jax.Array
    finite: jax.Array
    retried: jax.Array


def advance(
    state: MCLMCState,
    move: Move,
    *,
    schedule: Schedule,
    tuner: Tuner,
    in_phase: dict,
) -> tuple[jax.Array, MCLMCState]:
    """The chain's state after ``move``: its tuning taken during burn-in, the position added to
    the variance part's statistics and the step to the autocorrelation part's time; with the
    flattened position (what the autocorrelation part records)."""
    eps, L, tuning = state.step_size, state.L, state.tuning
    new = move.new
    tuning_now = state.iteration < schedule.num_burn_in
    tuning = jax.tree.map(lambda n, o: jnp.where(tuning_now, n, o), move.tuned, tuning)
    eps_out = jnp.where(tuning_now, move.next_eps, eps)
    L_out = jnp.where(tuning_now, move.next_length, L)
    x = ravel_pytree(new.position)[0]
    weight = jnp.where(jnp.logical_and(in_phase["variance"], move.weight_ok), eps, 0.0)
    gradient = ravel_pytree(new.logdensity_grad)[0] if tuner.preconditioner == "fisher" else None
    tuning = welford(tuning, x, gradient, weight.astype(eps.dtype))
    if schedule.rows:
        tuning = tuning._replace(
            window_time=tuning.window_time + jnp.where(in_phase["autocorrelation"], eps, 0)
        )
    return x, state._replace(
        position=new.position,
        momentum=new.momentum,
        logdensity=new.logdensity,
        logdensity_grad=new.logdensity_grad,
        step_size=eps_out,
        L=L_out,
        tuning=tuning,
    )


def accumulate(sums: Sums, move: Move, dim: int) -> Sums:
    """``sums`` with ``move`` added; ΔE²/d only over the transitions that did not diverge."""
    counted = jnp.logical_and(move.finite, jnp.logical_not(move.divergent))
    return Sums(
        sums.accept + move.accept,
        sums.divergent + move.divergent.astype(jnp.int32),
        sums.steps + move.num_steps,
        sums.energy + jnp.where(counted, jnp.square(move.change) / dim, 0.0),
        sums.finite + counted.astype(jnp.int32),
        sums.retried + move.retried.astype(jnp.int32),
    )


def transition(
    carry: tuple[MCLMCState, Sums],
    inputs: tuple[Key, jax.Array],
    *,
    logdensity_fn: Callable,
    schedule: Schedule,
    tuner: Tuner,
    dim: int,
    in_phase: dict,
) -> tuple[tuple[MCLMCState, Sums], jax.Array | None]:
    """One transition of an iteration (the body of its ``lax.scan``), with the tuning it does
    in the current part."""
    state, sums = carry
    key, index = inputs
    step = state.iteration * schedule.steps + index  # transitions since the start
    current = IntegratorState(
        state.position, state.momentum, state.logdensity, state.logdensity_grad
    )
    if tuner.adjusted:
        move = adjusted_move(key, current, state, logdensity_fn, schedule=schedule, tuner=tuner)
    else:
        move = unadjusted_move(
            key, current, state, step, logdensity_fn, schedule=schedule, tuner=tuner, dim=dim
        )
    x, state = advance(state, move, schedule=schedule, tuner=tuner, in_phase=in_phase)
    sums = accumulate(sums, move, dim)
    # The coordinates that set L, recorded after the scan (:func:`~bnnkit.inference.
    # mclmc_tuning.record`).
    return (state, sums), (x[state.tuning.subset] if schedule.rows else None)


def phases(iteration: jax.Array, schedule: Schedule) -> dict[str, jax.Array]:
    """Whether ``iteration`` is in the variance part and in the autocorrelation part."""
    return {
        "variance": jnp.logical_and(
            iteration >= schedule.variance_start, iteration < schedule.variance_end
        ),
        "autocorrelation": jnp.logical_and(
            iteration >= schedule.autocorrelation_start, iteration < schedule.num_burn_in
        ),
    }


def transitions(
    rng_key: Key,
    state: MCLMCState,
    batch: Batch,
    *,
    log_posterior: Callable,
    schedule: Schedule,
    tuner: Tuner,
    dim: int,
    in_phase: dict,
) -> tuple[MCLMCState, Sums, Any]:
    """The iteration's ``schedule.steps`` transitions in one ``lax.scan``: the state after
    them, their sums and the coordinates each recorded (``None`` without a record)."""
    dtype = state.step_size.dtype
    zeros = Sums(
        jnp.zeros((), dtype),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), dtype),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
    )
    # The transitions move one flat vector of the parameters, not a tree of them: every
    # elementwise step of the integrator, the Gaussian draws and the tuning is then one
    # operation, not one per leaf, which makes the compiled iteration a fraction of the size
    # (docs/performance.md, "Compilation"); the log posterior takes its tree back.
    _, unravel = ravel_pytree(state.position)
    state = state._replace(
        position=ravel_pytree(state.position)[0],
        momentum=ravel_pytree(state.momentum)[0],
        logdensity_grad=ravel_pytree(state.logdensity_grad)[0],
    )
    body = functools.partial(
        transition,
        logdensity_fn=lambda p: log_posterior(unravel(p), batch),
        schedule=schedule,
        tuner=tuner,
        dim=dim,
        in_phase=in_phase,
    )
    keys = jax.random.split(rng_key, schedule.steps)
    # The trace stays out of the scan's carry, which XLA copies at every transition: carried
    # (even untouched) it made an iteration 4x slower on a small network.
    trace = state.tuning.trace
    carry = state._replace(tuning=state.tuning._replace(trace=trace[:0]))
    (new, sums), recorded = jax.lax.scan(
        body, (carry, zeros), (keys, jnp.arange(schedule.steps, dtype=jnp.int32))
    )
    new = new._replace(
        tuning=new.tuning._replace(trace=trace),
        position=unravel(new.position),
        momentum=unravel(new.momentum),
        logdensity_grad=unravel(new.logdensity_grad),
    )
    return new, sums, recorded


def end_of_iteration(
    new: MCLMCState,
    recorded: Any,
    iteration: jax.Array,
    in_phase: dict,
    *,
    dim: int,
    schedule: Schedule,
    tuner: Tuner,
) -> MCLMCState:
    """The tuning's end-of-part updates after iteration ``iteration``'s transitions: the
    recorded coordinates written to the trace; Σ and L at the end of the variance part; L from
    the autocorrelation and ε frozen at the end of burn-in; then the iteration counted."""
    dtype = new.step_size.dtype
    if schedule.rows:
        new = new._replace(
            tuning=record(new.tuning, recorded, iteration, in_phase["autocorrelation"], schedule)
        )

    if schedule.variance_end > schedule.variance_start:
        installed = set_preconditioner(new, dim, tuner)
        last = iteration + 1 == schedule.variance_end
        new = jax.tree.map(lambda a, b: jnp.where(last, a, b), installed, new)
    last_tuning = iteration + 1 == schedule.num_burn_in
    if schedule.rows:
        # Unbatched predicate (:func:`any_chain`): otherwise every iteration of every chain
        # would compute the autocorrelation's FFTs over the whole trace (4x the iteration's
        # time on a small network).
        refined = jax.lax.cond(
            any_chain(last_tuning),
            functools.partial(autocorrelation_length, l_factor=tuner.l_factor),
            lambda tuning, L: L,
            new.tuning,
            new.L,
        )
        refined = jnp.where(last_tuning, refined, new.L)
        new = new._replace(L=refined)
    if tuner.adjusted and schedule.num_burn_in:
        final = jnp.exp(new.tuning.averaging.log_step_size_avg).astype(dtype)
        new = new._replace(step_size=jnp.where(last_tuning, final, new.step_size))
    return new._replace(iteration=iteration + 1)


def step(
    rng_key: Key,
    state: MCLMCState,
    batch: Batch,
    *,
    log_posterior: Callable,
    schedule: Schedule,
    tuner: Tuner,
) -> tuple[MCLMCState, MCLMCInfo]:
    """One iteration: ``schedule.steps`` transitions in a ``lax.scan`` (:func:`transitions`),
    then the tuning's end-of-part updates (:func:`end_of_iteration`: preconditioner and L; L
    from the autocorrelation and ε frozen at the end of burn-in).

    Args:
        rng_key: the iteration's key (split into one per transition).
        state: the chain's state.
        batch: the data ``log_posterior`` takes.
        log_posterior: ``(params, batch) -> log density``.
        schedule: the tuning's parts.
        tuner: the tuning's constants.
    """
    dim = state.inverse_mass_matrix.shape[-1]
    iteration = state.iteration
    in_phase = phases(iteration, schedule)
    new, sums, recorded = transitions(
        rng_key,
        state,
        batch,
        log_posterior=log_posterior,
        schedule=schedule,
        tuner=tuner,
        dim=dim,
        in_phase=in_phase,
    )
    new = end_of_iteration(
        new, recorded, iteration, in_phase, dim=dim, schedule=schedule, tuner=tuner
    )
    steps = jnp.maximum(sums.finite, 1)
    return new, MCLMCInfo(
        acceptance_rate=sums.accept / schedule.steps,
        divergent=sums.divergent > 0,
        num_divergent=sums.divergent,
        num_leapfrog=sums.steps,
        step_size=state.step_size,
        L=state.L,
        energy_var=sums.energy / steps,
        log_posterior=new.logdensity,
        num_retried=sums.retried,
    )
