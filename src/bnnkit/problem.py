"""A Bayesian problem assembled from a config: data, model, likelihood, prior, log posterior.

This is the left half of the data flow (``dataset -> model -> prior + likelihood -> log
posterior``) in one place, so the CLI, ``bnnkit evaluate`` and Python users build exactly the same
objects from the same config.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import data, likelihoods, models, priors
from bnnkit.errors import ConfigError
from bnnkit.log_posterior import LogPosterior
from bnnkit.settings import (
    MAX_INT32,
    Exclusive,
    check_dtype,
    check_numbers,
    check_representable,
    setting,
)
from bnnkit.types import Batch, Key, Params


@dataclasses.dataclass(frozen=True)
class ProblemConfig:
    """Everything that defines the posterior, independent of the inference method.

    Attributes:
        dataset: registry name (``"yacht_0"``) or path to an ``.npz`` file.
        model: registry name (``"mlp_regression_small"``).
        likelihood: ``"gaussian"`` or ``"categorical"``; ``None`` picks by task.
        noise_std: fixed observation noise (homoscedastic Gaussian); ``None`` lets the network
            output its std (heteroscedastic).
        weight_decay: λ of the default Gaussian prior N(0, 1/λ) (and of a ``gaussian`` spec
            given without a scale).
        prior: prior spec for every parameter (``"laplace:scale=0.1"``, see
            :mod:`bnnkit.priors.spec`); ``None``: the Gaussian of ``weight_decay``.
        bias_prior: prior spec for the leaves named ``bias``.
        layer_priors: ``PATTERN=SPEC`` rules joined by ``;`` (a sequence of rules is accepted
            and stored joined, so the config reads back equal from JSON); the last match wins.
        noise_prior: infer the regression noise std σ₀ (as log σ₀) with this prior
            (``"gamma:concentration=0.5,rate=1"``); excludes ``noise_std``.
        temperature: T of the tempered posterior.
        float64: compute in double precision.
        standardize: standardise inputs/targets with training statistics (``None``: the
            dataset's default — on for registry datasets, off for user files).
        subset_train_to: keep only the first N training examples.
        data_dir: where dataset files are (otherwise ``BNNKIT_DATA_DIR`` or the cache).
        chunk_size: evaluate the full-batch likelihood in chunks of this size.
        validation_size: examples held out from the end of the training set (before
            ``subset_train_to``) as a validation set, ``dataset.info["validation"]``: the
            method never sees them; ``bnnkit evaluate --calibrate`` and ``--conformal`` fit
            on them.
        dropout_rate: p of a dropout model (``*_dropout``; default
            :data:`bnnkit.models.registry.DEFAULT_DROPOUT_RATE`); refused for other models.
    """

    dataset: str = setting(aliases=("--dataset-name",),
                           help="registry name (yacht_0 = yacht, split 0; mnist; ...) or path "
                                "to an .npz file with x_train, y_train, x_test, y_test")
    model: str = setting(aliases=("--model-name",),
                         help="registered model (`bnnkit models` describes them)")
    likelihood: str | None = setting(None, choices=("gaussian", "categorical"),
                                     help="default: gaussian for regression, categorical for "
                                          "classification")
    noise_std: float | None = setting(None, help="fixed Gaussian noise std (in the units the "
                                                 "model sees); default: the network outputs "
                                                 "its own std")
    weight_decay: float = setting(1.0, help="precision λ of the Gaussian prior N(0, 1/λ)")
    temperature: float = setting(1.0, help="posterior temperature T (T < 1: a cold posterior)")
    float64: bool = setting(False, aliases=("--use-float64",),
                            help="compute in double precision")
    standardize: bool | None = setting(None, help="standardise a user .npz file with its "
                                                  "training statistics")
    subset_train_to: int | None = setting(None, help="keep only the first N training examples",
                                          bounds=(1, MAX_INT32))
    data_dir: str | None = setting(None, help="folder with dataset files (default: "
                                              "$BNNKIT_DATA_DIR or the download cache)")
    chunk_size: int | None = setting(None, help="evaluate the full-batch likelihood in chunks "
                                                "of N examples (bounds memory)",
                                     bounds=(1, MAX_INT32))
    prior: str | None = setting(
        None, metavar="SPEC",
        help="prior of every weight and bias: NAME or NAME:key=value,... e.g. "
             "laplace:scale=0.1, student_t:df=3,scale=0.1 (families: gaussian, fanin_gaussian, "
             "scale_mixture, mixture, logistic, laplace, student_t, hierarchical, ard); "
             "default: gaussian with variance 1/--weight-decay")
    bias_prior: str | None = setting(None, metavar="SPEC",
                                     help="prior of the biases (default: that of --prior)")
    layer_priors: str | None = setting(
        None, flag="--layer-prior", metavar="PATTERN=SPEC", action="append",
        help="prior of the parameters under PATTERN, a glob over paths such as Dense_2 or "
             "'Dense_*/kernel'; repeatable, the last match wins")
    noise_prior: str | None = setting(
        None, metavar="SPEC",
        help="infer the regression noise std σ0 under this prior instead of fixing it, e.g. "
             "gamma:concentration=0.5,rate=1 (gamma, half_normal, lognormal)")
    validation_size: int | None = setting(
        None, help="hold out the last N training examples (before --subset-train-to) as a "
                   "validation set, which the method never sees: evaluate --calibrate and "
                   "--conformal fit on it", bounds=(1, None))
    dropout_rate: float | None = setting(
        None, help="probability p with which a dropout model (*_dropout) drops each input of "
                   "every layer, in [0, 1) (default 0.1); other models have no dropout",
        bounds=(0.0, Exclusive(1.0)))

    def __post_init__(self) -> None:
        check_numbers(self)
        check_dtype(self, np.float64 if self.float64 else np.float32)
        # Stored canonical, so equal priors (and a model named by an alias) compare equal in
        # run.json and on --resume.
        canonical = {
            "model": models.canonical_name(self.model),
            "prior": priors.spec.canonical(self.prior),
            "bias_prior": priors.spec.canonical(self.bias_prior),
            "layer_priors": priors.spec.canonical_layer_rules(self.layer_priors),
            "noise_prior": priors.spec.canonical(self.noise_prior, kind="noise"),
        }
        for name, value in canonical.items():
            object.__setattr__(self, name, value)
        # A prior's numbers are the run's numbers too.
        for name, number in priors.spec.numbers(self.prior, self.bias_prior, self.layer_priors,
                                                self.noise_prior):
            check_representable(name, number, np.float64 if self.float64 else np.float32)

    @classmethod
    def from_dict(cls, values: dict) -> ProblemConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


#: Settings that fix which data a run's predictions are on: runs that differ in one of them
#: cannot be compared or started from one another.
DATA_SETTINGS = ("dataset",)
#: Settings that fix which posterior a run targets: runs that differ in them can be compared
#: or warm-started from one another, but the user is told.
POSTERIOR_SETTINGS = ("model", "likelihood", "noise_std", "noise_prior", "weight_decay",
                      "prior", "bias_prior", "layer_priors", "temperature", "subset_train_to",
                      "dropout_rate", "validation_size")


def differences(mine: ProblemConfig, other: ProblemConfig, names: tuple[str, ...],
                other_name: str = "the other run") -> list[str]:
    """The settings among ``names`` in which two problems differ, named by their flags.

    Example:
        >>> a = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.1)
        >>> b = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
        >>> differences(a, b, POSTERIOR_SETTINGS, "the reference")
        ['--noise-std 0.1 (the reference: 0.35)']
    """
    from bnnkit.settings import flag

    return [f"{flag(ProblemConfig, name)} {getattr(mine, name)} ({other_name}: "
            f"{getattr(other, name)})" for name in names
            if getattr(mine, name) != getattr(other, name)]


@dataclasses.dataclass(frozen=True)
class Problem:
    """The assembled pieces; ``apply`` includes any on-device input normalisation."""

    config: ProblemConfig
    dataset: data.Dataset
    model: models.Model
    likelihood: likelihoods.Likelihood
    prior: priors.Prior
    log_posterior: LogPosterior
    dtype: Any

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


def build(config: ProblemConfig) -> Problem:
    """Load the data and build model, likelihood, prior and log posterior from ``config``.

    Raises:
        ConfigError: any invalid value, named in the message.

    Example:
        >>> problem = build(ProblemConfig(dataset="yacht_0", model="mlp_regression_small"))
        >>> params = problem.init_params(jax.random.PRNGKey(0))
        >>> float(problem.log_posterior(params, problem.train_batch()))
        -1365.4
    """
    if config.float64 and not jax.config.read("jax_enable_x64"):
        jax.config.update("jax_enable_x64", True)
    dtype = jnp.float64 if config.float64 else jnp.float32
    options = {}
    if config.subset_train_to is not None:
        options["subset_train_to"] = config.subset_train_to
    if config.data_dir is not None:
        options["data_dir"] = config.data_dir
    if config.validation_size is not None:
        options["validation_size"] = config.validation_size
    dataset = data.load(config.dataset, standardize_data=config.standardize, **options)
    if config.subset_train_to is not None and dataset.num_train > config.subset_train_to:
        # Loaders that do not subset themselves: take the first N, as bnn_hmc does.
        dataset = dataclasses.replace(
            dataset,
            x_train=dataset.x_train[: config.subset_train_to],
            y_train=dataset.y_train[: config.subset_train_to],
        )
    _check_finite(dataset)
    models.check_compatible(config.model, dataset.task, dataset.input_shape, dataset.name)
    noise_std = config.noise_std
    if config.noise_prior is not None:
        if dataset.task != "regression" or config.likelihood not in (None, "gaussian"):
            raise ConfigError(f"--noise-prior {config.noise_prior} needs the gaussian likelihood "
                              f"of a regression dataset; {dataset.name!r} is {dataset.task}")
        if noise_std is not None:
            raise ConfigError(f"--noise-prior {config.noise_prior} infers the noise std; "
                              f"allowed: it or --noise-std {noise_std}, not both")
        # One output (the mean); the std comes from each position (LogPosterior.likelihood_for).
        noise_std = 1.0
    likelihood = likelihoods.make(
        config.likelihood, task=dataset.task, num_classes=dataset.num_classes,
        noise_std=noise_std,
    )
    model = models.get(config.model, num_outputs=likelihood.num_outputs,
                       dropout_rate=config.dropout_rate)
    plain = all(getattr(config, f) is None
                for f in ("prior", "bias_prior", "layer_priors", "noise_prior"))
    example = np.asarray(dataset.x_train[:1])
    example = jnp.asarray(example) if np.issubdtype(example.dtype, np.integer) else jnp.asarray(
        example, dtype)
    # Parameter shapes only, so that layer patterns are checked before anything runs.
    shapes = None if plain else jax.eval_shape(model.init, jax.random.PRNGKey(0), example)
    prior = priors.make(
        config.prior, bias=config.bias_prior, layers=config.layer_priors,
        noise=config.noise_prior, weight_decay=config.weight_decay, like=shapes,
    )

    apply = model.apply
    norm = dataset.input_normalization
    if norm is not None:
        mean = jnp.asarray(norm.mean, dtype)
        inv_std = jnp.asarray(1.0 / np.asarray(norm.std), dtype)

        def apply(params, x, *, key=None, _apply=model.apply):
            return _apply(params, (x.astype(dtype) - mean) * inv_std, key=key)

    log_posterior = LogPosterior(
        apply=apply, likelihood=likelihood, prior=prior, num_data=dataset.num_train,
        temperature=config.temperature, chunk_size=config.chunk_size,
        stochastic=model.stochastic, dropout_rate=model.dropout_rate,
    )
    return Problem(
        config=config, dataset=dataset, model=model, likelihood=likelihood, prior=prior,
        log_posterior=log_posterior, dtype=dtype,
    )
