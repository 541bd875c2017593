"""No-U-Turn sampler with Stan's window adaptation of the step size and a diagonal mass matrix.

Each iteration draws a momentum ``p ~ N(0, M)`` and doubles a leapfrog trajectory of
``H(θ, p) = −log p_T(θ | D) + ½ pᵀM⁻¹p`` in random directions until it turns back on itself
(or reaches ``2^max_tree_depth`` steps), then picks the next state from it by multinomial
sampling (Hoffman & Gelman 2014; Betancourt 2017). The kernel is BlackJAX's
(``blackjax.nuts.build_kernel``).

During the first ``num_burn_in`` iterations the step size ε and the diagonal inverse mass matrix
``M⁻¹`` are tuned by Stan's schedule (``blackjax.adaptation.window_adaptation.build_schedule``):
a fast window of dual averaging on ε towards ``target_accept_rate``, then slow windows, each
twice as long as the last, that estimate ``M⁻¹`` as the regularised sample variance of the
chain's positions (Welford) and restart the averaging, and a last fast window. At the end of
burn-in ε freezes at its average and ``M⁻¹`` at the last window's estimate
(:func:`~bnnkit.inference.mass_windows.window_adaptation`, the windows of HMC's ``"mass"``
mode). All of it lives in the state, advanced one iteration at a time, so a run resumes bit for
bit.

Example:
    >>> import jax, jax.numpy as jnp
    >>> def log_density(params, batch):  # variances 1 and 100
    ...     return -0.5 * jnp.sum(params["x"] ** 2 / jnp.array([1.0, 100.0]))
    >>> method = build(log_density, Config(step_size=0.5, num_iterations=40, num_burn_in=30))
    >>> state = method.init(jax.random.PRNGKey(0), {"x": jnp.zeros(2)}, None)
    >>> step = jax.jit(method.step)
    >>> for i in range(30):
    ...     state, info = step(jax.random.PRNGKey(i), state, None)
    >>> state.inverse_mass_matrix.shape, bool(state.step_size > 0)
    ((2,), True)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.mcmc import integrators, metrics, termination, trajectory
from blackjax.mcmc.nuts import NUTSInfo as BlackJAXNUTSInfo

from bnnkit.inference.adaptation import Adaptation, Tuning
from bnnkit.inference.base import HamiltonianSettings, Method, sampler
from bnnkit.inference.mass_windows import WindowState, window_adaptation
from bnnkit.settings import Exclusive, setting
from bnnkit.types import Batch, Key, Params


class NUTSState(NamedTuple):
    """What the next NUTS iteration needs.

    Attributes:
        position: current parameters.
        logdensity: tempered log posterior at ``position``; ``logdensity_grad`` its gradient.
        step_size: the step size the next iteration uses.
        inverse_mass_matrix: the diagonal of ``M⁻¹`` the next iteration uses.
        adaptation: dual averaging and the Welford window (frozen after burn-in).
        iteration: number of iterations done.
    """

    position: Params
    logdensity: jax.Array
    logdensity_grad: Params
    step_size: jax.Array
    inverse_mass_matrix: jax.Array
    adaptation: WindowState
    iteration: jax.Array


class NUTSInfo(NamedTuple):
    """Diagnostics of one NUTS iteration (the run log's keys). ``capped``: the tree reached
    ``max_tree_depth`` without turning back or diverging (its trajectory was cut short)."""

    acceptance_rate: jax.Array
    divergent: jax.Array
    num_leapfrog: jax.Array
    tree_depth: jax.Array
    step_size: jax.Array
    log_posterior: jax.Array
    capped: jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(HamiltonianSettings):
    """NUTS with window adaptation (BlackJAX's kernel and adaptation pieces).

    Raises:
        ConfigError: a non-positive step size, a target outside (0, 1), or a tree depth
            outside 1..16.
    """

    METHOD: ClassVar[str] = "nuts"

    step_size: float = setting(
        1e-3,
        help="where each chain's search for a first leapfrog step "
        "size ε starts (then tuned during burn-in; with no "
        "burn-in the ε used)",
        bounds=(Exclusive(0), None),
    )
    max_tree_depth: int = setting(
        10, help="at most 2^depth leapfrog steps per iteration", bounds=(1, 16)
    )
    adapt_mass_matrix: bool = setting(
        True,
        flag="--no-adapt-mass-matrix",
        help="keep the identity mass matrix during burn-in (the step size still adapts)",
    )


def bounded_kernel(divergence_threshold: float = 1000.0, *, max_tree_depth: int = 10) -> Callable:
    """BlackJAX's NUTS kernel whose tree depth limit is a traced value.

    ``blackjax.nuts.build_kernel`` sizes its U-turn checkpoints by the limit, which must
    therefore be a Python number; here they are sized by ``max_tree_depth`` and the limit is
    an argument of each call, so one compiled program can run trees of any depth up to it, or
    none (depth 0: the trajectory is not integrated and the state stays). That is what lets
    HMC's ``"auto"`` mode run NUTS during burn-in and static HMC after it in one program whose
    chains are vmapped: a depth of 0 costs nothing, where ``lax.cond`` over vmapped chains would
    run both samplers every iteration. With the limit equal to ``max_tree_depth`` it is
    ``iterative_nuts_proposal`` of BlackJAX 1.7 step for step.

    Returns ``kernel(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, depth)
    -> (state, info)`` on ``blackjax.mcmc.hmc.HMCState`` with BlackJAX's ``NUTSInfo``.

    Example:
        >>> import blackjax, jax, jax.numpy as jnp
        >>> def logdensity(x):
        ...     return -0.5 * jnp.sum(x ** 2)
        >>> start = blackjax.nuts.init(jnp.ones(3), logdensity)
        >>> kernel = bounded_kernel(max_tree_depth=8)
        >>> _, info = kernel(jax.random.PRNGKey(0), start, logdensity, 0.1, jnp.ones(3), 2)
        >>> int(info.num_integration_steps) <= 3, int(info.num_trajectory_expansions) <= 2
        (True, True)
        >>> moved, info = kernel(jax.random.PRNGKey(0), start, logdensity, 0.1, jnp.ones(3), 0)
        >>> bool((moved.position == start.position).all()), int(info.num_integration_steps)
        (True, 0)
    """

    return functools.partial(
        bounded_transition, divergence_threshold=divergence_threshold, max_tree_depth=max_tree_depth
    )


def bounded_transition(
    rng_key: Key,
    state,
    logdensity_fn: Callable,
    step_size: jax.Array,
    inverse_mass_matrix: jax.Array,
    depth: jax.Array,
    *,
    divergence_threshold: float,
    max_tree_depth: int,
):
    """One NUTS transition from ``state`` whose tree is at most ``depth`` deep (the kernel of
    :func:`bounded_kernel`, its U-turn checkpoints sized by ``max_tree_depth``)."""
    metric = metrics.default_metric(inverse_mass_matrix)
    integrator = integrators.velocity_verlet(logdensity_fn, metric.kinetic_energy)
    new_checkpoints, update_checkpoints, is_criterion_met = termination.iterative_uturn_numpyro(
        metric.check_turning
    )
    expand = trajectory.dynamic_multiplicative_expansion(
        trajectory.dynamic_progressive_integration(
            integrator,
            metric.kinetic_energy,
            update_checkpoints,
            is_criterion_met,
            divergence_threshold,
        ),
        metric.check_turning,
        depth,
    )
    key_momentum, key_integrator = jax.random.split(rng_key, 2)
    position, logdensity, logdensity_grad = state
    momentum = metric.sample_momentum(key_momentum, position)
    start = integrators.IntegratorState(position, momentum, logdensity, logdensity_grad)
    energy = -start.logdensity + metric.kinetic_energy(start.momentum)
    expansion, (is_diverging, is_turning) = expand(
        key_integrator,
        trajectory.DynamicExpansionState(
            0,
            blackjax.mcmc.proposal.Proposal(start, energy, 0.0, -np.inf),
            trajectory.Trajectory(start, start, start.momentum, 0),
            new_checkpoints(start, max_tree_depth),
        ),
        energy,
        step_size,
    )
    num_doublings, sampled, whole, _ = expansion
    # The average acceptance over the whole trajectory, subtrees rejected or not.
    acceptance = jnp.exp(sampled.sum_log_p_accept) / jnp.maximum(whole.num_states, 1)
    info = BlackJAXNUTSInfo(
        start.momentum,
        is_diverging,
        is_turning,
        sampled.energy,
        whole.leftmost_state,
        whole.rightmost_state,
        num_doublings,
        whole.num_states,
        acceptance,
    )
    moved = blackjax.mcmc.hmc.HMCState(
        sampled.state.position, sampled.state.logdensity, sampled.state.logdensity_grad
    )
    return moved, info


def init(
    key: Key,
    params: Params,
    batch: Batch,
    *,
    log_posterior: Callable,
    adaptation: Adaptation,
    step_size: float,
) -> NUTSState:
    """A chain's state at ``params``: the log posterior and its gradient there, its first ε
    (with a burn-in, Hoffman & Gelman's search from the given one, with ``key``), the identity
    M⁻¹ and the adaptation's state."""
    logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
    start = blackjax.mcmc.hmc.HMCState(params, logdensity, grad)
    tuned, tuning = adaptation.init(key, start, lambda p: log_posterior(p, batch), step_size, None)
    return NUTSState(
        params,
        logdensity,
        grad,
        tuning.step_size,
        tuning.inverse_mass_matrix,
        tuned,
        jnp.zeros((), jnp.int32),
    )


def step(
    rng_key: Key,
    state: NUTSState,
    batch: Batch,
    *,
    log_posterior: Callable,
    adaptation: Adaptation,
    max_tree_depth: int = 10,
    divergence_threshold: float = 1000.0,
) -> tuple[NUTSState, NUTSInfo]:
    """One NUTS iteration (``blackjax.nuts.build_kernel``), then what ``adaptation`` tunes for
    the next."""
    kernel = blackjax.nuts.build_kernel(divergence_threshold=divergence_threshold)
    current = blackjax.mcmc.hmc.HMCState(state.position, state.logdensity, state.logdensity_grad)
    proposal, info = kernel(
        rng_key,
        current,
        lambda p: log_posterior(p, batch),
        state.step_size,
        state.inverse_mass_matrix,
        max_tree_depth,
    )
    tuned, tuning = adaptation.update(
        state.adaptation,
        state.iteration,
        state.position,
        proposal,
        info,
        Tuning(state.step_size, None, state.inverse_mass_matrix),
    )
    new_state = NUTSState(
        proposal.position,
        proposal.logdensity,
        proposal.logdensity_grad,
        tuning.step_size,
        tuning.inverse_mass_matrix,
        tuned,
        state.iteration + 1,
    )
    return new_state, NUTSInfo(
        acceptance_rate=info.acceptance_rate,
        divergent=info.is_divergent,
        num_leapfrog=info.num_integration_steps,
        tree_depth=info.num_trajectory_expansions,
        step_size=state.step_size,
        log_posterior=proposal.logdensity,
        capped=(
            (info.num_trajectory_expansions >= max_tree_depth)
            & ~info.is_turning
            & ~info.is_divergent
        ),
    )


def build(log_posterior: Callable, config: Config) -> Method:
    """NUTS on ``log_posterior(params, batch)`` with window adaptation during burn-in.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings: the burn-in, acceptance rate and mass matrix of the window
            adaptation, the first step size, and the deepest tree.

    Returns:
        A :func:`~bnnkit.inference.base.sampler`: its ``posterior`` is the kept positions as
        :class:`~bnnkit.posterior.Samples`.
    """
    adaptation = window_adaptation(
        config.num_burn_in,
        config.target_accept_rate,
        adapt_mass=config.adapt_mass_matrix,
        divergence_threshold=config.divergence_threshold,
    )
    bound = dict(log_posterior=log_posterior, adaptation=adaptation)  # init's and step's
    return sampler(
        init=functools.partial(init, **bound, step_size=config.step_size),
        step=functools.partial(
            step,
            **bound,
            max_tree_depth=config.max_tree_depth,
            divergence_threshold=config.divergence_threshold,
        ),
    )
