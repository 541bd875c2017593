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

**Tuning schedule**, in parts of the ``num_burn_in`` iterations (each fraction a setting):

1. ε (the rest of the tuning, 0.75 with the defaults). Unadjusted: after every step the
   predictor of BlackJAX's ``make_L_step_size_adaptation``, as MILE uses it: with
   ``ξ = ΔE² / (d v)``, running averages of ``ξ/ε⁶`` weighted by
   ``w = exp(−½ (log ξ / (6 · trust_in_estimate))²)`` and decayed by ``(N − 1)/(N + 1)`` per
   step (N = ``num_effective_samples``) give ``ε = (Σ w ξ/ε⁶ / Σ w)^(−1/6)``, since the
   energy variance grows as ε⁶; ε stays below 0.8 times the last step size whose energy was
   not finite. The desired energy variance per dimension v decays linearly from
   ``energy_var_start`` 0.5 to ``energy_var_end`` 0.1 over parts 1 and 2 and stays there:
   MILE's schedule (Sommer et al., ICLR 2025), which a network's model average tolerates.
   BlackJAX's default v = 5·10⁻⁴ is far stricter: its step sizes are several times smaller
   and chains move that much slower per gradient, for a bias (below) the model average of a
   network does not notice. Adjusted: dual averaging of ε, and trajectories of
   ``tuning_trajectory_steps`` steps on average (BlackJAX's MAMS tuner's 2) while L is unknown.
2. ``variance_fraction`` (0.1): ε goes on tuning while the positions' (and gradients')
   variances are gathered (Welford, each step weighted by its ε, as BlackJAX does). At the end
   Σ is set (``preconditioner``) and L = √d, the radius of a standard Gaussian's typical set in
   the whitened units; without a preconditioner L = √(Σᵢ Var θᵢ). The step size tuning restarts
   (the predictor, or dual averaging centred on the current ε), ε being in new units.
   ``"fisher"`` (the default) sets Σᵢ = √(Var θᵢ / Var ∂ᵢ log p) (nutpie's estimator, HMC's
   ``--mass-estimator`` default), ``"variance"`` Σᵢ = Var θᵢ (BlackJAX's). On a Gaussian the
   first is exact whatever the chain has explored; the second underestimates the directions a
   short window has not crossed and overestimates the stiffest (on the 100-d Gaussian of the
   tests, σ over 10⁻²..10², the coordinates' second moments then came out between 13 % and
   49 % low, against an even 24 % to 29 % with ``"fisher"``; table below).
3. ``readjust_fraction`` (0.05): ε re-tunes with the preconditioner (BlackJAX re-runs its
   step size part for a third of part 2).
4. ``autocorrelation_fraction`` (0.1): a fixed random subset of at most
   ``autocorrelation_coordinates`` coordinates is recorded, at most ``autocorrelation_draws``
   evenly spaced rows, so memory stays bounded on a large network; at the end
   ``L = l_factor · T · mean(1/ESSᵢ)`` with T the part's integration time and ESSᵢ a recorded
   coordinate's effective sample size (BlackJAX's ``make_adaptation_L``,
   ``l_factor · ε · τ_int`` in steps, l_factor 0.4). ε tunes here too and freezes at the end of
   the tuning (the adjusted one at its dual average).

A step whose energy is not finite is reverted and its velocity redrawn (BlackJAX's
``handle_nans``); an unadjusted step with ``ΔE² > energy_var_max_ratio · d · v`` is cut off the
same way (``handle_high_energy``); an adjusted trajectory whose energy error exceeds
``divergence_threshold`` nats is rejected. Each is a divergence, logged per iteration
(``divergent``: whether one happened; ``num_divergent``: how many).

**Bias of the unadjusted sampler.** Without the Metropolis correction the chain samples a
distribution near the posterior, not the posterior. A second-order integrator keeps a shadow
energy within O(ε²) of the true one, so the second moments are off by O(ε²), relatively, while
the energy error per step is O(ε³): for small v the relative bias of second moments grows as
v^{1/3}. At the defaults the step is no longer small (on a 100-d standard Gaussian the tuned ε
is about 2√d, a step as long as the typical set is wide, and it barely grows between v = 0.01
and 0.1), so the figures are measured (``benchmarks/mclmc_bias.py``, 8 chains of 1,000
tuning and 2,000 kept iterations per seed): on Gaussians the variances come out too small by
about the same factor in every direction, as at a temperature below 1. Relative error
``E[θᵢ²]/σᵢ² − 1`` of the kept draws, d = 100 (``spread``: σ log-spaced over 10⁻²..10²;
``isotropic``: σ = 1):

    ===========  ===========  =========  =====  ===========================  ==============
    target       Σ            v          seeds  mean over coordinates        worst coordinate
    ===========  ===========  =========  =====  ===========================  ==============
    spread       fisher       0.1        1      −0.27                        −0.29
    spread       variance     0.1        5      −0.19 (seeds −0.21..−0.17)   −0.49
    spread       variance     0.01       2      −0.07                        −0.65
    spread       variance     5·10⁻⁴     2      −0.02                        −0.07
    isotropic    variance     0.1        2      −0.07 (seeds −0.11..−0.03)   −0.15
    isotropic    variance     0.01       2      −0.08                        −0.11
    isotropic    variance     5·10⁻⁴     2      −0.02                        −0.05
    ===========  ===========  =========  =====  ===========================  ==============

With ``"fisher"`` (the default) the whitened target is isotropic, so the error is even over
the coordinates; the tuned ε there is about 21 ≈ 2√d, as BlackJAX's own
``mclmc_find_L_and_step_size`` gives at v = 0.1 (21.1 on three seeds), and the mean energy
error per dimension of a chain after tuning then varies over two orders of magnitude
(0.003..1.1 over 8 chains; BlackJAX's tuned kernel gives 0.01..0.02 with its shorter L).

:data:`SECOND_MOMENT_BIAS` is the bound the tests hold the default to. For a network this is a
colder posterior of about that much; for sharper moments lower ``energy_var_end`` (the bias falls
to about 2 % at BlackJAX's 5·10⁻⁴) or use ``adjusted``, which is exact.

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
from typing import ClassVar, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.metric_estimators import fisher_score_diagonal_from_moments
from blackjax.adaptation.step_size import DualAveragingAdaptationState, dual_averaging_adaptation
from blackjax.diagnostics import effective_sample_size
from blackjax.mcmc.adjusted_mclmc import adjusted_mclmc_proposal, rescale
from blackjax.mcmc.integrators import (
    IntegratorState,
    isokinetic_mclachlan,
    with_isokinetic_maruyama,
)
from blackjax.mcmc.proposal import static_binomial_sampling
from blackjax.util import generate_unit_vector
from jax.flatten_util import ravel_pytree

from bnnkit.errors import ConfigError
from bnnkit.inference.adaptation import any_chain
from bnnkit.inference.base import IterationSettings, Method
from bnnkit.posterior import Samples
from bnnkit.settings import Exclusive, check_choice, setting
from bnnkit.types import Batch, Key, Params

#: Gradient evaluations of one isokinetic McLachlan step: its two position updates each
#: evaluate the log density and its gradient (the first momentum update reuses the last one).
GRADIENTS_PER_STEP = 2

#: Bound on the relative error of the unadjusted sampler's second moments at the defaults
#: (``energy_var_end`` 0.1, ``"fisher"``): measured −0.24..−0.29 over the coordinates of the
#: tests' 100-d Gaussian (module docstring); ``tests/inference/test_mclmc.py`` holds it to it.
SECOND_MOMENT_BIAS = 0.3

POSITIVE = (Exclusive(0), None)
FRACTION = (0, 1)
#: Transitions per iteration (the thinning) unless told otherwise, unadjusted and adjusted:
#: MILE keeps every 10th integrator step; an adjusted trajectory is already L/ε steps (tens on
#: a network), and keeping one in ten of them kept 28 draws per chain of 40,000 gradients on
#: yacht_0 (benchmarks/sampler_efficiency.py, case (a) at --budget-scale 0.1).
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

    The unadjusted sampler is biased: on Gaussians at v = 0.1 its variances come out 20 % to
    30 % too small in every direction (``SECOND_MOMENT_BIAS``, measured; lower ``--energy-var-end``
    or use ``--adjusted`` for less). See :mod:`bnnkit.inference.mclmc` for the details.

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
        help="an unadjusted step with ΔE² above this many times d·v is cut off (a "
        "divergence; BlackJAX's desired_energy_var_max_ratio)",
        bounds=POSITIVE,
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


class Schedule(NamedTuple):
    """The tuning's parts in iterations, and what each transition records (static).

    Attributes:
        steps: transitions per iteration.
        num_burn_in: iterations of tuning.
        variance_start, variance_end: iterations ``[variance_start, variance_end)`` gather the
            positions' variance.
        autocorrelation_start: iterations ``[autocorrelation_start, num_burn_in)`` record the
            coordinates that set L.
        rows, stride: the record's rows, one every ``stride`` transitions of that part.
        energy_var_start, energy_var_end: v's linear decay over ``[0, variance_end)``.
    """

    steps: int
    num_burn_in: int
    variance_start: int
    variance_end: int
    autocorrelation_start: int
    rows: int
    stride: int
    energy_var_start: float
    energy_var_end: float

    @classmethod
    def of(cls, config: Config) -> Schedule:
        """The schedule of ``config``.

        Example:
            >>> Schedule.of(Config(num_iterations=300, num_burn_in=200,
            ...                    autocorrelation_draws=100))[:7]
            (10, 200, 150, 170, 180, 100, 2)
        """
        burn_in, steps = config.num_burn_in, config.steps_per_iteration
        autocorrelation = round(config.autocorrelation_fraction * burn_in)
        readjust = round(config.readjust_fraction * burn_in)
        variance = min(
            round(config.variance_fraction * burn_in), burn_in - autocorrelation - readjust
        )
        variance_end = burn_in - autocorrelation - readjust
        start = burn_in - autocorrelation
        transitions = autocorrelation * steps
        stride = max(1, math.ceil(transitions / config.autocorrelation_draws))
        rows = transitions // stride
        return cls(
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


class Tuner(NamedTuple):
    """The tuning's constants (static; see :class:`Config`)."""

    adjusted: bool
    preconditioner: str
    l_factor: float
    trust_in_estimate: float
    decay: float
    energy_var_max_ratio: float
    target_accept_rate: float
    divergence_threshold: float
    max_trajectory_steps: int
    tuning_trajectory_steps: float

    @classmethod
    def of(cls, config: Config) -> Tuner:
        n = config.num_effective_samples
        return cls(
            config.adjusted,
            config.preconditioner,
            config.l_factor,
            config.trust_in_estimate,
            (n - 1.0) / (n + 1.0),
            config.energy_var_max_ratio,
            config.target_accept_rate,
            config.divergence_threshold,
            config.max_trajectory_steps,
            config.tuning_trajectory_steps,
        )


class MCLMCTuning(NamedTuple):
    """A chain's tuning state (frozen after burn-in).

    Stored runs are read back by these fields' names and order: keep both.

    Attributes:
        log_weight, log_estimate: the unadjusted step size predictor, ``log Σ w`` and
            ``log Σ w ξ/ε⁶``.
        step_size_max: ε's cap from the last non-finite energy (unadjusted).
        averaging: dual averaging of log ε (adjusted).
        variance_weight, mean, m2: the weighted Welford state of the flattened positions;
            ``gradient_mean``, ``gradient_m2`` that of their gradients.
        subset: the coordinates whose autocorrelation sets L.
        trace: their recorded values, ``(rows, coordinates)``.
        window_time: the integration time recorded so far.
    """

    log_weight: jax.Array
    log_estimate: jax.Array
    step_size_max: jax.Array
    averaging: DualAveragingAdaptationState
    variance_weight: jax.Array
    mean: jax.Array
    m2: jax.Array
    gradient_mean: jax.Array
    gradient_m2: jax.Array
    subset: jax.Array
    trace: jax.Array
    window_time: jax.Array


class MCLMCState(NamedTuple):
    """What the next MCLMC iteration needs.

    Stored runs are read back by these fields' names and order: keep both.

    Attributes:
        position: current parameters.
        momentum: the unit velocity (of the unadjusted sampler; the adjusted one draws a fresh
            one per transition).
        logdensity: tempered log posterior at ``position``; ``logdensity_grad`` its gradient.
        step_size: ε of the next transition.
        L: the decoherence length (unadjusted) or trajectory's integration time (adjusted).
        inverse_mass_matrix: the diagonal preconditioner Σ (flattened; BlackJAX's name).
        tuning: the tuning's state.
        iteration: iterations done.
    """

    position: Params
    momentum: Params
    logdensity: jax.Array
    logdensity_grad: Params
    step_size: jax.Array
    L: jax.Array
    inverse_mass_matrix: jax.Array
    tuning: MCLMCTuning
    iteration: jax.Array


class MCLMCInfo(NamedTuple):
    """Diagnostics of one iteration (the run log's keys).

    Attributes:
        acceptance_rate: mean Metropolis acceptance probability of the iteration's trajectories
            (1 for the unadjusted sampler, which takes every step).
        divergent: whether a transition of the iteration diverged.
        num_divergent: how many did.
        num_leapfrog: integrator steps of the iteration (the key HMC's log uses; each costs
            :data:`GRADIENTS_PER_STEP` gradient evaluations).
        step_size: ε the iteration started with.
        L: L the iteration started with.
        energy_var: mean of ΔE²/d over the iteration's transitions that did not diverge (per
            step unadjusted, where ε is tuned on it; per trajectory adjusted).
        log_posterior: tempered log posterior at the iteration's end.
    """

    acceptance_rate: jax.Array
    divergent: jax.Array
    num_divergent: jax.Array
    num_leapfrog: jax.Array
    step_size: jax.Array
    L: jax.Array
    energy_var: jax.Array
    log_posterior: jax.Array


def init(
    key: Key,
    params: Params,
    batch: Batch,
    *,
    log_posterior: Callable,
    schedule: Schedule,
    step_size: float | None = None,
    coordinates: int = 1000,
) -> MCLMCState:
    """A chain's state at ``params``: a random unit velocity, the log posterior and its
    gradient there, ε (given, or 0.25·√d, BlackJAX's), L = √d, the identity preconditioner,
    and the random subset of coordinates whose autocorrelation will set L.

    Raises:
        ConfigError: fewer than 2 parameters (the velocity lives on a sphere of dimension d − 1).
    """
    flat, _ = ravel_pytree(params)
    dim, dtype = flat.size, flat.dtype
    if dim < 2:
        raise ConfigError(
            f"MCLMC needs at least 2 parameters (its velocity is a unit vector "
            f"of dimension d - 1); this model has {dim}"
        )
    key_momentum, key_subset = jax.random.split(key)
    logdensity, grad = jax.value_and_grad(log_posterior)(params, batch)
    eps = jnp.asarray(0.25 * math.sqrt(dim) if step_size is None else step_size, dtype)
    size = min(dim, coordinates)
    subset = jnp.sort(jax.random.choice(key_subset, dim, (size,), replace=False)).astype(jnp.int32)
    tuning = MCLMCTuning(
        log_weight=jnp.asarray(-jnp.inf, dtype),
        log_estimate=jnp.asarray(-jnp.inf, dtype),
        step_size_max=jnp.asarray(jnp.inf, dtype),
        averaging=_averaging(eps),
        variance_weight=jnp.zeros((), dtype),
        mean=jnp.zeros(dim, dtype),
        m2=jnp.zeros(dim, dtype),
        gradient_mean=jnp.zeros(dim, dtype),
        gradient_m2=jnp.zeros(dim, dtype),
        subset=subset,
        trace=jnp.zeros((schedule.rows, size), dtype),
        window_time=jnp.zeros((), dtype),
    )
    return MCLMCState(
        position=params,
        momentum=generate_unit_vector(key_momentum, params),
        logdensity=logdensity,
        logdensity_grad=grad,
        step_size=eps,
        L=jnp.asarray(math.sqrt(dim), dtype),
        inverse_mass_matrix=jnp.ones(dim, dtype),
        tuning=tuning,
        iteration=jnp.zeros((), jnp.int32),
    )


def _averaging(step_size: jax.Array) -> DualAveragingAdaptationState:
    """Dual averaging of log ε centred on ε itself (not Stan's 10ε, which throws a chain into
    divergences; as :class:`bnnkit.inference.adaptation.Windows`)."""
    da_init, _, _ = dual_averaging_adaptation(target=0.5)  # the target is not in the state
    dtype = jnp.result_type(step_size)
    state = da_init(step_size)._replace(mu=jnp.log(step_size))
    return jax.tree.map(lambda v: jnp.asarray(v, dtype), state)


def energy_var_target(step: jax.Array, schedule: Schedule) -> jax.Array:
    """The desired energy variance per dimension v at transition ``step`` (counted from 0):
    linear from ``energy_var_start`` to ``energy_var_end`` over the first ``variance_end``
    iterations, then ``energy_var_end``.

    Example:
        >>> schedule = Schedule.of(Config(num_iterations=300, num_burn_in=200))
        >>> [round(float(energy_var_target(jnp.int32(s), schedule)), 3) for s in (0, 850, 1700)]
        [0.5, 0.3, 0.1]
    """
    span = max(schedule.variance_end * schedule.steps, 1)
    progress = jnp.minimum(step / span, 1.0)
    return (
        schedule.energy_var_start + (schedule.energy_var_end - schedule.energy_var_start) * progress
    )


def predict_step_size(
    tuning: MCLMCTuning,
    step_size: jax.Array,
    energy_change: jax.Array,
    finite: jax.Array,
    dim: int,
    energy_var: jax.Array,
    tuner: Tuner,
) -> tuple[MCLMCTuning, jax.Array]:
    """BlackJAX's step size predictor (``make_L_step_size_adaptation``) after one step, in
    log space so that ε⁶ cannot underflow: the new state and the next ε.

    Example:
        >>> tuner = Tuner.of(Config())
        >>> tuning = MCLMCTuning(*[jnp.asarray(v) for v in (-jnp.inf, -jnp.inf, jnp.inf)],
        ...                      *[None] * 9)
        >>> # ΔE² = 4·d·v: the energy error is 4 times the target's variance, ε shrinks by 4^(1/6)
        >>> _, eps = predict_step_size(tuning, jnp.float32(1.0), jnp.float32(2.0), True, 10,
        ...                            jnp.float32(0.1), tuner)
        >>> round(float(eps), 4), round(4 ** (-1 / 6), 4)
        (0.7937, 0.7937)
    """
    dtype = jnp.result_type(step_size)
    change = jnp.where(finite, energy_change, 0.0)
    xi = jnp.square(change) / (dim * energy_var) + 1e-8
    # From a sharp mode (naval's members) a finite ΔE of 1e20 squares past float32's range,
    # and the weight 0 times ξ = ∞ made ε NaN; log ξ is then taken in log space. Where ξ is
    # finite the direct form stays, so that runs keep their bits.
    log_xi = jnp.where(
        jnp.isfinite(xi),
        jnp.log(xi),
        jnp.logaddexp(2.0 * jnp.log(jnp.abs(change)) - jnp.log(dim * energy_var), math.log(1e-8)),
    )
    log_w = -0.5 * jnp.square(log_xi / (6.0 * tuner.trust_in_estimate))
    log_decay = math.log(tuner.decay)
    log_weight = jnp.logaddexp(log_decay + tuning.log_weight, log_w)
    log_estimate = jnp.logaddexp(
        log_decay + tuning.log_estimate, log_w + log_xi - 6.0 * jnp.log(step_size)
    )
    # A non-finite energy caps ε below the step size that produced it (BlackJAX: 0.8).
    step_size_max = jnp.where(finite, tuning.step_size_max, 0.8 * step_size)
    eps = jnp.minimum(jnp.exp(-(log_estimate - log_weight) / 6.0), step_size_max)
    tuning = tuning._replace(
        log_weight=log_weight.astype(dtype),
        log_estimate=log_estimate.astype(dtype),
        step_size_max=step_size_max.astype(dtype),
    )
    return tuning, eps.astype(dtype)


def _welford(
    tuning: MCLMCTuning, x: jax.Array, gradient: jax.Array | None, weight: jax.Array
) -> MCLMCTuning:
    """The weighted Welford update of the positions' (and, given, the gradients') mean and
    sum of squared deviations."""
    total = tuning.variance_weight + weight
    share = jnp.where(total > 0, weight / jnp.where(total > 0, total, 1.0), 0.0)

    def update(mean, m2, value):
        delta = value - mean
        mean = mean + share * delta
        return mean, m2 + weight * delta * (value - mean)

    mean, m2 = update(tuning.mean, tuning.m2, x)
    tuning = tuning._replace(variance_weight=total, mean=mean, m2=m2)
    if gradient is None:
        return tuning
    mean, m2 = update(tuning.gradient_mean, tuning.gradient_m2, gradient)
    return tuning._replace(gradient_mean=mean, gradient_m2=m2)


def _record(
    tuning: MCLMCTuning,
    recorded: jax.Array,
    iteration: jax.Array,
    in_window: jax.Array,
    schedule: Schedule,
) -> MCLMCTuning:
    """Write the iteration's recorded coordinates (``recorded``: one row per transition) into
    the trace, at every ``stride``-th transition of the autocorrelation part.

    One scatter per iteration, outside the transitions' ``lax.scan``: a trace in the scan's
    carry is rows × coordinates that the loop copies at every transition, where the scan's
    outputs cost a row each.
    """
    transition = (iteration - schedule.autocorrelation_start) * schedule.steps + jnp.arange(
        schedule.steps
    )
    due = jnp.logical_and(in_window, (transition + 1) % schedule.stride == 0)
    # A transition that is not due writes nowhere: its row is past the end, and dropped.
    row = jnp.where(due, (transition + 1) // schedule.stride - 1, schedule.rows)
    return tuning._replace(trace=tuning.trace.at[row].set(recorded, mode="drop"))


def _binomial_with_energy(rng_key: Key, log_p_accept: jax.Array, proposal, new_proposal):
    """BlackJAX's Metropolis choice, with ``log_p_accept`` (−ΔE) as its extra information."""
    sampled, (do_accept, p_accept, _) = static_binomial_sampling(
        rng_key, log_p_accept, proposal, new_proposal
    )
    return sampled, (do_accept, p_accept, log_p_accept)


def adjusted_transition(
    rng_key: Key,
    state: IntegratorState,
    logdensity_fn: Callable,
    step_size: jax.Array,
    L: jax.Array,
    inverse_mass_matrix: jax.Array,
    *,
    max_steps: int,
    divergence_threshold: float,
):
    """One MAMS transition (``blackjax.mcmc.adjusted_mclmc_dynamic``'s kernel): a fresh unit
    velocity, a uniformly random number of isokinetic McLachlan steps with mean L/ε (BlackJAX's
    ``rescale``; 1 to ``max_steps``), and the Metropolis choice.

    Returns:
        ``(state, info, log_p_accept)``: the next state, BlackJAX's ``HMCInfo`` and −ΔE
        (−inf for a non-finite energy).
    """
    key_steps, key_momentum, key_integrator = jax.random.split(rng_key, 3)
    mean_steps = jnp.clip(L / step_size, 1.0, max_steps)
    num_steps = jnp.clip(
        jnp.ceil(jax.random.uniform(key_steps) * rescale(mean_steps)), 1, max_steps
    ).astype(jnp.int32)
    momentum = generate_unit_vector(key_momentum, state.position)
    proposal = adjusted_mclmc_proposal(
        integrator=with_isokinetic_maruyama(
            isokinetic_mclachlan(
                logdensity_fn=logdensity_fn, inverse_mass_matrix=inverse_mass_matrix
            )
        ),
        step_size=step_size,
        L_proposal_factor=jnp.inf,
        num_integration_steps=num_steps,
        divergence_threshold=divergence_threshold,
        sample_proposal=_binomial_with_energy,
    )
    return proposal(key_integrator, state._replace(momentum=momentum))


class _Sums(NamedTuple):
    """What an iteration adds up over its transitions for its info."""

    accept: jax.Array
    divergent: jax.Array
    steps: jax.Array
    energy: jax.Array
    finite: jax.Array


def _transition(
    carry,
    inputs,
    *,
    logdensity_fn: Callable,
    schedule: Schedule,
    tuner: Tuner,
    dim: int,
    in_phase: dict,
):
    """One transition of an iteration, with the tuning it does in the current part."""
    state, sums = carry
    key, index = inputs
    step = state.iteration * schedule.steps + index  # transitions since the start
    eps, L, tuning = state.step_size, state.L, state.tuning
    current = IntegratorState(
        state.position, state.momentum, state.logdensity, state.logdensity_grad
    )
    if tuner.adjusted:
        new, info, log_p = adjusted_transition(
            key,
            current,
            logdensity_fn,
            eps,
            L,
            state.inverse_mass_matrix,
            max_steps=tuner.max_trajectory_steps,
            divergence_threshold=tuner.divergence_threshold,
        )
        finite = jnp.isfinite(log_p)
        change = jnp.where(finite, -log_p, 0.0)
        divergent = info.is_divergent
        accept = info.acceptance_rate
        num_steps = info.num_integration_steps
        _, da_update, _ = dual_averaging_adaptation(target=tuner.target_accept_rate)
        averaging = da_update(tuning.averaging, accept)
        averaging = jax.tree.map(lambda n, o: jnp.asarray(n, o.dtype), averaging, tuning.averaging)
        tuned = tuning._replace(averaging=averaging)
        next_eps = jnp.exp(averaging.log_step_size).astype(eps.dtype)
        # Until the positions' variance gives L, trajectories follow ε.
        next_L = jnp.where(
            state.iteration < schedule.variance_end, tuner.tuning_trajectory_steps * next_eps, L
        )
        weight_ok = jnp.ones((), bool)  # a rejected trajectory's start is a draw too
    else:
        energy_var = energy_var_target(step, schedule)
        key_kernel, key_cut = jax.random.split(key)
        kernel = blackjax.mcmc.mclmc.build_kernel(integrator=isokinetic_mclachlan)
        new, info = kernel(key_kernel, current, logdensity_fn, state.inverse_mass_matrix, L, eps)
        finite = info.nonans
        cutoff = jnp.sqrt(tuner.energy_var_max_ratio * dim * energy_var)
        cut = jnp.abs(info.energy_change) > cutoff  # False for a non-finite energy (zeroed)
        new, _ = blackjax.mcmc.mclmc.handle_high_energy(current, new, info, key_cut, cutoff)
        change = jnp.where(finite, info.energy_change, 0.0)
        divergent = jnp.logical_or(jnp.logical_not(finite), cut)
        accept = jnp.ones((), eps.dtype)
        num_steps = jnp.ones((), jnp.int32)
        tuned, next_eps = predict_step_size(
            tuning, eps, info.energy_change, finite, dim, energy_var, tuner
        )
        next_L = L
        weight_ok = jnp.logical_not(divergent)

    tuning_now = state.iteration < schedule.num_burn_in
    tuning = jax.tree.map(lambda n, o: jnp.where(tuning_now, n, o), tuned, tuning)
    eps_out = jnp.where(tuning_now, next_eps, eps)
    L_out = jnp.where(tuning_now, next_L, L)
    x = ravel_pytree(new.position)[0]
    weight = jnp.where(jnp.logical_and(in_phase["variance"], weight_ok), eps, 0.0)
    gradient = ravel_pytree(new.logdensity_grad)[0] if tuner.preconditioner == "fisher" else None
    tuning = _welford(tuning, x, gradient, weight.astype(eps.dtype))
    if schedule.rows:
        tuning = tuning._replace(
            window_time=tuning.window_time + jnp.where(in_phase["autocorrelation"], eps, 0)
        )

    state = state._replace(
        position=new.position,
        momentum=new.momentum,
        logdensity=new.logdensity,
        logdensity_grad=new.logdensity_grad,
        step_size=eps_out,
        L=L_out,
        tuning=tuning,
    )
    counted = jnp.logical_and(finite, jnp.logical_not(divergent))
    sums = _Sums(
        sums.accept + accept,
        sums.divergent + divergent.astype(jnp.int32),
        sums.steps + num_steps,
        sums.energy + jnp.where(counted, jnp.square(change) / dim, 0.0),
        sums.finite + counted.astype(jnp.int32),
    )
    # The coordinates that set L, recorded after the scan (:func:`_record`).
    return (state, sums), (x[tuning.subset] if schedule.rows else None)


def _set_preconditioner(state: MCLMCState, dim: int, tuner: Tuner) -> MCLMCState:
    """At the end of the variance part: Σ (``tuner.preconditioner``) and L from the
    positions' variance, and the step size tuning restarted in the new units."""
    tuning = state.tuning
    weight = jnp.where(tuning.variance_weight > 0, tuning.variance_weight, 1.0)
    variance = tuning.m2 / weight
    if tuner.preconditioner == "fisher":
        # √(Var[θ]/Var[∇ log p]): exact for a Gaussian whatever the chain has explored.
        variance = fisher_score_diagonal_from_moments(variance, tuning.gradient_m2 / weight)
    valid = jnp.logical_and(jnp.isfinite(variance), variance > 0)
    usable = jnp.logical_and(tuning.variance_weight > 0, jnp.any(valid))
    # A coordinate without a usable variance takes the mean of the others.
    fallback = jnp.sum(jnp.where(valid, variance, 0.0)) / jnp.maximum(jnp.sum(valid), 1)
    variance = jnp.where(valid, variance, fallback)
    if tuner.preconditioner == "none":
        inverse_mass = state.inverse_mass_matrix
        L = jnp.where(usable, jnp.sqrt(jnp.sum(variance)), state.L)
    else:
        inverse_mass = jnp.where(usable, variance, state.inverse_mass_matrix)
        L = jnp.where(usable, jnp.asarray(math.sqrt(dim), variance.dtype), state.L)
        dtype = state.step_size.dtype
        tuning = tuning._replace(
            log_weight=jnp.asarray(-jnp.inf, dtype),
            log_estimate=jnp.asarray(-jnp.inf, dtype),
            step_size_max=jnp.asarray(jnp.inf, dtype),
            averaging=_averaging(state.step_size),
        )
    return state._replace(
        inverse_mass_matrix=inverse_mass.astype(state.L.dtype),
        L=L.astype(state.L.dtype),
        tuning=tuning,
    )


def autocorrelation_length(tuning: MCLMCTuning, L: jax.Array, l_factor: float) -> jax.Array:
    """``l_factor`` · T · mean(1/ESS) over the recorded coordinates whose ESS is finite and
    positive (T: the recorded integration time); ``L`` when none is."""
    ess = effective_sample_size(tuning.trace[None])
    tau = tuning.window_time / ess
    usable = jnp.logical_and(jnp.isfinite(tau), ess > 0)
    mean = jnp.sum(jnp.where(usable, tau, 0.0)) / jnp.maximum(jnp.sum(usable), 1)
    return jnp.where(jnp.any(usable), l_factor * mean, L).astype(L.dtype)


def step(
    rng_key: Key,
    state: MCLMCState,
    batch: Batch,
    *,
    log_posterior: Callable,
    schedule: Schedule,
    tuner: Tuner,
) -> tuple[MCLMCState, MCLMCInfo]:
    """One iteration: ``schedule.steps`` transitions in a ``lax.scan``, then the tuning's
    end-of-part updates (preconditioner and L; L from the autocorrelation and ε frozen at the
    end of burn-in).

    Args:
        rng_key: the iteration's key (split into one per transition).
        state: the chain's state.
        batch: the data ``log_posterior`` takes.
        log_posterior: ``(params, batch) -> log density``.
        schedule: the tuning's parts.
        tuner: the tuning's constants.
    """
    dim = state.inverse_mass_matrix.shape[-1]
    iteration = state.iteration
    in_phase = {
        "variance": jnp.logical_and(
            iteration >= schedule.variance_start, iteration < schedule.variance_end
        ),
        "autocorrelation": jnp.logical_and(
            iteration >= schedule.autocorrelation_start, iteration < schedule.num_burn_in
        ),
    }
    dtype = state.step_size.dtype
    zeros = _Sums(
        jnp.zeros((), dtype),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), dtype),
        jnp.zeros((), jnp.int32),
    )
    body = functools.partial(
        _transition,
        logdensity_fn=lambda p: log_posterior(p, batch),
        schedule=schedule,
        tuner=tuner,
        dim=dim,
        in_phase=in_phase,
    )
    keys = jax.random.split(rng_key, schedule.steps)
    # The trace stays out of the scan's carry, which XLA copies at every transition: carried
    # (even untouched) it made an iteration 4x slower on a small network.
    trace = state.tuning.trace
    carry = state._replace(tuning=state.tuning._replace(trace=trace[:0]))
    (new, sums), recorded = jax.lax.scan(
        body, (carry, zeros), (keys, jnp.arange(schedule.steps, dtype=jnp.int32))
    )
    new = new._replace(tuning=new.tuning._replace(trace=trace))
    if schedule.rows:
        new = new._replace(
            tuning=_record(new.tuning, recorded, iteration, in_phase["autocorrelation"], schedule)
        )

    if schedule.variance_end > schedule.variance_start:
        installed = _set_preconditioner(new, dim, tuner)
        last = iteration + 1 == schedule.variance_end
        new = jax.tree.map(lambda a, b: jnp.where(last, a, b), installed, new)
    last_tuning = iteration + 1 == schedule.num_burn_in
    if schedule.rows:
        # Unbatched predicate (:func:`any_chain`): otherwise every iteration of every chain
        # would compute the autocorrelation's FFTs over the whole trace (4x the iteration's
        # time on a small network).
        refined = jax.lax.cond(
            any_chain(last_tuning),
            functools.partial(autocorrelation_length, l_factor=tuner.l_factor),
            lambda tuning, L: L,
            new.tuning,
            new.L,
        )
        refined = jnp.where(last_tuning, refined, new.L)
        new = new._replace(L=refined)
    if tuner.adjusted and schedule.num_burn_in:
        final = jnp.exp(new.tuning.averaging.log_step_size_avg).astype(dtype)
        new = new._replace(step_size=jnp.where(last_tuning, final, new.step_size))
    new = new._replace(iteration=iteration + 1)
    steps = jnp.maximum(sums.finite, 1)
    return new, MCLMCInfo(
        acceptance_rate=sums.accept / schedule.steps,
        divergent=sums.divergent > 0,
        num_divergent=sums.divergent,
        num_leapfrog=sums.steps,
        step_size=state.step_size,
        L=state.L,
        energy_var=sums.energy / steps,
        log_posterior=new.logdensity,
    )


def posterior(kept: MCLMCState) -> Samples:
    """The kept states' positions as samples of one chain."""
    return Samples.from_single_chain(kept.position)


def position(state: MCLMCState) -> Params:
    return state.position


def build(log_posterior: Callable, config: Config) -> Method:
    """MCLMC on ``log_posterior(params, batch)``, tuned per chain during burn-in.

    Args:
        log_posterior: the tempered log posterior, e.g. a
            :class:`~bnnkit.log_posterior.LogPosterior`.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose ``posterior`` returns
        :class:`~bnnkit.posterior.Samples`.
    """
    schedule = Schedule.of(config)
    return Method(
        init=functools.partial(
            init,
            log_posterior=log_posterior,
            schedule=schedule,
            step_size=config.step_size,
            coordinates=config.autocorrelation_coordinates,
        ),
        step=functools.partial(
            step, log_posterior=log_posterior, schedule=schedule, tuner=Tuner.of(config)
        ),
        posterior=posterior,
        position=position,
    )
