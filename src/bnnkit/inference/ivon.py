"""IVON: Improved Variational Online Newton (Shen et al. 2024, "Variational Learning is
Effective for Large Deep Networks", ICML), Algorithm 1.

IVON learns a mean-field Gaussian ``q(θ) = N(m, diag(σ²))`` at the cost of SGD: an Adam-like
update whose second moment is a diagonal Hessian estimate from the reparameterised gradient.
The tempered posterior of :mod:`bnnkit.log_posterior` is written per example,

    log p_T(θ | D) = −λ [ℓ̄(θ) + R(θ)/N] + const,   λ = N/T,   ℓ̄ = −(1/N) Σ_i log p(y_i | x_i, θ),

with ``R = −log p(θ)`` the prior, a Gaussian of precision P (per parameter), so the weight decay
is ``δ = P/N`` and λ, the paper's effective sample size, is N at T = 1. Each step, on
minibatch B, with ``ε_s ~ N(0, σ²)`` (``s = 1..S``, one sample by default)::

    ĝ = (1/S) Σ_s ∇ℓ̄_B(m + ε_s),      ĥ = (1/S) Σ_s ∇ℓ̄_B(m + ε_s) ⊙ ε_s / σ²
    g ← β₁ g + (1 − β₁) ĝ
    h ← β₂ h + (1 − β₂) ĥ + ½ (1 − β₂)² (h − ĥ)² / (h + δ)
    m ← m − α_t (g / (1 − β₁ᵗ) + δ ⊙ m) / (h + δ)
    σ = 1 / √(λ (h + δ))

``ℓ̄_B = −(1/|B|) Σ_{i∈B} log p(y_i | x_i, θ)``; ``ĥ`` is an unbiased estimate of
``E_q[diag ∇²ℓ̄]`` by Stein's lemma, and the third term of the h update keeps ``h + δ`` positive
(Lin et al. 2020). ``δ ⊙ m`` is ``∇R(m)/N`` for a zero-mean prior; any Gaussian prior's
gradient is used as it is. α_t follows the paper's cosine schedule from ``init_step_size`` to 0;
``clip_radius`` ξ, when given, clips each coordinate of the preconditioned update to [−ξ, ξ].
The published defaults: β₁ = 0.9, β₂ = 0.99999, h₀ = 0.1, λ = N, one Monte Carlo sample.

On a quadratic (conjugate Gaussian) posterior the fixed point is the mean-field optimum: m is
the posterior mean and σ² = T / Λ_ii for posterior precision Λ
(``tests/inference/test_ivon.py``). The posterior is a
:class:`~bnnkit.posterior.diag_gaussian.DiagGaussian` whose model average uses
``ivon_num_draws`` weight samples; ``position(state)`` is m.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit.toy_problem import linear_log_posterior
    >>> from bnnkit.types import Batch
    >>> model, lp = linear_log_posterior(num_data=16, weight_decay=4.0)
    >>> method = build(lp, Config(init_step_size=0.1, num_epochs=3, batch_size=4))
    >>> state = method.init(None, model.init(jax.random.PRNGKey(0), jnp.ones((1, 2))), None)
    >>> float(state.hess["params"]["Dense_0"]["bias"][0])  # h₀
    0.1
    >>> q = method.posterior(jax.tree.map(lambda a: a[None], state))
    >>> float(q.std["params"]["Dense_0"]["bias"][0])  # 1 / √(N (h₀ + 4/N)) = 1 / √5.6
    0.4225...
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from bnnkit import schedules
from bnnkit.errors import ConfigError
from bnnkit.inference._noise import stacked_normal_like
from bnnkit.inference.base import EpochSettings, Method, model_key
from bnnkit.inference.vi import has_closed_form_kl
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior.diag_gaussian import DiagGaussian
from bnnkit.priors import Prior
from bnnkit.settings import Exclusive, setting
from bnnkit.types import Batch, Key, Params, Schedule


class IVONState(NamedTuple):
    """The variational mean m, the Hessian estimate h, the gradient momentum g and the number
    of updates done (σ follows from h)."""

    mean: Params
    hess: Params
    momentum: Params
    count: jax.Array


class IVONInfo(NamedTuple):
    """Per-step values, before the update.

    Attributes:
        expected_log_likelihood: ``E_q[Σ_i log p(y_i | x_i, θ)]``, the minibatch estimate of
            the full-data sum (untempered).
        mean_hessian: the mean of h over the parameters.
        step_size: α_t.
    """

    expected_log_likelihood: jax.Array
    mean_hessian: jax.Array
    step_size: jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(EpochSettings):
    """IVON (Shen et al. 2024): variational learning of a mean-field Gaussian with an
    Adam-like update whose second moment is a reparameterised diagonal Hessian estimate; the
    paper's hyperparameters are the defaults. Needs a Gaussian prior (its precision is the
    weight decay).

    Raises:
        ConfigError: a value outside the ranges below.
    """

    METHOD: ClassVar[str] = "ivon"
    GAUSSIAN_NOISE: ClassVar[bool] = True

    beta1: float = setting(
        0.9, help="β₁, decay of the gradient momentum, in [0, 1)", bounds=(0.0, Exclusive(1.0))
    )
    beta2: float = setting(
        0.99999, help="β₂, decay of the Hessian estimate, in [0, 1)", bounds=(0.0, Exclusive(1.0))
    )
    hess_init: float = setting(
        0.1,
        help="h₀, the initial Hessian estimate (σ₀ = 1/√(λ(h₀ + δ)))",
        bounds=(Exclusive(0), None),
    )
    ess: float | None = setting(
        None,
        help="λ, the effective sample size (default: N/T, the training examples over the "
        "temperature: the tempered posterior)",
        bounds=(Exclusive(0), None),
    )
    ivon_num_samples: int = setting(
        1, help="Monte Carlo samples of the weights per step", bounds=(1, None)
    )
    clip_radius: float | None = setting(
        None,
        help="clip each coordinate of the preconditioned update to [-ξ, ξ] (default: no clipping)",
        bounds=(Exclusive(0), None),
    )
    ivon_num_draws: int = setting(
        20, help="weight samples drawn from q for the predictive at evaluation", bounds=(1, None)
    )

    @property
    def label(self) -> str:
        return f"IVON ({self.ivon_num_draws} samples)"


def check_prior(prior: Prior) -> None:
    """Refuse a prior whose precision IVON cannot take as its weight decay.

    Raises:
        ConfigError: a prior that is not Gaussian (no closed-form KL).
    """
    if not has_closed_form_kl(prior):
        raise ConfigError(
            f"ivon needs a Gaussian prior (its precision is IVON's weight "
            f"decay); the prior is {prior}. Allowed: --weight-decay, or --prior "
            "gaussian / fanin_gaussian"
        )


def prior_gradient(params: Params, *, prior: Prior) -> Params:
    """``∇R(θ) = −∇ log p(θ)``."""
    return jax.grad(lambda p: -prior.log_prob(p))(params)


def prior_precision(params: Params, *, prior: Prior) -> Params:
    """P, a Gaussian prior's precision per parameter, shaped like ``params``.

    A Gaussian prior's ``−log p`` is quadratic with a diagonal Hessian, so ``P`` is the
    difference of its gradients at ``1`` and ``0`` (exact, for any mean).
    """
    ones = jax.tree.map(jnp.ones_like, params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return jax.tree.map(
        jnp.subtract, prior_gradient(ones, prior=prior), prior_gradient(zeros, prior=prior)
    )


def weight_decay(mean: Params, *, log_posterior: LogPosterior) -> Params:
    """δ = P/N."""
    n = log_posterior.num_data
    return jax.tree.map(lambda p: p / n, prior_precision(mean, prior=log_posterior.prior))


def std_of(hess: Params, delta: Params, *, ess: float) -> Params:
    """σ = 1 / √(λ (h + δ))."""
    return jax.tree.map(lambda h, d: jax.lax.rsqrt(ess * (h + d)), hess, delta)


def init(key: Key, params: Params, batch: Batch | None = None, *, hess_init: float) -> IVONState:
    """The state at ``params``: m = ``params``, h = h₀, g = 0 (``key`` and ``batch`` unused)."""
    del key, batch
    hess = jax.tree.map(lambda p: jnp.full_like(p, hess_init), params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return IVONState(params, hess, zeros, jnp.zeros((), jnp.int32))


def mean_loss(
    params: Params, batch: Batch, key: Key | None, *, log_posterior: LogPosterior
) -> jax.Array:
    """``ℓ̄_B(θ) = −(1/|B|) Σ_{i∈B} log p(y_i | x_i, θ)``."""
    return -log_posterior.log_likelihood(params, batch, key=key) / batch.x.shape[0]


def estimates(
    key: Key,
    mean: Params,
    std: Params,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    num_samples: int,
) -> tuple[jax.Array, Params, Params]:
    """The losses ``ℓ̄_B(m + ε_s)`` of ``num_samples`` draws ``ε_s ~ N(0, σ²)`` from ``key``,
    and their ĝ and ĥ (see the module); a stochastic model draws from
    :func:`~bnnkit.inference.base.model_key` of ``key``, split over the draws."""
    eps = jax.tree.map(
        lambda z, s: z * s,
        stacked_normal_like(key, mean, num_samples),
        jax.tree.map(lambda s: s[None], std),
    )
    model_keys = jax.random.split(model_key(key), num_samples)
    loss_of = functools.partial(mean_loss, log_posterior=log_posterior)

    def one(e, k):
        theta = jax.tree.map(jnp.add, mean, e)
        loss, grad = jax.value_and_grad(loss_of)(theta, batch, k)
        hess = jax.tree.map(lambda g, ei, s: g * ei / jnp.square(s), grad, e, std)
        return loss, grad, hess

    losses, grads, hesses = jax.vmap(one)(eps, model_keys)
    g_hat = jax.tree.map(lambda a: jnp.mean(a, 0), grads)
    h_hat = jax.tree.map(lambda a: jnp.mean(a, 0), hesses)
    return losses, g_hat, h_hat


def new_hessian(hess: Params, h_hat: Params, delta: Params, *, beta2: float) -> Params:
    """``h ← β₂ h + (1 − β₂) ĥ + ½ (1 − β₂)² (h − ĥ)² / (h + δ)``."""
    return jax.tree.map(
        lambda h, hh, d: (
            beta2 * h + (1 - beta2) * hh + 0.5 * (1 - beta2) ** 2 * jnp.square(h - hh) / (h + d)
        ),
        hess,
        h_hat,
        delta,
    )


def step(
    key: Key,
    state: IVONState,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    schedule: Schedule,
    ess: float,
    beta1: float,
    beta2: float,
    num_samples: int,
    clip: float | None,
) -> tuple[IVONState, IVONInfo]:
    """One step of Algorithm 1 on ``batch`` (see the module), its noise drawn from ``key``."""
    n = log_posterior.num_data
    delta = weight_decay(state.mean, log_posterior=log_posterior)
    std = std_of(state.hess, delta, ess=ess)
    losses, g_hat, h_hat = estimates(
        key, state.mean, std, batch, log_posterior=log_posterior, num_samples=num_samples
    )
    count = state.count + 1
    momentum = jax.tree.map(lambda g, gh: beta1 * g + (1 - beta1) * gh, state.momentum, g_hat)
    hess = new_hessian(state.hess, h_hat, delta, beta2=beta2)
    alpha = jnp.asarray(schedule(state.count), losses.dtype)
    correction = 1.0 - beta1 ** count.astype(losses.dtype)
    prior_grad = prior_gradient(state.mean, prior=log_posterior.prior)

    def new_mean(m, g, r, h, d):
        update = (g / correction + r / n) / (h + d)
        if clip is not None:
            update = jnp.clip(update, -clip, clip)
        return m - alpha * update

    mean = jax.tree.map(new_mean, state.mean, momentum, prior_grad, hess, delta)
    leaves = jax.tree.leaves(hess)
    info = IVONInfo(
        -n * jnp.mean(losses),
        sum(jnp.sum(h) for h in leaves) / sum(h.size for h in leaves),
        alpha,
    )
    return IVONState(mean, hess, momentum, count), info


def posterior(
    kept: IVONState, *, log_posterior: LogPosterior, ess: float, num_draws: int
) -> DiagGaussian:
    """q of the last kept state, averaging ``num_draws`` weight samples when it predicts."""
    last = jax.tree.map(lambda a: a[-1], kept)
    delta = weight_decay(last.mean, log_posterior=log_posterior)
    return DiagGaussian(last.mean, std_of(last.hess, delta, ess=ess), num_draws=num_draws)


def position(state: IVONState) -> Params:
    return state.mean


def build(log_posterior: LogPosterior, config: Config) -> Method:
    """IVON on a :class:`~bnnkit.log_posterior.LogPosterior`.

    Args:
        log_posterior: the tempered log posterior; its log likelihood, prior, temperature
            (through :meth:`~bnnkit.log_posterior.LogPosterior.temper`) and ``num_data`` are
            used separately.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method`; ``position`` is m, ``posterior`` the last
        kept state's :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`.

    Raises:
        ConfigError: a prior that is not Gaussian.
    """
    n = log_posterior.num_data
    check_prior(log_posterior.prior)
    ess = float(log_posterior.temper(float(n))) if config.ess is None else float(config.ess)
    return Method(
        init=functools.partial(init, hess_init=config.hess_init),
        step=functools.partial(
            step,
            log_posterior=log_posterior,
            schedule=schedules.cosine(
                config.init_step_size, config.num_epochs * config.steps_per_epoch(n)
            ),
            ess=ess,
            beta1=config.beta1,
            beta2=config.beta2,
            num_samples=int(config.ivon_num_samples),
            clip=config.clip_radius,
        ),
        posterior=functools.partial(
            posterior, log_posterior=log_posterior, ess=ess, num_draws=config.ivon_num_draws
        ),
        position=position,
    )
