"""Laplace approximation around a MAP estimate, on the one method interface.

``init`` holds θ* (the MAP) and empty curvature; each ``step`` adds the GGN of one chunk of the
training data (so the whole training set is seen in bounded memory, a chunk per step);
``posterior`` adds the prior's curvature (or an isotropic Gaussian one, optionally chosen by
the marginal likelihood), tempers by T and returns a :mod:`bnnkit.posterior.laplace` object
with ``sample(key, n)``::

    Λ = (G + Λ_prior) / T,    G = (N / n) Σ_{i seen} J_iᵀ H_i J_i

The ``N / n`` factor makes a pass over a subset an unbiased estimate; one pass over all N
examples gives the exact sum. Steps never change θ*. The run driver makes that pass chunk by
chunk (``Config.loop``: a loop of chunks), starting from the MAP of a finished ``sgd`` or
``ensemble`` run (``map_run``), whose problem it reuses.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit.toy_problem import linear_log_posterior
    >>> from bnnkit.types import Batch
    >>> model, lp = linear_log_posterior(num_data=20, noise_std=0.5)
    >>> x, y = jax.random.normal(jax.random.PRNGKey(0), (20, 3)), jnp.zeros(20)
    >>> method = build(lp, Config(structure="last_layer", num_samples=5))
    >>> state = method.init(None, model.init(jax.random.PRNGKey(1), x[:1]), Batch(x, y))
    >>> for start in (0, 10):
    ...     state, info = method.step(None, state, Batch(x[start:start + 10], y[start:start + 10]))
    >>> posterior = method.posterior(jax.tree.map(lambda a: a[None], state))
    >>> posterior.covariance().shape, posterior.sample(jax.random.PRNGKey(2), 5)["params"][
    ...     "Dense_0"]["kernel"].shape
    ((4, 4), (5, 3, 1))
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.inference.base import Loop, Method, RunSettings, state_position
from bnnkit.inference.laplace import ggn as curvature
from bnnkit.inference.laplace import structures
from bnnkit.inference.laplace.evidence import check_prior_precision
from bnnkit.log_posterior import LATENT_COLLECTIONS, LogPosterior, network_variables
from bnnkit.posterior.laplace import PREDICTIVES, STRUCTURES
from bnnkit.settings import DRAWS, MAX_INT32, MEMBERS, check_at_least, check_choice, setting
from bnnkit.types import Batch, Key, Params


class LaplaceState(NamedTuple):
    """θ*, the GGN summed over the examples seen so far, and what the posterior needs.

    Attributes:
        position: θ*, never changed.
        curvature: the summed GGN: a params-shaped diagonal, a last-layer matrix, or
            ``{layer: (A, B)}`` Kronecker factor sums.
        log_likelihood: ``Σ log p(y_i | x_i, θ*)`` over the examples seen.
        num_seen: how many examples were seen.
        example: one input, from which the network's layers are read.
    """

    position: Params
    curvature: Any
    log_likelihood: jax.Array
    num_seen: jax.Array
    example: jax.Array


class LaplaceInfo(NamedTuple):
    """Log likelihood of the chunk at θ* and its size."""

    log_likelihood: jax.Array
    num_examples: jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(RunSettings):
    """A Laplace approximation around the MAP of a finished ``sgd`` or ``ensemble`` run.

    Raises:
        ConfigError: an unknown structure or predictive, a bad prior precision, or counts
            below 1.
    """

    METHOD: ClassVar[str] = "laplace"
    API_NAME: ClassVar[str] = "Laplace"
    SOURCE_FLAG: ClassVar[str] = "--map-run"
    SOURCE_FIELD: ClassVar[str] = "map_run"
    SOURCE_NAME: ClassVar[str] = "MAP run"
    SOURCE_METHODS: ClassVar[tuple[str, ...]] = ("sgd", "ensemble")
    PROBLEM_FROM_SOURCE: ClassVar[bool] = True

    map_run: str | None = setting(
        None, help="a finished `bnnkit sgd` (or `bnnkit ensemble`) run directory (required to run)"
    )
    member: int = setting(
        0, help="ensemble member whose parameters are θ*", bounds=(0, MEMBERS[1] - 1)
    )
    structure: str = setting(
        "diag",
        choices=STRUCTURES,
        help="diag: diagonal GGN over all weights; last_layer: full GGN "
        "over the last Dense layer; kfac: Kronecker-factored GGN per "
        "Dense layer",
    )
    prior_precision: float | str | None = setting(
        None,
        metavar="auto|ALPHA",
        help="'auto': isotropic Gaussian prior precision maximising the Laplace marginal "
        "likelihood; a number: that precision; default: the curvature of the MAP run's "
        "own prior",
    )
    predictive: str = setting(
        "mc",
        choices=PREDICTIVES,
        help="what evaluate uses: mc (Monte Carlo over sampled networks) "
        "or glm (linearised network)",
    )
    num_samples: int = setting(
        30, help="posterior draws for the Monte Carlo predictive and diagnostics", bounds=DRAWS
    )
    curvature_chunk_size: int = setting(
        1000,
        aliases=("--chunk-size",),
        help="training examples per step of the curvature pass (bounds memory)",
        bounds=(1, MAX_INT32),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = type(self)
        check_choice(cls, "structure", self.structure, STRUCTURES)
        check_choice(cls, "predictive", self.predictive, PREDICTIVES)
        object.__setattr__(self, "prior_precision", check_prior_precision(self.prior_precision))
        check_at_least(cls, "num_samples", self.num_samples, 1)
        check_at_least(cls, "curvature_chunk_size", self.curvature_chunk_size, 1)
        check_at_least(cls, "member", self.member, 0)

    @property
    def label(self) -> str:
        return f"Laplace ({self.structure}, {self.predictive})"

    def source_run(self) -> str:
        if self.map_run is None:
            raise ConfigError("laplace needs --map-run, a finished sgd or ensemble run")
        return self.map_run

    def loop(self, num_train: int) -> Loop:
        chunks = math.ceil(num_train / self.curvature_chunk_size)
        return Loop("chunks", chunks, batch_size=self.curvature_chunk_size, burn_in=chunks - 1)


def last_layer(position: Params, example: jax.Array, *, log_posterior: LogPosterior, model: str):
    """The path of the last Dense layer of the network at ``position`` (read from one input)."""
    return curvature.last_dense_path(
        log_posterior.apply, network_variables(position), example, model
    )


def batch_curvature(
    position: Params,
    batch: Batch,
    example: jax.Array,
    *,
    log_posterior: LogPosterior,
    structure: str,
    max_elements: int,
    model: str,
):
    """The GGN of ``batch`` at ``position`` in the shape ``structure`` keeps.

    The GGN is over the network's variables; the likelihood is the one at the position (with
    its inferred noise std, if any).
    """
    apply = log_posterior.apply
    params = network_variables(position)
    likelihood = log_posterior.likelihood_for(position)
    if structure == "diag":
        return curvature.ggn_diag(apply, likelihood, params, batch, max_elements=max_elements)
    if structure == "last_layer":
        path = last_layer(params, example, log_posterior=log_posterior, model=model)
        return curvature.ggn_block(
            apply, likelihood, params, batch, path, max_elements=max_elements
        )
    return curvature.kfac_factors(
        apply, likelihood, params, batch, max_elements=max_elements, model=model
    )


def init(key: Key, params: Params, batch: Batch, *, curvature_of: Callable) -> LaplaceState:
    """θ* = ``params`` and zero curvature of the shape ``curvature_of`` gives."""
    del key
    if batch is None:
        raise ConfigError("the Laplace method needs a batch at init to read the network")
    example = batch.x[:1]
    shapes = jax.eval_shape(curvature_of, params, Batch(batch.x[:1], batch.y[:1]), example)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    dtype = jax.tree.leaves(params)[0].dtype
    return LaplaceState(params, zeros, jnp.zeros((), dtype), jnp.zeros((), jnp.int32), example)


def step(
    key: Key,
    state: LaplaceState,
    batch: Batch,
    *,
    log_posterior: LogPosterior,
    curvature_of: Callable,
) -> tuple[LaplaceState, LaplaceInfo]:
    """Add the GGN and the log likelihood of ``batch`` at θ* (θ* never changes)."""
    del key
    position = state.position
    ggn = curvature_of(position, batch, state.example)
    ll = jnp.sum(
        log_posterior.likelihood_for(position).log_prob(
            log_posterior.apply(network_variables(position), batch.x), batch.y
        )
    )
    n = jnp.asarray(batch.x.shape[0], jnp.int32)
    new = LaplaceState(
        position,
        jax.tree.map(jnp.add, state.curvature, ggn),
        state.log_likelihood + ll.astype(state.log_likelihood.dtype),
        state.num_seen + n,
        state.example,
    )
    return new, LaplaceInfo(ll, n)


def structured_posterior(
    state: LaplaceState, *, log_posterior: LogPosterior, structure: str, model: str, **common
):
    """The posterior of one state's summed curvature, scaled to the full data set."""
    seen = int(state.num_seen)
    # The untempered full-data GGN: (N / n) Σ over the n examples seen.
    scale = log_posterior.data_weight(seen)
    common = dict(
        log_prior=log_posterior.log_prior,
        temper=log_posterior.temper,
        log_likelihood=float(state.log_likelihood) * scale,
        **common,
    )
    if structure == "kfac":
        factors = {
            name: (np.asarray(A, np.float64) / seen, np.asarray(B, np.float64) * scale)
            for name, (A, B) in state.curvature.items()
        }
        return structures.kronecker(state.position, factors, **common)
    if structure == "last_layer":
        G = np.asarray(state.curvature, np.float64) * scale
        path = last_layer(state.position, state.example, log_posterior=log_posterior, model=model)
        return structures.last_layer(state.position, G, path, **common)
    G = jax.tree.map(lambda a: np.asarray(a, np.float64) * scale, state.curvature)
    return structures.diagonal(
        state.position, _position_ggn(state.position, G, log_posterior), **common
    )


def posterior(kept: LaplaceState, **settings):
    """The Laplace posterior of the last kept state (:func:`structured_posterior`), with a
    warning when its precision needed damping."""
    state = jax.tree.map(lambda a: a[-1], kept)
    if int(state.num_seen) < 1:
        raise ConfigError("no data seen: run at least one step before the posterior")
    post = structured_posterior(state, **settings)
    message = structures.damping_message(post.info)
    if message is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    return post


def build(
    log_posterior: LogPosterior,
    config: Config,
    *,
    max_elements: int = curvature.MAX_ELEMENTS,
    model: str = "model",
) -> Method:
    """A Laplace approximation as ``init``/``step``/``posterior``.

    Args:
        log_posterior: a :class:`bnnkit.log_posterior.LogPosterior` (apply, likelihood, prior,
            num_data N, temperature T).
        config: the settings (``structure``, ``prior_precision``, how it predicts).
        max_elements: bound on the per-example products held at once in a step.
        model: the model's name, for error messages.
    """
    curvature_of = functools.partial(
        batch_curvature,
        log_posterior=log_posterior,
        structure=config.structure,
        max_elements=max_elements,
        model=model,
    )
    return Method(
        init=functools.partial(init, curvature_of=curvature_of),
        step=functools.partial(step, log_posterior=log_posterior, curvature_of=curvature_of),
        posterior=functools.partial(
            posterior,
            log_posterior=log_posterior,
            structure=config.structure,
            model=model,
            prior_precision=config.prior_precision,
            num_draws=config.num_samples,
            predictive=config.predictive,
        ),
        position=state_position,
    )


def _position_ggn(position: Params, network_ggn: Params, log_posterior: LogPosterior) -> Params:
    """The diagonal GGN over a whole position from the one over the network's variables.

    A prior's latent scales do not enter the likelihood (zero GGN). An inferred Gaussian noise
    std ``σ₀ = eᵘ`` gets its Fisher information, 2 per example: ``2N``.
    """
    if not (isinstance(position, dict) and any(k in position for k in LATENT_COLLECTIONS)):
        return network_ggn
    full = {k: jax.tree.map(lambda a: np.zeros(np.shape(a)), v) for k, v in position.items()}
    full.update(network_ggn)
    if "noise" in position:
        full["noise"] = jax.tree.map(
            lambda a: np.full(np.shape(a), 2.0 * log_posterior.num_data), position["noise"]
        )
    return full
