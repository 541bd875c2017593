"""Stan's windowed adaptation of the step size and a diagonal mass matrix, and NUTS's tuning.

:class:`Windows` is Stan's warm-up schedule (``blackjax.adaptation.window_adaptation``'s
``build_schedule``, scaled to the burn-in by :func:`window_schedule`): a fast window of dual
averaging on the step size, slow windows, each twice as long as the last, that estimate a
diagonal inverse mass matrix ``M⁻¹`` and restart the averaging, and a last fast window. ``M⁻¹``
is either Stan's regularised variance of the positions (``estimator="variance"``, BlackJAX's
``mass_matrix_adaptation``) or the Fisher-divergence diagonal ``√(Var[θ] / Var[∇ log p])`` of
positions and gradients (``estimator="fisher"``, BlackJAX's
``fisher_score_diagonal_from_moments``; Seyboldt et al., as nutpie), which also sees the
curvature of directions the chain has not yet explored. With ``pool_axis`` the window's
statistics are pooled over the chains of a vmapped run (Chan et al.'s merge of Welford states),
so every chain gets the same ``M⁻¹``.

The windows serve HMC's ``"mass"``, ``"chees"`` and ``"auto"`` modes
(:mod:`bnnkit.inference.hmc_modes`) and, as an
:class:`~bnnkit.inference.adaptation.Adaptation` of their own, NUTS
(:func:`window_adaptation`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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
from jax.flatten_util import ravel_pytree

from bnnkit.inference.adaptation import (
    Adaptation,
    Tuning,
    during_burn_in,
    kept,
    like,
    size_and_dtype,
)
from bnnkit.inference.step_size_search import reasonable_step_size
from bnnkit.types import Params

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
    return build_schedule(
        num_burn_in,
        initial_buffer_size=max(10, num_burn_in // 20),
        first_window_size=max(5, num_burn_in // 40),
        final_buffer_size=max(10, num_burn_in // 10),
    )


def slow_window_ends(num_burn_in: int) -> list[int]:
    """The burn-in iterations at which a slow window closes (M⁻¹ changes after them).

    Example:
        >>> slow_window_ends(300)
        [21, 35, 63, 119, 269]
    """
    with jax.ensure_compile_time_eval():  # numbers, also when called inside a trace
        schedule = np.asarray(window_schedule(num_burn_in))
    return [i for i, (stage, end) in enumerate(schedule.tolist()) if stage == 1 and end]


def early_until(num_burn_in: int) -> int:
    """The last iteration that runs with the identity M⁻¹: the one that closes the first slow
    window (the whole burn-in when it has none).

    Example:
        >>> early_until(500), early_until(5)
        (36, 4)
    """
    ends = slow_window_ends(num_burn_in) if num_burn_in else []
    return ends[0] if ends else num_burn_in - 1


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

    def __init__(
        self,
        num_burn_in: int,
        target: float,
        *,
        adapt_mass: bool = True,
        estimator: str = "variance",
        pool_axis: str | None = None,
    ):
        if estimator not in MASS_ESTIMATORS:
            raise ValueError(f"estimator {estimator!r}; allowed: {', '.join(MASS_ESTIMATORS)}")
        self.num_burn_in = num_burn_in
        schedule = jnp.asarray(window_schedule(num_burn_in), jnp.int32).reshape((num_burn_in, 2))
        self.schedule = schedule if adapt_mass else jnp.zeros_like(schedule)
        self.estimator = estimator
        self.pool_axis = pool_axis
        self.da_init, self.da_update, _ = dual_averaging_adaptation(target=target)
        self.mm_init, self.mm_update, self.mm_final = mass_matrix_adaptation(
            is_diagonal_matrix=True
        )
        self.wf_init, self.wf_update, self.wf_final = welford_algorithm(is_diagonal_matrix=True)

    def init(self, step_size: float, size: int, dtype: Any) -> WindowState:
        def cast(tree):
            return jax.tree.map(
                lambda v: jnp.asarray(
                    v, dtype if jnp.issubdtype(jnp.result_type(v), jnp.floating) else jnp.int32
                ),
                tree,
            )

        return WindowState(
            cast(self._averaging(step_size)), cast(self.mm_init(size)), cast(self.wf_init(size))
        )

    def _averaging(self, step_size: Any) -> DualAveragingAdaptationState:
        """Dual averaging that shrinks towards ``step_size`` itself.

        Stan (and BlackJAX's ``dual_averaging_adaptation``) centre the averaging on 10ε, so the
        first iterations of every window try steps up to ten times the last good one, and on
        network posteriors a burn-in then diverges often, most of all at window starts
        (measured in ``docs/performance.md``, "Full-batch samplers"). Centring on ε keeps those
        first steps where the last window ended.
        """
        state = self.da_init(step_size)
        return state._replace(mu=jnp.log(jnp.asarray(step_size)))

    def _pooled(
        self, w: WelfordAlgorithmState, include: jax.Array | None = None
    ) -> WelfordAlgorithmState:
        """A window's Welford statistics merged over the chains (Chan et al. 1979), leaving
        out a chain whose ``include`` is false (:func:`~bnnkit.inference.chees.pooled_chains`)."""
        if self.pool_axis is None:
            return w
        if include is not None:
            w = jax.tree.map(lambda v: jnp.where(include, v, jnp.zeros_like(v)), w)
        count = w.sample_size.astype(w.mean.dtype)
        total = jax.lax.psum(count, self.pool_axis)
        mean = jax.lax.psum(count * w.mean, self.pool_axis) / jnp.maximum(total, 1)
        m2 = jax.lax.psum(w.m2 + count * jnp.square(w.mean - mean), self.pool_axis)
        return WelfordAlgorithmState(mean, m2, jax.lax.psum(w.sample_size, self.pool_axis))

    def _close(
        self,
        mass: MassMatrixAdaptationState,
        gradients: WelfordAlgorithmState,
        include: jax.Array | None = None,
    ):
        """``M⁻¹`` from the window that ends, and fresh windows."""
        positions = self._pooled(mass.wc_state, include)
        if self.estimator == "variance":
            new = like(self.mm_final(mass._replace(wc_state=positions)), mass)
            return new, gradients
        grads = self._pooled(gradients, include)
        var_x, count, _ = self.wf_final(positions)
        var_g, _, _ = self.wf_final(grads)
        estimate = fisher_score_diagonal_from_moments(var_x, var_g)
        # A coordinate that did not move within the window (a chain far out in the tails
        # taking steps below float resolution) has no variance to estimate: an estimate of 0
        # there made every later step diverge, so it keeps its previous value.
        usable = (count > 1) & jnp.isfinite(estimate) & (estimate > 0)
        inverse_mass = jnp.where(usable, estimate, mass.inverse_mass_matrix)
        fresh = like(self.wf_init(inverse_mass.shape[0]), gradients)
        return like(MassMatrixAdaptationState(inverse_mass, fresh), mass), fresh

    def update(
        self,
        state: WindowState,
        iteration: jax.Array,
        position: Params,
        acceptance_rate: jax.Array,
        *,
        gradient: Params | None = None,
        adapt_step: bool = True,
        include: jax.Array | None = None,
    ) -> tuple[WindowState, jax.Array, jax.Array]:
        """After burn-in iteration ``iteration``: the new state, step size and ``M⁻¹``.

        The step size is the current dual-averaging iterate, and at the last burn-in
        iteration its average (Stan's final value). ``gradient`` (of the log density at
        ``position``) is needed by the ``"fisher"`` estimator. With ``pool_axis``, a chain
        whose ``include`` is false adds nothing to the pooled window that closes.
        """
        ss, mm, gw = state
        stage, window_end = self.schedule[jnp.minimum(iteration, self.num_burn_in - 1)]
        slow = stage == 1
        mm = jax.lax.cond(slow, lambda m: like(self.mm_update(m, position), m), lambda m: m, mm)
        if self.estimator == "fisher":
            flat_grad = ravel_pytree(gradient)[0]
            gw = jax.lax.cond(
                slow, lambda w: like(self.wf_update(w, flat_grad), w), lambda w: w, gw
            )
        if adapt_step:
            ss = like(self.da_update(ss, acceptance_rate), ss)

        def close_window(ss, mm, gw):
            # Estimate M⁻¹ from the window, restart the averaging at the average step size.
            mm, gw = self._close(mm, gw, include)
            if adapt_step:
                ss = like(self._averaging(jnp.exp(ss.log_step_size_avg)), ss)
            return ss, mm, gw

        ss, mm, gw = jax.lax.cond(window_end == 1, close_window, lambda *a: a, ss, mm, gw)
        last = iteration + 1 == self.num_burn_in
        step_size = jnp.where(last, jnp.exp(ss.log_step_size_avg), jnp.exp(ss.log_step_size))
        return WindowState(ss, mm, gw), step_size, mm.inverse_mass_matrix


def window_init(
    key: jax.Array,
    start,
    logdensity_fn: Callable,
    step_size: float,
    trajectory_len: float | None,
    *,
    windows: Windows,
    search: bool = False,
    target: float = 0.8,
    divergence_threshold: float = 1000.0,
) -> tuple[WindowState, Tuning]:
    """Stan's windows from the given ε, or with ``search`` from :func:`reasonable_step_size`
    where the chain starts, and the identity M⁻¹."""
    del trajectory_len
    size, dtype = size_and_dtype(start.position)
    eps = jnp.asarray(step_size, dtype)
    if search:
        eps = reasonable_step_size(
            key, start, logdensity_fn, eps, target=target, divergence_threshold=divergence_threshold
        ).astype(dtype)
    return windows.init(eps, size, dtype), Tuning(eps, None, jnp.ones(size, dtype))


def window_update(
    state: WindowState,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    windows: Windows,
) -> tuple[WindowState, Tuning]:
    """Stan's windows: ε by dual averaging and M⁻¹ from the chain's own positions (and
    gradients); τ as it is."""
    state, eps, inverse_mass = windows.update(
        state, iteration, proposal.position, info.acceptance_rate, gradient=proposal.logdensity_grad
    )
    return state, Tuning(eps, tuning.trajectory_len, inverse_mass)


def window_adaptation(
    num_burn_in: int,
    target: float,
    *,
    adapt_mass: bool = True,
    divergence_threshold: float = 1000.0,
) -> Adaptation:
    """Stan's window adaptation of ε and, with ``adapt_mass``, a diagonal M⁻¹ (Stan's
    regularised variance of the positions), as NUTS tunes; state: :class:`WindowState`. With
    a burn-in, each chain's ε starts from :func:`reasonable_step_size` where it starts."""
    windows = Windows(max(num_burn_in, 1), target, adapt_mass=adapt_mass)
    update = kept
    if num_burn_in:
        update = functools.partial(
            during_burn_in,
            num_burn_in=num_burn_in,
            update=functools.partial(window_update, windows=windows),
        )
    return Adaptation(
        functools.partial(
            window_init,
            windows=windows,
            search=num_burn_in > 0,
            target=target,
            divergence_threshold=divergence_threshold,
        ),
        update,
    )
