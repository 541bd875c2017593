"""Stochastic-gradient MCMC: SGLD, SGHMC, and their RMSprop-preconditioned forms.

One update rule covers the family (bnn_hmc's parameterisation, with the momentum measured in
units of √η). With ``g = ∇_θ log p_T(θ | B)`` the minibatch gradient of the tempered log posterior,
a preconditioner ``M`` (identity, or RMSprop's ``√v + ε``), ``ξ ~ N(0, I)`` and momentum decay β::

    m_{t+1} = β m_t + √η_t g + √(2 (1 − β)) · √M ⊙ ξ       (√M ⊙ ξ ~ N(0, M))
    θ_{t+1} = θ_t + √η_t M⁻¹ m_{t+1}

- β = 0 is SGLD (Welling & Teh 2011): ``θ ← θ + η M⁻¹ g + √(2η) M^{-½} ξ``, whose stationary
  distribution as η → 0 is ``exp(log p_T)``, the posterior at temperature T. Because ``g`` is the
  gradient of the already tempered log posterior, the noise is ``√(2η)`` at every T: the
  temperature enters once, in :class:`bnnkit.log_posterior.LogPosterior`.
- β > 0 is SGHMC (Chen et al. 2014) with friction ``1 − β`` per step.
- ``preconditioner="rmsprop"`` is pSGLD (Li et al. 2016): ``v ← α v + (1 − α) g²``,
  ``M = √v + ε``, leaving out the Γ(θ) correction term as Li et al. and bnn_hmc do; v starts
  at 1 so the first steps are unpreconditioned.

Minibatch gradients carry noise of their own, and a finite η biases the stationary distribution;
both shrink as η → 0 (see ``tests/inference/test_sgmcmc_exact.py``).

Step sizes follow bnn_hmc's schedules (:mod:`bnnkit.schedules`): ``constant`` is a cosine from
η₀ to ``final_step_size`` over the burn-in, then constant; ``cyclical`` is η₀ through the
burn-in, then cosine cycles of ``cycle_length`` epochs (Zhang et al. 2020). The paper's four
variants::

    SGLD            momentum_decay=0    step_size_schedule="constant"
    SGHMC           momentum_decay=0.9  step_size_schedule="constant"
    SGHMC-CLR       momentum_decay=0.9  step_size_schedule="cyclical", cycle_length=C
    SGHMC-CLR-Prec  ... as SGHMC-CLR ... preconditioner="rmsprop"

Example:
    >>> config = Config(init_step_size=1e-5, num_epochs=8, batch_size=32, momentum_decay=0.9,
    ...                 step_size_schedule="cyclical", cycle_length=2, num_burn_in=2,
    ...                 preconditioner="RMSprop")
    >>> config.variant, config.ensemble_freq, config.loop(277).kept_units()
    ('SGHMC-CLR-Prec', 2, [3, 5, 7])
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError
from bnnkit.inference._noise import DRAWS, NOISES
from bnnkit.inference.base import (
    EpochSettings,
    Loop,
    Method,
    burn_in_schedule,
    chain_samples,
    epochs_after_burn_in,
    lowercase_choices,
    model_key,
    state_position,
)
from bnnkit.inference.sgd import MOMENTUM_BOUNDS
from bnnkit.log_posterior import LogPosterior
from bnnkit.settings import MEMBERS, UNITS, Exclusive, setting
from bnnkit.types import Batch, Key, Params, Schedule

PRECONDITIONERS = ("none", "rmsprop")
SCHEDULES = ("constant", "cyclical")
#: ε added to √v in RMSprop's preconditioner.
RMSPROP_EPS = 1e-7


class SGMCMCState(NamedTuple):
    """Position, momentum (zero for SGLD), RMSprop's second moment and the update count."""

    position: Params
    momentum: Params
    second_moment: Params
    count: jax.Array


class SGMCMCInfo(NamedTuple):
    """Minibatch log posterior before the update, and the step size used."""

    log_posterior: jax.Array
    step_size: jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(EpochSettings):
    """SGLD, SGHMC and their cyclical and RMSprop-preconditioned forms (bnn_hmc's flags).

    Raises:
        ConfigError: a value outside the ranges below, a cycle that does not fit in the epochs
            after the burn-in, or settings that keep no sample.
    """

    METHOD: ClassVar[str] = "sgmcmc"

    momentum_decay: float = setting(
        0.0,
        aliases=("--momentum",),
        help="β in [0, 1): 0 is SGLD, > 0 SGHMC (the paper uses 0.9)",
        bounds=MOMENTUM_BOUNDS,
    )
    preconditioner: str = setting(
        "none", choices=PRECONDITIONERS, help="none, or rmsprop (pSGLD, Li et al. 2016)"
    )
    rmsprop_decay: float = setting(
        0.99,
        help="RMSprop's decay α of the running average of squared gradients, in (0, 1)",
        bounds=(Exclusive(0), Exclusive(1)),
    )
    noise: str = setting(
        "gaussian",
        choices=NOISES,
        help="gaussian, or rademacher: ±1 signs with the same mean and "
        "covariance, several times cheaper to draw (same weak order)",
    )
    step_size_schedule: str = setting(
        "constant",
        choices=SCHEDULES,
        help="constant (cosine over the burn-in to --final-step-size, then constant) or "
        "cyclical (constant over the burn-in, then cosine cycles of --cycle-length epochs)",
    )
    final_step_size: float | None = setting(
        None,
        help="constant schedule: the step size after the burn-in (default: the initial)",
        bounds=(Exclusive(0), None),
    )
    cycle_length: int | None = setting(
        None,
        aliases=("--step-size-cycle-length-epochs",),
        help="cyclical schedule: epochs per cycle",
        bounds=UNITS,
    )
    num_burn_in: int = setting(
        0,
        aliases=("--num-burnin-epochs",),
        help="epochs before the first kept sample",
        bounds=(0, UNITS[1]),
    )
    ensemble_freq: int | None = setting(
        None,
        help="keep a sample every N epochs after the burn-in (default: 1, or the cycle "
        "length for the cyclical schedule: the end of each cycle)",
        bounds=UNITS,
    )
    num_chains: int = setting(1, help="independent chains, vmapped", bounds=MEMBERS)

    def __post_init__(self) -> None:
        super().__post_init__()
        lowercase_choices(
            self, preconditioner=PRECONDITIONERS, noise=NOISES, step_size_schedule=SCHEDULES
        )
        after = epochs_after_burn_in(self)
        if self.ensemble_freq is None:
            default = self.cycle_length if self.step_size_schedule == "cyclical" else 1
            object.__setattr__(self, "ensemble_freq", default)
        if self.ensemble_freq > after:
            raise ConfigError(
                f"no sample would be kept: --ensemble-freq {self.ensemble_freq} "
                f"is longer than the {after} epochs after the burn-in"
            )

    @property
    def draws_gaussian_noise(self) -> bool:
        return self.noise == "gaussian"

    @property
    def label(self) -> str:
        return self.variant

    @property
    def variant(self) -> str:
        """The paper's name of this variant (SGLD, SGHMC, SGHMC-CLR, SGHMC-CLR-Prec, ...)."""
        name = "SGLD" if self.momentum_decay == 0 else "SGHMC"
        if self.step_size_schedule == "cyclical":
            name += "-CLR"
        if self.preconditioner == "rmsprop":
            name += "-Prec"
        return name

    def schedule(self, steps_per_epoch: int) -> Schedule:
        """The step size as a function of the update count (:func:`burn_in_schedule`)."""
        return burn_in_schedule(self, steps_per_epoch, self.final_step_size)

    def loop(self, num_train: int) -> Loop:
        return self.epoch_loop(
            num_train,
            num_members=self.num_chains,
            burn_in=self.num_burn_in,
            keep_every=self.ensemble_freq,
        )


def init(
    key: Key, params: Params, batch: Batch | None = None, *, precondition: bool
) -> SGMCMCState:
    """The state at ``params``: zero momentum, and RMSprop's second moment at 1 when
    ``precondition`` (else zero, unused); ``key`` and ``batch`` unused."""
    del key, batch
    zeros = jax.tree.map(jnp.zeros_like, params)
    # v starts at 1, not 0: the first steps are plain SGLD/SGHMC instead of dividing the
    # noise by √v of a gradient that may be ~0 (a chain started at a mode would explode).
    ones = jax.tree.map(jnp.ones_like, params)
    return SGMCMCState(params, zeros, ones if precondition else zeros, jnp.zeros((), jnp.int32))


def rmsprop(second_moment: Params, grad: Params, *, decay: float) -> tuple[Params, Params]:
    """RMSprop's ``v ← α v + (1 − α) g²`` and the preconditioner ``M = √v + ε`` it gives."""
    v = jax.tree.map(
        lambda v, g: decay * v + (1 - decay) * jnp.square(g),
        second_moment,
        grad,
    )
    return v, jax.tree.map(lambda v: jnp.sqrt(v) + RMSPROP_EPS, v)


def new_momentum(
    m: jax.Array,
    g: jax.Array,
    n: jax.Array,
    d: jax.Array | None = None,
    *,
    decay: float,
    sqrt_eta: jax.Array,
    noise_scale: float,
) -> jax.Array:
    """One leaf's ``β m + √η g + √(2 (1 − β)) · √M ⊙ ξ`` (``d``: M's diagonal, or ``None``
    for the identity)."""
    n = n if d is None else n * jnp.sqrt(d)
    return decay * m + sqrt_eta * g + noise_scale * n


def step(
    key: Key,
    state: SGMCMCState,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    schedule: Schedule,
    momentum_decay: float,
    noise: str,
    rmsprop_decay: float | None,
) -> tuple[SGMCMCState, SGMCMCInfo]:
    """One SGLD/SGHMC update on ``batch`` (see the module), preconditioned by RMSprop with
    decay ``rmsprop_decay`` unless it is ``None``.

    ``key`` draws ξ (a ``noise`` of :data:`~bnnkit.inference._noise.DRAWS`); a stochastic model
    draws from :func:`~bnnkit.inference.base.model_key` of it.
    """
    value, grad = jax.value_and_grad(log_posterior)(state.position, batch, key=model_key(key))
    eta = jnp.asarray(schedule(state.count), value.dtype)
    sqrt_eta = jnp.sqrt(eta)
    xi = DRAWS[noise](key, grad)
    if rmsprop_decay is not None:
        v, m_diag = rmsprop(state.second_moment, grad, decay=rmsprop_decay)
    else:
        v, m_diag = state.second_moment, None
    kick = functools.partial(
        new_momentum,
        decay=momentum_decay,
        sqrt_eta=sqrt_eta,
        noise_scale=(2.0 * (1.0 - momentum_decay)) ** 0.5,
    )
    if m_diag is not None:
        momentum = jax.tree.map(kick, state.momentum, grad, xi, m_diag)
        position = jax.tree.map(
            lambda p, m, d: p + sqrt_eta * m / d, state.position, momentum, m_diag
        )
    else:
        momentum = jax.tree.map(kick, state.momentum, grad, xi)
        position = jax.tree.map(lambda p, m: p + sqrt_eta * m, state.position, momentum)
    return SGMCMCState(position, momentum, v, state.count + 1), SGMCMCInfo(value, eta)


def build(log_posterior: LogPosterior, config: Config) -> Method:
    """SGLD (``momentum_decay=0``) or SGHMC, optionally RMSprop-preconditioned.

    Args:
        log_posterior: the tempered log posterior (minibatch-scaled); its ``num_data`` sets the
            steps per epoch of the schedule, and a stochastic model gets the step's
            :func:`~bnnkit.inference.base.model_key` (ξ keeps the step's key).
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose posterior is the kept positions as
        :class:`~bnnkit.posterior.Samples`.
    """
    precondition = config.preconditioner == "rmsprop"
    return Method(
        init=functools.partial(init, precondition=precondition),
        step=functools.partial(
            step,
            log_posterior=log_posterior,
            schedule=config.schedule(config.steps_per_epoch(log_posterior.num_data)),
            momentum_decay=config.momentum_decay,
            noise=config.noise,
            rmsprop_decay=config.rmsprop_decay if precondition else None,
        ),
        posterior=chain_samples,
        position=state_position,
    )
