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
burn-in ε freezes at its average and ``M⁻¹`` at the last window's estimate. All of it lives in
the state, advanced one iteration at a time, so a run resumes bit for bit.

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
from typing import ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.mass_matrix import MassMatrixAdaptationState, mass_matrix_adaptation
from blackjax.adaptation.step_size import (
    DualAveragingAdaptationState,
    dual_averaging_adaptation,
)
from blackjax.adaptation.window_adaptation import build_schedule

from bnnkit.errors import ConfigError
from bnnkit.inference.base import HamiltonianSettings, Method
from bnnkit.posterior import Samples
from bnnkit.settings import check_positive, flag, setting
from bnnkit.types import Batch, Key, Params


class NUTSState(NamedTuple):
    """What the next NUTS iteration needs.

    Attributes:
        position: current parameters.
        logdensity: tempered log posterior at ``position``; ``logdensity_grad`` its gradient.
        step_size: the step size the next iteration uses.
        inverse_mass_matrix: the diagonal of ``M⁻¹`` the next iteration uses.
        step_adaptation: dual-averaging state (frozen after burn-in).
        mass_adaptation: Welford state of the current slow window (frozen after burn-in).
        iteration: number of iterations done.
    """

    position: Params
    logdensity: jax.Array
    logdensity_grad: Params
    step_size: jax.Array
    inverse_mass_matrix: jax.Array
    step_adaptation: DualAveragingAdaptationState
    mass_adaptation: MassMatrixAdaptationState
    iteration: jax.Array


class NUTSInfo(NamedTuple):
    """Diagnostics of one NUTS iteration (the run log's keys)."""

    acceptance_rate: jax.Array
    divergent: jax.Array
    num_leapfrog: jax.Array
    tree_depth: jax.Array
    step_size: jax.Array
    log_posterior: jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(HamiltonianSettings):
    """NUTS with window adaptation (BlackJAX's kernel and adaptation pieces).

    Raises:
        ConfigError: a non-positive step size, a target outside (0, 1), or a tree depth
            outside 1..16.
    """

    METHOD: ClassVar[str] = "nuts"

    step_size: float = setting(1e-3, help="initial leapfrog step size ε (tuned during burn-in)")
    max_tree_depth: int = setting(10, help="at most 2^depth leapfrog steps per iteration")
    adapt_mass_matrix: bool = setting(True, flag="--no-adapt-mass-matrix",
                                      help="keep the identity mass matrix during burn-in "
                                           "(the step size still adapts)")

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = type(self)
        check_positive(cls, "step_size", self.step_size)
        if not 1 <= self.max_tree_depth <= 16:
            raise ConfigError(f"{flag(cls, 'max_tree_depth')} {self.max_tree_depth} must be in "
                              "1..16")


def build(log_posterior, config: Config) -> Method:
    """NUTS on ``log_posterior(params, batch)`` with window adaptation during burn-in.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose ``posterior`` returns
        :class:`~bnnkit.posterior.Samples`.
    """
    num_burn_in = config.num_burn_in
    # Stan's windows as a table indexed by the iteration: (0 fast | 1 slow, window ends).
    schedule = jnp.asarray(build_schedule(num_burn_in), jnp.int32).reshape((num_burn_in, 2))
    if not config.adapt_mass_matrix:
        schedule = jnp.zeros_like(schedule)
    da_init, da_update, _ = dual_averaging_adaptation(target=config.target_accept_rate)
    mm_init, mm_update, mm_final = mass_matrix_adaptation(is_diagonal_matrix=True)
    kernel = blackjax.nuts.build_kernel(divergence_threshold=config.divergence_threshold)

    def like(new, old):
        """``new`` with the dtypes of ``old`` (BlackJAX's constructors use Python scalars)."""
        return jax.tree.map(lambda n, o: jnp.asarray(n, o.dtype), new, old)

    def init(key: Key, params: Params, batch: Batch) -> NUTSState:
        del key  # the initial state is deterministic given params
        logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
        leaves = jax.tree.leaves(params)
        dtype = jnp.result_type(*leaves)
        size = sum(leaf.size for leaf in leaves)
        step_adaptation = jax.tree.map(lambda v: jnp.asarray(v, dtype), da_init(config.step_size))
        mass_adaptation = jax.tree.map(
            lambda v: jnp.asarray(v, dtype if jnp.issubdtype(jnp.result_type(v), jnp.floating)
                                  else jnp.int32), mm_init(size))
        return NUTSState(params, logdensity, grad, jnp.asarray(config.step_size, dtype),
                         jnp.ones(size, dtype), step_adaptation, mass_adaptation,
                         jnp.zeros((), jnp.int32))

    def adapt(state: NUTSState, position: Params, acceptance_rate: jax.Array):
        """The adaptation after iteration ``state.iteration`` of burn-in: (ε, M⁻¹, states)."""
        ss, mm = state.step_adaptation, state.mass_adaptation
        stage, window_end = schedule[jnp.minimum(state.iteration, num_burn_in - 1)]
        mm = jax.lax.cond(stage == 1, lambda m: like(mm_update(m, position), m), lambda m: m,
                          mm)
        ss = like(da_update(ss, acceptance_rate), ss)

        def close_window(ss, mm):
            # Stan: estimate M⁻¹ from the window, restart dual averaging at the average ε.
            return like(da_init(jnp.exp(ss.log_step_size_avg)), ss), like(mm_final(mm), mm)

        ss, mm = jax.lax.cond(window_end == 1, close_window, lambda s, m: (s, m), ss, mm)
        last = state.iteration + 1 == num_burn_in
        step_size = jnp.where(last, jnp.exp(ss.log_step_size_avg), jnp.exp(ss.log_step_size))
        return step_size, mm.inverse_mass_matrix, ss, mm

    def step(key: Key, state: NUTSState, batch: Batch) -> tuple[NUTSState, NUTSInfo]:
        def logdensity_fn(params):
            return log_posterior(params, batch)

        current = blackjax.mcmc.hmc.HMCState(state.position, state.logdensity,
                                              state.logdensity_grad)
        proposal, info = kernel(key, current, logdensity_fn, state.step_size,
                                state.inverse_mass_matrix, config.max_tree_depth)
        step_size, inverse_mass = state.step_size, state.inverse_mass_matrix
        step_adaptation, mass_adaptation = state.step_adaptation, state.mass_adaptation
        if num_burn_in:
            tuned = adapt(state, proposal.position, info.acceptance_rate)
            burning = state.iteration < num_burn_in

            def pick(new, old):
                return jax.tree.map(lambda n, o: jnp.where(burning, jnp.asarray(n, o.dtype), o),
                                    new, old)

            step_size, inverse_mass, step_adaptation, mass_adaptation = pick(
                tuned, (step_size, inverse_mass, step_adaptation, mass_adaptation))
        new_state = NUTSState(proposal.position, proposal.logdensity, proposal.logdensity_grad,
                              step_size, inverse_mass, step_adaptation, mass_adaptation,
                              state.iteration + 1)
        return new_state, NUTSInfo(
            acceptance_rate=info.acceptance_rate,
            divergent=info.is_divergent,
            num_leapfrog=info.num_integration_steps,
            tree_depth=info.num_trajectory_expansions,
            step_size=state.step_size,
            log_posterior=proposal.logdensity,
        )

    def posterior(kept: NUTSState) -> Samples:
        return Samples.from_single_chain(kept.position)

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.position)
