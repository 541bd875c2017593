"""MCLMC's per-chain tuning: the schedule of its parts, its state and the updates of each part.

Everything the tuning needs lives in the chain's state (:class:`MCLMCTuning`), advanced by
:mod:`bnnkit.inference.mclmc_kernel` after every transition and at the end of every iteration,
so a run resumes bit for bit at any point, and no statistic is shared between chains: chains
started from different members of an ensemble tune each to its own mode.

**Schedule**, in parts of the ``num_burn_in`` iterations (each fraction a setting of
:class:`bnnkit.inference.mclmc.Config`; :class:`Schedule`):

1. ε (the rest of the tuning, 0.75 with the defaults). Unadjusted: after every step the
   predictor of BlackJAX's ``make_L_step_size_adaptation``, as MILE uses it
   (:func:`predict_step_size`): with ``ξ = ΔE² / (d v)``, running averages of ``ξ/ε⁶`` weighted
   by ``w = exp(−½ (log ξ / (6 · trust_in_estimate))²)`` and decayed by ``(N − 1)/(N + 1)`` per
   step (N = ``num_effective_samples``) give ``ε = (Σ w ξ/ε⁶ / Σ w)^(−1/6)``, since the energy
   variance grows as ε⁶, with each step's ξ clipped at :data:`SPIKE_CLIP` times the ξ the
   average predicts for it (below, "Energy spikes"); ε stays below 0.8 times the last step size
   whose energy was not finite. The desired energy variance per dimension v decays linearly from
   ``energy_var_start`` 0.5 to ``energy_var_end`` 0.1 over parts 1 and 2 and stays there
   (:func:`energy_var_target`): MILE's schedule (Sommer et al., ICLR 2025), which a network's
   model average tolerates. BlackJAX's default v = 5·10⁻⁴ is far stricter: its step sizes are
   several times smaller and chains move that much slower per gradient, for a bias
   (:mod:`bnnkit.inference.mclmc`) the model average of a network does not notice. Adjusted:
   dual averaging of ε (:func:`centred_averaging`), and trajectories of
   ``tuning_trajectory_steps`` steps on average (BlackJAX's MAMS tuner's 2) while L is unknown.
2. ``variance_fraction`` (0.1): ε goes on tuning while the positions' (and gradients')
   variances are gathered (:func:`welford`, each step weighted by its ε, as BlackJAX does). At
   the end Σ is set (``preconditioner``,
   :func:`~bnnkit.inference.mclmc_state.set_preconditioner`) and L = √d, the radius of a
   standard Gaussian's typical set in the whitened units; without a preconditioner
   L = √(Σᵢ Var θᵢ). The step size tuning restarts (the predictor, or dual averaging centred on
   the current ε), ε being in new units. ``"fisher"`` (the default) sets
   Σᵢ = √(Var θᵢ / Var ∂ᵢ log p) (nutpie's estimator, HMC's ``--mass-estimator`` default),
   ``"variance"`` Σᵢ = Var θᵢ (BlackJAX's). On a Gaussian the first is exact whatever the chain
   has explored; the second underestimates the directions a short window has not crossed and
   overestimates the stiffest (measured in ``docs/performance.md``, "Full-batch samplers").
3. ``readjust_fraction`` (0.05): ε re-tunes with the preconditioner (BlackJAX re-runs its
   step size part for a third of part 2).
4. ``autocorrelation_fraction`` (0.1): a fixed random subset of at most
   ``autocorrelation_coordinates`` coordinates is recorded (:func:`record`), at most
   ``autocorrelation_draws`` evenly spaced rows, so memory stays bounded on a large network; at
   the end ``L = l_factor · T · mean(1/ESSᵢ)`` with T the part's integration time and ESSᵢ a
   recorded coordinate's effective sample size (:func:`autocorrelation_length`; BlackJAX's
   ``make_adaptation_L``, ``l_factor · ε · τ_int`` in steps, l_factor 0.4). ε tunes here too and
   freezes at the end of the tuning (the adjusted one at its dual average).

**Energy spikes.** On a network posterior most steps' energy errors are small, and now and
then one is orders of magnitude larger (the step crosses a sharp region, e.g. where a
heteroscedastic network's noise scale is small). BlackJAX's weight does not bound what such a
step does to the average: it falls off in log ξ, slowly, while the value averaged is ξ itself,
so a step with ξ in the thousands keeps much of its weight and outweighs every other step in
the predictor's memory together. ε then drops several-fold and grows back over the next
hundreds of steps, and a chain whose burn-in ends in such a dip samples with the small ε, for
fewer effective samples per gradient. So each step's ξ enters the average winsorised (a
Huber-type clip of the value, the weight left as BlackJAX's) at ``SPIKE_CLIP`` times the ξ
that the average predicts for that step, ``ε⁶ Σ w ξ/ε⁶ / Σ w`` (about 1: the predictor sets ε
so; less while ε is capped): one step can then raise the average by at most
``SPIKE_CLIP · w / Σ w`` of it. A clip, not a running median or trimmed mean, because

- it keeps the state: the same two running sums, which stored runs read back;
- it keeps BlackJAX's estimator where there are no spikes: a Gaussian ΔE at the target
  variance has a chance of about 10⁻²³ per step of reaching ``SPIKE_CLIP``;
- and it bounds a spike's share without ignoring it, as a median or an adjusted phase
  that rejects spikes would. On a network the sharp regions are real, and more of the steps
  meet them as ε grows: spikes that recur hold ε down (each clipped step still raises the
  average), where a rule blind to them lets ε grow until a large share of steps are cut off
  as divergences.

The first step of the tuning, and the first after the preconditioner is set and the predictor
restarts, have no average to be clipped against and enter it whole.

**Why not an** :class:`~bnnkit.inference.adaptation.Adaptation`. That interface is one update
per iteration, after one HMC or NUTS transition and from BlackJAX's info, answering ε, τ and M⁻¹
for the next iteration. This tuner advances after every transition inside the iteration's
``lax.scan`` (the step size predictor or dual averaging, the ε-weighted Welford sums, v at that
transition), and once more at the iteration's end (Σ and L, from a trace kept out of the scan's
carry). Putting it behind ``update`` would take a second, end-of-iteration hook that no other
sampler has and an ``iteration`` that counts transitions, so it keeps a tuner of its own.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.adaptation.step_size import DualAveragingAdaptationState, dual_averaging_adaptation
from blackjax.diagnostics import effective_sample_size

#: The most one step's ξ counts for in the step size predictor's average, as a multiple of the
#: ξ the average predicts for that step (the module's "Energy spikes"): far above what a
#: Gaussian energy error reaches, and low enough that a lone spike shrinks ε by a bounded
#: share, ``(1 + SPIKE_CLIP · w / Σ w)^(1/6)`` at most.
SPIKE_CLIP = 100.0


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


class Tuner(NamedTuple):
    """The tuning's constants (static; see :class:`~bnnkit.inference.mclmc.Config`)."""

    adjusted: bool
    preconditioner: str
    l_factor: float
    trust_in_estimate: float
    decay: float
    energy_var_max_ratio: float
    step_retries: int
    target_accept_rate: float
    divergence_threshold: float
    max_trajectory_steps: int
    tuning_trajectory_steps: float


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


def centred_averaging(step_size: jax.Array) -> DualAveragingAdaptationState:
    """Dual averaging of log ε centred on ε itself (not Stan's 10ε, which throws a chain into
    divergences; as :class:`bnnkit.inference.mass_windows.Windows`)."""
    da_init, _, _ = dual_averaging_adaptation(target=0.5)  # the target is not in the state
    dtype = jnp.result_type(step_size)
    state = da_init(step_size)._replace(mu=jnp.log(step_size))
    return jax.tree.map(lambda v: jnp.asarray(v, dtype), state)


def energy_var_target(step: jax.Array, schedule: Schedule) -> jax.Array:
    """The desired energy variance per dimension v at transition ``step`` (counted from 0):
    linear from ``energy_var_start`` to ``energy_var_end`` over the first ``variance_end``
    iterations, then ``energy_var_end``.

    Example:
        >>> from bnnkit.inference.mclmc import Config, schedule, tuner
        >>> schedule = schedule(Config(num_iterations=300, num_burn_in=200))
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
    log space so that ε⁶ cannot underflow, with the step's ξ clipped at :data:`SPIKE_CLIP`
    times the predicted one: the new state and the next ε.

    Example:
        >>> from bnnkit.inference.mclmc import Config, schedule, tuner
        >>> tuner = tuner(Config())
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
    log_step = jnp.log(step_size)
    # A spike enters the average at SPIKE_CLIP times the ξ the average predicts for this step
    # (the weight stays its own); nothing is predicted before the first step or a restart.
    log_predicted = tuning.log_estimate - tuning.log_weight + 6.0 * log_step
    log_clipped = jnp.where(
        jnp.isfinite(log_predicted),
        jnp.minimum(log_xi, log_predicted + math.log(SPIKE_CLIP)),
        log_xi,
    )
    log_decay = math.log(tuner.decay)
    log_weight = jnp.logaddexp(log_decay + tuning.log_weight, log_w)
    log_estimate = jnp.logaddexp(
        log_decay + tuning.log_estimate, log_w + log_clipped - 6.0 * log_step
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


def welford(
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


def record(
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


def autocorrelation_length(tuning: MCLMCTuning, L: jax.Array, l_factor: float) -> jax.Array:
    """``l_factor`` · T · mean(1/ESS) over the recorded coordinates whose ESS is finite and
    positive (T: the recorded integration time); ``L`` when none is."""
    ess = effective_sample_size(tuning.trace[None])
    tau = tuning.window_time / ess
    usable = jnp.logical_and(jnp.isfinite(tau), ess > 0)
    mean = jnp.sum(jnp.where(usable, tau, 0.0)) / jnp.maximum(jnp.sum(usable), 1)
    return jnp.where(jnp.any(usable), l_factor * mean, L).astype(L.dtype)
