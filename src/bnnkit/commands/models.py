"""``bnnkit models``: the registered networks (:mod:`bnnkit.models.catalog`) as a table."""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.models.catalog import (
    CLASSIFICATION_FEATURES,
    REGRESSION_FEATURES,
    model_rows,
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plain",
        action="store_true",
        help="tab-separated text instead of a table (for scripts)",
    )


def _run(args: argparse.Namespace) -> int:
    rows = model_rows()
    if args.plain:
        print("name\ttask\tinput\tinput_shape\toutputs\tparams\tdescription")
        for r in rows:
            shape = "x".join(map(str, r.example_shape))
            print(
                f"{r.name}\t{r.tasks}\t{r.input_kind}\t{shape}\t{r.num_outputs}\t"
                f"{r.num_params}\t{r.description}"
            )
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
            r.name,
            task,
            f"{shape} {r.input_kind}{star}",
            f"{r.num_params:,} ({r.num_outputs} out)",
            r.description,
        )
    console = Console()
    if not console.is_terminal:  # piped or captured: no width to fit, keep rows on one line
        console = Console(width=160)
    console.print(table)
    print(
        f"* no fixed input size: counted for {CLASSIFICATION_FEATURES} input features "
        f"(classification) or {REGRESSION_FEATURES} (regression only)."
    )
    return 0


COMMAND = Command(
    help="list the registered networks with their parameter counts",
    add_arguments=_add_arguments,
    run=_run,
    docs="reference/models.md",
)
