"""The assembled problem, and the one place its pieces are put together.

A :class:`Problem` holds what a method needs of a posterior: the dataset, the network, the
likelihood, the prior and the tempered :class:`~bnnkit.log_posterior.LogPosterior`.
:func:`assemble` makes them from a :class:`~bnnkit.problem_config.ProblemConfig` on a loaded
dataset; both ways in, a named dataset (:func:`bnnkit.problem.build`) and arrays in memory
(:mod:`bnnkit.problem_arrays`), go through it, so the same settings give the same objects
whichever way the data came.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import data, likelihoods, models, priors
from bnnkit.errors import ConfigError
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import imported
from bnnkit.priors.spec import PRIOR_FIELDS
from bnnkit.problem_arrays import from_given
from bnnkit.problem_config import ProblemConfig
from bnnkit.types import Batch, Key, Params


@dataclasses.dataclass(frozen=True)
class Problem:
    """The assembled pieces; ``apply`` includes any on-device input normalisation.

    Attributes:
        arrays: for a problem made by :meth:`from_arrays`, the arrays as given (what a run
            stores as :data:`bnnkit.problem.DATA_FILE`); ``None`` for one built from a config.
    """

    config: ProblemConfig
    dataset: data.Dataset
    model: models.Model
    likelihood: likelihoods.Likelihood
    prior: priors.Prior
    log_posterior: LogPosterior
    dtype: Any
    arrays: Mapping[str, np.ndarray] | None = None

    @classmethod
    def from_arrays(
        cls,
        x_train: Any,
        y_train: Any,
        x_test: Any,
        y_test: Any,
        *,
        model: Any,
        likelihood: str | None = None,
        params: Params | Callable[[jax.Array, jax.Array], Params] | None = None,
        x_val: Any = None,
        y_val: Any = None,
        **settings: Any,
    ) -> Problem:
        r"""A problem on arrays in memory and a model given as an object.

        The arrays are checked as a user's ``.npz`` file is: integer targets are class labels
        ``0..K-1`` (classification), real ones regression targets; they are used as given
        unless ``standardize=True``. :func:`bnnkit.run` takes the result where it takes a
        :class:`ProblemConfig`, and every method, ``bnnkit.evaluate``, the report and the run
        directory work on it as on a named dataset. A run stores the arrays
        (:data:`bnnkit.problem.DATA_FILE`) and records their sha256 and the model's import
        path with its constructor arguments, so that it can be evaluated again in another
        process; a model that cannot be imported again (a class of ``__main__``, an ``apply``
        function) is recorded as such, and such a run is evaluated with
        ``bnnkit.evaluate(run_dir, problem=Problem.from_arrays(...))``.

        Args:
            x_train: training inputs, one row per example.
            y_train: training targets: integer class labels, or real regression targets.
            x_test: test inputs.
            y_test: test targets.
            model: a ``flax.linen.Module`` (its outputs must be what the likelihood reads:
                the number of classes; for Gaussian regression 1 with ``noise_std`` fixed,
                else 2, a mean and a softplus std), an ``apply(params, x)`` function (with
                ``params``), or an import path ``"package.module:ClassName"``.
            likelihood: ``"gaussian"`` or ``"categorical"``; ``None`` picks by the targets.
            params: with an ``apply`` function: the initial parameters (every chain and
                member starts there), or an ``init(key, x)`` function that draws them.
            x_val: optional validation inputs (``dataset.info["validation"]``).
            y_val: their targets, given with ``x_val``.
            **settings: the problem settings of :data:`bnnkit.problem.ARRAY_SETTINGS`
                (``noise_std``, ``weight_decay``, ``prior``, ``temperature``,
                ``standardize``, ...), as for :class:`ProblemConfig`; ``model_args`` with an
                import path.

        Raises:
            ConfigError: any invalid array, setting or model, named in one line.

        Example:
            >>> import flax.linen as nn
            >>> rng = np.random.default_rng(0)
            >>> x = rng.normal(size=(40, 3)).astype(np.float32)
            >>> y = (x @ np.array([1.0, -2.0, 0.5]) > 0).astype(np.int32)
            >>> problem = Problem.from_arrays(x[:30], y[:30], x[30:], y[30:],
            ...                               model=nn.Dense(2), weight_decay=1.0)
            >>> problem.dataset.task, problem.dataset.num_classes, problem.config.dataset[:7]
            ('classification', 2, 'arrays:')
            >>> problem.config.model  # flax's own Dense: importable, so recorded by path
            'flax.linen.linear:Dense'
        """
        return assembled(
            from_given(
                {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test},
                x_val,
                y_val,
                model=model,
                likelihood=likelihood,
                params=params,
                settings=settings,
            )
        )

    def apply(self, params: Params, x: jax.Array, *, key: Key | None = None) -> jax.Array:
        """Network outputs at a position (its latent collections are not the network's);
        ``key`` draws a stochastic model's randomness, else it runs deterministically."""
        return self.log_posterior.outputs(params, x, key)

    def likelihood_at(self, params: Params) -> likelihoods.Likelihood:
        """The likelihood at a position (with the position's noise std when it is inferred)."""
        return self.log_posterior.likelihood_for(params)

    def init_params(self, key: jax.Array) -> Params:
        """A starting position: network initialisation plus the prior's latents at their mode."""
        example = self.to_device(self.dataset.x_train[:1])
        params = self.model.init(key, example)
        position = {**params, **self.prior.init_latents(params)}
        return jax.tree.map(lambda p: jnp.asarray(p).astype(self.dtype), position)

    def to_device(self, x: np.ndarray) -> jax.Array:
        """Inputs as the model takes them: integers stay integers, reals get the run dtype."""
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.integer):
            return jnp.asarray(x)
        return jnp.asarray(x, self.dtype)

    def batch(self, x: np.ndarray, y: np.ndarray) -> Batch:
        ydtype = jnp.int32 if self.dataset.task == "classification" else self.dtype
        return Batch(self.to_device(x), jnp.asarray(y, ydtype))

    def train_batch(self) -> Batch:
        return self.batch(self.dataset.x_train, self.dataset.y_train)

    def test_batch(self) -> Batch:
        return self.batch(self.dataset.x_test, self.dataset.y_test)


def _check_finite(dataset: data.Dataset) -> None:
    for key in ("x_train", "y_train", "x_test", "y_test"):
        value = np.asarray(getattr(dataset, key))
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            raise ConfigError(
                f"dataset {dataset.name!r}: {key} holds {int(np.sum(~np.isfinite(value)))} NaN "
                "or infinite values"
            )


def subset_train(dataset: data.Dataset, subset_train_to: int | None) -> data.Dataset:
    """The first N training examples, as bnn_hmc takes them (loaders that do not subset)."""
    if subset_train_to is None or dataset.num_train <= subset_train_to:
        return dataset
    return dataclasses.replace(
        dataset,
        x_train=dataset.x_train[:subset_train_to],
        y_train=dataset.y_train[:subset_train_to],
    )


def enable_float64(config: ProblemConfig) -> Any:
    """The run's dtype, with JAX's double precision turned on for a ``float64`` problem."""
    if config.float64 and not jax.config.read("jax_enable_x64"):
        jax.config.update("jax_enable_x64", True)
    return jnp.float64 if config.float64 else jnp.float32


def _model(
    config: ProblemConfig,
    dataset: data.Dataset,
    num_outputs: int,
    likelihood: str,
    maker: Callable[[int], models.Model] | None,
    example: jax.Array,
) -> models.Model:
    """The network: given (``maker``), by import path, or from the registry, checked against
    the data's shapes and the likelihood's outputs."""
    if maker is None and not imported.is_import_path(config.model):
        models.check_compatible(config.model, dataset.task, dataset.input_shape, dataset.name)
        return models.get(config.model, num_outputs=num_outputs, dropout_rate=config.dropout_rate)
    if config.dropout_rate is not None:
        raise ConfigError(
            f"--dropout-rate {config.dropout_rate} applies to a model with dropout "
            f"(*_dropout); {config.model!r} drops nothing"
        )
    if maker is None:
        module = imported.module_from_path(config.model, config.model_args, num_outputs=num_outputs)
        model = imported.from_module(module, config.model, num_outputs)
    else:
        model = maker(num_outputs)
    imported.check_outputs(model, example, num_outputs, likelihood)
    return model


def _likelihood_noise_std(config: ProblemConfig, dataset: data.Dataset) -> float | None:
    """The likelihood's fixed noise std: ``--noise-std``, or 1 where ``--noise-prior`` infers
    it (one output, the mean; the std comes from each position, LogPosterior.likelihood_for),
    or ``None`` (the network outputs it).

    Raises:
        ConfigError: ``--noise-prior`` off a Gaussian regression, or with ``--noise-std`` or
            ``--min-noise-std``.
    """
    noise_std = config.noise_std
    if config.noise_prior is not None:
        if dataset.task != "regression" or config.likelihood not in (None, "gaussian"):
            raise ConfigError(
                f"--noise-prior {config.noise_prior} needs the gaussian likelihood "
                f"of a regression dataset; {dataset.name!r} is {dataset.task}"
            )
        if noise_std is not None:
            raise ConfigError(
                f"--noise-prior {config.noise_prior} infers the noise std; "
                f"allowed: it or --noise-std {noise_std}, not both"
            )
        if config.min_noise_std is not None:
            raise ConfigError(
                f"--noise-prior {config.noise_prior} infers one noise std; "
                f"--min-noise-std {config.min_noise_std} floors the std a network outputs: "
                "give one or the other"
            )
        noise_std = 1.0
    return noise_std


def assemble(
    config: ProblemConfig, dataset: data.Dataset, maker: Callable[[int], models.Model] | None = None
) -> Problem:
    """Model, likelihood, prior and log posterior on a loaded dataset."""
    dtype = enable_float64(config)
    _check_finite(dataset)
    noise_std = _likelihood_noise_std(config, dataset)
    likelihood = likelihoods.make(
        config.likelihood,
        task=dataset.task,
        num_classes=dataset.num_classes,
        noise_std=noise_std,
        min_std=config.min_noise_std,
    )
    example = np.asarray(dataset.x_train[:1])
    example = (
        jnp.asarray(example)
        if np.issubdtype(example.dtype, np.integer)
        else jnp.asarray(example, dtype)
    )
    model = _model(
        config, dataset, likelihood.num_outputs, _describe(likelihood, noise_std), maker, example
    )
    plain = all(getattr(config, f) is None for f in PRIOR_FIELDS)
    # Parameter shapes only, so that layer patterns are checked before anything runs.
    shapes = None if plain else jax.eval_shape(model.init, jax.random.PRNGKey(0), example)
    prior = priors.make(
        config.prior,
        bias=config.bias_prior,
        layers=config.layer_priors,
        noise=config.noise_prior,
        weight_decay=config.weight_decay,
        like=shapes,
    )

    apply = model.apply
    norm = dataset.input_normalization
    if norm is not None:
        mean = jnp.asarray(norm.mean, dtype)
        inv_std = jnp.asarray(1.0 / np.asarray(norm.std), dtype)

        def apply(params, x, *, key=None, _apply=model.apply):
            return _apply(params, (x.astype(dtype) - mean) * inv_std, key=key)

    log_posterior = LogPosterior(
        apply=apply,
        likelihood=likelihood,
        prior=prior,
        num_data=dataset.num_train,
        temperature=config.temperature,
        chunk_size=config.chunk_size,
        stochastic=model.stochastic,
        dropout_rate=model.dropout_rate,
    )
    return Problem(
        config=config,
        dataset=dataset,
        model=model,
        likelihood=likelihood,
        prior=prior,
        log_posterior=log_posterior,
        dtype=dtype,
    )


def _describe(likelihood: likelihoods.Likelihood, noise_std: float | None) -> str:
    """The likelihood as a message names it, with what its outputs are."""
    if likelihood.name == "gaussian" and noise_std is None:
        return "gaussian (a mean and a softplus std per example; fix noise_std for one output)"
    return f"{likelihood.name} ({likelihood.num_outputs} output(s) per example)"


def assembled(parts: Any) -> Problem:
    """The problem of a :class:`bnnkit.problem_arrays.ArrayParts`: its training set cut as
    its settings say, assembled as a named dataset's, with its arrays kept for the run."""
    dataset = subset_train(parts.dataset, parts.config.subset_train_to)
    problem = assemble(parts.config, dataset, parts.maker)
    return dataclasses.replace(problem, arrays=parts.arrays)
