"""Models by name: each entry makes a flax module for a given number of outputs.

A model is used as a pair of pure functions over a params pytree::

    model = get("mlp_regression_small", num_outputs=2)
    params = model.init(key, x[:1])
    outputs = model.apply(params, x)          # (batch, num_outputs)

Outputs depend only on the parameters and the input (no batch statistics, dropout or hidden
randomness), which is what HMC needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.types import Params


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
    """

    make: Callable[[int], nn.Module]
    tasks: tuple[str, ...]
    input_rank: int | None
    description: str
    input_dtype: str = "float"
    example_shape: tuple[int, ...] | None = None


class Model(NamedTuple):
    """A model as two pure functions: ``init(key, example_x) -> params``, ``apply(params, x)``."""

    name: str
    init: Callable[[jax.Array, jax.Array], Params]
    apply: Callable[[Params, jax.Array], jax.Array]
    num_outputs: int


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


def get(name: str, num_outputs: int) -> Model:
    """Build the named model with ``num_outputs`` outputs.

    Raises:
        ConfigError: unknown model name.

    Example:
        >>> model = get("linear", num_outputs=1)
        >>> params = model.init(jax.random.PRNGKey(0), np.zeros((1, 3), np.float32))
    """
    name = canonical_name(name)
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; allowed: {allowed_names()}")
    module = MODELS[name].make(num_outputs)
    return Model(name=name, init=module.init, apply=module.apply, num_outputs=num_outputs)


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
        raise ConfigError(
            f"model {name!r} takes {wanted} but dataset {dataset!r} has {got}"
        )


def num_params(params: Params) -> int:
    """Total number of scalar parameters in a params pytree."""
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(params)))
