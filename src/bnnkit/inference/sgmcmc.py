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
both shrink as η → 0 (see ``tests/test_sgmcmc_exact.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bnnkit.errors import ConfigError
from bnnkit.inference.base import Method
from bnnkit.inference.noise_draws import DRAWS, NOISES
from bnnkit.inference.sgd import _as_schedule
from bnnkit.log_posterior import Batch
from bnnkit.posterior import Samples

Params = Any

PRECONDITIONERS = ("none", "rmsprop")


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


def build(
    log_posterior,
    step_size: float | optax.Schedule,
    momentum_decay: float = 0.0,
    preconditioner: str = "none",
    rmsprop_decay: float = 0.99,
    rmsprop_eps: float = 1e-7,
    noise: str = "gaussian",
) -> Method:
    """SGLD (``momentum_decay=0``) or SGHMC, optionally RMSprop-preconditioned.

    Args:
        log_posterior: ``(params, batch) -> scalar`` tempered log posterior (minibatch-scaled).
        step_size: η, a number or an optax schedule of the update count
            (see :mod:`bnnkit.schedules`).
        momentum_decay: β in [0, 1); 0 is SGLD.
        preconditioner: ``"none"`` or ``"rmsprop"``.
        rmsprop_decay: α of the running average of squared gradients.
        rmsprop_eps: ε added to ``√v``.
        noise: ``"gaussian"`` (ξ ~ N(0, I)) or ``"rademacher"`` (ξ = ±1, same mean and
            covariance, several times cheaper to draw; see :mod:`bnnkit.inference.noise_draws`).

    Returns:
        A :class:`~bnnkit.inference.base.Method` whose posterior is the kept positions as
        :class:`~bnnkit.posterior.Samples`.

    Example:
        >>> sghmc = build(log_posterior, step_size=1e-4, momentum_decay=0.9)  # doctest: +SKIP
        >>> state = sghmc.init(key, params, None)  # doctest: +SKIP
        >>> state, info = sghmc.step(key, state, minibatch)  # doctest: +SKIP
    """
    if not 0.0 <= momentum_decay < 1.0:
        raise ConfigError(f"--momentum-decay {momentum_decay} must be in [0, 1)")
    if preconditioner not in PRECONDITIONERS:
        raise ConfigError(
            f"unknown --preconditioner {preconditioner!r}; allowed: {', '.join(PRECONDITIONERS)}"
        )
    if not 0.0 < rmsprop_decay < 1.0:
        raise ConfigError(f"RMSprop decay {rmsprop_decay} must be in (0, 1)")
    if noise not in NOISES:
        raise ConfigError(f"unknown --noise {noise!r}; allowed: {', '.join(NOISES)}")
    draw = DRAWS[noise]
    schedule = _as_schedule(step_size)
    precondition = preconditioner == "rmsprop"
    noise_scale = (2.0 * (1.0 - momentum_decay)) ** 0.5

    def init(key: jax.Array, params: Params, batch: Batch | None = None) -> SGMCMCState:
        del key, batch
        zeros = jax.tree.map(jnp.zeros_like, params)
        # v starts at 1, not 0: the first steps are plain SGLD/SGHMC instead of dividing the
        # noise by √v of a gradient that may be ~0 (a chain started at a mode would explode).
        ones = jax.tree.map(jnp.ones_like, params)
        return SGMCMCState(params, zeros, ones if precondition else zeros,
                           jnp.zeros((), jnp.int32))

    def step(key: jax.Array, state: SGMCMCState, batch: Batch):
        value, grad = jax.value_and_grad(log_posterior)(state.position, batch)
        eta = jnp.asarray(schedule(state.count), value.dtype)
        sqrt_eta = jnp.sqrt(eta)
        xi = draw(key, grad)
        if precondition:
            v = jax.tree.map(
                lambda v, g: rmsprop_decay * v + (1 - rmsprop_decay) * jnp.square(g),
                state.second_moment, grad,
            )
            m_diag = jax.tree.map(lambda v: jnp.sqrt(v) + rmsprop_eps, v)
        else:
            v = state.second_moment
            m_diag = None

        def new_momentum(m, g, n, d=None):
            n = n if d is None else n * jnp.sqrt(d)
            return momentum_decay * m + sqrt_eta * g + noise_scale * n

        if precondition:
            momentum = jax.tree.map(new_momentum, state.momentum, grad, xi, m_diag)
            position = jax.tree.map(
                lambda p, m, d: p + sqrt_eta * m / d, state.position, momentum, m_diag
            )
        else:
            momentum = jax.tree.map(new_momentum, state.momentum, grad, xi)
            position = jax.tree.map(lambda p, m: p + sqrt_eta * m, state.position, momentum)
        return SGMCMCState(position, momentum, v, state.count + 1), SGMCMCInfo(value, eta)

    def posterior(kept: SGMCMCState) -> Samples:
        return Samples.from_single_chain(kept.position)

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.position)
