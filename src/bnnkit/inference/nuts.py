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

from bnnkit.errors import ConfigError
from bnnkit.inference.adaptation import Windows, WindowState
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
    windows = Windows(max(num_burn_in, 1), config.target_accept_rate,
                      adapt_mass=config.adapt_mass_matrix)
    kernel = blackjax.nuts.build_kernel(divergence_threshold=config.divergence_threshold)

    def init(key: Key, params: Params, batch: Batch) -> NUTSState:
        del key  # the initial state is deterministic given params
        logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
        leaves = jax.tree.leaves(params)
        dtype = jnp.result_type(*leaves)
        size = sum(leaf.size for leaf in leaves)
        adaptation = windows.init(config.step_size, size, dtype)
        return NUTSState(params, logdensity, grad, jnp.asarray(config.step_size, dtype),
                         jnp.ones(size, dtype), adaptation, jnp.zeros((), jnp.int32))

    def step(key: Key, state: NUTSState, batch: Batch) -> tuple[NUTSState, NUTSInfo]:
        def logdensity_fn(params):
            return log_posterior(params, batch)

        current = blackjax.mcmc.hmc.HMCState(state.position, state.logdensity,
                                              state.logdensity_grad)
        proposal, info = kernel(key, current, logdensity_fn, state.step_size,
                                state.inverse_mass_matrix, config.max_tree_depth)
        tuned = (state.adaptation, state.step_size, state.inverse_mass_matrix)
        if num_burn_in:
            new = windows.update(state.adaptation, state.iteration, proposal.position,
                                 info.acceptance_rate)
            burning = state.iteration < num_burn_in
            tuned = jax.tree.map(lambda n, o: jnp.where(burning, jnp.asarray(n, o.dtype), o),
                                 new, tuned)
        adaptation, step_size, inverse_mass = tuned
        new_state = NUTSState(proposal.position, proposal.logdensity, proposal.logdensity_grad,
                              step_size, inverse_mass, adaptation, state.iteration + 1)
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
