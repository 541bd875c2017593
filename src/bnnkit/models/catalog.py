"""What each registered network takes and how many parameters it has (``bnnkit models``).

Parameters are counted from shapes only (``jax.eval_shape`` of ``init``), so nothing is
allocated or compiled. A model without a fixed input (the MLPs) is counted for a stated example:
784 features (a flattened 28×28 image) for classification, 6 features for regression.
"""

from __future__ import annotations

from typing import NamedTuple

from bnnkit.models import MODELS, get, num_params
from bnnkit.models.registry import ModelSpec

# Example inputs for models whose size depends on the data (ModelSpec.example_shape is None).
CLASSIFICATION_FEATURES = 784
REGRESSION_FEATURES = 6


class ModelRow(NamedTuple):
    """One line of the table: the counted example is ``example_shape → num_outputs``."""

    name: str
    tasks: str
    input_kind: str
    example_shape: tuple[int, ...]
    fixed_input: bool
    num_outputs: int
    num_params: int
    description: str


def example_for(spec: ModelSpec) -> tuple[tuple[int, ...], int]:
    """The input shape and output width a model is counted for in the table.

    Image classifiers get 10 outputs (CIFAR-10, MNIST), token models 2 (IMDB sentiment),
    regression-only models 2 (mean and scale of a Gaussian).

    Example:
        >>> from bnnkit.models import MODELS
        >>> example_for(MODELS["mlp_regression"])
        ((6,), 2)
    """
    classification = "classification" in spec.tasks
    if spec.example_shape is not None:
        shape = tuple(spec.example_shape)
    else:
        shape = (CLASSIFICATION_FEATURES if classification else REGRESSION_FEATURES,)
    outputs = 2 if not classification or spec.input_dtype == "int" else 10
    return shape, outputs


def model_rows() -> list[ModelRow]:
    """A :class:`ModelRow` per registered model, sorted by name.

    Example:
        >>> {row.name: row.num_params for row in model_rows()}["linear"]
        7850
    """
    import jax
    import jax.numpy as jnp

    rows = []
    for name in sorted(MODELS):
        spec = MODELS[name]
        shape, outputs = example_for(spec)
        dtype = jnp.int32 if spec.input_dtype == "int" else jnp.float32
        model = get(name, outputs)
        shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, *shape), dtype))
        rows.append(
            ModelRow(
                name=name,
                tasks="/".join(spec.tasks),
                input_kind="token ids" if spec.input_dtype == "int" else "real",
                example_shape=shape,
                fixed_input=spec.example_shape is not None,
                num_outputs=outputs,
                num_params=num_params(shapes),
                description=spec.description,
            )
        )
    return rows
