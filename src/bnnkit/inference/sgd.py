"""SGD with momentum to the MAP: maximise the same tempered log posterior HMC samples.

The loss is ``-log p_T(θ | B)``, the minibatch estimate of the negative tempered log posterior
(``[log p(θ) + (N/|B|) Σ_{i∈B} log p(y_i | x_i, θ)] / T``), so weight decay is the Gaussian prior
itself, never a separate regulariser, and any prior of :mod:`bnnkit.priors` works. The update is
optax's heavy-ball SGD (bnn_hmc's ``momentum_decay`` β)::

    m_{t+1} = β m_t + ∇_θ(−log p_T(θ_t | B_t))
    θ_{t+1} = θ_t − η_t m_{t+1}

``η_t`` is a number or an optax schedule of the step count (e.g. :func:`bnnkit.schedules.cosine`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bnnkit.errors import ConfigError
from bnnkit.inference.base import Method
from bnnkit.log_posterior import Batch
from bnnkit.posterior import Samples

Params = Any


class SGDState(NamedTuple):
    """Parameters, optimiser state and the number of updates done."""

    position: Params
    opt_state: Any
    count: jax.Array


class SGDInfo(NamedTuple):
    """Minibatch log posterior before the update, and the step size used."""

    log_posterior: jax.Array
    step_size: jax.Array


def _as_schedule(step_size: float | optax.Schedule, name: str = "step size") -> optax.Schedule:
    if callable(step_size):
        return step_size
    if not (float(step_size) > 0 and jnp.isfinite(step_size)):
        raise ConfigError(f"{name} {step_size} must be a finite number > 0")
    return optax.constant_schedule(float(step_size))


def build(
    log_posterior,
    step_size: float | optax.Schedule,
    momentum_decay: float = 0.9,
) -> Method:
    """SGD with heavy-ball momentum on ``-log_posterior``.

    Args:
        log_posterior: ``(params, batch) -> scalar`` tempered log posterior (minibatch-scaled).
        step_size: η, a number or an optax schedule of the update count.
        momentum_decay: β in [0, 1).

    Returns:
        A :class:`~bnnkit.inference.base.Method`; its posterior is the last state's parameters
        as a single sample (a point mass at the MAP estimate).

    Example:
        >>> method = build(log_posterior, step_size=schedules.cosine(1e-3, 1000))  # doctest: +SKIP
        >>> state = method.init(key, params, None)  # doctest: +SKIP
        >>> state, info = method.step(key, state, batch)  # doctest: +SKIP
    """
    if not 0.0 <= momentum_decay < 1.0:
        raise ConfigError(f"--momentum-decay {momentum_decay} must be in [0, 1)")
    schedule = _as_schedule(step_size)
    optimizer = optax.sgd(schedule, momentum=momentum_decay or None)

    def init(key: jax.Array, params: Params, batch: Batch | None = None) -> SGDState:
        del key, batch
        return SGDState(params, optimizer.init(params), jnp.zeros((), jnp.int32))

    def step(key: jax.Array, state: SGDState, batch: Batch) -> tuple[SGDState, SGDInfo]:
        del key
        value, grad = jax.value_and_grad(log_posterior)(state.position, batch)
        neg_grad = jax.tree.map(jnp.negative, grad)
        updates, opt_state = optimizer.update(neg_grad, state.opt_state, state.position)
        position = optax.apply_updates(state.position, updates)
        info = SGDInfo(value, jnp.asarray(schedule(state.count), value.dtype))
        return SGDState(position, opt_state, state.count + 1), info

    def posterior(kept: SGDState) -> Samples:
        last = jax.tree.map(lambda a: a[-1:], kept.position)
        return Samples.from_single_chain(last)

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.position)
