"""Adaptation pieces shared by the full-batch samplers, on BlackJAX's estimators.

- :class:`Windows`: Stan's warm-up schedule (``blackjax.adaptation.window_adaptation``'s
  ``build_schedule``): a fast window of dual averaging on the step size, slow windows, each twice
  as long as the last, that estimate a diagonal inverse mass matrix ``M⁻¹`` and restart the
  averaging, and a last fast window. ``M⁻¹`` is either Stan's regularised variance of the
  positions (``estimator="variance"``, BlackJAX's ``mass_matrix_adaptation``) or the
  Fisher-divergence diagonal ``√(Var[θ] / Var[∇ log p])`` of positions and gradients
  (``estimator="fisher"``, BlackJAX's ``fisher_score_diagonal_from_moments``; Seyboldt et al.,
  as nutpie), which also sees the curvature of directions the chain has not yet explored. With
  ``pool_axis`` the window's statistics are pooled over the chains of a vmapped run (Chan et
  al.'s merge of Welford states), so every chain gets the same ``M⁻¹``.
- :class:`ChEES`: the step size and trajectory length of jittered HMC tuned across chains by
  maximising the ChEES criterion (Hoffman, Radul & Sountsov 2021; ``blackjax.adaptation.
  chees_adaptation.base``). The chains of a run are gathered with ``jax.lax.all_gather`` over
  the vmapped axis, so every chain computes the same update.
- :func:`jitter`: the quasi-random fraction of the trajectory length integrated at an iteration
  (a base-2 Halton sequence, shared by all chains, so that draws are not periodic).

All states are NamedTuples of arrays: they live in a sampler's state and resume bit for bit.

Example:
    >>> import jax.numpy as jnp
    >>> windows = Windows(num_burn_in=100, target=0.8)
    >>> state = windows.init(step_size=0.1, size=3, dtype=jnp.float32)
    >>> state, step_size, inverse_mass = windows.update(state, jnp.int32(0), jnp.ones(3), 0.9)
    >>> inverse_mass.shape
    (3,)
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from blackjax.adaptation import chees_adaptation
from blackjax.adaptation.mass_matrix import (
    MassMatrixAdaptationState,
    WelfordAlgorithmState,
    mass_matrix_adaptation,
    welford_algorithm,
)
from blackjax.adaptation.metric_estimators import fisher_score_diagonal_from_moments
from blackjax.adaptation.step_size import (
    DualAveragingAdaptationState,
    dual_averaging_adaptation,
)
from blackjax.adaptation.window_adaptation import build_schedule
from blackjax.mcmc.dynamic_hmc import halton_sequence
from jax.flatten_util import ravel_pytree

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


MASS_ESTIMATORS = ("variance", "fisher")


def window_schedule(num_burn_in: int) -> list[tuple[int, bool]]:
    """Stan's windows scaled to the burn-in: (stage, window ends) per iteration.

    Stan's fixed sizes (75 fast iterations, a first slow window of 25, 50 fast at the end) are
    for 1,000 warm-up iterations; a shorter burn-in spent a quarter of itself on the identity
    mass matrix, where a badly scaled posterior diverges at the edge of stability. Here the
    first fast window is 5 % of burn-in (at least 10), the first slow window 2.5 % (at least 5)
    and the last fast window 10 % (at least 10).

    Example:
        >>> [i for i, (_, end) in enumerate(window_schedule(300)) if end]
        [21, 35, 63, 119, 269]
    """
    return build_schedule(num_burn_in, initial_buffer_size=max(10, num_burn_in // 20),
                          first_window_size=max(5, num_burn_in // 40),
                          final_buffer_size=max(10, num_burn_in // 10))


class WindowState(NamedTuple):
    """Dual averaging of the step size and the Welford windows of positions and gradients."""

    step: DualAveragingAdaptationState
    mass: MassMatrixAdaptationState
    gradients: WelfordAlgorithmState


class Windows:
    """Stan's windowed adaptation of the step size and a diagonal mass matrix.

    Args:
        num_burn_in: iterations of warm-up (the schedule's length).
        target: acceptance rate the dual averaging aims at.
        adapt_mass: estimate ``M⁻¹`` in the slow windows (else it stays the identity).
        estimator: ``"variance"`` (Stan) or ``"fisher"`` (positions and gradients).
        pool_axis: pool each window's statistics over this vmapped axis (chains).
    """

    def __init__(self, num_burn_in: int, target: float, *, adapt_mass: bool = True,
                 estimator: str = "variance", pool_axis: str | None = None):
        if estimator not in MASS_ESTIMATORS:
            raise ValueError(f"estimator {estimator!r}; allowed: {', '.join(MASS_ESTIMATORS)}")
        self.num_burn_in = num_burn_in
        schedule = jnp.asarray(window_schedule(num_burn_in), jnp.int32).reshape(
            (num_burn_in, 2))
        self.schedule = schedule if adapt_mass else jnp.zeros_like(schedule)
        self.estimator = estimator
        self.pool_axis = pool_axis
        self.da_init, self.da_update, _ = dual_averaging_adaptation(target=target)
        self.mm_init, self.mm_update, self.mm_final = mass_matrix_adaptation(
            is_diagonal_matrix=True)
        self.wf_init, self.wf_update, self.wf_final = welford_algorithm(is_diagonal_matrix=True)

    def init(self, step_size: float, size: int, dtype: Any) -> WindowState:
        def cast(tree):
            return jax.tree.map(
                lambda v: jnp.asarray(v, dtype if jnp.issubdtype(jnp.result_type(v),
                                                                 jnp.floating) else jnp.int32),
                tree)

        return WindowState(cast(self._averaging(step_size)), cast(self.mm_init(size)),
                           cast(self.wf_init(size)))

    def _averaging(self, step_size: Any) -> DualAveragingAdaptationState:
        """Dual averaging that shrinks towards ``step_size`` itself.

        Stan (and BlackJAX's ``dual_averaging_adaptation``) centre the averaging on 10ε, so the
        first iterations of every window try steps up to ten times the last good one; on
        network posteriors a burn-in then diverges in 5-10 % of its iterations, most of them at
        window starts. Centring on ε keeps those first steps where the last window ended.
        """
        state = self.da_init(step_size)
        return state._replace(mu=jnp.log(jnp.asarray(step_size)))

    def _pooled(self, w: WelfordAlgorithmState) -> WelfordAlgorithmState:
        """A window's Welford statistics merged over the chains (Chan et al. 1979)."""
        if self.pool_axis is None:
            return w
        count = w.sample_size.astype(w.mean.dtype)
        total = jax.lax.psum(count, self.pool_axis)
        mean = jax.lax.psum(count * w.mean, self.pool_axis) / jnp.maximum(total, 1)
        m2 = jax.lax.psum(w.m2 + count * jnp.square(w.mean - mean), self.pool_axis)
        return WelfordAlgorithmState(mean, m2, jax.lax.psum(w.sample_size, self.pool_axis))

    def _close(self, mass: MassMatrixAdaptationState, gradients: WelfordAlgorithmState):
        """``M⁻¹`` from the window that ends, and fresh windows."""
        positions = self._pooled(mass.wc_state)
        if self.estimator == "variance":
            new = like(self.mm_final(mass._replace(wc_state=positions)), mass)
            return new, gradients
        grads = self._pooled(gradients)
        var_x, count, _ = self.wf_final(positions)
        var_g, _, _ = self.wf_final(grads)
        inverse_mass = jnp.where(count > 1, fisher_score_diagonal_from_moments(var_x, var_g),
                                 mass.inverse_mass_matrix)
        fresh = like(self.wf_init(inverse_mass.shape[0]), gradients)
        return like(MassMatrixAdaptationState(inverse_mass, fresh), mass), fresh

    def update(self, state: WindowState, iteration: jax.Array, position: Params,
               acceptance_rate: jax.Array, *, gradient: Params | None = None,
               adapt_step: bool = True) -> tuple[WindowState, jax.Array, jax.Array]:
        """After burn-in iteration ``iteration``: the new state, step size and ``M⁻¹``.

        The step size is the current dual-averaging iterate, and at the last burn-in
        iteration its average (Stan's final value). ``gradient`` (of the log density at
        ``position``) is needed by the ``"fisher"`` estimator.
        """
        ss, mm, gw = state
        stage, window_end = self.schedule[jnp.minimum(iteration, self.num_burn_in - 1)]
        slow = stage == 1
        mm = jax.lax.cond(slow, lambda m: like(self.mm_update(m, position), m), lambda m: m, mm)
        if self.estimator == "fisher":
            flat_grad = ravel_pytree(gradient)[0]
            gw = jax.lax.cond(slow, lambda w: like(self.wf_update(w, flat_grad), w),
                              lambda w: w, gw)
        if adapt_step:
            ss = like(self.da_update(ss, acceptance_rate), ss)

        def close_window(ss, mm, gw):
            # Estimate M⁻¹ from the window, restart the averaging at the average step size.
            mm, gw = self._close(mm, gw)
            if adapt_step:
                ss = like(self._averaging(jnp.exp(ss.log_step_size_avg)), ss)
            return ss, mm, gw

        ss, mm, gw = jax.lax.cond(window_end == 1, close_window, lambda *a: a, ss, mm, gw)
        last = iteration + 1 == self.num_burn_in
        step_size = jnp.where(last, jnp.exp(ss.log_step_size_avg), jnp.exp(ss.log_step_size))
        return WindowState(ss, mm, gw), step_size, mm.inverse_mass_matrix


class ChEES:
    """ChEES adaptation of the step size and trajectory length across the chains of a run.

    Args:
        num_iterations: iterations of the whole run (sizes the Halton sequence).
        target: acceptance rate (harmonic mean over chains) the step size aims at.
        max_leapfrog_steps: the trajectory length is clipped to this many steps.
        learning_rate: Adam's rate on the log trajectory length (TFP's default, β₁ = 0).
        axis_name: the vmapped axis of the chains.
    """

    def __init__(self, num_iterations: int, target: float, max_leapfrog_steps: int, *,
                 learning_rate: float = 0.025, axis_name: str = MEMBERS):
        self.bits = halton_bits(num_iterations)
        self.axis_name = axis_name
        self._init, self._update = chees_adaptation.base(
            lambda i: jitter(i, self.bits), lambda i: i + 1,
            optax.adam(learning_rate, b1=0.0, b2=0.95), target, 0.5, max_leapfrog_steps)

    def init(self, step_size: float, trajectory_len: float, dtype: Any):
        state = self._init(jnp.zeros((), jnp.int32), jnp.asarray(step_size, dtype))
        state = state._replace(trajectory_length=jnp.asarray(trajectory_len, dtype),
                               log_trajectory_length_moving_average=jnp.log(
                                   jnp.asarray(trajectory_len, dtype)))
        return jax.tree.map(
            lambda v: jnp.asarray(v, dtype if jnp.issubdtype(jnp.result_type(v), jnp.floating)
                                  else jnp.int32), state)

    def update(self, state, proposal_position: Params, proposal_momentum: Params,
               start_position: Params, acceptance_rate: jax.Array, divergent: jax.Array,
               inverse_mass: jax.Array):
        """The shared update from every chain's trajectory (called inside the vmap)."""

        def gather(value):
            return jax.lax.all_gather(value, self.axis_name)

        def flat(tree):  # BlackJAX's criterion takes one (chains, dim) array per quantity
            return gather(ravel_pytree(tree)[0])

        new = self._update(state, flat(proposal_position), flat(proposal_momentum),
                           flat(start_position), gather(acceptance_rate), gather(divergent),
                           inverse_mass)
        return like(new, state)

    @staticmethod
    def final(state) -> tuple[jax.Array, jax.Array]:
        """The step size and trajectory length to sample with: the moving averages."""
        return (jnp.exp(state.log_step_size_moving_average),
                jnp.exp(state.log_trajectory_length_moving_average))
