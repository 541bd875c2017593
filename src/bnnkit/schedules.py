"""Step-size schedules of the paper's SGD and SGMCMC runs, as optax schedules of the step count.

Every schedule is a function ``step -> step size`` (an ``optax.Schedule``), so a method takes a
number or a schedule alike. Steps count minibatch updates; the helpers below take lengths in
*steps* — multiply epochs by ``steps_per_epoch`` (the number of minibatches per epoch).

- :func:`cosine`: ``η_t = η₀ · ½ (1 + cos(π t / T))`` for t < T, then 0 (bnn_hmc's SGD).
- :func:`constant_after_cosine_burnin`: cosine from η₀ down to η_f over the burn-in, then η_f
  (bnn_hmc's SGLD/SGHMC).
- :func:`cyclical_cosine`: η₀ through the burn-in, then cosine cycles
  ``η_t = η₀ · ½ (1 + cos(π ((t − B) mod C) / C))`` of C steps (cSG-MCMC, Zhang et al. 2020).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import optax

from bnnkit.errors import ConfigError
from bnnkit.types import Schedule


def _check_step_size(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} {value} must be a finite number > 0")


def cosine(init_step_size: float, total_steps: int) -> Schedule:
    """Cosine decay from ``init_step_size`` to 0 over ``total_steps`` steps.

    Example:
        >>> s = cosine(0.1, 100)
        >>> float(s(0)), round(float(s(50)), 6), float(s(100))
        (0.1, 0.05, 0.0)
    """
    _check_step_size("--init-step-size", init_step_size)
    if total_steps < 1:
        raise ConfigError(f"schedule length {total_steps} steps must be >= 1")
    return optax.cosine_decay_schedule(init_step_size, total_steps)


def constant_after_cosine_burnin(
    init_step_size: float, final_step_size: float, burnin_steps: int
) -> Schedule:
    """Cosine from ``init_step_size`` to ``final_step_size`` over the burn-in, then constant.

    Example:
        >>> s = constant_after_cosine_burnin(1e-2, 1e-4, 10)
        >>> float(s(0)), float(s(10)), float(s(1000))
        (0.01, 0.0001, 0.0001)
    """
    _check_step_size("--init-step-size", init_step_size)
    _check_step_size("--final-step-size", final_step_size)
    if burnin_steps < 0:
        raise ConfigError(f"burn-in length {burnin_steps} steps must be >= 0")
    if burnin_steps == 0:
        return optax.constant_schedule(final_step_size)
    decay = optax.cosine_decay_schedule(
        init_step_size, burnin_steps, alpha=final_step_size / init_step_size
    )
    return optax.join_schedules([decay, optax.constant_schedule(final_step_size)], [burnin_steps])


def cyclical_cosine(init_step_size: float, burnin_steps: int, cycle_steps: int) -> Schedule:
    """Constant ``init_step_size`` during the burn-in, then cosine cycles of ``cycle_steps``.

    Each cycle restarts at η₀ and decays to (almost) 0 at its last step, where cSG-MCMC collects
    its sample.

    Example:
        >>> s = cyclical_cosine(0.1, burnin_steps=4, cycle_steps=10)
        >>> float(s(3)), float(s(4)), round(float(s(9)), 6), float(s(14))
        (0.1, 0.1, 0.05, 0.1)
    """
    _check_step_size("--init-step-size", init_step_size)
    if burnin_steps < 0:
        raise ConfigError(f"burn-in length {burnin_steps} steps must be >= 0")
    if cycle_steps < 1:
        raise ConfigError(f"cycle length {cycle_steps} steps must be >= 1")

    def schedule(step):
        phase = jnp.mod(jnp.maximum(step - burnin_steps, 0), cycle_steps) / cycle_steps
        cyc = init_step_size * 0.5 * (1 + jnp.cos(jnp.pi * phase))
        return jnp.where(step < burnin_steps, init_step_size, cyc)

    return schedule


def as_schedule(step_size: float | Schedule, name: str = "step size") -> Schedule:
    """A schedule from a number (constant) or a schedule (returned as is).

    Example:
        >>> float(as_schedule(0.1)(1000))
        0.1
    """
    if callable(step_size):
        return step_size
    _check_step_size(name, float(step_size))
    return optax.constant_schedule(float(step_size))
