"""MC dropout (Gal & Ghahramani 2016): dropout training as variational inference, and T
stochastic passes at test time.

On a dropout network (``*_dropout`` models, :mod:`bnnkit.models.mlp`,
:mod:`bnnkit.models.lenet`), which drops each input of every layer with probability p, the
approximation is ``q(W_i) = M_i diag(z_i)``, ``z_ij ~ Bernoulli(1 − p)``, over the weights M.
Up to a constant (q's entropy, which does not depend on M), its tempered evidence lower bound
is

    L_T(M) = ( E_z[Σ_i log p(y_i | x_i, M, z)] + E_q[log p(W)] ) / T,

with the prior-implied weight decay of the paper in its second term. For a prior that
factorises over the rows of the kernels, each row of a kernel is M's row with probability
1 − p and 0 otherwise, so

    E_q[log p(W)] = (1 − p) log p(M) + p log p(M⁰),

M⁰ being M with every kernel zeroed (biases are not dropped). flax stores the kernels of
inverted dropout, ``K = (1 − p) M`` (kept inputs are scaled by 1/(1 − p), so the network
without dropout is the mean network ``E_q[W] = K``), and the term is computed at ``M = K/(1 −
p)``. For a Gaussian prior of precision λ it is the paper's ``(1 − p) λ/2 ‖M‖²``, i.e.
``λ / (2 (1 − p)) ‖K‖²`` on the stored kernels and ``λ/2 ‖b‖²`` on the biases. Every leaf
named ``kernel`` counts as dropped, since the dropout models drop the input of every layer.

Each step is :mod:`bnnkit.inference.sgd`'s heavy-ball SGD with the cosine schedule on
``−L̂_T``, the minibatch estimate with one draw of the masks (the network's own, from the step's
:func:`~bnnkit.inference.base.model_key`, a mask per example). The posterior is
:class:`~bnnkit.posterior.mc_dropout.MCDropout`: the last weights, p and ``num_passes`` T;
``bnnkit evaluate`` averages T passes, each drawing its own masks.

A run needs a network with randomness of its own: a registered dropout model, or a flax module
whose ``__call__`` takes ``deterministic`` (:mod:`bnnkit.models.registry`'s contract).
:func:`check_problem` refuses any other model before the run starts, since its T passes would
all be the same deterministic network, SGD's MAP under another name. (:func:`build` itself
takes any log posterior: without dropout, p = 0, its objective is the log posterior.)

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit import likelihoods, models, priors
    >>> from bnnkit.log_posterior import LogPosterior
    >>> model = models.get("mlp_regression_small_dropout", num_outputs=1, dropout_rate=0.5)
    >>> lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=1.0), priors.Gaussian(1.0),
    ...                   num_data=16, stochastic=True, dropout_rate=0.5)
    >>> params = {"params": {"Dense_0": {"kernel": jnp.ones((1, 1)), "bias": jnp.ones(1)}}}
    >>> float(expected_log_prior(lp, params) - lp.log_prior(params))  # −(1/(2·0.5) − 1/2)·1
    -0.5
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax

from bnnkit.errors import ConfigError
from bnnkit.inference import sgd
from bnnkit.inference.base import Method, model_key, state_position
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import registry
from bnnkit.posterior.mc_dropout import MCDropout
from bnnkit.settings import setting
from bnnkit.types import Batch, Key, Params, Schedule

#: The leaves whose inputs a dropout model drops (the kernels of its Dense and Conv layers).
DROPPED = "kernel"


def _map_kernels(fn, params: Params) -> Params:
    """``fn`` applied to every kernel leaf of the network (``params`` collection) only."""

    def visit(path, leaf):
        network = bool(path) and getattr(path[0], "key", None) == "params"
        named = bool(path) and getattr(path[-1], "key", None) == DROPPED
        return fn(leaf) if network and named else leaf

    return jax.tree_util.tree_map_with_path(visit, params)


def expected_log_prior(log_posterior: LogPosterior, params: Params) -> jax.Array:
    """``E_q[log p(W)] = (1 − p) log p(K/(1 − p)) + p log p(K⁰)`` (untempered), with p the log
    posterior's ``dropout_rate``; ``log p(θ)`` itself when p = 0."""
    p = float(log_posterior.dropout_rate)
    if p == 0.0:
        return log_posterior.log_prior(params)
    full = _map_kernels(lambda k: k / (1.0 - p), params)
    zero = _map_kernels(jnp.zeros_like, params)
    return (1.0 - p) * log_posterior.log_prior(full) + p * log_posterior.log_prior(zero)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(sgd.Config):
    """MC dropout (Gal & Ghahramani 2016): SGD on a dropout network's variational objective,
    with the prior-implied weight decay, then T passes with fresh masks at test time. Use it
    with a dropout model (``--model mlp_classification_dropout``, ``lenet5_dropout``, ...;
    ``--dropout-rate`` sets p).
    """

    METHOD: ClassVar[str] = "dropout"
    API_NAME: ClassVar[str] = "Dropout"

    num_passes: int = setting(
        20,
        help="T, the stochastic passes (each with its own dropout "
        "masks) the predictive averages at evaluation",
        bounds=(1, None),
    )

    @property
    def label(self) -> str:
        return f"MC dropout (T={self.num_passes})"


def check_problem(problem) -> None:
    """Refuse a model without randomness of its own, before a run starts.

    Args:
        problem: the run's built :class:`~bnnkit.problem.Problem`.

    Raises:
        ConfigError: one line naming the model, what MC dropout allows, and the model's
            registered dropout variant where there is one.

    Example:
        >>> from bnnkit import problem as problem_lib
        >>> check_problem(problem_lib.build(problem_lib.ProblemConfig(
        ...     "yacht_0", "mlp_regression_small_dropout", noise_std=0.35)))  # has dropout
        >>> check_problem(problem_lib.build(problem_lib.ProblemConfig(
        ...     "yacht_0", "mlp_regression_small", noise_std=0.35)))
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: MC dropout needs a model with dropout, and model ...
    """
    if problem.log_posterior.stochastic:
        return
    name = problem.config.model
    variant = f"{registry.canonical_name(name)}_dropout"
    instead = (
        f"; for this network: --model {variant}" if variant in registry.dropout_names() else ""
    )
    raise ConfigError(
        f"MC dropout needs a model with dropout, and model {name!r} has none: its passes "
        f"would all be one deterministic network; allowed: a dropout model "
        f"({', '.join(registry.dropout_names())}) or a flax module whose __call__ takes "
        f"deterministic and applies nn.Dropout with it{instead}"
    )


def objective(
    params: Params, batch: Batch, *, key: Key | None, log_posterior: LogPosterior
) -> jax.Array:
    """``L̂_T``: ``[E_q log p(W) + (N/|B|) Σ_{i∈B} log p(y_i | x_i, M, z_i)] / T``, with the
    masks ``z_i`` the network draws from ``key``."""
    lp = log_posterior
    return lp.temper(expected_log_prior(lp, params)) + lp.tempered_log_likelihood(
        params, batch, key=key
    )


def step(
    key: Key,
    state: sgd.SGDState,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    optimizer: optax.GradientTransformation,
    schedule: Schedule,
) -> tuple[sgd.SGDState, sgd.SGDInfo]:
    """One heavy-ball step on ``−L̂_T`` of ``batch`` (:func:`objective`), whose masks the
    network draws from :func:`~bnnkit.inference.base.model_key` of ``key``."""
    loss = functools.partial(objective, log_posterior=log_posterior)
    value, grad = jax.value_and_grad(loss)(state.position, batch, key=model_key(key))
    return sgd.update(state, value, grad, optimizer=optimizer, schedule=schedule)


def posterior(kept: sgd.SGDState, *, rate: float, num_passes: int) -> MCDropout:
    """The last kept weights, predicting by ``num_passes`` passes that drop with ``rate``."""
    last = jax.tree.map(lambda a: a[-1], kept.position)
    return MCDropout(last, rate, num_passes)


def build(log_posterior: LogPosterior, config: Config) -> Method:
    """MC dropout training on ``log_posterior``'s dropout network.

    Args:
        log_posterior: the tempered log posterior; its likelihood, prior, ``dropout_rate``,
            temperature and ``num_data`` are used, and its stochastic network gets the step's
            :func:`~bnnkit.inference.base.model_key`.
        config: the settings.

    Returns:
        A :class:`~bnnkit.inference.base.Method`; its state and step are SGD's, its posterior
        the last weights as :class:`~bnnkit.posterior.mc_dropout.MCDropout`.
    """
    schedule = config.schedule(config.steps_per_epoch(log_posterior.num_data))
    optimizer = sgd.heavy_ball(config, schedule, log_posterior.num_data)
    return Method(
        init=functools.partial(sgd.init, optimizer=optimizer),
        step=functools.partial(
            step, log_posterior=log_posterior, optimizer=optimizer, schedule=schedule
        ),
        posterior=functools.partial(
            posterior, rate=float(log_posterior.dropout_rate), num_passes=config.num_passes
        ),
        position=state_position,
    )
