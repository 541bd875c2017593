"""Full-batch Hamiltonian Monte Carlo: the paper's fixed trajectory, or tuned by itself.

Each iteration draws a momentum ``p ~ N(0, M)``, integrates Hamilton's equations for
``H(θ, p) = -log p_T(θ | D) + ½ pᵀM⁻¹p`` with L leapfrog steps of size ε, and accepts the end
point with probability ``min(1, exp(H_start - H_end))`` (Neal 2011; Izmailov et al. 2021). A
trajectory whose energy is not finite, or that loses more than ``divergence_threshold`` nats, is
a divergence: it is rejected and counted, never a crash. The kernel is BlackJAX's
(``blackjax.hmc.build_kernel``); ε, L and M⁻¹ are traced values, so one compilation serves the
whole run. Burn-in samples are never kept.

What adapts during the first ``num_burn_in`` iterations is ``adapt``:

- ``"none"``: nothing; ``L = ceil(τ/ε)`` with the given ε and τ, identity mass.
- ``"step"`` (the default): the paper's mode. ε is tuned by dual averaging (Hoffman & Gelman
  2014) towards ``target_accept_rate``, centred on the initial ε (not 10ε, which throws a chain
  started at a random initialisation into divergences) and restarted halfway through burn-in,
  then frozen at its average; τ fixed, identity mass.
- ``"mass"``: Stan's windows (:class:`~bnnkit.inference.adaptation.Windows`): dual averaging of
  ε and a diagonal M⁻¹ from each chain's own positions and gradients; τ fixed, each iteration
  integrating a quasi-random fraction of it (so draws are not periodic).
- ``"chees"``: for several chains. ε by dual averaging of the chains' harmonic-mean acceptance and
  τ by maximising the ChEES criterion across chains (Hoffman, Radul & Sountsov 2021), starting
  from the given τ (at least one leapfrog step), with a diagonal M⁻¹ pooled over the chains in
  Stan's windows; jittered trajectories throughout. The chains exchange their statistics
  through collectives over the vmapped axis :data:`~bnnkit.inference.adaptation.MEMBERS` (the
  run driver vmaps under that name).

Both adaptive modes start from a step size found where each chain stands (Hoffman & Gelman's
doubling and halving until one leapfrog step's acceptance crosses the target), and aim at an
acceptance of 0.9 rather than the paper modes' 0.8 unless told otherwise
(:data:`DEFAULT_TARGET_ACCEPT_RATE`): long static trajectories on a network posterior are
accepted nearly all or nothing, and at 0.8 many of the rejections diverge.

Where the leapfrog loop runs is ``integrator``. ``"scan"``: inside the compiled iteration
(BlackJAX's ``fori_loop``). ``"host"``: from Python, one compiled leapfrog step of every chain
per call, with the state on the device and only the chains' numbers of steps read back; the
iteration's start (momentum draw) and end (energy, accept/reject, adaptation) are one compiled
call each. XLA's CPU backend runs convolution gradients several times slower inside a compiled
loop than on their own (jax issue #12868; no XLA flag of jax 0.10.2 helps), so ``"auto"`` (the
default) takes ``"host"`` on the CPU backend for a log posterior with a convolution and
``"scan"`` otherwise. With several chains both apply the same operations in the same order and
give the same bits. A single chain's host loop calls its leapfrog step unvmapped, which XLA:CPU
runs about 15 % faster for LeNet-5 than vmapped over an axis of one; XLA then sums the
convolution in another order, so it agrees with ``"scan"`` to rounding, not to the bit (a resumed
run takes the same path, so resume stays bit-exact). ``"host"`` lives in the method's
``step_members`` (what the run driver calls), while ``step`` stays the in-loop, jit-able
iteration.

The paper's reference code can skip the Metropolis-Hastings correction during burn-in
(``mh_during_burn_in=False``) so that a chain started far from the typical set moves faster; a
trajectory whose energy is not finite is rejected even then. It is on by default because on
sharp posteriors an uncorrected chain random-walks in energy instead of settling.

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
from typing import Any, ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.step_size import (
    DualAveragingAdaptationState,
    dual_averaging_adaptation,
    find_reasonable_step_size,
)
from blackjax.mcmc.integrators import IntegratorState, velocity_verlet
from blackjax.mcmc.metrics import default_metric
from blackjax.mcmc.proposal import static_binomial_sampling

from bnnkit.errors import ConfigError
from bnnkit.inference.adaptation import MEMBERS, ChEES, Windows, WindowState, halton_bits, jitter
from bnnkit.inference.base import HamiltonianSettings, Method
from bnnkit.posterior import Samples
from bnnkit.settings import check_positive, flag, setting
from bnnkit.types import Batch, Key, Params

ADAPT_MODES = ("none", "step", "mass", "chees")
#: The acceptance rate each mode's step-size adaptation aims at unless told otherwise. The
#: paper's modes keep bnn_hmc's 0.8. With long static trajectories a network posterior's
#: acceptance is nearly 0 or 1 per iteration, and on yacht_0 (heteroscedastic) and concrete_0
#: a quarter of the rejections at 0.8 were divergences: 4.6 % and 5.3 % of burn-in iterations
#: with ``mass``, against 1.4 % and 0.75 % at 0.9 (4 chains, 300 burn-in iterations each).
DEFAULT_TARGET_ACCEPT_RATE = {"none": 0.8, "step": 0.8, "mass": 0.9, "chees": 0.9}
INTEGRATORS = ("auto", "scan", "host")


class HMCState(NamedTuple):
    """What the next HMC iteration needs.

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
    chees: Any
    iteration: jax.Array


class HMCInfo(NamedTuple):
    """Diagnostics of one HMC iteration (the run log's keys)."""

    acceptance_rate: jax.Array
    accepted: jax.Array
    divergent: jax.Array
    num_leapfrog: jax.Array
    step_size: jax.Array
    trajectory_len: jax.Array
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
    """Full-batch HMC (bnn_hmc's flag names) and what it adapts during burn-in.

    Raises:
        ConfigError: non-positive step size or trajectory length, a target outside (0, 1), an
            unknown or impossible adaptation, or, with a fixed trajectory,
            ``ceil(τ/ε) > max_num_leapfrog_steps``.
    """

    METHOD: ClassVar[str] = "hmc"

    step_size: float = setting(help="leapfrog step size ε (the initial one when it adapts)")
    trajectory_len: float = setting(
        help="integration time τ: each iteration takes ceil(τ/ε) leapfrog steps with --adapt "
             "none or step; --adapt mass integrates a quasi-random fraction of it; --adapt chees "
             "starts from it and tunes τ")
    adapt: str = setting(
        "step", choices=ADAPT_MODES,
        help="what burn-in tunes: none; step (the paper's: ε by dual averaging); mass (ε and a "
             "diagonal mass matrix, Stan's windows); chees (ε, τ and the mass matrix across "
             "chains)")
    target_accept_rate: float | None = setting(
        None, help="acceptance rate the step-size adaptation aims at, in (0, 1); default 0.8 "
                   "with --adapt step (the paper's), 0.9 with mass and chees")
    adapt_step_size: bool = setting(True, flag="--no-adapt-step-size",
                                    help="keep the given step size during burn-in (the same as "
                                         "--adapt none)")
    mass_estimator: str = setting(
        "fisher", choices=("fisher", "variance"),
        help="the diagonal mass matrix of --adapt mass and chees: fisher (√(Var[θ]/Var[∇ log "
             "p]) from positions and gradients) or variance (Stan's, positions only)")
    max_num_leapfrog_steps: int = setting(
        10_000, help="refuse a fixed trajectory that needs more leapfrog steps per iteration; "
                     "adapted trajectories are clipped to it")
    integrator: str = setting(
        "auto", choices=INTEGRATORS, resumable=True,
        help="where the leapfrog loop runs: scan (inside one compiled iteration), host (one "
             "compiled leapfrog step of every chain per call from Python), auto (host on CPU "
             "for models with convolutions, whose gradients XLA's CPU backend runs slowly "
             "inside compiled loops; scan otherwise); the same samples (one chain: to rounding)")
    mh_during_burn_in: bool = setting(True, flag="--no-mh-during-burn-in",
                                      help="accept every finite trajectory during burn-in (as "
                                           "bnn_hmc can)")

    def __post_init__(self) -> None:
        if self.target_accept_rate is None:
            object.__setattr__(self, "target_accept_rate", DEFAULT_TARGET_ACCEPT_RATE.get(
                str(self.adapt).lower(), DEFAULT_TARGET_ACCEPT_RATE["step"]))
        super().__post_init__()
        cls = type(self)
        check_positive(cls, "step_size", self.step_size)
        check_positive(cls, "trajectory_len", self.trajectory_len)
        if self.mass_estimator not in ("fisher", "variance"):
            raise ConfigError(f"unknown {flag(cls, 'mass_estimator')} {self.mass_estimator!r}; "
                              "allowed: fisher, variance")
        adapt = str(self.adapt).lower()
        if adapt not in ADAPT_MODES:
            raise ConfigError(f"unknown --adapt {self.adapt!r}; allowed: {', '.join(ADAPT_MODES)}")
        if not self.adapt_step_size:
            if adapt not in ("step", "none"):
                raise ConfigError(f"--no-adapt-step-size contradicts --adapt {adapt}; allowed: "
                                  "--adapt none, or no --no-adapt-step-size")
            adapt = "none"
        if adapt == "chees" and self.num_chains < 2:
            raise ConfigError(f"--adapt chees tunes across chains; allowed: --num-chains >= 2, "
                              f"not {self.num_chains} (or --adapt mass)")
        object.__setattr__(self, "adapt", adapt)
        if self.integrator not in INTEGRATORS:
            raise ConfigError(f"unknown {flag(cls, 'integrator')} {self.integrator!r}; "
                              f"allowed: {', '.join(INTEGRATORS)}")
        if self.max_num_leapfrog_steps < 1:
            raise ConfigError(f"{flag(cls, 'max_num_leapfrog_steps')} "
                              f"{self.max_num_leapfrog_steps} must be >= 1")
        needed = num_leapfrog_steps(self.trajectory_len, self.step_size)
        if adapt in ("none", "step") and needed > self.max_num_leapfrog_steps:
            raise ConfigError(
                f"trajectory length {self.trajectory_len} / step size {self.step_size} needs "
                f"{needed} leapfrog steps, more than --max-num-leapfrog-steps "
                f"{self.max_num_leapfrog_steps}")


def build(log_posterior, config: Config) -> Method:
    """Full-batch HMC on ``log_posterior(params, batch)``.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings; ``config.adapt`` says what adapts during the first
            ``config.num_burn_in`` iterations. With ``"chees"`` ``init`` and ``step`` must run
            under ``jax.vmap(..., axis_name=MEMBERS)`` over the chains, as the run driver does.

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose ``posterior`` returns
        :class:`~bnnkit.posterior.Samples`.
    """
    adapt, num_burn_in = config.adapt, config.num_burn_in
    max_steps = config.max_num_leapfrog_steps
    skip_mh_in_burn_in = not config.mh_during_burn_in
    da_init, da_update, _ = dual_averaging_adaptation(target=config.target_accept_rate)
    windows = Windows(max(num_burn_in, 1), config.target_accept_rate,
                      estimator=config.mass_estimator,
                      pool_axis=MEMBERS if adapt == "chees" else None)
    chees = ChEES(config.num_iterations, config.target_accept_rate, max_steps)
    bits = halton_bits(config.num_iterations)

    def reasonable_step_size(key, current, batch, eps, size, dtype):
        """Hoffman & Gelman's doubling and halving of ε until one leapfrog step's acceptance
        crosses the target, so that adaptation starts where the chain stands."""
        base = blackjax.hmc.build_kernel(divergence_threshold=config.divergence_threshold)
        ones = jnp.ones(size, dtype)

        def kernel_at(step_size):
            return lambda k, s: base(k, s, lambda p: log_posterior(p, batch), step_size, ones, 1)

        return find_reasonable_step_size(key, kernel_at, current, eps,
                                         target_accept=config.target_accept_rate)

    def init(key: Key, params: Params, batch: Batch) -> HMCState:
        logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
        leaves = jax.tree.leaves(params)
        dtype = jnp.result_type(*leaves)
        size = sum(leaf.size for leaf in leaves)
        eps = jnp.asarray(config.step_size, dtype)
        tau = jnp.asarray(config.trajectory_len, dtype)
        if adapt in ("mass", "chees") and num_burn_in:
            current = blackjax.mcmc.hmc.HMCState(params, logdensity, grad)
            eps = reasonable_step_size(key, current, batch, eps, size, dtype).astype(dtype)
        if adapt == "chees":
            # One step size for every chain (their geometric mean), and ChEES starts from the
            # given trajectory length (at least one leapfrog step). Started from one step, its
            # Adam on log τ barely moved while the chains were still climbing to the typical
            # set, so they climbed by Langevin steps: on yacht_0 after 250 burn-in iterations
            # the chains' log posteriors were -490..-330 with τ at 4 steps, against +160..+340
            # started from τ = 1 (which ChEES shortened to 0.19, 35-80 steps).
            eps = jnp.exp(jax.lax.pmean(jnp.log(eps), MEMBERS))
            tau = jnp.maximum(tau, eps)
        return HMCState(
            position=params,
            logdensity=logdensity,
            logdensity_grad=grad,
            step_size=eps,
            trajectory_len=tau,
            inverse_mass_matrix=jnp.ones(size, dtype),
            adaptation=jax.tree.map(
                lambda v: jnp.asarray(v, dtype), da_init(eps)._replace(mu=jnp.log(eps))
            ),
            windows=windows.init(eps, size, dtype),
            chees=chees.init(eps, tau, dtype),
            iteration=jnp.zeros((), jnp.int32),
        )

    def paper_step_size(state: HMCState, acceptance_rate: jax.Array):
        """The paper mode's dual averaging: (averaging state, next ε) during burn-in."""
        updated = da_update(state.adaptation, acceptance_rate)
        # Restart the averaging halfway through burn-in (as Stan's windows do): the chain's
        # transient from its initialisation wants larger steps than the typical set does,
        # and an average over it would freeze a step size that is too large.
        restart = state.iteration + 1 == num_burn_in // 2
        fresh = da_init(jnp.exp(updated.log_step_size))
        fresh = fresh._replace(mu=fresh.log_step_size)
        updated = jax.tree.map(
            lambda f, u: jnp.where(restart, jnp.asarray(f, u.dtype), u), fresh, updated
        )
        # Inside burn-in take the current iterate; at its end freeze the averaged value.
        still_burning = state.iteration + 1 < num_burn_in
        eps = jnp.where(still_burning, jnp.exp(updated.log_step_size),
                        jnp.exp(updated.log_step_size_avg))
        return updated, eps

    def trajectory_steps(state: HMCState) -> jax.Array:
        """The number of leapfrog steps L of the iteration that starts from ``state``."""
        eps, tau = state.step_size, state.trajectory_len
        if adapt in ("none", "step"):
            length = tau
        else:  # a quasi-random fraction, shared by the chains, so draws are not periodic
            length = jitter(state.iteration, bits).astype(tau.dtype) * tau
        return jnp.clip(jnp.ceil(length / eps - 1e-6).astype(jnp.int32), 1, max_steps)

    def step(key: Key, state: HMCState, batch: Batch) -> tuple[HMCState, HMCInfo]:
        return advance(key, state, batch, trajectory_end=None)

    def advance(key: Key, state: HMCState, batch: Batch,
                trajectory_end: IntegratorState | None) -> tuple[HMCState, HMCInfo]:
        """One iteration; ``trajectory_end`` is its end point when the host integrated it,
        ``None`` to integrate it here (BlackJAX's leapfrog loop)."""
        def logdensity_fn(params):
            return log_posterior(params, batch)

        eps = state.step_size
        num_steps = trajectory_steps(state)
        current = blackjax.mcmc.hmc.HMCState(
            state.position, state.logdensity, state.logdensity_grad
        )
        in_burn_in = state.iteration < num_burn_in
        skip_mh = jnp.logical_and(in_burn_in, skip_mh_in_burn_in)

        def accept_reject(key, log_p_accept, start, end):
            sampled, (do_accept, p_accept, extra) = static_binomial_sampling(
                key, log_p_accept, start, end
            )
            # log_p_accept is -inf for a non-finite energy: such a trajectory is always rejected.
            forced = jnp.logical_and(skip_mh, jnp.isfinite(log_p_accept))
            do_accept = jnp.logical_or(do_accept, forced)
            sampled = jax.tree.map(lambda e, s: jnp.where(forced, e, s), end, sampled)
            return sampled, (do_accept, p_accept, extra)

        if trajectory_end is None:
            integrator, kernel_steps = velocity_verlet, num_steps
        else:  # the host's trajectory: BlackJAX's loop takes one "step" straight to its end
            integrator, kernel_steps = (lambda *_: lambda *_: trajectory_end), 1
        kernel = blackjax.hmc.build_kernel(
            integrator=integrator,
            divergence_threshold=config.divergence_threshold,
            build_proposal=functools.partial(
                blackjax.mcmc.hmc.hmc_proposal, sample_proposal=accept_reject
            ),
        )
        proposal, info = kernel(key, current, logdensity_fn, eps, state.inverse_mass_matrix,
                                kernel_steps)
        tau = state.trajectory_len
        tuned = (eps, tau, state.inverse_mass_matrix, state.adaptation, state.windows,
                 state.chees)
        if num_burn_in and adapt != "none":
            tuned = adapted(state, proposal, info, tuned)
            tuned = jax.tree.map(lambda n, o: jnp.where(in_burn_in, jnp.asarray(n, o.dtype), o),
                                 tuned, (eps, tau, state.inverse_mass_matrix, state.adaptation,
                                         state.windows, state.chees))
        next_eps, next_tau, inverse_mass, adaptation, window_state, chees_state = tuned
        new_state = HMCState(
            position=proposal.position,
            logdensity=proposal.logdensity,
            logdensity_grad=proposal.logdensity_grad,
            step_size=next_eps,
            trajectory_len=next_tau,
            inverse_mass_matrix=inverse_mass,
            adaptation=adaptation,
            windows=window_state,
            chees=chees_state,
            iteration=state.iteration + 1,
        )
        return new_state, HMCInfo(
            acceptance_rate=info.acceptance_rate,
            accepted=info.is_accepted,
            divergent=info.is_divergent,
            num_leapfrog=num_steps,
            step_size=eps,
            trajectory_len=tau,
            log_posterior=proposal.logdensity,
        )

    def adapted(state: HMCState, proposal, info, current: tuple) -> tuple:
        """The tuned (ε, τ, M⁻¹, and adaptation states) after a burn-in iteration."""
        eps, tau, inverse_mass, adaptation, window_state, chees_state = current
        if adapt == "step":
            adaptation, eps = paper_step_size(state, info.acceptance_rate)
        elif adapt == "mass":
            window_state, eps, inverse_mass = windows.update(
                state.windows, state.iteration, proposal.position, info.acceptance_rate,
                gradient=proposal.logdensity_grad)
        else:  # chees: ε and τ from every chain's trajectory, M⁻¹ pooled in Stan's windows
            chees_state = chees.update(
                state.chees, info.proposal.position, info.proposal.momentum, state.position,
                info.acceptance_rate, info.is_divergent, state.inverse_mass_matrix)
            window_state, _, inverse_mass = windows.update(
                state.windows, state.iteration, proposal.position, info.acceptance_rate,
                gradient=proposal.logdensity_grad, adapt_step=False)
            last = state.iteration + 1 == num_burn_in
            final_eps, final_tau = ChEES.final(chees_state)
            eps = jnp.where(last, final_eps, chees_state.step_size)
            tau = jnp.where(last, final_tau, chees_state.trajectory_length)
        return eps, tau, inverse_mass, adaptation, window_state, chees_state

    def trajectory_start(key: Key, state: HMCState) -> tuple[IntegratorState, jax.Array]:
        """The point (position, fresh momentum) the iteration's trajectory starts from, and
        its number of leapfrog steps: what ``blackjax.hmc.build_kernel`` draws from ``key``."""
        key_momentum, _ = jax.random.split(key)
        momentum = default_metric(state.inverse_mass_matrix).sample_momentum(
            key_momentum, state.position)
        point = IntegratorState(state.position, momentum, state.logdensity,
                                state.logdensity_grad)
        return point, trajectory_steps(state)

    def leapfrog(point: IntegratorState, done: jax.Array, num_steps: jax.Array,
                 step_size: jax.Array, inverse_mass: jax.Array, batch: Batch) -> IntegratorState:
        """Leapfrog step ``done + 1`` of a trajectory of ``num_steps``; past its end the point
        stays, as vmapping BlackJAX's loop over chains of different L keeps it."""
        moved = velocity_verlet(lambda p: log_posterior(p, batch),
                                default_metric(inverse_mass).kinetic_energy)(point, step_size)
        return jax.tree.map(lambda m, p: jnp.where(done < num_steps, m, p), moved, point)

    start_all = jax.jit(jax.vmap(trajectory_start, axis_name=MEMBERS))
    # Not donating the point's buffers: its first is the state's own position (jit forwards
    # an input it returns unchanged), which the iteration's end still needs.
    leapfrog_all = jax.jit(jax.vmap(leapfrog, in_axes=(0, None, 0, 0, 0, None),
                                    axis_name=MEMBERS))
    finish_all = jax.jit(jax.vmap(advance, in_axes=(0, 0, None, 0), axis_name=MEMBERS))
    # One chain: its leapfrog step unvmapped. XLA:CPU runs a convolution's gradient vmapped
    # over an axis of one about 1.2x slower than the plain one (LeNet-5), and the leapfrog
    # step takes no collective over the chains.
    leapfrog_one = jax.jit(leapfrog)

    def host_step(keys: Key, states: HMCState, batch: Batch) -> tuple[HMCState, HMCInfo]:
        """Every chain's iteration with the leapfrog loop run from the host: one compiled
        leapfrog step of all chains per dispatch, everything on the device; only the chains'
        numbers of steps come to the host."""
        point, num_steps = start_all(keys, states)
        steps = int(jnp.max(num_steps))
        if num_steps.shape[0] == 1:
            one, step_size, inverse_mass = jax.tree.map(
                lambda a: a[0], (point, states.step_size, states.inverse_mass_matrix))
            for done in range(steps):
                one = leapfrog_one(one, done, num_steps[0], step_size, inverse_mass, batch)
            point = jax.tree.map(lambda a: a[None], one)
        else:
            for done in range(steps):
                point = leapfrog_all(point, done, num_steps, states.step_size,
                                     states.inverse_mass_matrix, batch)
        return finish_all(keys, states, batch, point)

    scan_step = jax.jit(jax.vmap(step, in_axes=(0, 0, None), axis_name=MEMBERS))
    chosen: dict[Any, bool] = {}  # auto's choice per shapes of (position, batch)

    def step_members(keys: Key, states: HMCState, batch: Batch) -> tuple[HMCState, HMCInfo]:
        if config.integrator == "auto":
            one = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype),
                               states.position)
            shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), batch)
            signature = (jax.tree.structure((one, shapes)),
                         tuple((a.shape, str(a.dtype)) for a in jax.tree.leaves((one, shapes))))
            if signature not in chosen:
                chosen[signature] = uses_host_loop(config, log_posterior, one, shapes)
            host = chosen[signature]
        else:
            host = config.integrator == "host"
        return (host_step if host else scan_step)(keys, states, batch)

    def posterior(kept: HMCState) -> Samples:
        return Samples.from_single_chain(kept.position)

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.position,
                  step_members=None if config.integrator == "scan" else step_members)


def has_convolution(log_posterior, params: Params, batch: Batch) -> bool:
    """Whether ``log_posterior(params, batch)`` computes a convolution (traced, not run).

    Every convolutional and recurrent model in :mod:`bnnkit.models` (LeNet-5, the ResNets, the
    CNN-LSTM) has one, and no other model does.

    Example:
        >>> import jax.numpy as jnp
        >>> has_convolution(lambda p, b: jnp.sum(p ** 2), jnp.zeros(3), None)
        False
    """
    def convolves(jaxpr) -> bool:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "conv_general_dilated":
                return True
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    inner = getattr(sub, "jaxpr", sub)  # a closed jaxpr holds its jaxpr
                    if hasattr(inner, "eqns") and convolves(inner):
                        return True
        return False

    return convolves(jax.make_jaxpr(log_posterior)(params, batch).jaxpr)


def uses_host_loop(config: Config, log_posterior, params: Params, batch: Batch) -> bool:
    """Whether ``config.integrator`` runs the leapfrog loop from the host for this problem.

    ``"auto"`` does on the CPU backend for a log posterior with a convolution: XLA's CPU
    backend runs convolution gradients several times slower inside a compiled loop than
    called on their own (jax issue #12868), so there one compiled leapfrog step per dispatch
    is faster; elsewhere the in-loop integrator saves the dispatches.

    Args:
        config: the settings.
        log_posterior: ``(params, batch) -> log density``.
        params, batch: one chain's position and the batch, or their shapes
            (``jax.ShapeDtypeStruct``).

    Example:
        >>> import jax.numpy as jnp
        >>> config = Config(step_size=0.1, trajectory_len=1.0)
        >>> uses_host_loop(config, lambda p, b: jnp.sum(p ** 2), jnp.zeros(3), None)
        False
    """
    if config.integrator != "auto":
        return config.integrator == "host"
    return jax.default_backend() == "cpu" and has_convolution(log_posterior, params, batch)
