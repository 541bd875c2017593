"""MCLMC's transitions: one unadjusted step (with its shorter retries) or one MAMS trajectory,
each with the tuning it proposes, as a :class:`Move` that :mod:`bnnkit.inference.mclmc_kernel`
takes into the chain's state.

An unadjusted step whose energy is not finite, or whose ``ΔE² > energy_var_max_ratio · d · v``,
is taken again from the same point with ε/2, then ε/4, ... up to ``step_retries`` times
(:func:`unadjusted_move`), and the first of them that is finite and within the cap is the step;
when none is, the step is reverted and its velocity redrawn (BlackJAX's ``handle_nans`` and
``handle_high_energy``). An adjusted trajectory whose energy error exceeds
``divergence_threshold`` nats is rejected. A step undone and a rejected trajectory are
divergences.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.step_size import dual_averaging_adaptation
from blackjax.mcmc.adjusted_mclmc import adjusted_mclmc_proposal, rescale
from blackjax.mcmc.integrators import (
    IntegratorState,
    isokinetic_mclachlan,
    with_isokinetic_maruyama,
)
from blackjax.mcmc.proposal import static_binomial_sampling
from blackjax.util import generate_unit_vector

from bnnkit.inference.adaptation import any_chain
from bnnkit.inference.mclmc_state import MCLMCState
from bnnkit.inference.mclmc_tuning import (
    MCLMCTuning,
    Schedule,
    Tuner,
    energy_var_target,
    predict_step_size,
)
from bnnkit.types import Key


def _binomial_with_energy(rng_key: Key, log_p_accept: jax.Array, proposal, new_proposal):
    """BlackJAX's Metropolis choice, with ``log_p_accept`` (−ΔE) as its extra information."""
    sampled, (do_accept, p_accept, _) = static_binomial_sampling(
        rng_key, log_p_accept, proposal, new_proposal
    )
    return sampled, (do_accept, p_accept, log_p_accept)


def adjusted_transition(
    rng_key: Key,
    state: IntegratorState,
    logdensity_fn: Callable,
    step_size: jax.Array,
    L: jax.Array,
    inverse_mass_matrix: jax.Array,
    *,
    max_steps: int,
    divergence_threshold: float,
):
    """One MAMS transition (``blackjax.mcmc.adjusted_mclmc_dynamic``'s kernel): a fresh unit
    velocity, a uniformly random number of isokinetic McLachlan steps with mean L/ε (BlackJAX's
    ``rescale``; 1 to ``max_steps``), and the Metropolis choice.

    Returns:
        ``(state, info, log_p_accept)``: the next state, BlackJAX's ``HMCInfo`` and −ΔE
        (−inf for a non-finite energy).
    """
    key_steps, key_momentum, key_integrator = jax.random.split(rng_key, 3)
    mean_steps = jnp.clip(L / step_size, 1.0, max_steps)
    num_steps = jnp.clip(
        jnp.ceil(jax.random.uniform(key_steps) * rescale(mean_steps)), 1, max_steps
    ).astype(jnp.int32)
    momentum = generate_unit_vector(key_momentum, state.position)
    proposal = adjusted_mclmc_proposal(
        integrator=with_isokinetic_maruyama(
            isokinetic_mclachlan(
                logdensity_fn=logdensity_fn, inverse_mass_matrix=inverse_mass_matrix
            )
        ),
        step_size=step_size,
        L_proposal_factor=jnp.inf,
        num_integration_steps=num_steps,
        divergence_threshold=divergence_threshold,
        sample_proposal=_binomial_with_energy,
    )
    return proposal(key_integrator, state._replace(momentum=momentum))


class Move(NamedTuple):
    """One transition's move, what the iteration's info adds up of it, and the tuning it
    proposes (taken during burn-in only).

    Attributes:
        new: the state the transition ends in.
        finite: whether its energy was finite.
        change: its energy error ΔE (0 where not finite).
        divergent: whether it diverged.
        accept: its acceptance probability (1 unadjusted).
        num_steps: its integrator steps (a step taken again counts each time).
        retried: whether it was taken again with a shorter step (unadjusted).
        tuned: the tuning state after it.
        next_eps, next_length: the step size and L it proposes for the next transition.
        weight_ok: whether its position counts in the variance part's statistics.
    """

    new: IntegratorState
    finite: jax.Array
    change: jax.Array
    divergent: jax.Array
    accept: jax.Array
    num_steps: jax.Array
    retried: jax.Array
    tuned: MCLMCTuning
    next_eps: jax.Array
    next_length: jax.Array
    weight_ok: jax.Array


def adjusted_move(
    key: Key,
    current: IntegratorState,
    state: MCLMCState,
    logdensity_fn: Callable,
    *,
    schedule: Schedule,
    tuner: Tuner,
) -> Move:
    """A MAMS trajectory (:func:`adjusted_transition`) and the dual averaging of ε on its
    acceptance; until the variance part ends, L follows ε (``tuning_trajectory_steps`` steps)."""
    eps, L, tuning = state.step_size, state.L, state.tuning
    new, info, log_p = adjusted_transition(
        key,
        current,
        logdensity_fn,
        eps,
        L,
        state.inverse_mass_matrix,
        max_steps=tuner.max_trajectory_steps,
        divergence_threshold=tuner.divergence_threshold,
    )
    finite = jnp.isfinite(log_p)
    change = jnp.where(finite, -log_p, 0.0)
    divergent = info.is_divergent
    accept = info.acceptance_rate
    num_steps = info.num_integration_steps
    _, da_update, _ = dual_averaging_adaptation(target=tuner.target_accept_rate)
    averaging = da_update(tuning.averaging, accept)
    averaging = jax.tree.map(lambda n, o: jnp.asarray(n, o.dtype), averaging, tuning.averaging)
    tuned = tuning._replace(averaging=averaging)
    next_eps = jnp.exp(averaging.log_step_size).astype(eps.dtype)
    # Until the positions' variance gives L, trajectories follow ε.
    next_L = jnp.where(
        state.iteration < schedule.variance_end, tuner.tuning_trajectory_steps * next_eps, L
    )
    weight_ok = jnp.ones((), bool)  # a rejected trajectory's start is a draw too
    retried = jnp.zeros((), bool)
    return Move(
        new,
        finite,
        change,
        divergent,
        accept,
        num_steps,
        retried,
        tuned,
        next_eps,
        next_L,
        weight_ok,
    )


def undo_cut(
    current: IntegratorState, new: IntegratorState, cut: jax.Array, key: Key
) -> IntegratorState:
    """``new``, or where ``cut`` the step undone: ``current`` with a fresh unit velocity drawn
    from ``key`` (BlackJAX's ``handle_high_energy``, the same bits).

    BlackJAX draws the fresh velocity at every step, whether a step is undone or not; here it
    is drawn only when some chain undoes one (:func:`~bnnkit.inference.adaptation.any_chain`:
    unbatched under the chains' vmap), which spares every transition a Gaussian vector, its
    hash and its norm.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> here = IntegratorState(jnp.zeros(3), jnp.ones(3) / 3**0.5, 0.0, jnp.zeros(3))
        >>> there = IntegratorState(jnp.ones(3), jnp.ones(3) / 3**0.5, -1.0, jnp.ones(3))
        >>> undone = undo_cut(here, there, jnp.array(True), jax.random.PRNGKey(0))
        >>> undone.position.tolist(), round(float(jnp.linalg.norm(undone.momentum)), 5)
        ([0.0, 0.0, 0.0], 1.0)
        >>> undo_cut(here, there, jnp.array(False), jax.random.PRNGKey(0)).position.tolist()
        [1.0, 1.0, 1.0]
    """
    momentum = jax.lax.cond(
        any_chain(cut),
        lambda: generate_unit_vector(key, current.position),
        lambda: current.momentum,
    )
    undone = current._replace(momentum=momentum)
    return jax.tree.map(lambda a, b: jnp.where(cut, a, b), undone, new)


def unadjusted_move(
    key: Key,
    current: IntegratorState,
    state: MCLMCState,
    step: jax.Array,
    logdensity_fn: Callable,
    *,
    schedule: Schedule,
    tuner: Tuner,
    dim: int,
) -> Move:
    """One step of BlackJAX's MCLMC kernel at transition ``step`` (counted from the start),
    taken again with a shorter step where its energy error is too high, and the step size
    predictor on the first try's ΔE.

    A step whose energy is not finite or whose ``ΔE²`` exceeds ``energy_var_max_ratio · d · v``
    is tried again from the same point with ε/2ʲ, j = 1, ..., ``step_retries`` (each try with a
    key of its own), and the first try that is finite and within the cap is the step; where
    none is, the step is undone and the velocity redrawn (BlackJAX's ``handle_high_energy``),
    a divergence. Undoing leaves a chain where a sharp region begins: on a heteroscedastic
    network, where its noise std is small, every step of the tuned ε from there can exceed the
    cap, and such a chain stays on one point for the rest of the run (measured in
    ``docs/concepts/reference.md``). A shorter step there is the integrator resolving the
    region: the unadjusted sampler's bias falls with ε, and no Metropolis balance is there to
    keep (delayed-rejection HMC, Modi, Barnett & Carpenter 2023, does the same with its
    correction). The tuning still sees the first try, so that ε keeps answering to the energy
    errors of its own steps; a retry is logged (``num_retried``) and its gradients counted.
    """
    eps, L, tuning = state.step_size, state.L, state.tuning
    energy_var = energy_var_target(step, schedule)
    key_kernel, key_cut = jax.random.split(key)
    kernel = blackjax.mcmc.mclmc.build_kernel(integrator=isokinetic_mclachlan)
    cutoff = jnp.sqrt(tuner.energy_var_max_ratio * dim * energy_var)

    def failed(info) -> jax.Array:
        # A non-finite energy is zeroed by the kernel: ``nonans`` tells it apart.
        return jnp.logical_or(jnp.logical_not(info.nonans), jnp.abs(info.energy_change) > cutoff)

    # Jitted so that it is traced once: the loop's carry takes its shapes from the same trace.
    @jax.jit
    def attempt(tries: jax.Array):
        # Try j takes ε/2ʲ with fold_in(key, j); the first, the key itself.
        again_key = jax.random.fold_in(key_kernel, tries)
        key_j = jax.tree.map(lambda a, b: jnp.where(tries == 0, a, b), key_kernel, again_key)
        # ε itself on the first try: XLA's exp2 need not give exactly 1 at 0.
        short = jnp.where(tries == 0, eps, eps * jnp.exp2(-tries.astype(eps.dtype)))
        return kernel(key_j, current, logdensity_fn, state.inverse_mass_matrix, L, short)

    if tuner.step_retries:
        # The first try and the retries are one loop, so that the step (its gradients, its
        # Gaussian draws) is compiled once, not once before a loop of retries and again in it.
        # Under vmap the loop runs while any chain retries, the others' tries masked: a retry
        # costs every chain a step, and is rare.
        def again(carry):
            done, _, info, _ = carry
            return jnp.logical_or(
                done == 0, jnp.logical_and(failed(info), done <= tuner.step_retries)
            )

        def one_more(carry):
            done, _, _, first = carry
            new, info = attempt(done)
            first = jax.tree.map(lambda a, b: jnp.where(done == 0, a, b), info, first)
            return done + 1, new, info, first

        shapes = jax.eval_shape(attempt, jnp.zeros((), jnp.int32))
        new, info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        done, new, info, first = jax.lax.while_loop(
            again, one_more, (jnp.zeros((), jnp.int32), new, info, info)
        )
        tries = done - 1
    else:
        new, info = attempt(jnp.zeros((), jnp.int32))
        first, tries = info, jnp.zeros((), jnp.int32)
    divergent = failed(info)
    new = undo_cut(current, new, jnp.abs(info.energy_change) > cutoff, key_cut)
    finite = info.nonans
    change = jnp.where(finite, info.energy_change, 0.0)
    accept = jnp.ones((), eps.dtype)
    num_steps = 1 + tries
    tuned, next_eps = predict_step_size(
        tuning, eps, first.energy_change, first.nonans, dim, energy_var, tuner
    )
    return Move(
        new=new,
        finite=finite,
        change=change,
        divergent=divergent,
        accept=accept,
        num_steps=num_steps,
        retried=tries > 0,
        tuned=tuned,
        next_eps=next_eps,
        next_length=L,
        weight_ok=jnp.logical_not(divergent),
    )
