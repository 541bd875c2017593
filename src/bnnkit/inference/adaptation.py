"""Adaptation pieces shared by the full-batch samplers, on BlackJAX's estimators.

- :class:`Windows`: Stan's warm-up schedule (``blackjax.adaptation.window_adaptation``'s
  ``build_schedule``): a fast window of dual averaging on the step size, slow windows, each twice
  as long as the last, that estimate a diagonal inverse mass matrix ``M⁻¹`` and restart the
  averaging, and a last fast window. ``M⁻¹`` is either Stan's regularised variance of the
  positions (``estimator="variance"``, BlackJAX's ``mass_matrix_adaptation``) or the
  Fisher-divergence diagonal ``√(Var[θ] / Var[∇ log p])`` of positions and gradients
  (``estimator="fisher"``, BlackJAX's ``fisher_score_diagonal_from_moments``; Seyboldt et al.,
  as nutpie), which also sees the curvature of directions the chain has not yet explored. With
  ``pool_axis`` the window's statistics are pooled over the chains of a vmapped run (Chan et
  al.'s merge of Welford states), so every chain gets the same ``M⁻¹``.
- :class:`ChEES`: the step size and trajectory length of jittered HMC tuned across chains by
  maximising the ChEES criterion (Hoffman, Radul & Sountsov 2021; ``blackjax.adaptation.
  chees_adaptation.base``). The chains of a run are gathered with ``jax.lax.all_gather`` over
  the vmapped axis, so every chain computes the same update. Chains stranded far below the
  others are left out of every pooled statistic (:func:`pooled_chains`).
- ``"auto"`` (:func:`hmc_adaptation`), HMC's default: each chain on its own runs NUTS through
  Stan's windows during burn-in (its trees at most :data:`EARLY_TREE_DEPTH` deep while M⁻¹ is
  still the identity), and the kept iterations are jittered static HMC whose τ is a high
  quantile of that chain's NUTS integration times in the last window (:func:`auto_update`).
- :func:`jitter`: the quasi-random fraction of the trajectory length integrated at an iteration
  (a base-2 Halton sequence, shared by all chains, so that draws are not periodic).
- :class:`Adaptation`: a sampler's burn-in tuning as two pure functions, ``init`` and
  ``update``, that answer one question after every iteration: the next ε, τ and M⁻¹
  (:class:`Tuning`). :func:`hmc_adaptation` gives HMC's modes (:data:`ADAPT_MODES`: none, the
  paper's dual averaging, Stan's windows, ChEES), :func:`window_adaptation` NUTS's windows.
  Each is assembled with ``functools.partial`` from the module-level pieces below
  (:func:`reasonable_step_size`, :func:`paper_update`, :func:`window_update`,
  :func:`chees_update`, :func:`during_burn_in`).

All states are NamedTuples of arrays: they live in a sampler's state and resume bit for bit.

Example:
    >>> import jax.numpy as jnp
    >>> windows = Windows(num_burn_in=100, target=0.8)
    >>> state = windows.init(step_size=0.1, size=3, dtype=jnp.float32)
    >>> state, step_size, inverse_mass = windows.update(state, jnp.int32(0), jnp.ones(3), 0.9)
    >>> inverse_mass.shape
    (3,)
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from blackjax.adaptation import chees_adaptation
from blackjax.adaptation.chees_adaptation import ChEESAdaptationState
from blackjax.adaptation.mass_matrix import (
    MassMatrixAdaptationState,
    WelfordAlgorithmState,
    mass_matrix_adaptation,
    welford_algorithm,
)
from blackjax.adaptation.metric_estimators import fisher_score_diagonal_from_moments
from blackjax.adaptation.step_size import (
    DualAveragingAdaptationState,
    dual_averaging_adaptation,
    find_reasonable_step_size,
)
from blackjax.adaptation.window_adaptation import build_schedule
from blackjax.mcmc.dynamic_hmc import halton_sequence
from jax.flatten_util import ravel_pytree

from bnnkit.types import Params

#: The axis name under which the run driver vmaps a method's members (chains).
MEMBERS = "members"

#: The deepest NUTS tree of ``"auto"``'s burn-in: at most 2^10 − 1 leapfrog steps, NUTS's
#: own default (:mod:`bnnkit.inference.nuts`).
MAX_TREE_DEPTH = 10
#: The deepest tree while M⁻¹ is still the identity (until the first slow window closes), and
#: the most leapfrog steps (2^6 − 1) of a static trajectory then (``"mass"``, ``"chees"``).
#: With the identity metric the step size is set by the narrowest direction, and a trajectory
#: long in the widest one takes thousands of steps: on a regression with income-scale
#: predictors ``"mass"`` spent 97 % of its gradients in the first 50 iterations. The first
#: window only needs the chain to move enough for its variance and gradient statistics.
EARLY_TREE_DEPTH = 6
#: The quantile of a chain's NUTS integration times (last window of burn-in) that ``"auto"``
#: integrates as τ afterwards, jittered: each iteration a quasi-random fraction of it.
TRAJECTORY_QUANTILE = 0.9
#: ChEES leaves out of its pooled statistics a chain whose log density is more than this many
#: spreads below the median chain's (:func:`pooled_chains`).
STRANDED_SPREADS = 5.0
#: Fewer chains than this cannot outvote a stranded one (with 2 the median is their mean).
MIN_POOLED_CHAINS = 4


def like(new: Any, old: Any) -> Any:
    """``new`` with the dtypes of ``old`` (BlackJAX's constructors return Python scalars)."""
    return jax.tree.map(lambda n, o: jnp.asarray(n, jnp.result_type(o)), new, old)


def halton_bits(num_iterations: int) -> int:
    """Bits of the Halton sequence that cover ``num_iterations`` distinct values (< 32)."""
    return min(31, max(1, math.ceil(math.log2(num_iterations + 1))))


def jitter(iteration: jax.Array, bits: int) -> jax.Array:
    """The fraction in (0, 1) of the trajectory integrated at ``iteration``."""
    return halton_sequence(jnp.asarray(iteration, jnp.int32), bits)


MASS_ESTIMATORS = ("variance", "fisher")


def pooled_chains(logdensity: jax.Array, num_params: int, axis_name: str = MEMBERS) -> jax.Array:
    r"""Whether this chain's statistics may be pooled with the others' (called inside the vmap
    over ``axis_name``).

    A chain is left out when its log density is not finite or lies more than
    :data:`STRANDED_SPREADS` spreads below the median chain's, the spread being

    .. math:: s = \max\big(1.4826\,\mathrm{MAD}(\log p),\ \sqrt{d/2}\big),

    the chains' robust standard deviation, but never below a d-dimensional Gaussian's spread of
    ``log p`` in its typical set (so chains that all sit in the typical set are all kept). A
    chain stranded in a far region (from a dispersed start) would otherwise pull every pooled
    statistic: the ChEES criterion, the harmonic-mean acceptance behind ε and the pooled mass
    matrix. With two chains the median is their mean and no chain is ever left out: ChEES
    warns below :data:`MIN_POOLED_CHAINS`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> keep = jax.vmap(lambda lp: pooled_chains(lp, 10), axis_name=MEMBERS)
        >>> keep(jnp.array([-5.0, -7.0, -6.0, -1e6])).tolist()
        [True, True, True, False]
    """
    every = jax.lax.all_gather(logdensity, axis_name)
    finite = jnp.isfinite(every)
    median = jnp.nanmedian(jnp.where(finite, every, jnp.nan))
    mad = jnp.nanmedian(jnp.where(finite, jnp.abs(every - median), jnp.nan))
    spread = jnp.maximum(1.4826 * mad, jnp.sqrt(num_params / 2.0))
    return jnp.isfinite(logdensity) & (logdensity >= median - STRANDED_SPREADS * spread)


def any_chain(flag: jax.Array, axis_name: str = MEMBERS) -> jax.Array:
    """Whether ``flag`` holds for any chain: unbatched when called inside the vmap over
    ``axis_name`` (as the run driver runs a method's step), else ``flag`` itself.

    A ``lax.cond`` whose predicate ``vmap`` batches runs both branches for every chain, at
    every step; with this predicate it runs one. The chains of a run are all at the same step,
    so a condition on the step count reduced over them is each chain's own; a branch that
    changes state still selects per chain with ``jnp.where(flag, ...)``, so what it computes
    is unchanged.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> jax.vmap(any_chain, axis_name=MEMBERS)(jnp.array([False, True])).tolist()
        [True, True]
        >>> bool(any_chain(jnp.array(False)))  # outside the vmap
        False
    """
    try:
        return jax.lax.psum(flag.astype(jnp.int32), axis_name) > 0
    except NameError:  # not inside a vmap over the chains' axis
        return flag


def window_schedule(num_burn_in: int) -> list[tuple[int, bool]]:
    """Stan's windows scaled to the burn-in: (stage, window ends) per iteration.

    Stan's fixed sizes (75 fast iterations, a first slow window of 25, 50 fast at the end) are
    for 1,000 warm-up iterations; a shorter burn-in spent a quarter of itself on the identity
    mass matrix, where a badly scaled posterior diverges at the edge of stability. Here the
    first fast window is 5 % of burn-in (at least 10), the first slow window 2.5 % (at least 5)
    and the last fast window 10 % (at least 10).

    Example:
        >>> [i for i, (_, end) in enumerate(window_schedule(300)) if end]
        [21, 35, 63, 119, 269]
    """
    return build_schedule(
        num_burn_in,
        initial_buffer_size=max(10, num_burn_in // 20),
        first_window_size=max(5, num_burn_in // 40),
        final_buffer_size=max(10, num_burn_in // 10),
    )


class WindowState(NamedTuple):
    """Dual averaging of the step size and the Welford windows of positions and gradients."""

    step: DualAveragingAdaptationState
    mass: MassMatrixAdaptationState
    gradients: WelfordAlgorithmState


class Windows:
    """Stan's windowed adaptation of the step size and a diagonal mass matrix.

    Args:
        num_burn_in: iterations of warm-up (the schedule's length).
        target: acceptance rate the dual averaging aims at.
        adapt_mass: estimate ``M⁻¹`` in the slow windows (else it stays the identity).
        estimator: ``"variance"`` (Stan) or ``"fisher"`` (positions and gradients).
        pool_axis: pool each window's statistics over this vmapped axis (chains).
    """

    def __init__(
        self,
        num_burn_in: int,
        target: float,
        *,
        adapt_mass: bool = True,
        estimator: str = "variance",
        pool_axis: str | None = None,
    ):
        if estimator not in MASS_ESTIMATORS:
            raise ValueError(f"estimator {estimator!r}; allowed: {', '.join(MASS_ESTIMATORS)}")
        self.num_burn_in = num_burn_in
        schedule = jnp.asarray(window_schedule(num_burn_in), jnp.int32).reshape((num_burn_in, 2))
        self.schedule = schedule if adapt_mass else jnp.zeros_like(schedule)
        self.estimator = estimator
        self.pool_axis = pool_axis
        self.da_init, self.da_update, _ = dual_averaging_adaptation(target=target)
        self.mm_init, self.mm_update, self.mm_final = mass_matrix_adaptation(
            is_diagonal_matrix=True
        )
        self.wf_init, self.wf_update, self.wf_final = welford_algorithm(is_diagonal_matrix=True)

    def init(self, step_size: float, size: int, dtype: Any) -> WindowState:
        def cast(tree):
            return jax.tree.map(
                lambda v: jnp.asarray(
                    v, dtype if jnp.issubdtype(jnp.result_type(v), jnp.floating) else jnp.int32
                ),
                tree,
            )

        return WindowState(
            cast(self._averaging(step_size)), cast(self.mm_init(size)), cast(self.wf_init(size))
        )

    def _averaging(self, step_size: Any) -> DualAveragingAdaptationState:
        """Dual averaging that shrinks towards ``step_size`` itself.

        Stan (and BlackJAX's ``dual_averaging_adaptation``) centre the averaging on 10ε, so the
        first iterations of every window try steps up to ten times the last good one; on
        network posteriors a burn-in then diverges in 5-10 % of its iterations, most of them at
        window starts. Centring on ε keeps those first steps where the last window ended.
        """
        state = self.da_init(step_size)
        return state._replace(mu=jnp.log(jnp.asarray(step_size)))

    def _pooled(
        self, w: WelfordAlgorithmState, include: jax.Array | None = None
    ) -> WelfordAlgorithmState:
        """A window's Welford statistics merged over the chains (Chan et al. 1979), leaving
        out a chain whose ``include`` is false (:func:`pooled_chains`)."""
        if self.pool_axis is None:
            return w
        if include is not None:
            w = jax.tree.map(lambda v: jnp.where(include, v, jnp.zeros_like(v)), w)
        count = w.sample_size.astype(w.mean.dtype)
        total = jax.lax.psum(count, self.pool_axis)
        mean = jax.lax.psum(count * w.mean, self.pool_axis) / jnp.maximum(total, 1)
        m2 = jax.lax.psum(w.m2 + count * jnp.square(w.mean - mean), self.pool_axis)
        return WelfordAlgorithmState(mean, m2, jax.lax.psum(w.sample_size, self.pool_axis))

    def _close(
        self,
        mass: MassMatrixAdaptationState,
        gradients: WelfordAlgorithmState,
        include: jax.Array | None = None,
    ):
        """``M⁻¹`` from the window that ends, and fresh windows."""
        positions = self._pooled(mass.wc_state, include)
        if self.estimator == "variance":
            new = like(self.mm_final(mass._replace(wc_state=positions)), mass)
            return new, gradients
        grads = self._pooled(gradients, include)
        var_x, count, _ = self.wf_final(positions)
        var_g, _, _ = self.wf_final(grads)
        estimate = fisher_score_diagonal_from_moments(var_x, var_g)
        # A coordinate that did not move within the window (a chain far out in the tails
        # taking steps below float resolution) has no variance to estimate: an estimate of 0
        # there made every later step diverge, so it keeps its previous value.
        usable = (count > 1) & jnp.isfinite(estimate) & (estimate > 0)
        inverse_mass = jnp.where(usable, estimate, mass.inverse_mass_matrix)
        fresh = like(self.wf_init(inverse_mass.shape[0]), gradients)
        return like(MassMatrixAdaptationState(inverse_mass, fresh), mass), fresh

    def update(
        self,
        state: WindowState,
        iteration: jax.Array,
        position: Params,
        acceptance_rate: jax.Array,
        *,
        gradient: Params | None = None,
        adapt_step: bool = True,
        include: jax.Array | None = None,
    ) -> tuple[WindowState, jax.Array, jax.Array]:
        """After burn-in iteration ``iteration``: the new state, step size and ``M⁻¹``.

        The step size is the current dual-averaging iterate, and at the last burn-in
        iteration its average (Stan's final value). ``gradient`` (of the log density at
        ``position``) is needed by the ``"fisher"`` estimator. With ``pool_axis``, a chain
        whose ``include`` is false adds nothing to the pooled window that closes.
        """
        ss, mm, gw = state
        stage, window_end = self.schedule[jnp.minimum(iteration, self.num_burn_in - 1)]
        slow = stage == 1
        mm = jax.lax.cond(slow, lambda m: like(self.mm_update(m, position), m), lambda m: m, mm)
        if self.estimator == "fisher":
            flat_grad = ravel_pytree(gradient)[0]
            gw = jax.lax.cond(
                slow, lambda w: like(self.wf_update(w, flat_grad), w), lambda w: w, gw
            )
        if adapt_step:
            ss = like(self.da_update(ss, acceptance_rate), ss)

        def close_window(ss, mm, gw):
            # Estimate M⁻¹ from the window, restart the averaging at the average step size.
            mm, gw = self._close(mm, gw, include)
            if adapt_step:
                ss = like(self._averaging(jnp.exp(ss.log_step_size_avg)), ss)
            return ss, mm, gw

        ss, mm, gw = jax.lax.cond(window_end == 1, close_window, lambda *a: a, ss, mm, gw)
        last = iteration + 1 == self.num_burn_in
        step_size = jnp.where(last, jnp.exp(ss.log_step_size_avg), jnp.exp(ss.log_step_size))
        return WindowState(ss, mm, gw), step_size, mm.inverse_mass_matrix


class ChEES:
    """ChEES adaptation of the step size and trajectory length across the chains of a run.

    Args:
        num_iterations: iterations of the whole run (sizes the Halton sequence).
        target: acceptance rate (harmonic mean over chains) the step size aims at.
        max_leapfrog_steps: the trajectory length is clipped to this many steps.
        learning_rate: Adam's rate on the log trajectory length (TFP's default, β₁ = 0).
        axis_name: the vmapped axis of the chains.
    """

    def __init__(
        self,
        num_iterations: int,
        target: float,
        max_leapfrog_steps: int,
        *,
        learning_rate: float = 0.025,
        axis_name: str = MEMBERS,
    ):
        self.bits = halton_bits(num_iterations)
        self.axis_name = axis_name
        self._init, self._update = chees_adaptation.base(
            lambda i: jitter(i, self.bits),
            lambda i: i + 1,
            optax.adam(learning_rate, b1=0.0, b2=0.95),
            target,
            0.5,
            max_leapfrog_steps,
        )

    def init(self, step_size: float, trajectory_len: float, dtype: Any):
        state = self._init(jnp.zeros((), jnp.int32), jnp.asarray(step_size, dtype))
        state = state._replace(
            trajectory_length=jnp.asarray(trajectory_len, dtype),
            log_trajectory_length_moving_average=jnp.log(jnp.asarray(trajectory_len, dtype)),
        )
        return jax.tree.map(
            lambda v: jnp.asarray(
                v, dtype if jnp.issubdtype(jnp.result_type(v), jnp.floating) else jnp.int32
            ),
            state,
        )

    def update(
        self,
        state,
        proposal_position: Params,
        proposal_momentum: Params,
        start_position: Params,
        acceptance_rate: jax.Array,
        divergent: jax.Array,
        inverse_mass: jax.Array,
        include: jax.Array | bool = True,
    ):
        """The shared update from every chain's trajectory (called inside the vmap).

        A chain whose ``include`` is false (:func:`pooled_chains`) counts as BlackJAX's
        divergent chains do: its acceptance, trajectory and position enter neither the step
        size nor the criterion (its start is NaN, which BlackJAX's means skip).
        """

        def gather(value):
            return jax.lax.all_gather(value, self.axis_name)

        def flat(tree):  # BlackJAX's criterion takes one (chains, dim) array per quantity
            return gather(ravel_pytree(tree)[0])

        start = flat(start_position)
        included = gather(jnp.asarray(include))
        start = jnp.where(included[:, None], start, jnp.nan)
        new = self._update(
            state,
            flat(proposal_position),
            flat(proposal_momentum),
            start,
            gather(acceptance_rate),
            gather(divergent) | ~included,
            inverse_mass,
        )
        return like(new, state)

    @staticmethod
    def final(state) -> tuple[jax.Array, jax.Array]:
        """The step size and trajectory length to sample with: the moving averages."""
        return (
            jnp.exp(state.log_step_size_moving_average),
            jnp.exp(state.log_trajectory_length_moving_average),
        )


# --- The burn-in tuning of a sampler, mode by mode -------------------------------------------

#: What HMC's burn-in may tune (``hmc.Config.adapt``); see :func:`hmc_adaptation`.
ADAPT_MODES = ("none", "step", "mass", "chees", "auto")


class Tuning(NamedTuple):
    """What an iteration integrates with.

    Attributes:
        step_size: the leapfrog step size ε.
        trajectory_len: the integration time τ (``None`` for NUTS, whose trajectories end
            where they turn back).
        inverse_mass_matrix: the diagonal of M⁻¹.
    """

    step_size: jax.Array
    trajectory_len: jax.Array | None
    inverse_mass_matrix: jax.Array


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


class Adaptation(NamedTuple):
    """A sampler's burn-in tuning of ε, τ and M⁻¹ as two pure functions.

    The sampler keeps the adaptation's state in its own and asks, after every iteration, what
    the next one integrates with; past burn-in the answer no longer changes.

    Attributes:
        init: ``(key, start, logdensity_fn, step_size, trajectory_len) -> (state, tuning)``:
            the adaptation's state and the first iteration's :class:`Tuning` at the chain's
            start (a ``blackjax.mcmc.hmc.HMCState``), from the given ε and τ.
        update: ``(state, iteration, start_position, proposal, info, tuning) -> (state,
            tuning)``: after iteration ``iteration`` (counted from 0), which started at
            ``start_position`` with ``tuning`` and moved to ``proposal`` (an ``HMCState``)
            with BlackJAX's ``info``, the state and the next iteration's tuning.
        jittered: each iteration integrates a quasi-random fraction (:func:`jitter`) of τ.
        tree_depth: ``iteration -> depth``: the iteration runs NUTS with trees at most this
            deep instead of static HMC where it is positive (``"auto"``'s burn-in, see
            :func:`auto_tree_depth`); ``None``: static HMC throughout.
        early_until: the last iteration whose M⁻¹ is still the identity (-1: none), where a
            static trajectory takes at most 2^:data:`EARLY_TREE_DEPTH` − 1 steps.

    Example:
        >>> import blackjax, jax, jax.numpy as jnp
        >>> def logdensity(x):
        ...     return -0.5 * jnp.sum(x ** 2)
        >>> adaptation = hmc_adaptation("step", num_burn_in=10, num_iterations=20, target=0.8)
        >>> start = blackjax.hmc.init(jnp.zeros(2), logdensity)
        >>> state, tuning = adaptation.init(None, start, logdensity, 0.1, 1.0)
        >>> info = blackjax.hmc.build_kernel()(jax.random.PRNGKey(0), start, logdensity,
        ...                                    tuning.step_size, tuning.inverse_mass_matrix, 10)[1]
        >>> state, tuning = adaptation.update(state, jnp.int32(0), start.position, start, info,
        ...                                   tuning)
        >>> bool(tuning.step_size > 0.1), float(tuning.trajectory_len)  # accepted: ε grows
        (True, 1.0)
    """

    init: Callable[..., tuple[Any, Tuning]]
    update: Callable[..., tuple[Any, Tuning]]
    jittered: bool = False
    tree_depth: Callable[[jax.Array], jax.Array] | None = None
    early_until: int = -1


def size_and_dtype(position: Params) -> tuple[int, Any]:
    """The number of parameters of ``position`` and their common float type."""
    leaves = jax.tree.leaves(position)
    return sum(leaf.size for leaf in leaves), jnp.result_type(*leaves)


def reasonable_step_size(
    key: jax.Array,
    start,
    logdensity_fn: Callable,
    step_size: jax.Array,
    *,
    target: float,
    divergence_threshold: float,
) -> jax.Array:
    """Hoffman & Gelman's doubling and halving of ε from ``start`` (identity mass) until one
    leapfrog step's acceptance crosses ``target``, so that adaptation starts where the chain
    stands (``blackjax.adaptation.step_size.find_reasonable_step_size``)."""
    size, dtype = size_and_dtype(start.position)
    base = blackjax.hmc.build_kernel(divergence_threshold=divergence_threshold)
    ones = jnp.ones(size, dtype)

    def kernel_at(eps):
        return lambda k, s: base(k, s, logdensity_fn, eps, ones, 1)

    found = find_reasonable_step_size(key, kernel_at, start, step_size, target_accept=target)
    # Doubling stops at the first ε whose acceptance fell below the target, which can be past
    # the leapfrog's stability limit (a stiff start accepted 0.9 at ε and 1e-34 at 2ε, and every
    # first trajectory was rejected); the ε before it is the largest one seen to accept.
    return jnp.where(found > step_size, found / 2, found)


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


def kept(
    state: Any, iteration: jax.Array, start_position: Params, proposal, info, tuning: Tuning
) -> tuple[Any, Tuning]:
    """The update of a sampler that adapts nothing: state and tuning as they are."""
    return state, tuning


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


def window_update(
    state: WindowState,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    windows: Windows,
) -> tuple[WindowState, Tuning]:
    """Stan's windows: ε by dual averaging and M⁻¹ from the chain's own positions (and
    gradients); τ as it is."""
    state, eps, inverse_mass = windows.update(
        state, iteration, proposal.position, info.acceptance_rate, gradient=proposal.logdensity_grad
    )
    return state, Tuning(eps, tuning.trajectory_len, inverse_mass)


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


def during_burn_in(
    state: Any,
    iteration: jax.Array,
    start_position: Params,
    proposal,
    info,
    tuning: Tuning,
    *,
    update: Callable,
    num_burn_in: int,
) -> tuple[Any, Tuning]:
    """``update`` during the first ``num_burn_in`` iterations; after them, state and tuning
    as they are (traced values: the same program serves the whole run)."""
    new = update(state, iteration, start_position, proposal, info, tuning)
    in_burn_in = iteration < num_burn_in
    return jax.tree.map(
        lambda n, o: jnp.where(in_burn_in, jnp.asarray(n, o.dtype), o), new, (state, tuning)
    )


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
        estimator: M⁻¹ of ``"mass"``, ``"chees"`` and ``"auto"`` (:data:`MASS_ESTIMATORS`).
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
    if mode == "auto":
        init = functools.partial(auto_init, **settings)
    else:
        init = functools.partial(hmc_init, **settings)
    if mode == "none" or not num_burn_in:
        update = kept
    else:
        ends = slow_window_ends(num_burn_in)
        update = functools.partial(
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


def slow_window_ends(num_burn_in: int) -> list[int]:
    """The burn-in iterations at which a slow window closes (M⁻¹ changes after them).

    Example:
        >>> slow_window_ends(300)
        [21, 35, 63, 119, 269]
    """
    with jax.ensure_compile_time_eval():  # numbers, also when called inside a trace
        schedule = np.asarray(window_schedule(num_burn_in))
    return [i for i, (stage, end) in enumerate(schedule.tolist()) if stage == 1 and end]


def early_until(num_burn_in: int) -> int:
    """The last iteration that runs with the identity M⁻¹: the one that closes the first slow
    window (the whole burn-in when it has none).

    Example:
        >>> early_until(500), early_until(5)
        (36, 4)
    """
    ends = slow_window_ends(num_burn_in) if num_burn_in else []
    return ends[0] if ends else num_burn_in - 1


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


def window_init(
    key: jax.Array,
    start,
    logdensity_fn: Callable,
    step_size: float,
    trajectory_len: float | None,
    *,
    windows: Windows,
    search: bool = False,
    target: float = 0.8,
    divergence_threshold: float = 1000.0,
) -> tuple[WindowState, Tuning]:
    """Stan's windows from the given ε, or with ``search`` from :func:`reasonable_step_size`
    where the chain starts, and the identity M⁻¹."""
    del trajectory_len
    size, dtype = size_and_dtype(start.position)
    eps = jnp.asarray(step_size, dtype)
    if search:
        eps = reasonable_step_size(
            key, start, logdensity_fn, eps, target=target, divergence_threshold=divergence_threshold
        ).astype(dtype)
    return windows.init(eps, size, dtype), Tuning(eps, None, jnp.ones(size, dtype))


def window_adaptation(
    num_burn_in: int,
    target: float,
    *,
    adapt_mass: bool = True,
    divergence_threshold: float = 1000.0,
) -> Adaptation:
    """Stan's window adaptation of ε and, with ``adapt_mass``, a diagonal M⁻¹ (Stan's
    regularised variance of the positions), as NUTS tunes; state: :class:`WindowState`. With
    a burn-in, each chain's ε starts from :func:`reasonable_step_size` where it starts."""
    windows = Windows(max(num_burn_in, 1), target, adapt_mass=adapt_mass)
    update = kept
    if num_burn_in:
        update = functools.partial(
            during_burn_in,
            num_burn_in=num_burn_in,
            update=functools.partial(window_update, windows=windows),
        )
    return Adaptation(
        functools.partial(
            window_init,
            windows=windows,
            search=num_burn_in > 0,
            target=target,
            divergence_threshold=divergence_threshold,
        ),
        update,
    )
