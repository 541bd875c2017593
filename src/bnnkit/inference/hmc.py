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
  and any fixed default is wrong for some posterior (the one right for the exact regression
  of the tests cost ESS against a better τ); NUTS measures the posterior's own integration
  time per chain, and burn-in costs what NUTS's does (less from a far start, its early trees
  being shallow). The kept phase keeps static HMC's advantage over NUTS in effective samples
  per gradient on well-conditioned targets (``benchmarks/sampler_defaults.py``; the figures
  of both are in ``docs/performance.md``, "Full-batch samplers"). Nothing is pooled across
  chains: chains started in different modes (from an ensemble's members) each get their own
  ε, M⁻¹ and τ.
- ``"none"``: nothing; ``L = ceil(τ/ε)`` with the given ε and τ, identity mass.
- ``"step"`` (the default when both ε and τ are given): the paper's mode. ε is tuned by dual
  averaging (Hoffman & Gelman 2014) towards ``target_accept_rate``, centred on the initial ε (not
  10ε, which throws a chain started at a random initialisation into divergences) and restarted
  halfway through burn-in, then frozen at its average; τ fixed, identity mass.
- ``"mass"``: Stan's windows (:class:`~bnnkit.inference.mass_windows.Windows`): dual averaging of
  ε and a diagonal M⁻¹ from each chain's own positions and gradients; τ fixed, each iteration
  integrating a quasi-random fraction of it (so draws are not periodic).
- ``"chees"``: for several chains. ε by dual averaging of the chains' harmonic-mean acceptance and
  τ by maximising the ChEES criterion across chains (Hoffman, Radul & Sountsov 2021), starting
  from the given τ (at least one leapfrog step), with a diagonal M⁻¹ pooled over the chains in
  Stan's windows; jittered trajectories throughout. A chain whose log density is more than 5
  robust spreads below the median chain's is left out of every pooled statistic
  (:func:`~bnnkit.inference.chees.pooled_chains`); below 4 chains it warns. The chains
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

As in BlackJAX, :func:`~bnnkit.inference.hmc_kernel.init` and
:func:`~bnnkit.inference.hmc_kernel.step` (the chain's state and one iteration,
:mod:`bnnkit.inference.hmc_kernel`) are module-level pure functions that take the log posterior
and the settings as arguments, and :func:`build` binds them with ``functools.partial``. What
burn-in tunes is an :class:`~bnnkit.inference.adaptation.Adaptation`
(:func:`~bnnkit.inference.hmc_modes.hmc_adaptation`): after each iteration ``step`` asks it for
the next ε, τ and M⁻¹.

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
from typing import ClassVar

from bnnkit.errors import ConfigError
from bnnkit.inference import host_leapfrog
from bnnkit.inference.adaptation import halton_bits
from bnnkit.inference.base import HamiltonianSettings, Method, sampler
from bnnkit.inference.chees import MIN_POOLED_CHAINS
from bnnkit.inference.hmc_kernel import init, step, trajectory_steps
from bnnkit.inference.hmc_modes import ADAPT_MODES, hmc_adaptation
from bnnkit.inference.host_leapfrog import INTEGRATORS
from bnnkit.settings import LEAPFROG_STEPS, Exclusive, check_choice, check_numbers, setting
from bnnkit.types import Batch, Params

#: The acceptance rate each mode's step-size adaptation aims at unless told otherwise. The
#: paper's modes keep bnn_hmc's 0.8. With long static trajectories a network posterior's
#: acceptance is nearly 0 or 1 per iteration, and on yacht_0 and concrete_0 many of the
#: rejections at 0.8 were divergences, far fewer at 0.9 (measured with ``mass``; figures in
#: ``docs/performance.md``, "Full-batch samplers"). ``"auto"`` tunes ε on NUTS's acceptance
#: statistic (the average over the whole tree), as NUTS does.
DEFAULT_TARGET_ACCEPT_RATE = {"none": 0.8, "step": 0.8, "mass": 0.9, "chees": 0.9, "auto": 0.8}
#: The step size the adaptive modes start their search from when none is given (the search
#: doubles or halves it until one leapfrog step's acceptance crosses the target).
DEFAULT_STEP_SIZE = 0.1
#: τ when none is given, in units of the adapted metric (so ~1 is the scale of a whitened
#: posterior): what ``"mass"`` integrates (a quasi-random fraction of it each iteration) and
#: where ``"chees"`` starts. ``"auto"`` estimates it.
DEFAULT_TRAJECTORY_LEN = {"mass": 2.0, "chees": 1.0}


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


def build(log_posterior: Callable, config: Config) -> Method:
    """Full-batch HMC on ``log_posterior(params, batch)``.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings; ``config.adapt`` says what adapts during the first
            ``config.num_burn_in`` iterations. With ``"chees"`` ``init`` and ``step`` must run
            under ``jax.vmap(..., axis_name=MEMBERS)`` over the chains, as the run driver does.

    Returns:
        A :func:`~bnnkit.inference.base.sampler`: its ``posterior`` is the kept positions as
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
    bound = dict(log_posterior=log_posterior, adaptation=adaptation)  # init's and step's
    iteration = functools.partial(
        step,
        **bound,
        num_burn_in=config.num_burn_in,
        mh_during_burn_in=config.mh_during_burn_in,
        divergence_threshold=config.divergence_threshold,
        **trajectory,
    )
    return sampler(
        init=functools.partial(
            init, **bound, step_size=config.step_size, trajectory_len=config.trajectory_len
        ),
        step=iteration,
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
