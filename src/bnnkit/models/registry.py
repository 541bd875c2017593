"""Models by name: each entry makes a flax module for a given number of outputs.

A model is used as a pair of pure functions over a params pytree::

    model = get("mlp_regression_small", num_outputs=2)
    params = model.init(key, x[:1])
    outputs = model.apply(params, x)          # (batch, num_outputs)

Outputs depend only on the parameters and the input (no batch statistics), and randomness only
through an explicit key. The contract for a model with randomness of its own (dropout):

- its :class:`ModelSpec` says ``stochastic=True``, and its flax module's ``__call__`` takes
  ``deterministic: bool = True`` and draws its randomness from the flax RNG stream
  :data:`RNG_STREAM` when ``deterministic=False``;
- ``model.apply(params, x, key=key)`` draws that randomness from ``key`` (one draw per call:
  a dropout mask per example); ``model.apply(params, x)``, without a key, is the model's
  deterministic mode (dropout off), so the same inputs always give the same outputs. A model
  without randomness ignores ``key``;
- who passes a key: the log posterior (:class:`bnnkit.log_posterior.LogPosterior`, given
  ``key=``), into which minibatch methods pass ``fold_in(step_key, MODEL_STREAM)``
  (:func:`bnnkit.inference.base.model_key`), and the predictive
  (:func:`bnnkit.predict.predict`, one key per posterior draw), and each only to a model
  whose ``stochastic`` is set. Full-batch samplers (HMC, NUTS) and Laplace's curvature pass
  none: they need an exact, deterministic log density and run the deterministic mode.

Example:
    >>> from bnnkit import models  # the package registers the built-in models
    >>> model = models.get("linear", num_outputs=1)
    >>> x = np.ones((2, 3), np.float32)
    >>> params = model.init(jax.random.PRNGKey(0), x[:1])
    >>> model.stochastic, bool((model.apply(params, x, key=jax.random.PRNGKey(1))
    ...                         == model.apply(params, x)).all())
    (False, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.types import Key, Params

#: The flax RNG stream a stochastic model's module draws its randomness from (flax's default
#: for ``nn.Dropout``).
RNG_STREAM = "dropout"
#: The rate p of a dropout model (``ModelSpec.dropout``) when none is given (``--dropout-rate``).
DEFAULT_DROPOUT_RATE = 0.1


class ModelSpec(NamedTuple):
    """A registry entry.

    Attributes:
        make: ``num_outputs -> flax.linen.Module``.
        tasks: the tasks it can serve (``"regression"``, ``"classification"``).
        input_rank: rank of one input example (1 for feature vectors, 3 for HWC images, 1 for
            token sequences), or ``None`` for "anything, flattened".
        description: one line for ``bnnkit models``.
        input_dtype: ``"float"`` for real-valued inputs, ``"int"`` for token ids.
        example_shape: shape of one typical input example (e.g. ``(32, 32, 3)``), used by
            ``bnnkit models`` to count parameters; ``None`` for models whose size depends on the
            data (the MLPs), which the command counts for a stated example input instead.
        stochastic: the module has randomness of its own (dropout): its ``__call__`` takes
            ``deterministic`` and draws from :data:`RNG_STREAM` (see the module docstring).
        dropout: a dropout model (MC dropout, Gal & Ghahramani 2016): ``make`` takes
            ``(num_outputs, dropout_rate)`` and the module drops each input of every weight
            layer with probability ``dropout_rate`` (flax's inverted dropout: kept inputs are
            scaled by 1/(1 − p)); it is ``stochastic`` too.
    """

    make: Callable[[int], nn.Module]
    tasks: tuple[str, ...]
    input_rank: int | None
    description: str
    input_dtype: str = "float"
    example_shape: tuple[int, ...] | None = None
    stochastic: bool = False
    dropout: bool = False


class Model(NamedTuple):
    """A model as two pure functions: ``init(key, example_x) -> params`` and
    ``apply(params, x, *, key=None) -> outputs``.

    Attributes:
        stochastic: ``apply`` draws randomness (dropout) from ``key``; without a key it runs
            its deterministic mode. ``False``: ``key`` is ignored.
        dropout_rate: p, the probability with which a dropout model (``ModelSpec.dropout``)
            drops each input of every weight layer; 0 for every other model.
    """

    name: str
    init: Callable[[jax.Array, jax.Array], Params]
    apply: Callable[..., jax.Array]
    num_outputs: int
    stochastic: bool = False
    dropout_rate: float = 0.0


def _apply_fn(module: nn.Module, stochastic: bool) -> Callable[..., jax.Array]:
    """``module.apply`` as ``apply(params, x, *, key=None)``, the model contract."""
    if not stochastic:

        def apply(params: Params, x: jax.Array, *, key: Key | None = None) -> Any:
            del key  # nothing random to draw
            return module.apply(params, x)

        return apply

    def apply_stochastic(params: Params, x: jax.Array, *, key: Key | None = None) -> Any:
        if key is None:
            return module.apply(params, x, deterministic=True)
        return module.apply(params, x, deterministic=False, rngs={RNG_STREAM: key})

    return apply_stochastic


MODELS: dict[str, ModelSpec] = {}
#: Other accepted names (the paper's code calls LeNet-5 ``lenet``) and the model they name.
ALIASES: dict[str, str] = {"lenet": "lenet5"}


def canonical_name(name: str) -> str:
    """The registered name of a model given by an alias; any other name unchanged.

    Example:
        >>> canonical_name("lenet"), canonical_name("mlp_classification")
        ('lenet5', 'mlp_classification')
    """
    return ALIASES.get(name, name)


def allowed_names() -> str:
    """Every registered name, then each alias with what it names, for messages and ``--help``."""
    aliases = [f"{a} (= {n})" for a, n in sorted(ALIASES.items()) if n in MODELS]
    return ", ".join([*sorted(MODELS), *aliases])


def register(name: str, spec: ModelSpec) -> None:
    """Add a model to the registry (called at import time by each model module)."""
    MODELS[name] = spec


def dropout_names() -> list[str]:
    """The registered dropout models (``ModelSpec.dropout``), sorted.

    Example:
        >>> dropout_names()[:2]
        ['lenet5_dropout', 'mlp_classification_dropout']
    """
    return sorted(name for name, spec in MODELS.items() if spec.dropout)


def get(name: str, num_outputs: int, *, dropout_rate: float | None = None) -> Model:
    """Build the named model with ``num_outputs`` outputs.

    Args:
        name: a registered name or alias.
        num_outputs: width of the output layer.
        dropout_rate: p of a dropout model (default :data:`DEFAULT_DROPOUT_RATE`); refused for
            any other model.

    Raises:
        ConfigError: unknown model name, or a dropout rate for a model without dropout.

    Example:
        >>> model = get("linear", num_outputs=1)
        >>> params = model.init(jax.random.PRNGKey(0), np.zeros((1, 3), np.float32))
        >>> get("mlp_classification_dropout", 10, dropout_rate=0.2).dropout_rate
        0.2
    """
    name = canonical_name(name)
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; allowed: {allowed_names()}")
    spec = MODELS[name]
    if spec.dropout:
        rate = DEFAULT_DROPOUT_RATE if dropout_rate is None else float(dropout_rate)
        module = spec.make(num_outputs, rate)
    else:
        if dropout_rate is not None:
            raise ConfigError(
                f"--dropout-rate {dropout_rate} applies to a model with dropout "
                f"({', '.join(dropout_names())}); model {name!r} has none"
            )
        rate = 0.0
        module = spec.make(num_outputs)
    stochastic = spec.stochastic or spec.dropout
    return Model(
        name=name,
        init=module.init,
        apply=_apply_fn(module, stochastic),
        num_outputs=num_outputs,
        stochastic=stochastic,
        dropout_rate=rate,
    )


def check_compatible(
    name: str,
    task: str,
    input_shape: tuple[int, ...],
    dataset: str,
    input_dtype: str | None = None,
) -> None:
    """Refuse a model/dataset pair that cannot work, before anything is compiled.

    Args:
        name: registered model name.
        task: the dataset's task, ``"regression"`` or ``"classification"``.
        input_shape: shape of one input example (without the batch axis).
        dataset: the dataset's name, for the message.
        input_dtype: ``"int"`` if the inputs are token ids, ``"float"`` if they are real-valued
            features or pixels, ``None`` to skip this check.

    Raises:
        ConfigError: the model cannot serve the task, the inputs have the wrong rank, or token
            ids meet a real-valued model (or the reverse).

    Example:
        >>> check_compatible("lenet5", "classification", (28, 28, 1), "mnist")  # fits
        >>> check_compatible("lenet5", "classification", (13,), "boston")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: model 'lenet5' takes inputs of rank 3 but dataset 'boston' ...
    """
    name = canonical_name(name)
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; allowed: {allowed_names()}")
    spec = MODELS[name]
    if task not in spec.tasks:
        raise ConfigError(
            f"model {name!r} is for {'/'.join(spec.tasks)} but dataset {dataset!r} is {task}"
        )
    if spec.input_rank is not None and len(input_shape) != spec.input_rank:
        raise ConfigError(
            f"model {name!r} takes inputs of rank {spec.input_rank} but dataset {dataset!r} has "
            f"examples of shape {input_shape}"
        )
    if input_dtype not in (None, "int", "float"):
        raise ConfigError(f"input dtype {input_dtype!r} must be 'int' or 'float'")
    if input_dtype is not None and input_dtype != spec.input_dtype:
        # Token ids index an embedding table; real-valued features cannot, and a dense or
        # convolutional layer applied to token ids would treat their arbitrary order as a scale.
        wanted = "token ids" if spec.input_dtype == "int" else "real-valued inputs"
        got = "token ids" if input_dtype == "int" else "real-valued inputs"
        raise ConfigError(f"model {name!r} takes {wanted} but dataset {dataset!r} has {got}")


def num_params(params: Params) -> int:
    """Total number of scalar parameters in a params pytree."""
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(params)))
