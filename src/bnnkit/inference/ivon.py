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
    >>> from bnnkit import likelihoods, models, priors
    >>> from bnnkit.log_posterior import LogPosterior
    >>> from bnnkit.types import Batch
    >>> model = models.get("linear", num_outputs=1)
    >>> lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=1.0), priors.Gaussian(4.0),
    ...                   num_data=16)
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
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from bnnkit import schedules
from bnnkit.errors import ConfigError
from bnnkit.inference._noise import stacked_normal_like
from bnnkit.inference.base import EpochSettings, Loop, Method, model_key
from bnnkit.posterior.diag_gaussian import DiagGaussian
from bnnkit.settings import Exclusive, setting
from bnnkit.types import Batch, Key, Params


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
    def draws_gaussian_noise(self) -> bool:
        return True

    @property
    def label(self) -> str:
        return f"IVON ({self.ivon_num_draws} samples)"

    def loop(self, num_train: int) -> Loop:
        return self.epoch_loop(num_train)


def prior_terms(prior) -> tuple:
    """``(P, ∇R)``: the prior's precision per parameter and ``θ -> −∇ log p(θ)``.

    A Gaussian prior's ``−log p`` is quadratic with a diagonal Hessian, so ``P`` is the
    difference of its gradients at ``1`` and ``0`` (exact, for any mean).

    Raises:
        ConfigError: a prior that is not Gaussian (no closed-form KL).
    """
    from bnnkit.inference.vi import has_closed_form_kl

    if not has_closed_form_kl(prior):
        raise ConfigError(
            f"ivon needs a Gaussian prior (its precision is IVON's weight "
            f"decay); the prior is {prior}. Allowed: --weight-decay, or --prior "
            "gaussian / fanin_gaussian"
        )
    grad_r = jax.grad(lambda p: -prior.log_prob(p))

    def precision(params: Params) -> Params:
        ones = jax.tree.map(jnp.ones_like, params)
        zeros = jax.tree.map(jnp.zeros_like, params)
        return jax.tree.map(jnp.subtract, grad_r(ones), grad_r(zeros))

    return precision, grad_r


def build(log_posterior, config: Config) -> Method:
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
    lp = log_posterior
    n = lp.num_data
    steps = config.num_epochs * config.steps_per_epoch(n)
    schedule = schedules.cosine(config.init_step_size, steps)
    precision, grad_r = prior_terms(lp.prior)
    ess = float(lp.temper(float(n))) if config.ess is None else float(config.ess)
    beta1, beta2, samples = config.beta1, config.beta2, int(config.ivon_num_samples)
    clip = config.clip_radius

    def weight_decay(mean: Params) -> Params:
        return jax.tree.map(lambda p: p / n, precision(mean))

    def std_of(hess: Params, delta: Params) -> Params:
        return jax.tree.map(lambda h, d: jax.lax.rsqrt(ess * (h + d)), hess, delta)

    def init(key: Key, params: Params, batch: Batch | None = None) -> IVONState:
        del key, batch
        hess = jax.tree.map(lambda p: jnp.full_like(p, config.hess_init), params)
        zeros = jax.tree.map(jnp.zeros_like, params)
        return IVONState(params, hess, zeros, jnp.zeros((), jnp.int32))

    def mean_loss(params: Params, batch: Batch, key: Key) -> jax.Array:
        """``ℓ̄_B(θ) = −(1/|B|) Σ_{i∈B} log p(y_i | x_i, θ)``."""
        return -lp.log_likelihood(params, batch, key=key) / batch.x.shape[0]

    def step(key: Key, state: IVONState, batch: Batch) -> tuple[IVONState, IVONInfo]:
        delta = weight_decay(state.mean)
        std = std_of(state.hess, delta)
        eps = jax.tree.map(
            lambda z, s: z * s,
            stacked_normal_like(key, state.mean, samples),
            jax.tree.map(lambda s: s[None], std),
        )
        model_keys = jax.random.split(model_key(key), samples)

        def one(e, k):
            theta = jax.tree.map(jnp.add, state.mean, e)
            loss, grad = jax.value_and_grad(mean_loss)(theta, batch, k)
            hess = jax.tree.map(lambda g, ei, s: g * ei / jnp.square(s), grad, e, std)
            return loss, grad, hess

        losses, grads, hesses = jax.vmap(one)(eps, model_keys)
        g_hat = jax.tree.map(lambda a: jnp.mean(a, 0), grads)
        h_hat = jax.tree.map(lambda a: jnp.mean(a, 0), hesses)
        count = state.count + 1
        momentum = jax.tree.map(lambda g, gh: beta1 * g + (1 - beta1) * gh, state.momentum, g_hat)
        hess = jax.tree.map(
            lambda h, hh, d: (
                beta2 * h + (1 - beta2) * hh + 0.5 * (1 - beta2) ** 2 * jnp.square(h - hh) / (h + d)
            ),
            state.hess,
            h_hat,
            delta,
        )
        alpha = jnp.asarray(schedule(state.count), losses.dtype)
        correction = 1.0 - beta1 ** count.astype(losses.dtype)
        prior_grad = grad_r(state.mean)

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

    def posterior(kept: IVONState) -> DiagGaussian:
        last = jax.tree.map(lambda a: a[-1], kept)
        return DiagGaussian(
            last.mean, std_of(last.hess, weight_decay(last.mean)), num_draws=config.ivon_num_draws
        )

    return Method(init=init, step=step, posterior=posterior, position=lambda s: s.mean)
