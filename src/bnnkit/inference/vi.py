"""Mean-field variational inference: Bayes by Backprop (Blundell et al. 2015).

The approximation is ``q(θ) = Π_j N(θ_j; μ_j, σ_j²)`` with ``σ = softplus(ρ)``. For the tempered
posterior ``log p_T(θ | D) = [log p(θ) + Σ_i log p(y_i | x_i, θ)] / T`` of
:mod:`bnnkit.log_posterior`, the objective maximised is

    L_T(q) = E_q[log p_T(θ | D)] + H[q]
           = E_q[ℓ(θ)] / T  −  C_T(q),      C_T(q) = −E_q[log p(θ)] / T − H[q],

with ``ℓ(θ) = Σ_i log p(y_i | x_i, θ)``. Since ``L_T(q) = −KL(q ‖ p_T) + const``, its optimum over
all q is p_T itself and over mean-field Gaussians the mean-field approximation of p_T, at every T
(likelihood and prior are tempered together, as everywhere in bnnkit). At T = 1, ``C_1 = KL(q‖p)``
and ``L_1`` is the usual ELBO ``E_q[ℓ] − KL(q ‖ p)``.

Each step estimates the gradient with the reparameterisation ``θ_s = μ + σ ⊙ ε_s``,
``ε_s ~ N(0, I)``, ``s = 1..S`` (one flat normal draw per sample for all parameters), on
minibatch ``B_i``, ``i = t mod M`` of the M minibatches of an epoch:

    L̂_i = (1/S) Σ_s (N/|B|) Σ_{n∈B_i} log p(y_n | x_n, θ_s) / T  −  M π_i C_T(q)

- ``E_q[log p(θ)]`` is in closed form for a Gaussian prior (then ``C_T`` is exact), and the
  Monte Carlo average ``(1/S) Σ_s log p(θ_s)`` with the same draws for any other prior (scale
  mixtures, Laplace, ...); ``H[q] = Σ_j log σ_j + ½ d (1 + log 2π)`` is always exact, so the
  Monte Carlo KL is ``E_q[log q − log p]`` with the ``log q`` part integrated analytically.
- KL weighting: ``uniform`` is ``π_i = 1/M``; ``blundell`` is ``π_i = 2^{M−i}/(2^M − 1)`` for
  ``i = 1..M`` (most of the complexity cost on the first minibatches of each epoch). Both sum to
  1 over an epoch, so an epoch's average of ``L̂_i`` is an unbiased estimate of ``L_T``.

The update is Adam or SGD (with heavy-ball momentum) on ``−L̂_i`` with step size ``η_t``, a number
or an optax schedule (the paper's cosine). ``position(state)`` is μ, so test metrics logged during
training are those of the mean network; the posterior is a
:class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bnnkit import schedules
from bnnkit.errors import ConfigError
from bnnkit.inference.base import Method
from bnnkit.inference.sgd import _as_schedule
from bnnkit.log_posterior import Batch
from bnnkit.posterior.diag_gaussian import (
    DiagGaussian,
    inverse_softplus,
    standard_normal_like,
)

Params = Any

OPTIMIZERS = ("adam", "sgd")
KL_WEIGHTINGS = ("uniform", "blundell")
DEFAULT_SIGMA_INIT = 1e-3


class VIState(NamedTuple):
    """Variational parameters (μ, ρ), the optimiser's state and the number of updates done."""

    mean: Params
    rho: Params
    opt_state: Any
    count: jax.Array


class VIInfo(NamedTuple):
    """Per-step estimates, before the update.

    Attributes:
        elbo: ``L_T`` on this minibatch (uniform weighting, whatever the KL weighting).
        expected_log_likelihood: ``E_q[ℓ(θ)]``, the minibatch estimate of the full-data sum
            (untempered).
        kl: ``KL(q ‖ p)`` (untempered; exact or Monte Carlo).
        step_size: η_t.
    """

    elbo: jax.Array
    expected_log_likelihood: jax.Array
    kl: jax.Array
    step_size: jax.Array


# --- KL weighting -------------------------------------------------------------------------------

def kl_weight(count: jax.Array, kind: str, steps_per_epoch: int, dtype: Any = jnp.float32):
    """``M π_i`` for update ``count`` (minibatch ``i = count mod M + 1`` of the epoch).

    Blundell's ``π_i = 2^{M−i}/(2^M − 1) = 2^{−i}/(1 − 2^{−M})``, written in the second form so
    that large M neither overflows nor loses the weights of the first minibatches.

    Example:
        >>> [float(kl_weight(i, "blundell", 3)) for i in range(4)]  # 3·(4, 2, 1)/7, repeating
        [1.7142857..., 0.8571428..., 0.4285714..., 1.7142857...]
    """
    if kind == "uniform":
        return jnp.ones((), dtype)
    m = steps_per_epoch
    i = (jnp.asarray(count) % m + 1).astype(dtype)
    return m * jnp.exp2(-i) / (1.0 - 2.0 ** (-m))


def blundell_weights(steps_per_epoch: int) -> np.ndarray:
    """``π_1..π_M`` of Blundell et al.'s Eq. (9) in float64; they sum to 1.

    Example:
        >>> blundell_weights(3)  # (4, 2, 1) / 7
        array([0.57142857, 0.28571429, 0.14285714])
    """
    i = np.arange(1, steps_per_epoch + 1, dtype=np.float64)
    return np.exp2(-i) / (1.0 - 2.0 ** (-steps_per_epoch))


# --- KL and the complexity cost ----------------------------------------------------------------

def has_closed_form_kl(prior) -> bool:
    """Whether ``prior`` gives ``KL(q ‖ p)`` in closed form (``kl_closed_form(mean, std)``).

    bnnkit's Gaussian priors do (the weight-decay prior, and joint priors built only from
    ``gaussian`` / ``fanin_gaussian`` families); every other prior gets the Monte Carlo KL.
    """
    return bool(getattr(prior, "has_closed_form_kl", False)) and callable(
        getattr(prior, "kl_closed_form", None))


def monte_carlo_kl_terms(q: DiagGaussian, prior, draws: Params) -> jax.Array:
    """``−H[q] − log p(θ_s)`` per draw: unbiased terms of ``KL(q ‖ p) = E_q[log q − log p]``.

    ``draws`` are stacked ``(S, ...)`` from q; the entropy is exact, so only ``log p`` varies.
    """
    log_p = jax.vmap(prior.log_prob)(draws)
    return -q.entropy() - log_p


# --- the method ---------------------------------------------------------------------------------

def _check(optimizer: str, num_samples: int, sigma_init: float, kl_weighting: str,
           steps_per_epoch: int, momentum_decay: float) -> None:
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown --optimizer {optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    if int(num_samples) != num_samples or num_samples < 1:
        raise ConfigError(f"--vi-num-samples {num_samples} must be an integer >= 1")
    if not (math.isfinite(sigma_init) and sigma_init > 0):
        raise ConfigError(f"--vi-sigma-init {sigma_init} must be a finite number > 0")
    if kl_weighting not in KL_WEIGHTINGS:
        raise ConfigError(f"unknown --kl-weighting {kl_weighting!r}; allowed: "
                          f"{', '.join(KL_WEIGHTINGS)}")
    if steps_per_epoch < 1:
        raise ConfigError(f"steps per epoch {steps_per_epoch} must be >= 1")
    if not 0.0 <= momentum_decay < 1.0:
        raise ConfigError(f"--momentum-decay {momentum_decay} must be in [0, 1)")


def build(
    log_posterior,
    step_size: float | optax.Schedule,
    optimizer: str = "adam",
    num_samples: int = 1,
    sigma_init: float = DEFAULT_SIGMA_INIT,
    kl_weighting: str = "uniform",
    steps_per_epoch: int = 1,
    momentum_decay: float = 0.9,
) -> Method:
    """Bayes by Backprop on a :class:`~bnnkit.log_posterior.LogPosterior`.

    Args:
        log_posterior: the tempered log posterior; its ``log_likelihood``, ``prior``,
            ``num_data`` and ``temperature`` are used separately.
        step_size: η, a number or an optax schedule of the update count.
        optimizer: ``"adam"`` or ``"sgd"`` (heavy-ball momentum ``momentum_decay``).
        num_samples: S, reparameterised draws per step.
        sigma_init: every σ starts here (ρ = softplus⁻¹(σ_init)).
        kl_weighting: ``"uniform"`` or ``"blundell"``.
        steps_per_epoch: M, minibatches per epoch (for the KL weighting).
        momentum_decay: β of SGD; ignored by Adam.

    Returns:
        A :class:`~bnnkit.inference.base.Method`; ``position`` is μ, ``posterior`` the last
        kept state's :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`.

    Raises:
        ConfigError: a value outside the ranges above.

    Example:
        >>> vi = build(lp, 1e-3, kl_weighting="blundell", steps_per_epoch=468)  # doctest: +SKIP
        >>> state = vi.init(key, params, None)  # doctest: +SKIP
        >>> state, info = vi.step(key, state, minibatch)  # doctest: +SKIP
    """
    _check(optimizer, num_samples, sigma_init, kl_weighting, steps_per_epoch, momentum_decay)
    schedule = _as_schedule(step_size)
    if optimizer == "adam":
        opt = optax.adam(schedule)
    else:
        opt = optax.sgd(schedule, momentum=momentum_decay or None)
    prior = log_posterior.prior
    temperature = float(log_posterior.temperature)
    num_samples = int(num_samples)
    closed_form = has_closed_form_kl(prior)

    def init(key: jax.Array, params: Params, batch: Batch | None = None) -> VIState:
        del key, batch
        rho = jax.tree.map(lambda p: jnp.full_like(p, inverse_softplus(sigma_init)), params)
        return VIState(params, rho, opt.init((params, rho)), jnp.zeros((), jnp.int32))

    def negative_objective(variational, eps, batch, weight):
        mean, rho = variational
        q = DiagGaussian.from_rho(mean, rho)
        draws = jax.tree.map(lambda m, s, e: m + s * e, q.mean, q.std, eps)
        scale = log_posterior.num_data / batch.x.shape[0]
        if num_samples == 1:  # no vmap: the plain network call is cheapest
            one = jax.tree.map(lambda a: a[0], draws)
            log_lik = log_posterior.log_likelihood(one, batch)
        else:
            log_lik = jnp.mean(jax.vmap(lambda p: log_posterior.log_likelihood(p, batch))(draws))
        expected_ll = scale * log_lik
        if closed_form:
            kl = prior.kl_closed_form(q.mean, q.std)
        else:
            kl = jnp.mean(monte_carlo_kl_terms(q, prior, draws))
        if temperature == 1.0:
            complexity = kl
        else:
            # E_q[log p] = −KL − H: the prior term is tempered, the entropy is not.
            entropy = q.entropy()
            complexity = (kl + entropy) / temperature - entropy
        elbo = expected_ll / temperature - complexity
        objective = expected_ll / temperature - weight * complexity
        return -objective, (elbo, expected_ll, kl)

    def step(key: jax.Array, state: VIState, batch: Batch) -> tuple[VIState, VIInfo]:
        dtype = jax.tree.leaves(state.mean)[0].dtype
        eps = standard_normal_like(key, state.mean, num_samples)
        weight = kl_weight(state.count, kl_weighting, steps_per_epoch, dtype)
        variational = (state.mean, state.rho)
        grads, (elbo, expected_ll, kl) = jax.grad(negative_objective, has_aux=True)(
            variational, eps, batch, weight)
        updates, opt_state = opt.update(grads, state.opt_state, variational)
        mean, rho = optax.apply_updates(variational, updates)
        info = VIInfo(elbo, expected_ll, kl, jnp.asarray(schedule(state.count), elbo.dtype))
        return VIState(mean, rho, opt_state, state.count + 1), info

    def posterior(kept: VIState) -> DiagGaussian:
        last = jax.tree.map(lambda a: a[-1], (kept.mean, kept.rho))
        return DiagGaussian.from_rho(*last)

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.mean)


def build_from_config(problem, config: dict, steps_per_epoch: int, num_epochs: int) -> Method:
    """The :data:`bnnkit.training.BUILDERS` entry: VI with the paper's cosine schedule.

    ``config`` keys: ``init_step_size``, ``optimizer``, ``momentum_decay``, ``num_samples``,
    ``sigma_init``, ``kl_weighting`` (``vi_ensemble_size`` and ``mean_init_run`` are read by
    evaluation and the command).
    """
    size = config.get("vi_ensemble_size", 1)
    if int(size) != size or size < 1:
        raise ConfigError(f"--vi-ensemble-size {size} must be an integer >= 1")
    return build(
        problem.log_posterior,
        schedules.cosine(config["init_step_size"], num_epochs * steps_per_epoch),
        optimizer=config.get("optimizer", "adam"),
        num_samples=config.get("num_samples", 1),
        sigma_init=config.get("sigma_init", DEFAULT_SIGMA_INIT),
        kl_weighting=config.get("kl_weighting", "uniform"),
        steps_per_epoch=steps_per_epoch,
        momentum_decay=config.get("momentum_decay", 0.9),
    )
