"""Full-batch Hamiltonian Monte Carlo: the paper's fixed trajectory, or tuned by itself.

Each iteration draws a momentum ``p ~ N(0, M)``, integrates Hamilton's equations for
``H(θ, p) = -log p_T(θ | D) + ½ pᵀM⁻¹p`` with L leapfrog steps of size ε, and accepts the end
point with probability ``min(1, exp(H_start - H_end))`` (Neal 2011; Izmailov et al. 2021). A
trajectory whose energy is not finite, or that loses more than ``divergence_threshold`` nats, is
a divergence: it is rejected and counted, never a crash. The kernel is BlackJAX's
(``blackjax.hmc.build_kernel``); ε, L and M⁻¹ are traced values, so one compilation serves the
whole run. Burn-in samples are never kept.

What adapts during the first ``num_burn_in`` iterations is ``adapt``:

- ``"auto"`` (the default unless both ε and τ are given): each chain on its own runs NUTS
  (BlackJAX's iterative kernel) through Stan's windows during burn-in: ε by dual averaging on
  NUTS's acceptance statistic from a step found where the chain starts, a diagonal M⁻¹ (the
  Fisher estimate) per slow window, and trees at most 2^6 − 1 steps long until the first slow
  window has closed (the identity metric's step is set by the narrowest direction, so a
  trajectory long in the widest is thousands of steps: its cost is what a chain far out
  cannot afford), 2^10 − 1 after. τ is the 90 % quantile of the chain's NUTS integration
  times in the last window (a log-normal fit), and the kept iterations are static HMC
  integrating a quasi-random fraction of τ (jittered, so draws are not periodic).
  Why this and not Stan's windows with static trajectories throughout (``"mass"`` with its
  early trajectories bounded): a static τ is in units of a metric that does not exist yet,
  and any fixed default is wrong for some posterior (0.3 right for the exact regression of
  the tests was a third of the ESS of a better τ); NUTS measures the posterior's own
  integration time per chain, and burn-in costs what NUTS's does (less from a far start, its
  early trees being shallow). The kept phase keeps static HMC's advantage over NUTS (2-20x
  effective samples per gradient on well-conditioned targets, ``benchmarks/
  sampler_defaults.py``). Nothing is pooled across chains: chains started in different modes
  (from an ensemble's members) each get their own ε, M⁻¹ and τ.
- ``"none"``: nothing; ``L = ceil(τ/ε)`` with the given ε and τ, identity mass.
- ``"step"`` (the default when both ε and τ are given): the paper's mode. ε is tuned by dual
  averaging (Hoffman & Gelman 2014) towards ``target_accept_rate``, centred on the initial ε (not
  10ε, which throws a chain started at a random initialisation into divergences) and restarted
  halfway through burn-in, then frozen at its average; τ fixed, identity mass.
- ``"mass"``: Stan's windows (:class:`~bnnkit.inference.adaptation.Windows`): dual averaging of
  ε and a diagonal M⁻¹ from each chain's own positions and gradients; τ fixed, each iteration
  integrating a quasi-random fraction of it (so draws are not periodic).
- ``"chees"``: for several chains. ε by dual averaging of the chains' harmonic-mean acceptance and
  τ by maximising the ChEES criterion across chains (Hoffman, Radul & Sountsov 2021), starting
  from the given τ (at least one leapfrog step), with a diagonal M⁻¹ pooled over the chains in
  Stan's windows; jittered trajectories throughout. A chain whose log density is more than 5
  robust spreads below the median chain's is left out of every pooled statistic
  (:func:`~bnnkit.inference.adaptation.pooled_chains`); below 4 chains it warns. The chains
  exchange their statistics through collectives over the vmapped axis
  :data:`~bnnkit.inference.adaptation.MEMBERS` (the run driver vmaps under that name).

``"mass"`` and ``"chees"`` take at most 2^6 − 1 leapfrog steps per iteration while M⁻¹ is still
the identity, for the same reason as ``"auto"``'s shallow early trees. A trajectory cut short
by ``max_num_leapfrog_steps`` (or ``"auto"``'s tree depth limit) is ``capped`` in the info, and
the run reports the share.

The adaptive modes start from a step size found where each chain stands (Hoffman & Gelman's
doubling and halving until one leapfrog step's acceptance crosses the target), and aim at an
acceptance of 0.9 rather than the paper modes' 0.8 unless told otherwise
(:data:`DEFAULT_TARGET_ACCEPT_RATE`): long static trajectories on a network posterior are
accepted nearly all or nothing, and at 0.8 many of the rejections diverge.

Where the leapfrog loop runs is ``integrator``. ``"scan"``: inside the compiled iteration
(BlackJAX's ``fori_loop``). ``"host"``: from Python, one compiled leapfrog step of every chain
per call (:mod:`bnnkit.inference.host_leapfrog`), because XLA's CPU backend runs convolution
gradients several times slower inside a compiled loop than on their own. ``"auto"`` (the
default) takes ``"host"`` on the CPU backend for a log posterior with a convolution and
``"scan"`` otherwise. With several chains both give the same bits; a single chain's host loop
agrees with ``"scan"`` to rounding (and resumes bit for bit). ``"host"`` lives in the method's
``step_members`` (what the run driver calls), while ``step`` stays the in-loop, jit-able
iteration.

As in BlackJAX, :func:`init` and :func:`step` are module-level pure functions that
take the log posterior and the settings as arguments, and :func:`build` binds them with
``functools.partial``. What burn-in tunes is an :class:`~bnnkit.inference.adaptation.Adaptation`
(:func:`~bnnkit.inference.adaptation.hmc_adaptation`): after each iteration :func:`step` asks it
for the next ε, τ and M⁻¹.

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
    >>> default = build(log_density, Config(num_iterations=10))  # no knobs: "auto"
    >>> state = default.init(jax.random.PRNGKey(0), {"x": jnp.zeros(2)}, None)
    >>> state, info = jax.jit(default.step)(jax.random.PRNGKey(1), state, None)
    >>> bool(info.num_leapfrog <= 63)  # a NUTS tree, shallow while the metric is the identity
    True
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.chees_adaptation import ChEESAdaptationState
from blackjax.adaptation.step_size import DualAveragingAdaptationState
from blackjax.mcmc.hmc import hmc_proposal
from blackjax.mcmc.integrators import IntegratorState, velocity_verlet
from blackjax.mcmc.proposal import static_binomial_sampling
from jax.flatten_util import ravel_pytree

from bnnkit.errors import ConfigError
from bnnkit.inference import host_leapfrog
from bnnkit.inference import nuts as nuts_lib
from bnnkit.inference.adaptation import (
    ADAPT_MODES,
    EARLY_TREE_DEPTH,
    MAX_TREE_DEPTH,
    MIN_POOLED_CHAINS,
    Adaptation,
    HMCAdaptationState,
    Tuning,
    WindowState,
    halton_bits,
    hmc_adaptation,
    jitter,
)
from bnnkit.inference.base import HamiltonianSettings, Method
from bnnkit.inference.host_leapfrog import INTEGRATORS
from bnnkit.posterior import Samples
from bnnkit.settings import LEAPFROG_STEPS, Exclusive, check_choice, check_numbers, setting
from bnnkit.types import Batch, Key, Params

#: The acceptance rate each mode's step-size adaptation aims at unless told otherwise. The
#: paper's modes keep bnn_hmc's 0.8. With long static trajectories a network posterior's
#: acceptance is nearly 0 or 1 per iteration, and on yacht_0 (heteroscedastic) and concrete_0
#: a quarter of the rejections at 0.8 were divergences: 4.6 % and 5.3 % of burn-in iterations
#: with ``mass``, against 1.4 % and 0.75 % at 0.9 (4 chains, 300 burn-in iterations each).
#: ``"auto"`` tunes ε on NUTS's acceptance statistic (the average over the whole tree), as
#: NUTS does.
DEFAULT_TARGET_ACCEPT_RATE = {"none": 0.8, "step": 0.8, "mass": 0.9, "chees": 0.9, "auto": 0.8}
#: The step size the adaptive modes start their search from when none is given (the search
#: doubles or halves it until one leapfrog step's acceptance crosses the target).
DEFAULT_STEP_SIZE = 0.1
#: τ when none is given, in units of the adapted metric (so ~1 is the scale of a whitened
#: posterior): what ``"mass"`` integrates (a quasi-random fraction of it each iteration) and
#: where ``"chees"`` starts. ``"auto"`` estimates it.
DEFAULT_TRAJECTORY_LEN = {"mass": 2.0, "chees": 1.0}


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


def num_leapfrog_steps(trajectory_len: float, step_size: float) -> int:
    """``ceil(trajectory_len / step_size)``, the paper's rule.

    Example:
        >>> num_leapfrog_steps(0.15, 1e-5)
        15000
    """
    return max(1, math.ceil(trajectory_len / step_size - 1e-9))


POSITIVE = (Exclusive(0), None)
OPEN_UNIT = (Exclusive(0), Exclusive(1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(HamiltonianSettings):
    """Full-batch HMC (bnn_hmc's flag names) and what it adapts during burn-in.

    Nothing is required. With both ``step_size`` and ``trajectory_len`` and no ``adapt`` it is
    the paper's HMC (``"step"``), exactly as before either became optional; with either one
    missing, ``"auto"`` tunes ε, M⁻¹ and (unless given) τ per chain (see the module), over a
    burn-in of half the iterations unless ``num_burn_in`` says otherwise.

    Raises:
        ConfigError: non-positive step size or trajectory length, a target outside (0, 1), an
            unknown or impossible adaptation (``none`` or ``step`` without both ε and τ,
            ``auto``, ``mass`` or ``chees`` without burn-in), or, with a fixed trajectory,
            ``ceil(τ/ε) > max_num_leapfrog_steps``.

    Example:
        >>> Config().adapt, Config().num_burn_in, Config().trajectory_len
        ('auto', 500, None)
        >>> Config(step_size=1e-3, trajectory_len=0.1).adapt  # the paper's
        'step'
        >>> Config(adapt="mass").trajectory_len  # a default, in units of the adapted metric
        2.0
    """

    METHOD: ClassVar[str] = "hmc"

    step_size: float | None = setting(
        None,
        help="leapfrog step size ε; with --adapt auto, mass or chees only where the "
        "search for a first ε starts (default 0.1); with none or step the ε used "
        "(step tunes it during burn-in)",
        bounds=POSITIVE,
    )
    trajectory_len: float | None = setting(
        None,
        help="integration time τ, one meaning per --adapt: none and step: physical "
        "time, each iteration takes ceil(τ/ε) leapfrog steps (required); auto: in "
        "units of the adapted mass matrix, integrated as a quasi-random fraction "
        "each iteration, estimated from burn-in when not given; mass: the same, "
        "default 2.0; chees: where ChEES starts tuning it, default 1.0",
        bounds=POSITIVE,
    )
    num_burn_in: int | None = setting(
        None,
        aliases=("--num-burn-in-iterations",),
        help="iterations whose samples are discarded and where the sampler adapts; default "
        "half the iterations with --adapt auto, mass or chees, 0 with none or step",
        bounds=(0, None),
    )
    adapt: str | None = setting(
        None,
        choices=ADAPT_MODES,
        help="what burn-in tunes: auto (the default without both --step-size and "
        "--trajectory-len: per chain, NUTS during burn-in sets ε, a diagonal mass matrix "
        "and τ, then jittered HMC); step (the default with both, the paper's: ε by dual "
        "averaging); none; mass (ε and a diagonal mass matrix per chain, Stan's windows, "
        "τ fixed); chees (ε, τ and a mass matrix pooled across >= 4 chains)",
    )
    target_accept_rate: float | None = setting(
        None,
        help="acceptance rate the step-size adaptation aims at, in (0, 1); default 0.8 "
        "with --adapt step and auto (NUTS's statistic), 0.9 with mass and chees",
        bounds=OPEN_UNIT,
    )
    adapt_step_size: bool = setting(
        True,
        flag="--no-adapt-step-size",
        help="keep the given step size during burn-in (the same as --adapt none)",
    )
    mass_estimator: str = setting(
        "fisher",
        choices=("fisher", "variance"),
        help="the diagonal mass matrix of --adapt auto, mass and chees: fisher (√(Var[θ]/Var[∇ "
        "log p]) from positions and gradients) or variance (Stan's, positions only)",
    )
    max_num_leapfrog_steps: int = setting(
        10_000,
        help="refuse a fixed trajectory that needs more leapfrog steps per iteration; "
        "adapted trajectories are clipped to it, and the run reports the share of "
        "clipped iterations",
        bounds=LEAPFROG_STEPS,
    )
    integrator: str = setting(
        "auto",
        choices=INTEGRATORS,
        resumable=True,
        help="where the leapfrog loop runs: scan (inside one compiled iteration), host (one "
        "compiled leapfrog step of every chain per call from Python), auto (host on CPU "
        "for models with convolutions, whose gradients XLA's CPU backend runs slowly "
        "inside compiled loops; scan otherwise); the same samples (one chain: to rounding)",
    )
    mh_during_burn_in: bool = setting(
        True,
        flag="--no-mh-during-burn-in",
        help="accept every finite trajectory during burn-in (as bnn_hmc can)",
    )

    def __post_init__(self) -> None:
        check_numbers(self)  # every value of its field's type before the defaults read them
        adapt = self._adapt_mode()
        object.__setattr__(self, "adapt", adapt)
        if self.num_burn_in is None:
            object.__setattr__(
                self, "num_burn_in", 0 if adapt in ("none", "step") else self.num_iterations // 2
            )
        if self.target_accept_rate is None:
            object.__setattr__(self, "target_accept_rate", DEFAULT_TARGET_ACCEPT_RATE[adapt])
        if self.step_size is None and adapt not in ("none", "step"):
            object.__setattr__(self, "step_size", DEFAULT_STEP_SIZE)
        if self.trajectory_len is None and adapt in DEFAULT_TRAJECTORY_LEN:
            object.__setattr__(self, "trajectory_len", DEFAULT_TRAJECTORY_LEN[adapt])
        super().__post_init__()  # every number within its bounds
        cls = type(self)
        check_choice(cls, "mass_estimator", self.mass_estimator, ("fisher", "variance"))
        check_choice(cls, "integrator", self.integrator, INTEGRATORS)
        if adapt in ("none", "step"):
            needed = num_leapfrog_steps(self.trajectory_len, self.step_size)
            if needed > self.max_num_leapfrog_steps:
                raise ConfigError(
                    f"trajectory length {self.trajectory_len} / step size {self.step_size} "
                    f"needs {needed} leapfrog steps, more than --max-num-leapfrog-steps "
                    f"{self.max_num_leapfrog_steps}"
                )
        elif not self.num_burn_in:
            raise ConfigError(
                f"--adapt {adapt} tunes during burn-in; allowed: --num-burn-in "
                ">= 1, or --step-size and --trajectory-len with --adapt step"
            )
        if adapt == "chees" and self.chains < MIN_POOLED_CHAINS:
            warnings.warn(
                f"--adapt chees pools {self.chains} chains: below "
                f"{MIN_POOLED_CHAINS} it cannot leave out a stranded chain; use "
                f">= {MIN_POOLED_CHAINS} chains or --adapt auto (per chain)",
                UserWarning,
                stacklevel=3,
            )

    def _adapt_mode(self) -> str:
        """``adapt`` resolved (``None``: ``"step"`` with both ε and τ, else ``"auto"``; ``"none"``
        with ``--no-adapt-step-size``), in lower case, checked against the other settings."""
        both = self.step_size is not None and self.trajectory_len is not None
        adapt = str(self.adapt).lower() if self.adapt is not None else None
        if adapt is not None and adapt not in ADAPT_MODES:
            raise ConfigError(f"unknown --adapt {self.adapt!r}; allowed: {', '.join(ADAPT_MODES)}")
        if not self.adapt_step_size:
            if adapt not in (None, "step", "none"):
                raise ConfigError(
                    f"--no-adapt-step-size contradicts --adapt {adapt}; allowed: "
                    "--adapt none, or no --no-adapt-step-size"
                )
            adapt = "none"
        if adapt is None:
            adapt = "step" if both else "auto"
        if adapt in ("none", "step") and not both:
            missing = " and ".join(
                name
                for name, value in (
                    ("--step-size", self.step_size),
                    ("--trajectory-len", self.trajectory_len),
                )
                if value is None
            )
            raise ConfigError(
                f"--adapt {adapt} integrates a fixed trajectory and needs "
                f"{missing}; allowed: both given, or --adapt auto (the default "
                "without them: tunes both)"
            )
        if adapt == "chees" and self.init_checkpoint is not None:
            # Chains started from different members of a run sit in different modes; pooled
            # statistics would mix the modes' scales.
            raise ConfigError(
                f"--adapt chees pools its tuning across chains, and chains started "
                f"from --init-checkpoint {self.init_checkpoint!r} start in "
                "different places; allowed: --adapt auto or mass (tuned per "
                "chain)"
            )
        if adapt == "chees" and self.chains < 2:
            raise ConfigError(
                f"--adapt chees tunes across chains; allowed: --num-chains >= 2, "
                f"not {self.chains} (or --adapt auto)"
            )
        return adapt


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
    return HMCState(
        position=params,
        logdensity=logdensity,
        logdensity_grad=grad,
        step_size=tuning.step_size,
        trajectory_len=tuning.trajectory_len,
        inverse_mass_matrix=tuning.inverse_mass_matrix,
        adaptation=tuned.step,
        windows=tuned.windows,
        chees=tuned.chees,
        iteration=jnp.zeros((), jnp.int32),
    )


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
        >>> fixed = hmc_adaptation("none", num_burn_in=0, num_iterations=1, target=0.8)
        >>> state = init(None, jnp.ones(2), None, log_posterior=log_density, adaptation=fixed,
        ...              step_size=0.5, trajectory_len=1.0)
        >>> state, info = step(jax.random.PRNGKey(0), state, None, log_posterior=log_density,
        ...                    adaptation=fixed, num_burn_in=0)
        >>> int(info.num_leapfrog), int(state.iteration), bool(info.capped)
        (2, 1, False)
    """
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
    current = blackjax.mcmc.hmc.HMCState(state.position, state.logdensity, state.logdensity_grad)

    def logdensity_fn(p):
        return log_posterior(p, batch)

    proposal, info = kernel(
        rng_key,
        current,
        logdensity_fn,
        state.step_size,
        state.inverse_mass_matrix,
        num_steps if trajectory_end is None else 1,
    )
    moved = Transition(
        proposal,
        info.is_accepted,
        info.acceptance_rate,
        info.is_divergent,
        num_steps,
        state.trajectory_len,
        wanted_steps(state, **steps) > max_steps,
        info,
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
    proposal = moved.proposal
    tuned, tuning = adaptation.update(
        HMCAdaptationState(state.adaptation, state.windows, state.chees),
        state.iteration,
        state.position,
        proposal,
        moved.info,
        Tuning(state.step_size, state.trajectory_len, state.inverse_mass_matrix),
    )
    new_state = HMCState(
        position=proposal.position,
        logdensity=proposal.logdensity,
        logdensity_grad=proposal.logdensity_grad,
        step_size=tuning.step_size,
        trajectory_len=tuning.trajectory_len,
        inverse_mass_matrix=tuning.inverse_mass_matrix,
        adaptation=tuned.step,
        windows=tuned.windows,
        chees=tuned.chees,
        iteration=state.iteration + 1,
    )
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


def posterior(kept: HMCState) -> Samples:
    """The kept states' positions as samples of one chain."""
    return Samples.from_single_chain(kept.position)


def position(state: HMCState) -> Params:
    return state.position


def build(log_posterior: Callable, config: Config) -> Method:
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
    adaptation = hmc_adaptation(
        config.adapt,
        num_burn_in=config.num_burn_in,
        num_iterations=config.num_iterations,
        target=config.target_accept_rate,
        estimator=config.mass_estimator,
        max_leapfrog_steps=config.max_num_leapfrog_steps,
        divergence_threshold=config.divergence_threshold,
        tune_trajectory=config.trajectory_len is None,
    )
    trajectory = dict(
        jitter_bits=halton_bits(config.num_iterations) if adaptation.jittered else None,
        max_steps=config.max_num_leapfrog_steps,
    )
    iteration = functools.partial(
        step,
        log_posterior=log_posterior,
        adaptation=adaptation,
        num_burn_in=config.num_burn_in,
        mh_during_burn_in=config.mh_during_burn_in,
        divergence_threshold=config.divergence_threshold,
        **trajectory,
    )
    return Method(
        init=functools.partial(
            init,
            log_posterior=log_posterior,
            adaptation=adaptation,
            step_size=config.step_size,
            trajectory_len=config.trajectory_len,
        ),
        step=iteration,
        posterior=posterior,
        position=position,
        step_members=host_leapfrog.build(
            log_posterior,
            config.integrator,
            step=iteration,
            num_steps=functools.partial(
                trajectory_steps,
                early_until=adaptation.early_until,
                tree_depth=adaptation.tree_depth,
                **trajectory,
            ),
        ),
    )


def uses_host_loop(config: Config, log_posterior: Callable, params: Params, batch: Batch) -> bool:
    """Whether ``config.integrator`` runs the leapfrog loop from the host for this problem
    (:func:`bnnkit.inference.host_leapfrog.uses_host_loop`).

    Example:
        >>> import jax.numpy as jnp
        >>> config = Config(step_size=0.1, trajectory_len=1.0)
        >>> uses_host_loop(config, lambda p, b: jnp.sum(p ** 2), jnp.zeros(3), None)
        False
    """
    return host_leapfrog.uses_host_loop(config.integrator, log_posterior, params, batch)
