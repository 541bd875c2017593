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
``ε_s ~ N(0, I)``, ``s = 1..S`` (one flat normal draw for all samples and parameters, from
:func:`bnnkit.inference._noise.standard_normal`), on
minibatch ``B_i``, ``i = t mod M`` of the M minibatches of an epoch:

    L̂_i = (1/S) Σ_s (N/|B|) Σ_{n∈B_i} log p(y_n | x_n, θ_s) / T  −  M π_i C_T(q)

- ``E_q[log p(θ)]`` is in closed form for a Gaussian prior (then ``C_T`` is exact), and the
  Monte Carlo average ``(1/S) Σ_s log p(θ_s)`` with the same draws for any other prior (scale
  mixtures, Laplace, ...); ``H[q] = Σ_j log σ_j + ½ d (1 + log 2π)`` is always exact, so the
  Monte Carlo KL is ``E_q[log q − log p]`` with the ``log q`` part integrated analytically.
- KL weighting: ``uniform`` is ``π_i = 1/M``; ``blundell`` is ``π_i = 2^{M−i}/(2^M − 1)`` for
  ``i = 1..M`` (most of the complexity cost on the first minibatches of each epoch). Both sum to
  1 over an epoch, so an epoch's average of ``L̂_i`` is an unbiased estimate of ``L_T``.

The update is Adam or SGD (with heavy-ball momentum) on ``−L̂_i`` with the paper's cosine
schedule from ``init_step_size`` to 0. ``position(state)`` is μ, so test metrics logged during
training are those of the mean network; the posterior is a
:class:`~bnnkit.posterior.diag_gaussian.DiagGaussian` whose model average uses
``vi_ensemble_size`` weight samples. The temperature enters only through the log posterior's
tempered pieces (:meth:`~bnnkit.log_posterior.LogPosterior.temper`).

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit.toy_problem import linear_log_posterior
    >>> from bnnkit.types import Batch
    >>> model, lp = linear_log_posterior(num_data=16)
    >>> vi = build(lp, Config(init_step_size=1e-2, num_epochs=3, batch_size=4,
    ...                       kl_weighting="blundell"))
    >>> state = vi.init(None, model.init(jax.random.PRNGKey(0), jnp.ones((1, 2))), None)
    >>> state, info = vi.step(jax.random.PRNGKey(1), state, Batch(jnp.ones((4, 2)), jnp.ones(4)))
    >>> bool(info.kl > 0)
    True
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bnnkit import schedules
from bnnkit.inference._layer_noise import ESTIMATORS, check_network, noisy_apply
from bnnkit.inference._noise import stacked_normal_like
from bnnkit.inference.base import EpochSettings, Method, lowercase_choices, model_key
from bnnkit.inference.sgd import MOMENTUM_BOUNDS
from bnnkit.log_posterior import LATENT_COLLECTIONS, LogPosterior, network_variables
from bnnkit.posterior.diag_gaussian import DiagGaussian, inverse_softplus
from bnnkit.settings import DRAWS, Exclusive, check_at_least, setting
from bnnkit.types import Batch, Key, Params

OPTIMIZERS = ("adam", "sgd")
KL_WEIGHTINGS = ("uniform", "blundell")


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
        getattr(prior, "kl_closed_form", None)
    )


def monte_carlo_kl_terms(q: DiagGaussian, prior, draws: Params) -> jax.Array:
    """``−H[q] − log p(θ_s)`` per draw: unbiased terms of ``KL(q ‖ p) = E_q[log q − log p]``.

    ``draws`` are stacked ``(S, ...)`` from q; the entropy is exact, so only ``log p`` varies.
    """
    log_p = jax.vmap(prior.log_prob)(draws)
    return -q.entropy() - log_p


# --- the method ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(EpochSettings):
    """Bayes by Backprop: mean-field VI with the paper's cosine schedule.

    The paper's MFVI (Izmailov et al. 2021) starts the means at an SGD solution:
    ``init_checkpoint`` (``--mean-init-run`` on the command line) names that run.

    Raises:
        ConfigError: a value outside the ranges below.
    """

    METHOD: ClassVar[str] = "vi"
    GAUSSIAN_NOISE: ClassVar[bool] = True

    optimizer: str = setting(
        "adam",
        choices=OPTIMIZERS,
        help="adam or sgd (with --momentum-decay); the step size follows a "
        "cosine schedule from --init-step-size to 0",
    )
    momentum_decay: float = setting(
        0.9,
        aliases=("--momentum",),
        help="heavy-ball momentum β in [0, 1) of --optimizer sgd",
        bounds=MOMENTUM_BOUNDS,
    )
    vi_num_samples: int = setting(
        1, help="reparameterised Monte Carlo samples of the weights per step", bounds=DRAWS
    )
    vi_estimator: str = setting(
        "weights",
        choices=ESTIMATORS,
        help="gradient estimator of the same ELBO: weights (one weight sample per minibatch, "
        "Blundell), local_reparam (per-example pre-activation noise, dense layers only) "
        "or flipout (shared weight noise, per-example signs)",
    )
    vi_sigma_init: float = setting(
        1e-3,
        help="initial posterior std σ of every weight (σ = softplus(ρ))",
        bounds=(Exclusive(0), None),
    )
    kl_weighting: str = setting(
        "uniform",
        choices=KL_WEIGHTINGS,
        help="share of the KL per minibatch i of M: uniform (1/M) or blundell (2^(M-i)/(2^M-1))",
    )
    vi_ensemble_size: int = setting(
        20, help="weight samples drawn from q for the predictive at evaluation", bounds=DRAWS
    )
    init_checkpoint: str | None = setting(
        None,
        metavar="RUN[:SAMPLE]",
        aliases=("--mean-init-run", "--mean-init-checkpoint"),
        help="finished run (same model and data) whose parameters initialise the means, e.g. "
        "an sgd run as in the paper",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        lowercase_choices(
            self, optimizer=OPTIMIZERS, kl_weighting=KL_WEIGHTINGS, vi_estimator=ESTIMATORS
        )
        cls = type(self)
        check_at_least(cls, "vi_num_samples", self.vi_num_samples, 1)
        check_at_least(cls, "vi_ensemble_size", self.vi_ensemble_size, 1)

    @property
    def label(self) -> str:
        return f"MFVI ({self.vi_ensemble_size} samples)"


class Objective(NamedTuple):
    """How a step estimates ``L_T(q)`` on a minibatch.

    Attributes:
        log_posterior: the tempered log posterior (its likelihood, prior, tempered pieces and
            ``num_data`` are used separately).
        estimator: the gradient estimator (:data:`~bnnkit.inference._layer_noise.ESTIMATORS`).
        num_samples: S, the Monte Carlo samples per step.
        closed_form: the KL is in closed form (:func:`has_closed_form_kl` of the prior).
    """

    log_posterior: LogPosterior
    estimator: str
    num_samples: int
    closed_form: bool


def optimizer(
    config: Config, steps_per_epoch: int
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam or SGD (heavy-ball momentum) with the cosine schedule from ``init_step_size``."""
    schedule = schedules.cosine(config.init_step_size, config.num_epochs * steps_per_epoch)
    if config.optimizer == "adam":
        return optax.adam(schedule), schedule
    return optax.sgd(schedule, momentum=config.momentum_decay or None), schedule


def init(
    key: Key,
    params: Params,
    batch: Batch | None = None,
    *,
    objective: Objective,
    sigma_init: float,
    opt: optax.GradientTransformation,
) -> VIState:
    """q with means ``params`` and every std ``sigma_init`` (deterministic: ``key`` unused)."""
    del key
    lp = objective.log_posterior
    if objective.estimator != "weights" and batch is not None:
        # The run driver traces init before it writes anything: a network the estimator
        # cannot run is refused there.
        check_network(lp.apply, objective.estimator, network_variables(params), batch.x)
    rho = jax.tree.map(lambda p: jnp.full_like(p, inverse_softplus(sigma_init)), params)
    return VIState(params, rho, opt.init((params, rho)), jnp.zeros((), jnp.int32))


def layer_noise_log_likelihood(
    q: DiagGaussian,
    draws: Params | None,
    eps: Params | None,
    layer_key: Key,
    batch: Batch,
    *,
    objective: Objective,
) -> jax.Array:
    """The log likelihood averaged over S draws whose dense layers add their own noise
    (local reparameterisation or flipout)."""
    lp, num_samples = objective.log_posterior, objective.num_samples

    # The network's own variables stay at μ (the dense layers add the noise); latent
    # collections of the position (hierarchical priors, an inferred noise std) are drawn.
    def one(position, e, k):
        apply = noisy_apply(lp.apply, objective.estimator, network_variables(q.std), k, e)
        return dataclasses.replace(lp, apply=apply).log_likelihood(
            position, batch, key=model_key(k)
        )

    positions = (
        draws
        if draws is not None
        else jax.tree.map(lambda m: jnp.broadcast_to(m, (num_samples, *m.shape)), q.mean)
    )
    positions = {
        **positions,
        "params": jax.tree.map(
            lambda m: jnp.broadcast_to(m, (num_samples, *m.shape)), q.mean["params"]
        ),
    }
    keys = jax.random.split(layer_key, num_samples)
    if num_samples == 1:
        first = jax.tree.map(lambda a: a[0], (positions, eps))
        return one(*first, keys[0])
    return jnp.mean(jax.vmap(one)(positions, eps, keys))


def weights_log_likelihood(
    draws: Params, layer_key: Key, batch: Batch, *, objective: Objective
) -> jax.Array:
    """The log likelihood averaged over S weight draws (the ``"weights"`` estimator)."""
    lp = objective.log_posterior
    if objective.num_samples == 1:  # no vmap: the plain network call is cheapest
        return lp.log_likelihood(
            jax.tree.map(lambda a: a[0], draws), batch, key=model_key(layer_key)
        )
    return jnp.mean(
        jax.vmap(lambda p, k: lp.log_likelihood(p, batch, key=k))(
            draws, jax.random.split(model_key(layer_key), objective.num_samples)
        )
    )


def negative_objective(
    variational: tuple[Params, Params],
    eps: Params | None,
    layer_key: Key,
    batch: Batch,
    weight: jax.Array,
    *,
    objective: Objective,
):
    """``−L̂_i`` (KL weighted by ``weight``) and, as auxiliary values, the minibatch's ELBO,
    expected log likelihood and KL."""
    lp = objective.log_posterior
    mean, rho = variational
    q = DiagGaussian.from_rho(mean, rho)
    draws = None if eps is None else jax.tree.map(lambda m, s, e: m + s * e, q.mean, q.std, eps)
    # (1/S) Σ_s Σ_{n∈B} log p(y_n | x_n, θ_s) by the objective's estimator.
    if objective.estimator == "weights":
        log_lik = weights_log_likelihood(draws, layer_key, batch, objective=objective)
    else:
        log_lik = layer_noise_log_likelihood(q, draws, eps, layer_key, batch, objective=objective)
    expected_ll = lp.data_weight(batch.x.shape[0]) * log_lik
    if objective.closed_form:
        kl = lp.prior.kl_closed_form(q.mean, q.std)
    else:
        kl = jnp.mean(monte_carlo_kl_terms(q, lp.prior, draws))
    # C_T = −E_q[log p]/T − H[q] with E_q[log p] = −KL − H: KL/T + (H/T − H), written so
    # that no large entropy cancels in float32; at T = 1 it is KL and H is not computed.
    complexity = kl
    if lp.is_tempered:
        entropy = q.entropy()
        complexity = lp.temper(kl) + (lp.temper(entropy) - entropy)
    elbo = lp.temper(expected_ll) - complexity
    objective_value = lp.temper(expected_ll) - weight * complexity
    return -objective_value, (elbo, expected_ll, kl)


def step(
    key: Key,
    state: VIState,
    batch: Batch,
    *,
    objective: Objective,
    opt: optax.GradientTransformation,
    schedule: optax.Schedule,
    kl_weighting: str,
    steps_per_epoch: int,
) -> tuple[VIState, VIInfo]:
    """One update of (μ, ρ) on ``−L̂_i`` for minibatch ``batch``."""
    dtype = jax.tree.leaves(state.mean)[0].dtype
    # local_reparam draws no weights unless the KL (Monte Carlo) or latent variables
    # outside the network need them; the layers' own noise comes from a second key.
    has_latents = any(name in state.mean for name in LATENT_COLLECTIONS)
    needs_weights = (
        objective.estimator != "local_reparam" or not objective.closed_form or has_latents
    )
    eps = stacked_normal_like(key, state.mean, objective.num_samples) if needs_weights else None
    weight = kl_weight(state.count, kl_weighting, steps_per_epoch, dtype)
    variational = (state.mean, state.rho)
    grads, (elbo, expected_ll, kl) = jax.grad(
        functools.partial(negative_objective, objective=objective), has_aux=True
    )(variational, eps, jax.random.fold_in(key, 1), batch, weight)
    updates, opt_state = opt.update(grads, state.opt_state, variational)
    mean, rho = optax.apply_updates(variational, updates)
    info = VIInfo(elbo, expected_ll, kl, jnp.asarray(schedule(state.count), elbo.dtype))
    return VIState(mean, rho, opt_state, state.count + 1), info


def posterior(kept: VIState, *, num_draws: int) -> DiagGaussian:
    """q of the last kept state, averaging ``num_draws`` weight samples when it predicts."""
    last = jax.tree.map(lambda a: a[-1], (kept.mean, kept.rho))
    return DiagGaussian.from_rho(*last, num_draws=num_draws)


def position(state: VIState) -> Params:
    return state.mean


def build(log_posterior: LogPosterior, config: Config) -> Method:
    """Bayes by Backprop on a :class:`~bnnkit.log_posterior.LogPosterior`.

    Args:
        log_posterior: the tempered log posterior; its log likelihood, tempered pieces, prior
            and ``num_data`` are used separately.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method`; ``position`` is μ, ``posterior`` the last
        kept state's :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`.
    """
    steps_per_epoch = config.steps_per_epoch(log_posterior.num_data)
    opt, schedule = optimizer(config, steps_per_epoch)
    objective = Objective(
        log_posterior,
        config.vi_estimator,
        int(config.vi_num_samples),
        has_closed_form_kl(log_posterior.prior),
    )
    return Method(
        init=functools.partial(init, objective=objective, sigma_init=config.vi_sigma_init, opt=opt),
        step=functools.partial(
            step,
            objective=objective,
            opt=opt,
            schedule=schedule,
            kl_weighting=config.kl_weighting,
            steps_per_epoch=steps_per_epoch,
        ),
        posterior=functools.partial(posterior, num_draws=config.vi_ensemble_size),
        position=position,
    )
