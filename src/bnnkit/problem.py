"""A Bayesian problem assembled from a config: data, model, likelihood, prior, log posterior.

This is the left half of the data flow (``dataset -> model -> prior + likelihood -> log
posterior``) in one place, so the CLI, ``bnnkit evaluate`` and Python users build exactly the same
objects from the same config. Two ways in:

- :func:`build` from a :class:`ProblemConfig`: a dataset and a model by name (a registry name, a
  user ``.npz`` file, an importable ``package.module:ClassName``);
- :meth:`Problem.from_arrays` from objects in memory: NumPy arrays and any Flax module (or an
  ``apply`` function with its parameters). A run made from it stores the arrays in its run
  directory (:data:`DATA_FILE`) and records their sha256 and the model's import path, so
  :func:`build_recorded` rebuilds the same problem in another process, or refuses in one line
  saying how to pass the model back in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import data, likelihoods, models, priors, storage
from bnnkit.arguments import array_argument
from bnnkit.data.npz import from_arrays as dataset_from_arrays
from bnnkit.entry_points import check_call
from bnnkit.errors import ConfigError
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import imported
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
        model: registry name (``"mlp_regression_small"``), or an importable Flax module
            ``"package.module:ClassName"``.
        model_args: constructor arguments of an importable module, a JSON object
            (``'{"features": 32}'``); a ``num_outputs`` it leaves out is set for the likelihood.
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

    dataset: str = setting(
        aliases=("--dataset-name",),
        help="registry name (yacht_0 = yacht, split 0; mnist; ...) or path "
        "to an .npz file with x_train, y_train, x_test, y_test",
    )
    model: str = setting(
        aliases=("--model-name",),
        help="registered model (`bnnkit models` describes them), or an "
        "importable Flax module package.module:ClassName",
    )
    likelihood: str | None = setting(
        None,
        choices=("gaussian", "categorical"),
        help="default: gaussian for regression, categorical for classification",
    )
    noise_std: float | None = setting(
        None,
        help="fixed Gaussian noise std (in the units the "
        "model sees); default: the network outputs "
        "its own std",
    )
    weight_decay: float = setting(1.0, help="precision λ of the Gaussian prior N(0, 1/λ)")
    temperature: float = setting(1.0, help="posterior temperature T (T < 1: a cold posterior)")
    float64: bool = setting(False, aliases=("--use-float64",), help="compute in double precision")
    standardize: bool | None = setting(
        None, help="standardise a user .npz file with its training statistics"
    )
    subset_train_to: int | None = setting(
        None, help="keep only the first N training examples", bounds=(1, MAX_INT32)
    )
    data_dir: str | None = setting(
        None, help="folder with dataset files (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    chunk_size: int | None = setting(
        None,
        help="evaluate the full-batch likelihood in chunks of N examples (bounds memory)",
        bounds=(1, MAX_INT32),
    )
    prior: str | None = setting(
        None,
        metavar="SPEC",
        help="prior of every weight and bias: NAME or NAME:key=value,... e.g. "
        "laplace:scale=0.1, student_t:df=3,scale=0.1 (families: gaussian, fanin_gaussian, "
        "scale_mixture, mixture, logistic, laplace, student_t, hierarchical, ard); "
        "default: gaussian with variance 1/--weight-decay",
    )
    bias_prior: str | None = setting(
        None, metavar="SPEC", help="prior of the biases (default: that of --prior)"
    )
    layer_priors: str | None = setting(
        None,
        flag="--layer-prior",
        metavar="PATTERN=SPEC",
        action="append",
        help="prior of the parameters under PATTERN, a glob over paths such as Dense_2 or "
        "'Dense_*/kernel'; repeatable, the last match wins",
    )
    noise_prior: str | None = setting(
        None,
        metavar="SPEC",
        help="infer the regression noise std σ0 under this prior instead of fixing it, e.g. "
        "gamma:concentration=0.5,rate=1 (gamma, half_normal, lognormal)",
    )
    model_args: str | None = setting(
        None,
        metavar="JSON",
        help="constructor arguments of a --model package.module:ClassName, a JSON object, "
        "e.g. '{\"features\": 32}' (num_outputs is set for the likelihood if left out)",
    )
    validation_size: int | None = setting(
        None,
        help="hold out the last N training examples (before --subset-train-to) as a "
        "validation set, which the method never sees: evaluate --calibrate and "
        "--conformal fit on it",
        bounds=(1, None),
    )
    dropout_rate: float | None = setting(
        None,
        help="probability p with which a dropout model (*_dropout) drops each input of "
        "every layer, in [0, 1) (default 0.1); other models have no dropout",
        bounds=(0.0, Exclusive(1.0)),
    )

    def __post_init__(self) -> None:
        check_numbers(self)
        check_dtype(self, np.float64 if self.float64 else np.float32)
        if self.model_args is not None and not imported.is_import_path(self.model):
            raise ConfigError(
                f"--model-args is for a --model package.module:ClassName, not {self.model!r}"
            )
        # Stored canonical, so equal priors (and a model named by an alias) compare equal in
        # run.json and on --resume.
        canonical = {
            "model": models.canonical_name(self.model),
            "prior": priors.spec.canonical(self.prior),
            "bias_prior": priors.spec.canonical(self.bias_prior),
            "layer_priors": priors.spec.canonical_layer_rules(self.layer_priors),
            "noise_prior": priors.spec.canonical(self.noise_prior, kind="noise"),
            "model_args": imported.canonical_args(self.model_args),
        }
        for name, value in canonical.items():
            object.__setattr__(self, name, value)
        # A prior's numbers are the run's numbers too.
        for name, number in priors.spec.numbers(
            self.prior, self.bias_prior, self.layer_priors, self.noise_prior
        ):
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
POSTERIOR_SETTINGS = (
    "model",
    "model_args",
    "likelihood",
    "noise_std",
    "noise_prior",
    "weight_decay",
    "prior",
    "bias_prior",
    "layer_priors",
    "temperature",
    "subset_train_to",
    "dropout_rate",
    "validation_size",
)


#: How a setting left unset reads in a message, where ``None`` would say nothing.
UNSET = {
    "noise_std": "learned (the network outputs its std)",
    "likelihood": "by task",
    "prior": "Gaussian of --weight-decay",
    "bias_prior": "as --prior",
    "layer_priors": "none",
    "noise_prior": "none",
    "subset_train_to": "all",
    "standardize": "the dataset's default",
    "chunk_size": "none",
    "model_args": "the defaults",
    "validation_size": "none",
    "dropout_rate": "the model's (0.1 for *_dropout, else none)",
}


def shown(name: str, value: Any) -> str:
    """A setting's value as a message shows it: an unset one in words, not ``None``.

    Example:
        >>> shown("noise_std", None), shown("noise_std", 0.35)
        ('learned (the network outputs its std)', '0.35')
    """
    return UNSET.get(name, "unset") if value is None else str(value)


def differences(
    mine: ProblemConfig,
    other: ProblemConfig,
    names: tuple[str, ...],
    other_name: str = "the other run",
) -> list[str]:
    """The settings among ``names`` in which two problems differ, named by their flags.

    Example:
        >>> a = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.1)
        >>> b = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
        >>> differences(a, b, POSTERIOR_SETTINGS, "the reference")
        ['--noise-std 0.1 (the reference: 0.35)']
        >>> differences(ProblemConfig("yacht_0", "mlp_regression_small"), b,
        ...             POSTERIOR_SETTINGS, "the reference")
        ['--noise-std learned (the network outputs its std) (the reference: 0.35)']
    """
    from bnnkit.settings import flag

    return [
        f"{flag(ProblemConfig, name)} {shown(name, getattr(mine, name))} ({other_name}: "
        f"{shown(name, getattr(other, name))})"
        for name in names
        if getattr(mine, name) != getattr(other, name)
    ]


#: The dataset name of a problem made from arrays in memory: ``arrays:`` and the first 16 hex
#: digits of the arrays' sha256, so runs on the same arrays compare equal and others do not.
ARRAYS_PREFIX = "arrays:"
#: Where a run made from arrays keeps them, in its run directory.
DATA_FILE = "data.npz"
#: The arrays :meth:`Problem.from_arrays` takes and a run stores (the validation pair optional).
ARRAY_NAMES = ("x_train", "y_train", "x_test", "y_test", "x_val", "y_val")
#: The settings :meth:`Problem.from_arrays` takes as keywords: the problem's, less those that
#: name data or a model (it is given them as objects).
ARRAY_SETTINGS = (
    "noise_std",
    "weight_decay",
    "temperature",
    "float64",
    "standardize",
    "subset_train_to",
    "chunk_size",
    "prior",
    "bias_prior",
    "layer_priors",
    "noise_prior",
)


def arrays_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """The sha256 of named arrays: each name, dtype, shape and bytes, in name order; the
    fingerprint a run on arrays records (equal arrays give equal digests, wherever they are).

    Example:
        >>> a = arrays_sha256({"x": np.zeros((2, 3), np.float32)})
        >>> a == arrays_sha256({"x": np.zeros((2, 3), np.float32)}), len(a)
        (True, 64)
        >>> a == arrays_sha256({"x": np.zeros((3, 2), np.float32)})
        False
    """
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class Problem:
    """The assembled pieces; ``apply`` includes any on-device input normalisation.

    Attributes:
        arrays: for a problem made by :meth:`from_arrays`, the arrays as given (what a run
            stores as :data:`DATA_FILE`); ``None`` for one built from a config.
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
        directory work on it as on a named dataset. A run stores the arrays (:data:`DATA_FILE`)
        and records their sha256 and the model's import path with its constructor arguments,
        so that it can be evaluated again in another process; a model that cannot be imported
        again (a class of ``__main__``, an ``apply`` function) is recorded as such, and such a
        run is evaluated with ``bnnkit.evaluate(run_dir, problem=Problem.from_arrays(...))``.

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
            **settings: the problem settings of :data:`ARRAY_SETTINGS` (``noise_std``,
                ``weight_decay``, ``prior``, ``temperature``, ``standardize``, ...), as for
                :class:`ProblemConfig`; ``model_args`` with an import path.

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
        unknown = sorted(set(settings) - set(ARRAY_SETTINGS) - {"model_args"})
        if unknown:
            raise ConfigError(
                f"Problem.from_arrays got {', '.join(unknown)}; allowed settings: "
                f"{', '.join(ARRAY_SETTINGS)}"
            )
        if (x_val is None) != (y_val is None):
            raise ConfigError("Problem.from_arrays: give x_val and y_val together, or neither")
        given = {
            "x_train": x_train,
            "y_train": y_train,
            "x_test": x_test,
            "y_test": y_test,
            "x_val": x_val,
            "y_val": y_val,
        }
        # Kinds at the door; finiteness and shapes by the checks of a user's data file.
        arrays = {
            k: array_argument(v, k, where="Problem.from_arrays")
            for k, v in given.items()
            if v is not None or k not in ("x_val", "y_val")
        }
        return _from_arrays(
            arrays, model=model, likelihood=likelihood, params=params, settings=settings
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


def _subset(dataset: data.Dataset, subset_train_to: int | None) -> data.Dataset:
    """The first N training examples, as bnn_hmc takes them (loaders that do not subset)."""
    if subset_train_to is None or dataset.num_train <= subset_train_to:
        return dataset
    return dataclasses.replace(
        dataset,
        x_train=dataset.x_train[:subset_train_to],
        y_train=dataset.y_train[:subset_train_to],
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
    check_call("bnnkit.build_problem", locals())
    if config.dataset.startswith(ARRAYS_PREFIX):
        raise ConfigError(
            f"dataset {config.dataset!r} was arrays in memory: rebuild it from "
            "its run (bnnkit.evaluate reads the run's copy), or pass the arrays "
            "with bnnkit.Problem.from_arrays"
        )
    _enable_float64(config)
    options = {}
    if config.subset_train_to is not None:
        options["subset_train_to"] = config.subset_train_to
    if config.data_dir is not None:
        options["data_dir"] = config.data_dir
    if config.validation_size is not None:
        options["validation_size"] = config.validation_size
    dataset = data.load(config.dataset, standardize_data=config.standardize, **options)
    return _assemble(config, _subset(dataset, config.subset_train_to))


def build_recorded(
    config: ProblemConfig,
    run_dir: str | os.PathLike,
    dataset_info: Mapping[str, Any] | None = None,
    *,
    trust_model: str | None = None,
) -> Problem:
    """The problem of a stored run: :func:`build`, or for a run made from arrays, the arrays
    it stored (checked against the sha256 it recorded) and its model rebuilt by import path.

    This is where a model name comes from a file, so nothing is imported before
    :func:`bnnkit.models.imported.check_trusted` allows it: a model whose module is outside
    bnnkit only when the user named it (``trust_model``, or an enclosing
    :func:`~bnnkit.models.imported.trusting_model`).

    Args:
        config: the run's problem (``run.json``'s ``problem``).
        run_dir: the run directory.
        dataset_info: the run's recorded dataset (``run.json``'s ``dataset``), whose
            ``sha256`` the stored arrays must match.
        trust_model: the model import path the user allows importing (``--model`` on the
            reading command); ``None`` allows none outside bnnkit.

    Raises:
        ConfigError: the run's model imports code outside bnnkit that the user did not allow
            (naming the module and how to allow it), the stored arrays are missing or changed,
            or the model cannot be rebuilt here (a model recorded as in memory), in one line
            saying how to pass it back in.
    """
    imported.check_trusted(config.model, trust_model, where=f"the run {str(run_dir)!r}")
    if not config.dataset.startswith(ARRAYS_PREFIX):
        return build(config)
    path = Path(run_dir) / DATA_FILE
    if not path.is_file():
        raise ConfigError(
            f"{str(path)!r} is missing: the run was made from arrays in memory "
            "and keeps them there; pass them back in with problem="
            "bnnkit.Problem.from_arrays(...)"
        )
    arrays = storage.load_arrays(path)
    digest = arrays_sha256(arrays)
    recorded = (dataset_info or {}).get("sha256")
    if not config.dataset.startswith(ARRAYS_PREFIX + digest[:16]) or (
        isinstance(recorded, str) and recorded != digest
    ):
        raise ConfigError(
            f"{str(path)!r} was changed: its arrays' sha256 {digest[:12]}… is not "
            f"the {config.dataset!r} the run was made on"
        )
    if imported.is_in_memory(config.model):
        imported.module_from_path(config.model, None, num_outputs=0)  # raises, saying how
    settings = {name: getattr(config, name) for name in ARRAY_SETTINGS}
    return _from_arrays(
        arrays,
        model=config.model,
        likelihood=config.likelihood,
        params=None,
        settings={**settings, "model_args": config.model_args},
    )


def check_same(
    problem: Problem, config: ProblemConfig, dataset_info: Mapping[str, Any], where: str
) -> None:
    """Refuse a problem passed back in for a stored run unless it is the run's.

    Raises:
        ConfigError: a setting or the data differ, naming the first.
    """
    names = tuple(f.name for f in dataclasses.fields(ProblemConfig) if f.name != "data_dir")
    differ = differences(problem.config, config, names, where)
    if differ:
        raise ConfigError(f"problem= is not the problem of {where}: {differ[0]}")
    recorded, given = dataset_info.get("sha256"), problem.dataset.info.get("sha256")
    if isinstance(recorded, str) and recorded != given:
        raise ConfigError(
            f"problem= holds other arrays than {where} was made on (sha256 "
            f"{str(given)[:12]}… against {recorded[:12]}…)"
        )


def _enable_float64(config: ProblemConfig) -> Any:
    if config.float64 and not jax.config.read("jax_enable_x64"):
        jax.config.update("jax_enable_x64", True)
    return jnp.float64 if config.float64 else jnp.float32


def _from_arrays(
    arrays: dict[str, np.ndarray],
    *,
    model: Any,
    likelihood: str | None,
    params: Any,
    settings: Mapping[str, Any],
) -> Problem:
    """:meth:`Problem.from_arrays` on checked names: the dataset, the model's record, the
    assembly."""
    digest = arrays_sha256(arrays)
    name = ARRAYS_PREFIX + digest[:16]
    standardize = bool(settings.get("standardize"))
    dataset = dataset_from_arrays(
        arrays,
        name=name,
        where="Problem.from_arrays",
        info={"source": "arrays in memory", "sha256": digest},
        standardize_data=standardize,
    )
    if "x_val" in arrays:
        validation = dataset_from_arrays(
            {
                "x_train": arrays["x_train"],
                "y_train": arrays["y_train"],
                "x_test": arrays["x_val"],
                "y_test": arrays["y_val"],
            },
            name=name,
            where="Problem.from_arrays (x_val, y_val)",
            info={},
            standardize_data=standardize,
        )
        dataset.info["validation"] = (validation.x_test, validation.y_test)
    model_args = settings.get("model_args")
    maker: Callable[[int], models.Model] | None = None
    if params is not None and (isinstance(model, str) or hasattr(model, "init")):
        raise ConfigError(
            "Problem.from_arrays: params= goes with an apply(params, x) function; "
            "a flax module draws its own"
        )
    if isinstance(model, str):
        if not imported.is_import_path(model):
            raise ConfigError(
                f"Problem.from_arrays: model {model!r} is not package.module:"
                "ClassName; allowed: a flax module, an apply function with "
                "params=, or an import path"
            )
        model_name = model  # built by _assemble from the path, as --model is
    elif callable(getattr(model, "init", None)) and callable(getattr(model, "apply", None)):
        if model_args is not None:
            raise ConfigError(
                "Problem.from_arrays: model_args goes with an import path; a "
                "module instance carries its own arguments"
            )
        model_name, model_args = imported.describe(model)

        def maker(num_outputs: int, module: Any = model) -> models.Model:
            return imported.from_module(module, model_name, num_outputs)
    elif callable(model):
        if params is None:
            raise ConfigError(
                "Problem.from_arrays: an apply(params, x) function needs params= "
                "(the initial parameters, or an init(key, x) function)"
            )
        model_name = imported.from_function(model, params, num_outputs=0).name

        def maker(num_outputs: int, fn: Any = model) -> models.Model:
            return imported.from_function(fn, params, num_outputs)
    else:
        raise ConfigError(
            f"Problem.from_arrays: model {type(model).__name__} is none of a flax "
            "module, an apply(params, x) function or package.module:ClassName"
        )
    config = ProblemConfig(
        dataset=name,
        model=model_name,
        likelihood=likelihood,
        model_args=model_args,
        **{k: v for k, v in settings.items() if k != "model_args"},
    )
    dataset = _subset(dataset, config.subset_train_to)
    problem = _assemble(config, dataset, maker)
    return dataclasses.replace(problem, arrays=arrays)


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


def _assemble(
    config: ProblemConfig, dataset: data.Dataset, maker: Callable[[int], models.Model] | None = None
) -> Problem:
    """Model, likelihood, prior and log posterior on a loaded dataset."""
    dtype = _enable_float64(config)
    _check_finite(dataset)
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
        # One output (the mean); the std comes from each position (LogPosterior.likelihood_for).
        noise_std = 1.0
    likelihood = likelihoods.make(
        config.likelihood,
        task=dataset.task,
        num_classes=dataset.num_classes,
        noise_std=noise_std,
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
    plain = all(
        getattr(config, f) is None for f in ("prior", "bias_prior", "layer_priors", "noise_prior")
    )
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
