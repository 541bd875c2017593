"""The settings that define a Bayesian problem, whatever method then targets its posterior.

A :class:`ProblemConfig` names the dataset, the model, the likelihood, the prior and the
temperature; it is what a run records in ``run.json`` and what the flags of every command that
builds a problem fill. It is kept apart from the assembly (:mod:`bnnkit.problem`) because
reading, comparing and printing settings needs no data and no network: :data:`DATA_SETTINGS`
and :data:`POSTERIOR_SETTINGS` say which settings make two runs incomparable or different
posteriors, and :func:`differences` names them by their flags in one-line messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from bnnkit import models, priors
from bnnkit.errors import ConfigError
from bnnkit.models import imported
from bnnkit.priors.joint import uses_weight_decay
from bnnkit.settings import (
    MAX_INT32,
    Exclusive,
    check_dtype,
    check_numbers,
    check_representable,
    flag,
    setting,
)

#: The Gaussian prior's precision λ when none is given (the paper's N(0, 1)).
WEIGHT_DECAY = 1.0
#: λ when none is given for a registered regression network whose second output is its noise
#: std: under N(0, 1) about 30 % of that prior's mass puts σ below a thousandth of the targets'
#: sd, a posterior that sharpens without end (:mod:`bnnkit.prior_check`). Of N(0, 1), λ = 3 and
#: λ = 10 compared on splits 0-4 of the five small UCI sets, λ = 3's references predict at least
#: as well as the peer (MILE) on the most splits and are reproducible on the most among those
#: that do (docs/uci-benchmark.md, "The default prior against the peer").
HETEROSCEDASTIC_WEIGHT_DECAY = 3.0


def default_weight_decay(config: ProblemConfig) -> float:
    """λ for ``config`` when it gives none: :data:`HETEROSCEDASTIC_WEIGHT_DECAY` for a
    registered regression-only network that outputs its own noise std (Gaussian likelihood, no
    ``noise_std``, no ``noise_prior``) under a prior that λ reaches, else :data:`WEIGHT_DECAY`
    (a prior family with its own scale, such as ``scale_mixture:...``, ignores λ).

    Example:
        >>> ProblemConfig("yacht_0", "mlp_regression_small").weight_decay
        3.0
        >>> ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35).weight_decay
        1.0
        >>> ProblemConfig("yacht_0", "mlp_regression_small", weight_decay=1).weight_decay
        1.0
        >>> ProblemConfig("yacht_0", "mlp_regression_small", prior="laplace:scale=0.1").weight_decay
        1.0
    """
    spec = models.registry.MODELS.get(models.canonical_name(config.model))
    heteroscedastic = (
        spec is not None
        and spec.tasks == ("regression",)
        and config.likelihood in (None, "gaussian")
        and config.noise_std is None
        and config.noise_prior is None
        and uses_weight_decay(config.prior, config.bias_prior, config.layer_priors)
    )
    return HETEROSCEDASTIC_WEIGHT_DECAY if heteroscedastic else WEIGHT_DECAY


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
        min_noise_std: the floor ``σ_min`` of the std a heteroscedastic network outputs,
            ``σ = σ_min + softplus(f₂)``, in the units the model sees (standardised for the
            UCI sets, where it is a fraction of the training targets' sd); ``None``:
            :data:`bnnkit.likelihoods.MIN_STD`, which only keeps σ off zero. A run recorded
            before the setting existed reads back as ``None``, the posterior it sampled.
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
    weight_decay: float | None = setting(
        None,
        help="precision λ of the Gaussian prior N(0, 1/λ); default: "
        f"{HETEROSCEDASTIC_WEIGHT_DECAY:g} for a registered regression network that outputs its "
        f"own noise std (no --noise-std or --noise-prior), else {WEIGHT_DECAY:g} "
        "(the paper's N(0, 1) on such a network: --weight-decay 1)",
    )
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
    min_noise_std: float | None = setting(
        None,
        help="floor of the noise std the network outputs, σ = X + softplus(f2), in the units "
        "the model sees (a fraction of the targets' sd, which is 1 once standardised); "
        "default: 1e-6, which only keeps σ off zero",
        bounds=(Exclusive(0.0), None),
    )

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.weight_decay is None:  # after the check: the model is a name now
            object.__setattr__(self, "weight_decay", default_weight_decay(self))
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
    "min_noise_std",
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
    "min_noise_std": "1e-06 (keeps the std off zero)",
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
        >>> differences(ProblemConfig("yacht_0", "mlp_regression_small", weight_decay=1), b,
        ...             POSTERIOR_SETTINGS, "the reference")
        ['--noise-std learned (the network outputs its std) (the reference: 0.35)']
    """
    return [
        f"{flag(ProblemConfig, name)} {shown(name, getattr(mine, name))} ({other_name}: "
        f"{shown(name, getattr(other, name))})"
        for name in names
        if getattr(mine, name) != getattr(other, name)
    ]
