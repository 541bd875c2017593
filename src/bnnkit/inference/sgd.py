"""SGD with momentum to the MAP: maximise the same tempered log posterior HMC samples.

The loss is ``-log p_T(θ | B)``, the minibatch estimate of the negative tempered log posterior
(``[log p(θ) + (N/|B|) Σ_{i∈B} log p(y_i | x_i, θ)] / T``), so weight decay is the Gaussian prior
itself, never a separate regulariser, and any prior of :mod:`bnnkit.priors` works. The update is
optax's heavy-ball SGD (bnn_hmc's ``momentum_decay`` β)::

    m_{t+1} = β m_t + ∇_θ(−log p_T(θ_t | B_t))
    θ_{t+1} = θ_t − η_t m_{t+1}

with the paper's cosine schedule ``η_t = η₀ · ½ (1 + cos(π t / (E · M)))`` over E epochs of M
minibatches (:func:`bnnkit.schedules.cosine`).

``--clip-grad-norm c`` (off by default, as in bnn_hmc) first rescales the gradient ``g`` to a
global norm of at most ``c·N`` (``g ← g · min(1, c N / ‖g‖)``, optax's
``clip_by_global_norm``): a bound of ``c`` per training example, so one value suits any
dataset's size. It keeps a single huge gradient from throwing the weights far away, which a
heteroscedastic likelihood gives when its predicted noise std nears zero on a badly fitted point.

The optimiser (:func:`heavy_ball`) and the update (:func:`descend`, :func:`update`) are pieces of
their own because SWAG and MC dropout descend exactly as SGD does, on their own objectives.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit.toy_problem import linear_log_posterior
    >>> from bnnkit.types import Batch
    >>> model, lp = linear_log_posterior(num_data=16)
    >>> method = build(lp, Config(init_step_size=1e-2, num_epochs=5, batch_size=4))
    >>> state = method.init(None, model.init(jax.random.PRNGKey(0), jnp.ones((1, 2))), None)
    >>> state, info = method.step(None, state, Batch(jnp.ones((4, 2)), jnp.ones(4)))
    >>> float(info.step_size)
    0.01
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bnnkit import schedules
from bnnkit.inference.base import EpochSettings, Method, model_key, state_position
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior import Samples
from bnnkit.settings import Exclusive, setting
from bnnkit.types import Batch, Key, Params, Schedule


class SGDState(NamedTuple):
    """Parameters, optimiser state and the number of updates done."""

    position: Params
    opt_state: Any
    count: jax.Array


class SGDInfo(NamedTuple):
    """Minibatch log posterior before the update, and the step size used."""

    log_posterior: jax.Array
    step_size: jax.Array


#: Heavy-ball momentum β in [0, 1), for every method that has one (SGD, SGMCMC, VI's SGD).
MOMENTUM_BOUNDS = (0.0, Exclusive(1.0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(EpochSettings):
    """SGD/MAP with heavy-ball momentum and the cosine schedule (bnn_hmc's flags)."""

    METHOD: ClassVar[str] = "sgd"

    momentum_decay: float = setting(
        0.9,
        aliases=("--momentum",),
        help="heavy-ball momentum β in [0, 1); the step size follows a cosine schedule to 0",
        bounds=MOMENTUM_BOUNDS,
    )
    clip_grad_norm: float | None = setting(
        None,
        help="rescale each step's gradient to a global norm of at most this times N, the "
        "number of training examples (a per-example bound; default: no clipping)",
        bounds=(Exclusive(0), None),
    )

    def schedule(self, steps_per_epoch: int) -> Schedule:
        """The step size as a function of the update count: the paper's cosine to 0 over
        every step of the run."""
        return schedules.cosine(self.init_step_size, self.num_epochs * steps_per_epoch)


def heavy_ball(config: Config, schedule: Schedule, num_data: int) -> optax.GradientTransformation:
    """optax's heavy-ball SGD on ``schedule`` with ``config.momentum_decay`` (plain SGD at 0),
    after clipping the gradient's global norm to ``config.clip_grad_norm`` times ``num_data``
    when that is set: the optimiser of every method that descends by SGD (SWAG, MC dropout)."""
    optimizer = optax.sgd(schedule, momentum=config.momentum_decay or None)
    if config.clip_grad_norm is not None:
        bound = config.clip_grad_norm * num_data
        optimizer = optax.chain(optax.clip_by_global_norm(bound), optimizer)
    return optimizer


def init(
    key: Key, params: Params, batch: Batch | None = None, *, optimizer: optax.GradientTransformation
) -> SGDState:
    """The state at ``params``: ``optimizer``'s initial state, no update done (``key`` and
    ``batch`` unused)."""
    del key, batch
    return SGDState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


def descend(
    position: Params, opt_state: Any, grad: Params, *, optimizer: optax.GradientTransformation
) -> tuple[Params, Any]:
    """``position`` and ``opt_state`` after one update of ``optimizer`` on the negative of the
    objective whose gradient at ``position`` is ``grad``."""
    neg_grad = jax.tree.map(jnp.negative, grad)
    updates, opt_state = optimizer.update(neg_grad, opt_state, position)
    return optax.apply_updates(position, updates), opt_state


def update(
    state: SGDState,
    value: jax.Array,
    grad: Params,
    *,
    optimizer: optax.GradientTransformation,
    schedule: Schedule,
) -> tuple[SGDState, SGDInfo]:
    """The state after one step up the objective whose value and gradient at
    ``state.position`` are ``value`` and ``grad``, and the step's info."""
    position, opt_state = descend(state.position, state.opt_state, grad, optimizer=optimizer)
    info = SGDInfo(value, jnp.asarray(schedule(state.count), value.dtype))
    return SGDState(position, opt_state, state.count + 1), info


def step(
    key: Key,
    state: SGDState,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    optimizer: optax.GradientTransformation,
    schedule: Schedule,
) -> tuple[SGDState, SGDInfo]:
    """One heavy-ball step on ``-log_posterior`` of ``batch``, whose stochastic model draws from
    :func:`~bnnkit.inference.base.model_key` of ``key``."""
    value, grad = jax.value_and_grad(log_posterior)(state.position, batch, key=model_key(key))
    return update(state, value, grad, optimizer=optimizer, schedule=schedule)


def posterior(kept: SGDState) -> Samples:
    """The last kept state's parameters as a single sample."""
    last = jax.tree.map(lambda a: a[-1:], kept.position)
    return Samples.from_single_chain(last)


def build(log_posterior: LogPosterior, config: Config) -> Method:
    """SGD with heavy-ball momentum on ``-log_posterior``.

    Args:
        log_posterior: the tempered log posterior (minibatch-scaled); its ``num_data`` sets the
            steps per epoch of the schedule, and a stochastic model gets the step's
            :func:`~bnnkit.inference.base.model_key`.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method`; its posterior is the last state's parameters
        as a single sample (a point mass at the MAP estimate).
    """
    schedule = config.schedule(config.steps_per_epoch(log_posterior.num_data))
    optimizer = heavy_ball(config, schedule, log_posterior.num_data)
    return Method(
        init=functools.partial(init, optimizer=optimizer),
        step=functools.partial(
            step, log_posterior=log_posterior, optimizer=optimizer, schedule=schedule
        ),
        posterior=posterior,
        position=state_position,
    )
