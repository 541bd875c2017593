"""``bnnkit models``: the registered networks, what they take and how many parameters they have.

Parameters are counted from shapes only (``jax.eval_shape`` of ``init``), so nothing is
allocated or compiled. A model without a fixed input (the MLPs) is counted for a stated example:
784 features (a flattened 28×28 image) for classification, 6 features for regression.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NamedTuple

from bnnkit.commands import Command

if TYPE_CHECKING:
    from bnnkit.models.registry import ModelSpec

# Example inputs for models whose size depends on the data (ModelSpec.example_shape is None).
_CLASSIFICATION_FEATURES = 784
_REGRESSION_FEATURES = 6


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
        shape = (_CLASSIFICATION_FEATURES if classification else _REGRESSION_FEATURES,)
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

    from bnnkit.models import MODELS, get, num_params

    rows = []
    for name in sorted(MODELS):
        spec = MODELS[name]
        shape, outputs = example_for(spec)
        dtype = jnp.int32 if spec.input_dtype == "int" else jnp.float32
        model = get(name, outputs)
        shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, *shape), dtype))
        rows.append(ModelRow(
            name=name, tasks="/".join(spec.tasks),
            input_kind="token ids" if spec.input_dtype == "int" else "real",
            example_shape=shape, fixed_input=spec.example_shape is not None,
            num_outputs=outputs, num_params=num_params(shapes),
            description=spec.description,
        ))
    return rows


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plain", action="store_true",
        help="tab-separated text instead of a table (for scripts)",
    )


def _run(args: argparse.Namespace) -> int:
    rows = model_rows()
    if args.plain:
        print("name\ttask\tinput\tinput_shape\toutputs\tparams\tdescription")
        for r in rows:
            shape = "x".join(map(str, r.example_shape))
            print(f"{r.name}\t{r.tasks}\t{r.input_kind}\t{shape}\t{r.num_outputs}\t"
                  f"{r.num_params}\t{r.description}")
        return 0

    from rich.console import Console
    from rich.table import Table

    table = Table(title="bnnkit models")
    table.add_column("name", no_wrap=True)
    table.add_column("task", no_wrap=True)
    table.add_column("input", no_wrap=True)
    table.add_column("params", justify="right", no_wrap=True)
    table.add_column("description")
    for r in rows:
        shape = "×".join(map(str, r.example_shape))
        star = "" if r.fixed_input else "*"
        task = "both" if "/" in r.tasks else r.tasks
        table.add_row(
            r.name, task, f"{shape} {r.input_kind}{star}",
            f"{r.num_params:,} ({r.num_outputs} out)", r.description,
        )
    console = Console()
    if not console.is_terminal:  # piped or captured: no width to fit, keep rows on one line
        console = Console(width=160)
    console.print(table)
    print(
        f"* no fixed input size: counted for {_CLASSIFICATION_FEATURES} input features "
        f"(classification) or {_REGRESSION_FEATURES} (regression only)."
    )
    return 0


COMMAND = Command(
    help="list the registered networks with their parameter counts",
    add_arguments=_add_arguments,
    run=_run,
)
