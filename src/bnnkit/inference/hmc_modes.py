"""HMC's burn-in modes, each an :class:`~bnnkit.inference.adaptation.Adaptation`.

:func:`hmc_adaptation` gives what HMC's burn-in tunes, one of :data:`ADAPT_MODES`, assembled
with ``functools.partial`` from the pieces below and those of the step size search
(:mod:`bnnkit.inference.step_size_search`), Stan's windows (:mod:`bnnkit.inference.mass_windows`)
and ChEES (:mod:`bnnkit.inference.chees`):

- ``"none"``: nothing (:func:`~bnnkit.inference.adaptation.kept`).
- ``"step"``, the paper's: ε by dual averaging, restarted halfway through burn-in
  (:func:`paper_update`).
- ``"mass"``: ε and a diagonal M⁻¹ in each chain's own Stan windows (:func:`mass_update`).
- ``"chees"``: ε and τ by ChEES across the chains, M⁻¹ pooled over them in Stan's windows
  (:func:`chees_update`).
- ``"auto"``, HMC's default: each chain on its own runs NUTS through Stan's windows during
  burn-in (its trees at most :data:`EARLY_TREE_DEPTH` deep while M⁻¹ is still the identity,
  :func:`auto_tree_depth`), and the kept iterations are jittered static HMC whose τ is a high
  quantile of that chain's NUTS integration times in the last window (:func:`auto_update`).

Every mode keeps its state in one layout (:class:`HMCAdaptationState`), so a stored HMC run has
the same fields whatever its mode.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.adaptation.chees_adaptation import ChEESAdaptationState
from blackjax.adaptation.step_size import DualAveragingAdaptationState, dual_averaging_adaptation

from bnnkit.inference.adaptation import (
    MEMBERS,
    Adaptation,
    Tuning,
    during_burn_in,
    kept,
    size_and_dtype,
)
from bnnkit.inference.chees import ChEES, pooled_chains
from bnnkit.inference.mass_windows import (
    Windows,
    WindowState,
    early_until,
    slow_window_ends,
    window_update,
)
from bnnkit.inference.step_size_search import reasonable_step_size
from bnnkit.types import Params

#: What HMC's burn-in may tune (``hmc.Config.adapt``); see :func:`hmc_adaptation`.
ADAPT_MODES = ("none", "step", "mass", "chees", "auto")
#: The deepest NUTS tree of ``"auto"``'s burn-in: at most 2^10 − 1 leapfrog steps, NUTS's
#: own default (:mod:`bnnkit.inference.nuts`).
MAX_TREE_DEPTH = 10
#: The deepest tree while M⁻¹ is still the identity (until the first slow window closes), and
#: the most leapfrog steps (2^6 − 1) of a static trajectory then (``"mass"``, ``"chees"``).
#: With the identity metric the step size is set by the narrowest direction, and a trajectory
#: long in the widest one takes thousands of steps (on a regression with income-scale
#: predictors ``"mass"`` spent nearly all its gradients in its first iterations; measured in
#: ``docs/performance.md``, "Full-batch samplers"). The first window only needs the chain to
#: move enough for its variance and gradient statistics.
EARLY_TREE_DEPTH = 6
#: The quantile of a chain's NUTS integration times (last window of burn-in) that ``"auto"``
#: integrates as τ afterwards, jittered: each iteration a quasi-random fraction of it.
TRAJECTORY_QUANTILE = 0.9


class HMCAdaptationState(NamedTuple):
    """The tuning state of every HMC mode in one layout.

    A mode advances the parts it uses and leaves the others as initialised, so a chain's state
    (and a stored run's ``state.npz``) has the same fields whatever the mode.

    Attributes:
        step: the paper mode's dual averaging of ε.
        windows: Stan's windows of ``"mass"`` and ``"chees"``.
        chees: the ChEES state of ``"chees"``.
    """

    step: DualAveragingAdaptationState
    windows: WindowState
    chees: ChEESAdaptationState


def hmc_adaptation(
    mode: str,
    *,
    num_burn_in: int,
    num_iterations: int,
    target: float,
    estimator: str = "fisher",
    max_leapfrog_steps: int = 10_000,
    divergence_threshold: float = 1000.0,
    tune_trajectory: bool = True,
) -> Adaptation:
    """What HMC's burn-in tunes, one of :data:`ADAPT_MODES`; state: :class:`HMCAdaptationState`.

    - ``"none"``: nothing.
    - ``"step"`` (the paper's): ε by dual averaging (:func:`paper_update`), from the given ε.
    - ``"mass"``: ε and M⁻¹ in Stan's :class:`Windows` (:func:`mass_update`), jittered τ.
    - ``"chees"``: ε and τ by :class:`ChEES`, M⁻¹ pooled in Stan's windows
      (:func:`chees_update`), jittered τ; it must run vmapped over :data:`MEMBERS`.
    - ``"auto"``: burn-in by NUTS in each chain's own Stan windows (ε, M⁻¹) and τ from its
      NUTS trajectories (:func:`auto_update`), jittered static HMC after burn-in.

    ``"mass"``, ``"chees"`` and ``"auto"`` start from :func:`reasonable_step_size` when there
    is a burn-in, and while M⁻¹ is the identity their trajectories are short
    (:data:`EARLY_TREE_DEPTH`).

    Args:
        mode: one of :data:`ADAPT_MODES`.
        num_burn_in: iterations that adapt (0: none does).
        num_iterations: iterations of the run (sizes ChEES's jitter sequence).
        target: the acceptance rate the step size aims at.
        estimator: M⁻¹ of ``"mass"``, ``"chees"`` and ``"auto"``
            (:data:`~bnnkit.inference.mass_windows.MASS_ESTIMATORS`).
        max_leapfrog_steps: ChEES's τ is clipped to this many steps.
        divergence_threshold: the energy error of a divergent trajectory in the step size
            search.
        tune_trajectory: ``"auto"`` estimates τ (else it keeps the given one).
    """
    if mode not in ADAPT_MODES:
        raise ValueError(f"adaptation mode {mode!r}; allowed: {', '.join(ADAPT_MODES)}")
    windows = Windows(
        max(num_burn_in, 1),
        target,
        estimator=estimator,
        pool_axis=MEMBERS if mode == "chees" else None,
    )
    chees = ChEES(num_iterations, target, max_leapfrog_steps)
    settings = dict(
        windows=windows,
        chees=chees,
        search=mode in ("mass", "chees", "auto") and num_burn_in > 0,
        across_chains=mode == "chees",
        target=target,
        divergence_threshold=divergence_threshold,
    )
    init = functools.partial(auto_init if mode == "auto" else hmc_init, **settings)
    update = mode_update(
        mode,
        num_burn_in=num_burn_in,
        target=target,
        windows=windows,
        chees=chees,
        tune_trajectory=tune_trajectory,
    )
    dynamic = mode == "auto" and num_burn_in > 0
    return Adaptation(
        init,
        update,
        jittered=mode in ("mass", "chees", "auto"),
        tree_depth=(
            functools.partial(
                auto_tree_depth, num_burn_in=num_burn_in, early=early_until(num_burn_in)
            )
            if dynamic
            else None
        ),
        early_until=(early_until(num_burn_in) if mode in ("mass", "chees") and num_burn_in else -1),
    )


def mode_update(
    mode: str,
    *,
    num_burn_in: int,
    target: float,
    windows: Windows,
    chees: ChEES,
    tune_trajectory: bool,
) -> Callable:
    """The ``update`` of ``mode`` (see :func:`hmc_adaptation`): its update during burn-in
    (:func:`~bnnkit.inference.adaptation.during_burn_in`), or
    :func:`~bnnkit.inference.adaptation.kept` where it tunes nothing."""
    if mode == "none" or not num_burn_in:
        return kept
    ends = slow_window_ends(num_burn_in)
    return functools.partial(
        during_burn_in,
        num_burn_in=num_burn_in,
        update={
            "step": functools.partial(paper_update, num_burn_in=num_burn_in, target=target),
            "mass": functools.partial(mass_update, windows=windows),
            "chees": functools.partial(
                chees_update, chees=chees, windows=windows, num_burn_in=num_burn_in
            ),
            "auto": functools.partial(
                auto_update,
                windows=windows,
                stats_from=ends[-1] + 1 if ends else 0,
                tune_trajectory=tune_trajectory,
            ),
        }[mode],
    )


def hmc_init(
    key: jax.Array,
    start,
    logdensity_fn: Callable,
    step_size: float,
    trajectory_len: float,
    *,
    windows: Windows,
    chees: ChEES,
    search: bool,
    across_chains: bool,
    target: float,
    divergence_threshold: float,
) -> tuple[HMCAdaptationState, Tuning]:
    """Every HMC mode's initial state and tuning (see :func:`hmc_adaptation`).

    ``search``: start from :func:`reasonable_step_size`. ``across_chains``: one ε for every
    chain of the vmapped axis :data:`MEMBERS` (their geometric mean), and τ at least ε.
    """
    size, dtype = size_and_dtype(start.position)
    eps = jnp.asarray(step_size, dtype)
    tau = jnp.asarray(trajectory_len, dtype)
    if search:
        eps = reasonable_step_size(
            key, start, logdensity_fn, eps, target=target, divergence_threshold=divergence_threshold
        ).astype(dtype)
    if across_chains:
        # ChEES starts from the given trajectory length (at least one leapfrog step). Started
        # from one step, its Adam on log τ barely moved while the chains were still climbing
        # to the typical set, so they climbed by Langevin steps: on yacht_0 after 250 burn-in
        # iterations the chains' log posteriors were -490..-330 with τ at 4 steps, against
        # +160..+340 started from τ = 1 (which ChEES shortened to 0.19, 35-80 steps).
        eps = jnp.exp(jax.lax.pmean(jnp.log(eps), MEMBERS))
        tau = jnp.maximum(tau, eps)
    da_init, _, _ = dual_averaging_adaptation(target=target)
    # Centred on ε itself, not Stan's 10ε (see Windows._averaging).
    step = jax.tree.map(lambda v: jnp.asarray(v, dtype), da_init(eps)._replace(mu=jnp.log(eps)))
    state = HMCAdaptationState(step, windows.init(eps, size, dtype), chees.init(eps, tau, dtype))
    return state, Tuning(eps, tau, jnp.ones(size, dtype))


def paper_update(
    state: HMCAdaptationState,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    num_burn_in: int,
    target: float,
) -> tuple[HMCAdaptationState, Tuning]:
    """The paper mode: ε by dual averaging, restarted halfway through burn-in, then frozen at
    its average; τ and M⁻¹ as they are."""
    da_init, da_update, _ = dual_averaging_adaptation(target=target)
    updated = da_update(state.step, info.acceptance_rate)
    # Restart the averaging halfway through burn-in (as Stan's windows do): the chain's
    # transient from its initialisation wants larger steps than the typical set does, and an
    # average over it would freeze a step size that is too large.
    restart = iteration + 1 == num_burn_in // 2
    fresh = da_init(jnp.exp(updated.log_step_size))
    fresh = fresh._replace(mu=fresh.log_step_size)
    updated = jax.tree.map(
        lambda f, u: jnp.where(restart, jnp.asarray(f, u.dtype), u), fresh, updated
    )
    # Inside burn-in take the current iterate; at its end freeze the averaged value.
    still_burning = iteration + 1 < num_burn_in
    eps = jnp.where(
        still_burning, jnp.exp(updated.log_step_size), jnp.exp(updated.log_step_size_avg)
    )
    return state._replace(step=updated), tuning._replace(step_size=eps)


def mass_update(
    state: HMCAdaptationState,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    windows: Windows,
) -> tuple[HMCAdaptationState, Tuning]:
    """HMC's ``"mass"`` mode: :func:`window_update` on its part of the state."""
    window_state, tuning = window_update(
        state.windows, iteration, start_position, proposal, info, tuning, windows=windows
    )
    return state._replace(windows=window_state), tuning


def chees_update(
    state: HMCAdaptationState,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    chees: ChEES,
    windows: Windows,
    num_burn_in: int,
) -> tuple[HMCAdaptationState, Tuning]:
    """ε and τ by ChEES from every chain's trajectory; M⁻¹ pooled over the chains in Stan's
    windows; a stranded chain (:func:`pooled_chains`) left out of both. At the end of burn-in
    ε and τ freeze at ChEES's moving averages."""
    include = pooled_chains(proposal.logdensity, tuning.inverse_mass_matrix.shape[0])
    chees_state = chees.update(
        state.chees,
        info.proposal.position,
        info.proposal.momentum,
        start_position,
        info.acceptance_rate,
        info.is_divergent,
        tuning.inverse_mass_matrix,
        include,
    )
    window_state, _, inverse_mass = windows.update(
        state.windows,
        iteration,
        proposal.position,
        info.acceptance_rate,
        gradient=proposal.logdensity_grad,
        adapt_step=False,
        include=include,
    )
    last = iteration + 1 == num_burn_in
    final_eps, final_tau = ChEES.final(chees_state)
    eps = jnp.where(last, final_eps, chees_state.step_size)
    tau = jnp.where(last, final_tau, chees_state.trajectory_length)
    return (state._replace(windows=window_state, chees=chees_state), Tuning(eps, tau, inverse_mass))


def auto_tree_depth(iteration: jax.Array, *, num_burn_in: int, early: int) -> jax.Array:
    """The deepest NUTS tree of ``"auto"`` at ``iteration``: :data:`EARLY_TREE_DEPTH` while
    M⁻¹ is the identity, :data:`MAX_TREE_DEPTH` for the rest of burn-in, 0 after it (static
    HMC).

    Example:
        >>> [int(auto_tree_depth(i, num_burn_in=500, early=early_until(500)))
        ...  for i in (0, 36, 37, 499, 500)]
        [6, 6, 10, 10, 0]
    """
    depth = jnp.where(iteration <= early, EARLY_TREE_DEPTH, MAX_TREE_DEPTH)
    return jnp.where(iteration < num_burn_in, depth, 0).astype(jnp.int32)


def auto_init(
    key: jax.Array,
    start,
    logdensity_fn: Callable,
    step_size: float,
    trajectory_len: float | None,
    **settings: Any,
) -> tuple[HMCAdaptationState, Tuning]:
    """``"auto"``'s initial state: :func:`hmc_init` with the step size search, for this chain
    alone, and the Welford statistics of its integration times empty (see
    :func:`auto_update`). Without a given τ, τ starts at ε (a placeholder until burn-in
    estimates it)."""
    state, tuning = hmc_init(
        key,
        start,
        logdensity_fn,
        step_size,
        step_size if trajectory_len is None else trajectory_len,
        **settings,
    )
    if trajectory_len is None:
        tuning = tuning._replace(trajectory_len=tuning.step_size)
    empty = state.chees._replace(
        step=jnp.zeros_like(state.chees.step),
        log_trajectory_length_moving_average=jnp.zeros_like(
            state.chees.log_trajectory_length_moving_average
        ),
        log_step_size_moving_average=jnp.zeros_like(state.chees.log_step_size_moving_average),
    )
    return state._replace(chees=empty), tuning


def auto_update(
    state: HMCAdaptationState,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    windows: Windows,
    stats_from: int,
    tune_trajectory: bool,
) -> tuple[HMCAdaptationState, Tuning]:
    r"""``"auto"`` after a burn-in iteration of NUTS (``info`` is BlackJAX's ``NUTSInfo``): ε
    and M⁻¹ in this chain's own :class:`Windows`, and τ as the
    :data:`TRAJECTORY_QUANTILE` quantile of its NUTS integration times ``T = nε`` from
    iteration ``stats_from`` on (the last window, whose M⁻¹ is the one kept), fitted as a
    log-normal:

    .. math:: \tau = \exp\big(\bar{x} + z_q\, s_x\big), \qquad x = \log T,

    with the mean and standard deviation of ``x`` over the window's non-divergent iterations
    (Welford). A stored state has no field of its own for these three numbers, so they live in
    the (otherwise unused) ChEES state: the count in ``step``, the mean in
    ``log_trajectory_length_moving_average`` and the sum of squared deviations in
    ``log_step_size_moving_average``.
    """
    window_state, eps, inverse_mass = windows.update(
        state.windows,
        iteration,
        proposal.position,
        info.acceptance_rate,
        gradient=proposal.logdensity_grad,
    )
    c = state.chees
    dtype = c.log_trajectory_length_moving_average.dtype
    steps = info.num_integration_steps
    x = jnp.log(jnp.maximum(steps, 1).astype(dtype) * tuning.step_size.astype(dtype))
    use = (iteration >= stats_from) & ~info.is_divergent & (steps > 0)
    count = c.step + use.astype(c.step.dtype)
    delta = x - c.log_trajectory_length_moving_average
    mean = jnp.where(
        use,
        c.log_trajectory_length_moving_average + delta / jnp.maximum(count, 1).astype(dtype),
        c.log_trajectory_length_moving_average,
    )
    m2 = jnp.where(
        use, c.log_step_size_moving_average + delta * (x - mean), c.log_step_size_moving_average
    )
    sd = jnp.sqrt(m2 / jnp.maximum(count - 1, 1).astype(dtype))
    z = statistics.NormalDist().inv_cdf(TRAJECTORY_QUANTILE)
    tau = tuning.trajectory_len
    if tune_trajectory:
        tau = jnp.where(count > 0, jnp.exp(mean + z * sd).astype(tau.dtype), tau)
    chees = c._replace(
        step=count, log_trajectory_length_moving_average=mean, log_step_size_moving_average=m2
    )
    return (state._replace(windows=window_state, chees=chees), Tuning(eps, tau, inverse_mass))
