"""Microcanonical Langevin Monte Carlo (MCLMC), unadjusted or Metropolis-adjusted, tuned per chain.

**Dynamics.** MCLMC (Robnik, De Luca, Silverstein & Seljak 2023) moves the position θ ∈ ℝᵈ with a
velocity u of unit norm (isokinetic, "microcanonical") along

    dθ/dt = Σ^{1/2} u,    du/dt = (I − u uᵀ) Σ^{1/2} ∇ log p_T(θ | D) / (d − 1),

whose stationary distribution has the posterior as its marginal in θ; Σ is a diagonal
preconditioner (BlackJAX's ``inverse_mass_matrix``), an estimate of the posterior's variances.
A step of size ε is BlackJAX's isokinetic McLachlan integrator
(``blackjax.mcmc.integrators.isokinetic_mclachlan``, a two-stage palindromic splitting whose
two position updates each evaluate the gradient: :data:`GRADIENTS_PER_STEP`) between two
half-steps of partial velocity refreshment, ``u ← (u + ν z)/‖u + ν z‖`` with ``z ~ N(0, I)``
and ``ν = √((exp(ε/L) − 1)/d)``, so that the velocity decorrelates over the distance L, the
decoherence length (``blackjax.mcmc.mclmc.build_kernel``, which takes the log density at call
time). The unadjusted sampler takes every step; the energy error of a step, ΔE (the change of
the kinetic term plus that of −log p), is what tunes ε.

With ``adjusted`` the sampler is MAMS (Robnik, Cohn-Gordon & Seljak 2025; the kernel of BlackJAX's
``adjusted_mclmc_dynamic``): every transition draws a fresh unit velocity, integrates the
deterministic dynamics for a uniformly random number of steps with mean L/ε (BlackJAX's
``rescale``; at most ``max_trajectory_steps``) and accepts the end with probability
``min(1, exp(−ΔE))``, so it samples the posterior exactly. ε then aims at
``target_accept_rate`` by dual averaging (Hoffman & Gelman 2014), and L is the trajectories'
mean integration time.

**Iterations.** One iteration is ``steps_per_iteration`` transitions (integrator steps of the
unadjusted sampler, trajectories of the adjusted one) in one ``lax.scan``; its end is the kept
draw, so the run driver's work per iteration (dispatch, log line, checkpoint) is paid once per
draw: ``steps_per_iteration`` is the thinning (MILE's 10 steps by default; one trajectory when
adjusted, :data:`DEFAULT_STEPS_PER_ITERATION`). The first ``num_burn_in``
iterations tune; all the tuning needs is in the chain's state, advanced iteration by iteration,
so a run resumes bit for bit at any point, and no statistic is shared between chains: chains
started from different members of an ensemble (``--init-checkpoint``) tune each to its own
mode.

**Modules.** This one is the method: its settings (:class:`Config`) and :func:`build`. The
chain's state and its start are :mod:`bnnkit.inference.mclmc_state`'s, a transition (with
what counts as a divergence) :mod:`bnnkit.inference.mclmc_moves`'s, an iteration
:mod:`bnnkit.inference.mclmc_kernel`'s, and the tuning's schedule of ε, Σ and L, part by
part, :mod:`bnnkit.inference.mclmc_tuning`'s.

**Bias of the unadjusted sampler.** Without the Metropolis correction the chain samples a
distribution near the posterior, not the posterior. A second-order integrator keeps a shadow
energy within O(ε²) of the true one, so the second moments are off by O(ε²), relatively, while
the energy error per step is O(ε³): for small v the relative bias of second moments grows as
v^{1/3}. At the defaults the step is no longer small (on a standard Gaussian the tuned ε is a
step about as long as the typical set is wide), so the bias is measured
(``benchmarks/mclmc_bias.py``; its figures are in ``docs/performance.md``, "Full-batch
samplers"): on Gaussians the variances come out too small by about the same factor in every
direction, as at a temperature below 1. With ``"fisher"`` (the default) the whitened target is
isotropic, so the error is even over the coordinates.

:data:`SECOND_MOMENT_BIAS` is the bound the tests hold the default to. For a network this is a
colder posterior of about that much; for sharper moments lower ``energy_var_end`` (the bias falls
with it) or use ``adjusted``, which is exact.

Example:
    >>> import jax, jax.numpy as jnp
    >>> def log_density(params, batch):  # a standard normal in 4-d
    ...     return -0.5 * jnp.sum(params["x"] ** 2)
    >>> method = build(log_density, Config(num_iterations=20, num_burn_in=10))
    >>> state = method.init(jax.random.PRNGKey(0), {"x": jnp.zeros(4)}, None)
    >>> step = jax.jit(method.step)
    >>> for i in range(20):
    ...     state, info = step(jax.random.PRNGKey(i), state, None)
    >>> int(info.num_leapfrog), bool(state.step_size > 0), bool(state.L > 0)
    (10, True, True)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import ClassVar

from bnnkit.errors import ConfigError
from bnnkit.inference.base import IterationSettings, Method, sampler
from bnnkit.inference.mclmc_kernel import step
from bnnkit.inference.mclmc_state import init
from bnnkit.inference.mclmc_tuning import Schedule, Tuner
from bnnkit.settings import Exclusive, check_choice, setting

#: Gradient evaluations of one isokinetic McLachlan step: its two position updates each
#: evaluate the log density and its gradient (the first momentum update reuses the last one).
GRADIENTS_PER_STEP = 2

#: Bound on the relative error of the unadjusted sampler's second moments at the defaults
#: (``energy_var_end`` 0.1, ``"fisher"``), measured by ``benchmarks/mclmc_bias.py``;
#: ``tests/inference/test_mclmc.py`` holds the default to it.
SECOND_MOMENT_BIAS = 0.3

POSITIVE = (Exclusive(0), None)
FRACTION = (0, 1)
#: Transitions per iteration (the thinning) unless told otherwise, unadjusted and adjusted:
#: MILE keeps every 10th integrator step; an adjusted trajectory is already L/ε steps (tens on
#: a network), and keeping one in ten of them kept too few draws
#: (``benchmarks/sampler_efficiency.py``, case (a)).
DEFAULT_STEPS_PER_ITERATION = {False: 10, True: 1}
#: The diagonal preconditioners (``Config.preconditioner``).
PRECONDITIONERS = ("fisher", "variance", "none")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(IterationSettings):
    """MCLMC: BlackJAX's microcanonical Langevin sampler (``--adjusted``: MAMS), tuned per chain.

    The position moves with a unit-norm velocity u, ``dθ/dt = Σ^{1/2} u``,
    ``du/dt = (I − uuᵀ) Σ^{1/2} ∇ log p / (d − 1)``, integrated by BlackJAX's isokinetic
    McLachlan scheme (2 gradients per step), the velocity partly refreshed every step so that
    it decorrelates over a distance L. Unadjusted by default: every step is taken, and ε is
    tuned so that the energy error per step has variance v·d, v decaying from
    ``--energy-var-start`` 0.5 to ``--energy-var-end`` 0.1 (MILE's schedule; BlackJAX's 5e-4 is
    far slower on networks). With ``--adjusted`` every trajectory of about L/ε steps is
    Metropolis-corrected (exact) and ε aims at ``--target-accept-rate``. An iteration is
    ``--steps-per-iteration`` transitions, its end the kept draw (10 steps; 1 trajectory with
    ``--adjusted``).

    Burn-in tunes, per chain and without a statistic shared between chains: ε throughout; a
    diagonal preconditioner Σ from the positions' and gradients' variances after the first
    0.75 + ``--variance-fraction``, L = √d then; ε re-tuned (``--readjust-fraction``); L from the
    autocorrelation of a random subset of ≤ 1,000 coordinates in the last
    ``--autocorrelation-fraction`` (L = 0.4 · integration time / ESS). Chains started from the
    members of an ensemble (``--init-checkpoint ENSEMBLE_RUN``: chain k from member k) tune
    each to its own mode.

    The unadjusted sampler is biased: on Gaussians its variances come out too small by about
    the same factor in every direction, within ``SECOND_MOMENT_BIAS`` (0.3, relative) at the
    defaults (measured by ``benchmarks/mclmc_bias.py``; lower ``--energy-var-end`` or use
    ``--adjusted`` for less). See :mod:`bnnkit.inference.mclmc` for the details.

    Raises:
        ConfigError: a value out of its range, an unknown preconditioner, or tuning fractions
            that add up to more than 1.
    """

    METHOD: ClassVar[str] = "mclmc"

    num_iterations: int = setting(
        2000,
        help="iterations, burn-in included; each is --steps-per-iteration transitions",
        resumable=True,
        bounds=(1, None),
    )
    num_burn_in: int = setting(
        1000,
        aliases=("--num-burn-in-iterations",),
        help="iterations that tune ε, L and the preconditioner (their draws are discarded)",
        bounds=(0, None),
    )
    adjusted: bool = setting(
        False,
        help="Metropolis-adjust every trajectory (MAMS): exact, ε tuned to --target-accept-rate",
    )
    steps_per_iteration: int | None = setting(
        None,
        help="transitions per iteration, whose end is the kept draw (the thinning): "
        "integrator steps unadjusted (default 10, MILE's), trajectories of about L/ε "
        "steps with --adjusted (default 1)",
        bounds=(1, None),
    )
    step_size: float | None = setting(
        None, help="initial step size ε (then tuned); default 0.25·√d, BlackJAX's", bounds=POSITIVE
    )
    energy_var_start: float = setting(
        0.5,
        help="desired energy variance per dimension Var[ΔE]/d at the start of tuning (unadjusted)",
        bounds=POSITIVE,
    )
    energy_var_end: float = setting(
        0.1,
        help="desired energy variance per dimension at the end "
        "of its linear decay and after (unadjusted; "
        "BlackJAX's default is 5e-4)",
        bounds=POSITIVE,
    )
    variance_fraction: float = setting(
        0.1,
        help="fraction of tuning that gathers the positions' variance (preconditioner and L)",
        bounds=FRACTION,
    )
    readjust_fraction: float = setting(
        0.05,
        help="fraction of tuning that re-tunes ε after the preconditioner is set",
        bounds=FRACTION,
    )
    autocorrelation_fraction: float = setting(
        0.1, help="last fraction of tuning, whose autocorrelation sets L", bounds=FRACTION
    )
    preconditioner: str = setting(
        "fisher",
        choices=PRECONDITIONERS,
        help="the diagonal M⁻¹ set at the end of the variance part: fisher (√(Var[θ]/Var[∇ "
        "log p]) of the positions and gradients, nutpie's, as HMC's --mass-estimator), "
        "variance (the positions' variance, BlackJAX's) or none (the identity)",
    )
    l_factor: float = setting(
        0.4,
        help="L = l_factor · integration time / ESS at the end of tuning (BlackJAX's Lfactor)",
        bounds=POSITIVE,
    )
    trust_in_estimate: float = setting(
        1.5,
        help="width (in log ε⁶) of the weight of a step's step size estimate (unadjusted)",
        bounds=POSITIVE,
    )
    num_effective_samples: float = setting(
        150.0, help="memory of the step size predictor in steps (unadjusted)", bounds=(1, None)
    )
    autocorrelation_coordinates: int = setting(
        1000,
        help="at most this many coordinates (a fixed random subset) estimate L",
        bounds=(1, None),
    )
    autocorrelation_draws: int = setting(
        500, help="at most this many evenly spaced draws of them estimate L", bounds=(2, None)
    )
    energy_var_max_ratio: float = setting(
        1000.0,
        help="an unadjusted step with ΔE² above this many times d·v is cut off (BlackJAX's "
        "desired_energy_var_max_ratio): taken again shorter, or undone (a divergence)",
        bounds=POSITIVE,
    )
    step_retries: int = setting(
        4,
        help="an unadjusted step cut off is taken again from the same point with ε/2, ε/4, ... "
        "up to this many times before it is undone (0: undone at once, as BlackJAX does)",
        bounds=(0, None),
    )
    target_accept_rate: float = setting(
        0.9, help="acceptance rate of --adjusted, in (0, 1)", bounds=(Exclusive(0), Exclusive(1))
    )
    divergence_threshold: float = setting(
        1000.0, help="energy error (nats) of a divergent adjusted trajectory", bounds=POSITIVE
    )
    max_trajectory_steps: int = setting(
        1024, help="most integrator steps of an adjusted trajectory", bounds=(1, None)
    )
    tuning_trajectory_steps: float = setting(
        2.0,
        help="mean steps of an adjusted trajectory before L is estimated (BlackJAX's MAMS "
        "tuner keeps 2 throughout)",
        bounds=(1, None),
    )

    def __post_init__(self) -> None:
        if self.steps_per_iteration is None:
            object.__setattr__(
                self, "steps_per_iteration", DEFAULT_STEPS_PER_ITERATION[bool(self.adjusted)]
            )
        super().__post_init__()  # every number within its bounds
        check_choice(type(self), "preconditioner", self.preconditioner, PRECONDITIONERS)
        total = self.variance_fraction + self.readjust_fraction + self.autocorrelation_fraction
        if total > 1:
            raise ConfigError(
                f"--variance-fraction {self.variance_fraction} + --readjust-fraction "
                f"{self.readjust_fraction} + --autocorrelation-fraction "
                f"{self.autocorrelation_fraction} = {total:g}; allowed: at most 1"
            )

    @property
    def label(self) -> str:
        return "MCLMC-adjusted" if self.adjusted else "MCLMC"


def schedule(config: Config) -> Schedule:
    """The tuning's schedule under ``config`` (:class:`~bnnkit.inference.mclmc_tuning.Schedule`).

    Example:
        >>> schedule(Config(num_iterations=300, num_burn_in=200, autocorrelation_draws=100))[:7]
        (10, 200, 150, 170, 180, 100, 2)
    """
    burn_in, steps = config.num_burn_in, config.steps_per_iteration
    autocorrelation = round(config.autocorrelation_fraction * burn_in)
    readjust = round(config.readjust_fraction * burn_in)
    variance = min(round(config.variance_fraction * burn_in), burn_in - autocorrelation - readjust)
    variance_end = burn_in - autocorrelation - readjust
    start = burn_in - autocorrelation
    transitions = autocorrelation * steps
    stride = max(1, math.ceil(transitions / config.autocorrelation_draws))
    rows = transitions // stride
    return Schedule(
        steps,
        burn_in,
        variance_end - variance,
        variance_end,
        start,
        rows if rows >= 2 else 0,
        stride,
        config.energy_var_start,
        config.energy_var_end,
    )


def tuner(config: Config) -> Tuner:
    """The tuning's constants under ``config`` (:class:`~bnnkit.inference.mclmc_tuning.Tuner`)."""
    n = config.num_effective_samples
    return Tuner(
        config.adjusted,
        config.preconditioner,
        config.l_factor,
        config.trust_in_estimate,
        (n - 1.0) / (n + 1.0),
        config.energy_var_max_ratio,
        config.step_retries,
        config.target_accept_rate,
        config.divergence_threshold,
        config.max_trajectory_steps,
        config.tuning_trajectory_steps,
    )


def build(log_posterior: Callable, config: Config) -> Method:
    """MCLMC on ``log_posterior(params, batch)``, tuned per chain during burn-in.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings: the tuning's schedule (:func:`schedule`) and constants
            (:func:`tuner`), and the first step size.

    Returns:
        A :func:`~bnnkit.inference.base.sampler`: its ``posterior`` is the kept positions as
        :class:`~bnnkit.posterior.Samples`.
    """
    bound = dict(log_posterior=log_posterior, schedule=schedule(config))  # init's and step's
    return sampler(
        init=functools.partial(
            init,
            **bound,
            step_size=config.step_size,
            coordinates=config.autocorrelation_coordinates,
        ),
        step=functools.partial(step, **bound, tuner=tuner(config)),
    )
