"""HMC's chain: its state, one iteration's trajectory and the adaptation's answer after it.

:func:`step` is one iteration: a static trajectory of BlackJAX's HMC kernel (its leapfrog loop
inside the iteration, or integrated elsewhere and arriving at ``trajectory_end``), or, where the
adaptation runs NUTS (``"auto"``'s burn-in), a NUTS transition with a bounded tree
(:func:`bnnkit.inference.nuts.bounded_kernel`); then what the
:class:`~bnnkit.inference.adaptation.Adaptation` tunes for the next iteration. The method, its
settings and what each adaptation mode does are :mod:`bnnkit.inference.hmc`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.chees_adaptation import ChEESAdaptationState
from blackjax.adaptation.step_size import DualAveragingAdaptationState
from blackjax.mcmc.hmc import hmc_proposal
from blackjax.mcmc.integrators import IntegratorState, velocity_verlet
from blackjax.mcmc.proposal import static_binomial_sampling
from jax.flatten_util import ravel_pytree

from bnnkit.inference import nuts as nuts_lib
from bnnkit.inference.adaptation import Adaptation, Tuning, jitter
from bnnkit.inference.hmc_modes import EARLY_TREE_DEPTH, MAX_TREE_DEPTH, HMCAdaptationState
from bnnkit.inference.mass_windows import WindowState
from bnnkit.types import Batch, Key, Params


class HMCState(NamedTuple):
    """What the next HMC iteration needs.

    Stored runs are read back by these fields' names and order: keep both.

    Attributes:
        position: current parameters.
        logdensity: tempered log posterior at ``position``.
        logdensity_grad: its gradient.
        step_size: the step size ε the next iteration uses.
        trajectory_len: the trajectory length τ the next iteration uses (``"mass"`` and
            ``"chees"`` integrate a jittered fraction of it).
        inverse_mass_matrix: the diagonal of M⁻¹ the next iteration uses.
        adaptation: the paper mode's dual averaging of ε (frozen after burn-in).
        windows: Stan's windows (dual averaging and Welford) of ``"mass"`` and ``"chees"``.
        chees: the ChEES state of ``"chees"``.
        iteration: number of iterations done.
    """

    position: Params
    logdensity: jax.Array
    logdensity_grad: Params
    step_size: jax.Array
    trajectory_len: jax.Array
    inverse_mass_matrix: jax.Array
    adaptation: DualAveragingAdaptationState
    windows: WindowState
    chees: ChEESAdaptationState
    iteration: jax.Array

    @classmethod
    def at(
        cls, point: Any, tuned: HMCAdaptationState, tuning: Tuning, iteration: jax.Array
    ) -> HMCState:
        """The state at ``point`` (a ``blackjax.mcmc.hmc.HMCState``: position, log density
        and gradient) with the adaptation's state ``tuned`` and the next iteration's
        ``tuning``, after ``iteration`` iterations: this state's fields are those three's, in
        their order, then the iteration's."""
        return cls(*point, *tuning, *tuned, iteration)


class HMCInfo(NamedTuple):
    """Diagnostics of one HMC iteration (the run log's keys).

    ``capped``: the trajectory was cut short: a static one wanted more than
    ``max_num_leapfrog_steps`` steps, a NUTS tree of ``"auto"``'s burn-in reached its depth
    limit without turning back. ``trajectory_len`` is the τ the iteration used, or in
    ``"auto"``'s burn-in the NUTS trajectory's integration time.
    """

    acceptance_rate: jax.Array
    accepted: jax.Array
    divergent: jax.Array
    num_leapfrog: jax.Array
    step_size: jax.Array
    trajectory_len: jax.Array
    log_posterior: jax.Array
    capped: jax.Array


def init(
    key: Key,
    params: Params,
    batch: Batch,
    *,
    log_posterior: Callable,
    adaptation: Adaptation,
    step_size: float,
    trajectory_len: float,
) -> HMCState:
    """A chain's state at ``params``: the log posterior and its gradient there, and the first
    iteration's ε, τ and M⁻¹ from ``adaptation.init`` (which may search for ε with ``key``).

    Args:
        key: the key of the adaptation's initial step size search (unused without one).
        params: the chain's initial position.
        batch: the data ``log_posterior`` takes.
        log_posterior: ``(params, batch) -> log density``.
        adaptation: what burn-in tunes.
        step_size, trajectory_len: the given ε and τ.
    """
    logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
    start = blackjax.mcmc.hmc.HMCState(params, logdensity, grad)
    tuned, tuning = adaptation.init(
        key, start, lambda p: log_posterior(p, batch), step_size, trajectory_len
    )
    return HMCState.at(start, tuned, tuning, jnp.zeros((), jnp.int32))


def wanted_steps(state: HMCState, *, jitter_bits: int | None, early_until: int = -1) -> jax.Array:
    """The leapfrog steps the iteration that starts from ``state`` asks for, before the cap:
    ``ceil(τ/ε)``, or with ``jitter_bits`` a quasi-random fraction of τ (shared by the chains,
    so draws are not periodic); at most 2^EARLY_TREE_DEPTH − 1 up to iteration
    ``early_until``, while M⁻¹ is the identity."""
    eps, tau = state.step_size, state.trajectory_len
    length = tau
    if jitter_bits is not None:
        length = jitter(state.iteration, jitter_bits).astype(tau.dtype) * tau
    steps = jnp.ceil(length / eps - 1e-6).astype(jnp.int32)
    if early_until >= 0:
        steps = jnp.where(
            state.iteration <= early_until, jnp.minimum(steps, 2**EARLY_TREE_DEPTH - 1), steps
        )
    return steps


def trajectory_steps(
    state: HMCState,
    *,
    jitter_bits: int | None,
    max_steps: int,
    early_until: int = -1,
    tree_depth: Callable[[jax.Array], jax.Array] | None = None,
) -> jax.Array:
    """The number of leapfrog steps L of the static trajectory of the iteration that starts
    from ``state``: :func:`wanted_steps` clipped to ``1..max_steps``, and 0 where
    ``tree_depth`` runs NUTS instead."""
    steps = jnp.clip(
        wanted_steps(state, jitter_bits=jitter_bits, early_until=early_until), 1, max_steps
    )
    if tree_depth is not None:
        steps = jnp.where(tree_depth(state.iteration) > 0, 0, steps)
    return steps


def sample_proposal(
    key: Key, log_p_accept: jax.Array, start, end, *, accept_finite: jax.Array | bool
):
    """BlackJAX's Metropolis-Hastings choice, or with ``accept_finite`` the trajectory's end
    whenever its energy is finite (bnn_hmc's uncorrected burn-in)."""
    sampled, (do_accept, p_accept, extra) = static_binomial_sampling(key, log_p_accept, start, end)
    # log_p_accept is -inf for a non-finite energy: such a trajectory is always rejected.
    forced = jnp.logical_and(accept_finite, jnp.isfinite(log_p_accept))
    do_accept = jnp.logical_or(do_accept, forced)
    sampled = jax.tree.map(lambda e, s: jnp.where(forced, e, s), end, sampled)
    return sampled, (do_accept, p_accept, extra)


def arriving_at(end: IntegratorState) -> Callable:
    """An "integrator" whose one step goes straight to ``end`` (a trajectory integrated
    elsewhere, :mod:`~bnnkit.inference.host_leapfrog`)."""
    return lambda logdensity_fn, kinetic_energy: lambda state, step_size: end


def build_kernel(
    divergence_threshold: float = 1000.0,
    *,
    accept_finite: jax.Array | bool = False,
    trajectory_end: IntegratorState | None = None,
) -> Callable:
    """BlackJAX's HMC kernel (``blackjax.hmc.build_kernel``) with :func:`sample_proposal`.

    Returns ``kernel(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix,
    num_integration_steps) -> (state, info)`` on ``blackjax.mcmc.hmc.HMCState``; given
    ``trajectory_end``, its one integration step goes there.
    """
    return blackjax.hmc.build_kernel(
        integrator=velocity_verlet if trajectory_end is None else arriving_at(trajectory_end),
        divergence_threshold=divergence_threshold,
        build_proposal=functools.partial(
            hmc_proposal,
            sample_proposal=functools.partial(sample_proposal, accept_finite=accept_finite),
        ),
    )


def step(
    rng_key: Key,
    state: HMCState,
    batch: Batch,
    trajectory_end: IntegratorState | None = None,
    *,
    log_posterior: Callable,
    adaptation: Adaptation,
    num_burn_in: int,
    mh_during_burn_in: bool = True,
    divergence_threshold: float = 1000.0,
    jitter_bits: int | None = None,
    max_steps: int = 10_000,
) -> tuple[HMCState, HMCInfo]:
    """One HMC iteration, then what ``adaptation`` tunes for the next.

    Where ``adaptation.tree_depth`` is positive (``"auto"``'s burn-in) the iteration is a NUTS
    transition with trees at most that deep (:func:`bnnkit.inference.nuts.bounded_kernel`) and
    the static trajectory has no steps; elsewhere the NUTS part has depth 0 and costs nothing.
    Both are in the one program, so vmapped chains never run both samplers.

    Args:
        rng_key: the iteration's key (momentum, then the accept/reject draw).
        state: the chain's state.
        batch: the data ``log_posterior`` takes.
        trajectory_end: the trajectory's end point when the host integrated it, ``None`` to
            integrate it here (BlackJAX's leapfrog loop).
        log_posterior: ``(params, batch) -> log density``.
        adaptation: what burn-in tunes.
        num_burn_in: iterations of burn-in.
        mh_during_burn_in: ``False`` accepts every finite trajectory during burn-in.
        divergence_threshold: energy error (nats) of a divergent trajectory.
        jitter_bits, max_steps: the trajectory's number of steps (:func:`trajectory_steps`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> def log_density(x, batch):
        ...     return -0.5 * jnp.sum(x ** 2)
        >>> from bnnkit.inference.hmc_modes import hmc_adaptation
        >>> fixed = hmc_adaptation("none", num_burn_in=0, num_iterations=1, target=0.8)
        >>> state = init(None, jnp.ones(2), None, log_posterior=log_density, adaptation=fixed,
        ...              step_size=0.5, trajectory_len=1.0)
        >>> state, info = step(jax.random.PRNGKey(0), state, None, log_posterior=log_density,
        ...                    adaptation=fixed, num_burn_in=0)
        >>> int(info.num_leapfrog), int(state.iteration), bool(info.capped)
        (2, 1, False)
    """
    current = blackjax.mcmc.hmc.HMCState(state.position, state.logdensity, state.logdensity_grad)

    def logdensity_fn(p):
        return log_posterior(p, batch)

    moved = static_transition(
        rng_key,
        state,
        current,
        logdensity_fn,
        trajectory_end,
        adaptation=adaptation,
        num_burn_in=num_burn_in,
        mh_during_burn_in=mh_during_burn_in,
        divergence_threshold=divergence_threshold,
        jitter_bits=jitter_bits,
        max_steps=max_steps,
    )
    if adaptation.tree_depth is not None:
        moved = _tree_during_burn_in(
            rng_key,
            state,
            current,
            logdensity_fn,
            moved,
            depth=adaptation.tree_depth(state.iteration),
            divergence_threshold=divergence_threshold,
        )
    return adapted(state, moved, adaptation)


def static_transition(
    rng_key: Key,
    state: HMCState,
    current,
    logdensity_fn: Callable,
    trajectory_end: IntegratorState | None,
    *,
    adaptation: Adaptation,
    num_burn_in: int,
    mh_during_burn_in: bool,
    divergence_threshold: float,
    jitter_bits: int | None,
    max_steps: int,
) -> Transition:
    """The iteration's static trajectory from ``current`` (BlackJAX's HMC kernel with
    :func:`sample_proposal`): :func:`trajectory_steps` leapfrog steps, or one step to
    ``trajectory_end`` when the host integrated it; see :func:`step` for the arguments."""
    steps = dict(jitter_bits=jitter_bits, early_until=adaptation.early_until)
    num_steps = trajectory_steps(
        state, max_steps=max_steps, tree_depth=adaptation.tree_depth, **steps
    )
    in_burn_in = state.iteration < num_burn_in
    kernel = build_kernel(
        divergence_threshold,
        accept_finite=jnp.logical_and(in_burn_in, not mh_during_burn_in),
        trajectory_end=trajectory_end,
    )
    proposal, info = kernel(
        rng_key,
        current,
        logdensity_fn,
        state.step_size,
        state.inverse_mass_matrix,
        num_steps if trajectory_end is None else 1,
    )
    return Transition(
        proposal,
        info.is_accepted,
        info.acceptance_rate,
        info.is_divergent,
        num_steps,
        state.trajectory_len,
        wanted_steps(state, **steps) > max_steps,
        info,
    )


def adapted(state: HMCState, moved: Transition, adaptation: Adaptation) -> tuple[HMCState, HMCInfo]:
    """The chain's state after ``moved``, with what ``adaptation`` tunes for the next
    iteration, and the iteration's info."""
    proposal = moved.proposal
    tuned, tuning = adaptation.update(
        HMCAdaptationState(state.adaptation, state.windows, state.chees),
        state.iteration,
        state.position,
        proposal,
        moved.info,
        Tuning(state.step_size, state.trajectory_len, state.inverse_mass_matrix),
    )
    new_state = HMCState.at(proposal, tuned, tuning, state.iteration + 1)
    return new_state, HMCInfo(
        acceptance_rate=moved.acceptance,
        accepted=moved.accepted,
        divergent=moved.divergent,
        num_leapfrog=moved.num_leapfrog,
        step_size=state.step_size,
        trajectory_len=moved.length,
        log_posterior=proposal.logdensity,
        capped=moved.capped,
    )


class Transition(NamedTuple):
    """One iteration's move and what :class:`HMCInfo` reports of it (``info``: the kernel's
    own, which the adaptation reads)."""

    proposal: Any
    accepted: jax.Array
    acceptance: jax.Array
    divergent: jax.Array
    num_leapfrog: jax.Array
    length: jax.Array
    capped: jax.Array
    info: Any


def _tree_during_burn_in(
    rng_key: Key,
    state: HMCState,
    current,
    logdensity_fn: Callable,
    static: Transition,
    *,
    depth: jax.Array,
    divergence_threshold: float,
) -> Transition:
    """The NUTS transition with trees at most ``depth`` deep where ``depth > 0`` (``"auto"``'s
    burn-in), else the static trajectory's ``static``: both are computed and one is selected,
    so vmapped chains run one program."""
    moved, tree = nuts_lib.bounded_kernel(divergence_threshold, max_tree_depth=MAX_TREE_DEPTH)(
        rng_key, current, logdensity_fn, state.step_size, state.inverse_mass_matrix, depth
    )
    dynamic = depth > 0

    def pick(a, b):
        return jax.tree.map(lambda x, y: jnp.where(dynamic, x, y), a, b)

    changed = jnp.any(ravel_pytree(moved.position)[0] != ravel_pytree(current.position)[0])
    capped = (tree.num_trajectory_expansions >= depth) & ~tree.is_turning & ~tree.is_divergent
    return Transition(
        pick(moved, static.proposal),
        pick(changed, static.accepted),
        pick(tree.acceptance_rate, static.acceptance),
        pick(tree.is_divergent, static.divergent),
        pick(tree.num_integration_steps, static.num_leapfrog),
        pick(tree.num_integration_steps * state.step_size, static.length),
        pick(capped, static.capped),
        tree,
    )
