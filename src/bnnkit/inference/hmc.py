"""Full-batch Hamiltonian Monte Carlo with a fixed trajectory length.

Each iteration draws a momentum ``p ~ N(0, I)``, integrates Hamilton's equations for
``H(θ, p) = -log p_T(θ | D) + ½ pᵀp`` with ``L = ceil(trajectory_len / ε)`` leapfrog steps of size
ε, and accepts the end point with probability ``min(1, exp(H_start - H_end))`` (Neal 2011;
Izmailov et al. 2021). A trajectory whose energy is not finite, or that loses more than
``divergence_threshold`` nats, is a divergence: it is rejected and counted, never a crash.

During the first ``num_burn_in`` iterations ε is tuned by dual averaging (Hoffman & Gelman 2014)
towards ``target_accept_rate``, centred on the initial ε (not 10ε, which throws a chain started
at a random initialisation into divergences); afterwards it is frozen at the averaged value and
kept in the state. The paper's reference code can skip the Metropolis-Hastings correction
during burn-in (``mh_during_burn_in=False``) so that a chain started far from the typical set
moves faster; a trajectory whose energy is not finite is rejected even then. It is on by default
because on sharp posteriors an uncorrected chain random-walks in energy instead of settling.
Burn-in samples are never kept.

The kernel is BlackJAX's (``blackjax.hmc.build_kernel``); step size and number of steps are
traced values, so one compilation serves the whole run.

Example:
    >>> import jax, jax.numpy as jnp
    >>> def log_density(params, batch):  # a standard normal in 2-d
    ...     return -0.5 * jnp.sum(params["x"] ** 2)
    >>> config = Config(step_size=0.3, trajectory_len=1.0, num_iterations=10, num_burn_in=5)
    >>> method = build(log_density, config)
    >>> state = method.init(jax.random.PRNGKey(0), {"x": jnp.zeros(2)}, None)
    >>> state, info = jax.jit(method.step)(jax.random.PRNGKey(1), state, None)
    >>> int(info.num_leapfrog), bool(info.divergent)
    (4, False)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.step_size import (
    DualAveragingAdaptationState,
    dual_averaging_adaptation,
)
from blackjax.mcmc.proposal import static_binomial_sampling

from bnnkit.errors import ConfigError
from bnnkit.inference.base import HamiltonianSettings, Method
from bnnkit.posterior import Samples
from bnnkit.settings import check_positive, flag, setting
from bnnkit.types import Batch, Key, Params


class HMCState(NamedTuple):
    """What the next HMC iteration needs.

    Attributes:
        position: current parameters.
        logdensity: tempered log posterior at ``position``.
        logdensity_grad: its gradient.
        step_size: the step size the next iteration uses.
        adaptation: dual-averaging state (frozen after burn-in).
        iteration: number of iterations done.
    """

    position: Params
    logdensity: jax.Array
    logdensity_grad: Params
    step_size: jax.Array
    adaptation: DualAveragingAdaptationState
    iteration: jax.Array


class HMCInfo(NamedTuple):
    """Diagnostics of one HMC iteration (the run log's keys)."""

    acceptance_rate: jax.Array
    accepted: jax.Array
    divergent: jax.Array
    num_leapfrog: jax.Array
    step_size: jax.Array
    log_posterior: jax.Array


def num_leapfrog_steps(trajectory_len: float, step_size: float) -> int:
    """``ceil(trajectory_len / step_size)``, the paper's rule.

    Example:
        >>> num_leapfrog_steps(0.15, 1e-5)
        15000
    """
    return max(1, math.ceil(trajectory_len / step_size - 1e-9))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(HamiltonianSettings):
    """Full-batch HMC with the paper's fixed trajectory length (bnn_hmc's flag names).

    Raises:
        ConfigError: non-positive step size or trajectory length, a target outside (0, 1), or
            ``ceil(τ/ε) > max_num_leapfrog_steps``.
    """

    METHOD: ClassVar[str] = "hmc"

    step_size: float = setting(help="initial leapfrog step size ε")
    trajectory_len: float = setting(help="integration time τ; each iteration takes ceil(τ/ε) "
                                         "leapfrog steps")
    max_num_leapfrog_steps: int = setting(
        10_000, help="refuse settings that need more leapfrog steps per iteration; during "
                     "adaptation the count is clipped to it")
    adapt_step_size: bool = setting(True, flag="--no-adapt-step-size",
                                    help="keep the given step size during burn-in")
    mh_during_burn_in: bool = setting(True, flag="--no-mh-during-burn-in",
                                      help="accept every finite trajectory during burn-in (as "
                                           "bnn_hmc can)")

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = type(self)
        check_positive(cls, "step_size", self.step_size)
        check_positive(cls, "trajectory_len", self.trajectory_len)
        if self.max_num_leapfrog_steps < 1:
            raise ConfigError(f"{flag(cls, 'max_num_leapfrog_steps')} "
                              f"{self.max_num_leapfrog_steps} must be >= 1")
        needed = num_leapfrog_steps(self.trajectory_len, self.step_size)
        if needed > self.max_num_leapfrog_steps:
            raise ConfigError(
                f"trajectory length {self.trajectory_len} / step size {self.step_size} needs "
                f"{needed} leapfrog steps, more than --max-num-leapfrog-steps "
                f"{self.max_num_leapfrog_steps}")


def build(log_posterior, config: Config) -> Method:
    """Full-batch HMC on ``log_posterior(params, batch)``.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings; ε adapts during the first ``config.num_burn_in`` iterations.

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose ``posterior`` returns
        :class:`~bnnkit.posterior.Samples`.
    """
    step_size, trajectory_len = config.step_size, config.trajectory_len
    num_burn_in, adapt_step_size = config.num_burn_in, config.adapt_step_size
    max_num_leapfrog_steps = config.max_num_leapfrog_steps
    mh_during_burn_in = config.mh_during_burn_in
    divergence_threshold = config.divergence_threshold
    da_init, da_update, _ = dual_averaging_adaptation(target=config.target_accept_rate)

    def init(key: Key, params: Params, batch: Batch) -> HMCState:
        del key  # the initial state is deterministic given params
        logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
        dtype = jnp.result_type(*jax.tree.leaves(params))
        eps = jnp.asarray(step_size, dtype)
        return HMCState(
            position=params,
            logdensity=logdensity,
            logdensity_grad=grad,
            step_size=eps,
            adaptation=jax.tree.map(
                lambda v: jnp.asarray(v, dtype), da_init(eps)._replace(mu=jnp.log(eps))
            ),
            iteration=jnp.zeros((), jnp.int32),
        )

    def step(key: Key, state: HMCState, batch: Batch) -> tuple[HMCState, HMCInfo]:
        def logdensity_fn(params):
            return log_posterior(params, batch)

        eps = state.step_size
        num_steps = jnp.clip(
            jnp.ceil(trajectory_len / eps - 1e-6).astype(jnp.int32), 1, max_num_leapfrog_steps
        )
        # Identity mass matrix, as in the paper; its size is static, so no copy of the params.
        leaves = jax.tree.leaves(state.position)
        inverse_mass = jnp.ones(sum(leaf.size for leaf in leaves), leaves[0].dtype)
        current = blackjax.mcmc.hmc.HMCState(
            state.position, state.logdensity, state.logdensity_grad
        )
        in_burn_in = state.iteration < num_burn_in
        skip_mh = jnp.logical_and(in_burn_in, not mh_during_burn_in)

        def accept_reject(key, log_p_accept, start, end):
            sampled, (do_accept, p_accept, extra) = static_binomial_sampling(
                key, log_p_accept, start, end
            )
            # log_p_accept is -inf for a non-finite energy: such a trajectory is always rejected.
            forced = jnp.logical_and(skip_mh, jnp.isfinite(log_p_accept))
            do_accept = jnp.logical_or(do_accept, forced)
            sampled = jax.tree.map(lambda e, s: jnp.where(forced, e, s), end, sampled)
            return sampled, (do_accept, p_accept, extra)

        kernel = blackjax.hmc.build_kernel(
            divergence_threshold=divergence_threshold,
            build_proposal=functools.partial(
                blackjax.mcmc.hmc.hmc_proposal, sample_proposal=accept_reject
            ),
        )
        proposal, info = kernel(key, current, logdensity_fn, eps, inverse_mass, num_steps)
        adaptation, next_eps = state.adaptation, eps
        if adapt_step_size:
            updated = da_update(state.adaptation, info.acceptance_rate)
            # Restart the averaging halfway through burn-in (as Stan's windows do): the chain's
            # transient from its initialisation wants larger steps than the typical set does,
            # and an average over it would freeze a step size that is too large.
            restart = state.iteration + 1 == num_burn_in // 2
            fresh = da_init(jnp.exp(updated.log_step_size))
            fresh = fresh._replace(mu=fresh.log_step_size)
            updated = jax.tree.map(
                lambda f, u: jnp.where(restart, jnp.asarray(f, u.dtype), u), fresh, updated
            )
            adaptation = jax.tree.map(
                lambda new, old: jnp.where(in_burn_in, new, old), updated, state.adaptation
            )
            # Inside burn-in take the current iterate; at its end freeze the averaged value.
            still_burning = state.iteration + 1 < num_burn_in
            tuned = jnp.where(
                still_burning,
                jnp.exp(adaptation.log_step_size),
                jnp.exp(adaptation.log_step_size_avg),
            ).astype(eps.dtype)
            next_eps = jnp.where(in_burn_in, tuned, eps)

        new_state = HMCState(
            position=proposal.position,
            logdensity=proposal.logdensity,
            logdensity_grad=proposal.logdensity_grad,
            step_size=next_eps,
            adaptation=adaptation,
            iteration=state.iteration + 1,
        )
        return new_state, HMCInfo(
            acceptance_rate=info.acceptance_rate,
            accepted=info.is_accepted,
            divergent=info.is_divergent,
            num_leapfrog=num_steps,
            step_size=eps,
            log_posterior=proposal.logdensity,
        )

    def posterior(kept_states: HMCState) -> Samples:
        return Samples.from_single_chain(kept_states.position)

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.position)
