"""SWA-Gaussian (Maddox et al. 2019) and MultiSWAG (Wilson & Izmailov 2020).

SGD with heavy-ball momentum on the tempered log posterior (exactly :mod:`bnnkit.inference.sgd`'s
update), whose step size after a burn-in stays constant or cycles; every c steps after the
burn-in SWAG collects the iterate θ_i into

- the first two moments, by Welford's update (numerically stabler in float32 than the running
  mean of squares, with the same values in exact arithmetic)::

      n ← n + 1,   δ = θ_i − θ̄,   θ̄ ← θ̄ + δ / n,   M₂ ← M₂ + δ ⊙ (θ_i − θ̄),
      Σ_diag = M₂ / n  (= mean(θ²) − θ̄²);

- the deviation matrix D, whose K columns are the last K deviations ``θ_i − θ̄_i`` (the iterate
  minus the running mean just after it was added), a ring buffer of K slots.

The posterior is :class:`~bnnkit.posterior.low_rank_gaussian.LowRankGaussian`
``N(θ̄, ½ (Σ_diag + D Dᵀ / (K − 1)))``, with K the number of deviations collected (at most
``max_rank``); its model average uses ``swag_num_draws`` weight samples. ``num_members`` M > 1
runs M independent SWAG members (own initialisation and data order), vmapped like a deep
ensemble: MultiSWAG, whose predictive is the equal mixture of the M Gaussians.

Step sizes (:mod:`bnnkit.schedules`): ``constant`` is a cosine from η₀ (``init_step_size``) to
``swag_step_size`` over the burn-in, then constant (Maddox et al.'s SWA learning rate);
``cyclical`` is η₀ through the burn-in, then cosine cycles of ``cycle_length`` epochs from η₀
to 0, collecting at the end of every cycle by default.

On a quadratic log posterior with a constant step, the collected iterates are a stationary
linear process whose mean is the MAP and whose covariance solves a Lyapunov equation
(``tests/inference/test_swag.py`` checks the SWAG moments against it); only for a step size and
batch noise matched to the curvature is that covariance the posterior's, which is why SWAG is
an approximation.

Example:
    >>> config = Config(init_step_size=1e-2, num_epochs=10, batch_size=32, num_burn_in=5,
    ...                 num_members=3)
    >>> config.label, config.loop(320).num_members, config.loop(320).kept_units()
    ('MultiSWAG (M=3)', 3, [9])
    >>> config.collection_steps(steps_per_epoch=10)  # every epoch after the burn-in
    (50, 10)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bnnkit.errors import ConfigError
from bnnkit.inference import sgd
from bnnkit.inference.adaptation import any_chain
from bnnkit.inference.base import (
    Loop,
    Method,
    burn_in_schedule,
    epochs_after_burn_in,
    lowercase_choices,
    model_key,
    state_position,
)
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior.low_rank_gaussian import LowRankGaussian
from bnnkit.settings import Exclusive, setting
from bnnkit.types import Batch, Key, Params, Schedule

SCHEDULES = ("constant", "cyclical")


class SWAGState(NamedTuple):
    """The SGD state and SWAG's collected statistics.

    Attributes:
        position: θ, the SGD iterate.
        opt_state: the momentum (optax's state).
        count: updates done.
        num_collected: n, iterates collected.
        mean: θ̄ of the collected iterates.
        m2: Welford's M₂, the sum of squared deviations from θ̄ (``Σ_diag = M₂ / n``).
        deviations: the ring buffer of the last K deviations, each leaf ``(K, ...)``; slot
            ``(n − 1) mod K`` holds the newest.
    """

    position: Params
    opt_state: Any
    count: jax.Array
    num_collected: jax.Array
    mean: Params
    m2: Params
    deviations: Params


class SWAGInfo(NamedTuple):
    """Minibatch log posterior before the update, the step size and the iterates collected."""

    log_posterior: jax.Array
    step_size: jax.Array
    num_collected: jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(sgd.Config):
    """SWA-Gaussian (Maddox et al. 2019): SGD whose iterates after a burn-in give a diagonal
    plus low-rank Gaussian posterior; ``--num-members M`` runs MultiSWAG (Wilson & Izmailov
    2020), M SWAG members vmapped like a deep ensemble.

    Raises:
        ConfigError: a value outside the ranges below, a cycle that does not fit in the epochs
            after the burn-in, or a schedule setting of the other schedule.
    """

    METHOD: ClassVar[str] = "swag"
    API_NAME: ClassVar[str] = "SWAG"

    num_burn_in: int = setting(
        help="epochs of SGD before the first iterate is collected", bounds=(0, None)
    )
    step_size_schedule: str = setting(
        "constant",
        choices=SCHEDULES,
        help="constant (cosine over the burn-in to --swag-step-size, then constant) or "
        "cyclical (constant over the burn-in, then cosine cycles of --cycle-length epochs "
        "down to 0)",
    )
    swag_step_size: float | None = setting(
        None,
        help="constant schedule: the step size after the burn-in (default: the initial)",
        bounds=(Exclusive(0), None),
    )
    cycle_length: int | None = setting(
        None, help="cyclical schedule: epochs per cycle", bounds=(1, None)
    )
    collect_every: int | None = setting(
        None,
        help="collect an iterate every c minibatch steps after the burn-in (default: "
        "every epoch, or every cycle for the cyclical schedule)",
        bounds=(1, None),
    )
    max_rank: int = setting(
        20,
        help="K, the deviations kept for the low-rank part of the "
        "covariance (the last K collected)",
        bounds=(2, None),
    )
    num_members: int = setting(
        1,
        help="M SWAG members, each with its own initialisation and data order (M > 1: MultiSWAG)",
        bounds=(1, None),
    )
    sequential: bool = setting(
        False, help="train members one after another instead of in one vmapped step"
    )
    swag_num_draws: int = setting(
        20,
        help="weight samples drawn from each member's Gaussian for the predictive at evaluation",
        bounds=(1, None),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        lowercase_choices(self, step_size_schedule=SCHEDULES)
        epochs_after_burn_in(self)
        if self.step_size_schedule == "cyclical" and self.swag_step_size is not None:
            raise ConfigError(
                "--swag-step-size applies to --step-size-schedule constant "
                "only; the cyclical schedule decays to 0 in every cycle"
            )

    @property
    def label(self) -> str:
        return "SWAG" if self.num_members == 1 else f"MultiSWAG (M={self.num_members})"

    def schedule(self, steps_per_epoch: int) -> Schedule:
        """The step size as a function of the update count (:func:`burn_in_schedule`)."""
        return burn_in_schedule(self, steps_per_epoch, self.swag_step_size)

    def collection_steps(self, steps_per_epoch: int) -> tuple[int, int]:
        """``(B, c)``: the burn-in in steps and the steps between collections; the iterate after
        update t (counted from 1) is collected when ``t > B`` and ``(t − B) mod c = 0``."""
        burn = self.num_burn_in * steps_per_epoch
        if self.collect_every is not None:
            return burn, self.collect_every
        if self.step_size_schedule == "cyclical":
            return burn, self.cycle_length * steps_per_epoch
        return burn, steps_per_epoch

    def loop(self, num_train: int) -> Loop:
        return self.epoch_loop(
            num_train, num_members=self.num_members, vmap_members=not self.sequential
        )


def collect(state: SWAGState, position: Params, max_rank: int) -> SWAGState:
    """Add ``position`` to the moments and the deviation ring buffer (Welford's update)."""
    n = state.num_collected + 1
    inv_n = 1.0 / n.astype(jax.tree.leaves(position)[0].dtype)
    delta = jax.tree.map(jnp.subtract, position, state.mean)
    mean = jax.tree.map(lambda m, d: m + d * inv_n, state.mean, delta)
    m2 = jax.tree.map(lambda s, d, p, m: s + d * (p - m), state.m2, delta, position, mean)
    slot = (n - 1) % max_rank
    deviations = jax.tree.map(
        lambda buf, p, m: jax.lax.dynamic_update_index_in_dim(buf, p - m, slot, 0),
        state.deviations,
        position,
        mean,
    )
    return state._replace(num_collected=n, mean=mean, m2=m2, deviations=deviations)


def posterior_of(state: SWAGState, max_rank: int, num_draws: int) -> LowRankGaussian:
    """The Gaussian of one member's statistics (not jitted: K depends on n).

    Before anything is collected it is a point mass at the iterate."""
    n = int(state.num_collected)
    if n == 0:
        zeros = jax.tree.map(jnp.zeros_like, state.position)
        return LowRankGaussian(
            state.position, zeros, jax.tree.map(lambda a: a[:0], state.deviations), num_draws
        )
    rank = min(n, max_rank)
    var = jax.tree.map(lambda s: jnp.maximum(s / n, 0.0), state.m2)
    return LowRankGaussian(
        state.mean, var, jax.tree.map(lambda d: d[:rank], state.deviations), num_draws
    )


def init(
    key: Key,
    params: Params,
    batch: Batch | None = None,
    *,
    optimizer: optax.GradientTransformation,
    max_rank: int,
) -> SWAGState:
    """The state at ``params``: SGD's, and nothing collected yet into ``max_rank`` slots
    (``key`` and ``batch`` unused)."""
    del key, batch
    zeros = jax.tree.map(jnp.zeros_like, params)
    buffer = jax.tree.map(lambda p: jnp.zeros((max_rank, *p.shape), p.dtype), params)
    return SWAGState(
        params,
        optimizer.init(params),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
        zeros,
        zeros,
        buffer,
    )


def collect_where(due: jax.Array, state: SWAGState, max_rank: int) -> SWAGState:
    """``state`` with its iterate collected (:func:`collect`) where ``due``."""
    # Unbatched predicate (:func:`any_chain`): with one batched by the members' vmap every
    # step would collect, and write the K × d deviations, for nothing.
    return jax.lax.cond(
        any_chain(due),
        lambda s: jax.tree.map(
            lambda c, o: jnp.where(due, c, o), collect(s, s.position, max_rank), s
        ),
        lambda s: s,
        state,
    )


def step(
    key: Key,
    state: SWAGState,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    optimizer: optax.GradientTransformation,
    schedule: Schedule,
    burn: int,
    every: int,
    max_rank: int,
) -> tuple[SWAGState, SWAGInfo]:
    """One SGD step on ``-log_posterior`` of ``batch`` (a stochastic model draws from
    :func:`~bnnkit.inference.base.model_key` of ``key``), then the new iterate collected if it
    is due: after the ``burn`` steps of burn-in, every ``every`` steps."""
    value, grad = jax.value_and_grad(log_posterior)(state.position, batch, key=model_key(key))
    position, opt_state = sgd.descend(state.position, state.opt_state, grad, optimizer=optimizer)
    count = state.count + 1
    moved = state._replace(position=position, opt_state=opt_state, count=count)
    new = collect_where((count > burn) & ((count - burn) % every == 0), moved, max_rank)
    info = SWAGInfo(value, jnp.asarray(schedule(state.count), value.dtype), new.num_collected)
    return new, info


def posterior(kept: SWAGState, *, max_rank: int, num_draws: int) -> LowRankGaussian:
    """The last kept state's Gaussian (:func:`posterior_of`)."""
    last = jax.tree.map(lambda a: a[-1], kept)
    return posterior_of(last, max_rank, num_draws)


def collection_steps(config: Config, num_data: int) -> tuple[int, int]:
    """``(B, c)`` of :meth:`Config.collection_steps` on ``num_data`` training examples.

    Raises:
        ConfigError: settings that collect fewer than two iterates.
    """
    steps_per_epoch = config.steps_per_epoch(num_data)
    burn, every = config.collection_steps(steps_per_epoch)
    total = config.num_epochs * steps_per_epoch
    if (total - burn) // every < 2:
        raise ConfigError(
            f"SWAG would collect {(total - burn) // every} iterate(s) in the {total - burn} "
            f"steps after the burn-in, one every {every}; allowed: at least 2 (more epochs, "
            "a shorter --num-burn-in or a smaller --collect-every)"
        )
    return burn, every


def build(log_posterior: LogPosterior, config: Config) -> Method:
    """SWAG on ``log_posterior``: SGD, collecting iterates after the burn-in.

    Args:
        log_posterior: the tempered log posterior (minibatch-scaled); its ``num_data`` sets
            the steps per epoch, and a stochastic model gets the step's
            :func:`~bnnkit.inference.base.model_key`.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose posterior is the last kept state's
        :class:`~bnnkit.posterior.low_rank_gaussian.LowRankGaussian`.

    Raises:
        ConfigError: settings that collect fewer than two iterates.
    """
    num_data = log_posterior.num_data
    schedule = config.schedule(config.steps_per_epoch(num_data))
    burn, every = collection_steps(config, num_data)
    optimizer = sgd.heavy_ball(config, schedule, num_data)
    return Method(
        init=functools.partial(init, optimizer=optimizer, max_rank=config.max_rank),
        step=functools.partial(
            step,
            log_posterior=log_posterior,
            optimizer=optimizer,
            schedule=schedule,
            burn=burn,
            every=every,
            max_rank=config.max_rank,
        ),
        posterior=functools.partial(
            posterior, max_rank=config.max_rank, num_draws=config.swag_num_draws
        ),
        position=state_position,
    )
