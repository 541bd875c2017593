"""``bnnkit prune RUN_DIR``: signal-to-noise vs magnitude pruning of a VI run's weights."""

from __future__ import annotations

import argparse
from pathlib import Path

from bnnkit.commands.command import Command
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.experiments import pruning
from bnnkit.experiments.pruning import DEFAULT_FRACTIONS
from bnnkit.models.imported import trusting_model
from bnnkit.runs import RunDir


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory of `bnnkit vi`")
    p.add_argument("--out", default=None, help="output folder (default: RUN_DIR/pruning)")
    p.add_argument(
        "--fractions",
        type=float,
        nargs="+",
        default=list(DEFAULT_FRACTIONS),
        help="shares of the weights to remove, each in [0, 1) (default: "
        f"{' '.join(map(str, DEFAULT_FRACTIONS))})",
    )
    p.add_argument(
        "--include-biases",
        action="store_true",
        help="rank and prune biases too (default: weights only, as Blundell et al.)",
    )
    p.add_argument("--member", type=int, default=0, help="which trained member to prune")
    add_trust_model_argument(p)


def run(args: argparse.Namespace) -> int:
    with trusting_model(args.trust_model):
        rows = pruning.prune_run(
            args.run_dir, args.out, args.fractions, args.include_biases, args.member
        )
    task = RunDir(args.run_dir).read_record().get("dataset", {}).get("task", "classification")
    print_rows(rows, task)
    print(f"table, figures and metrics in {args.out or Path(args.run_dir) / 'pruning'}")
    return 0


def print_rows(rows: list[dict], task: str) -> None:
    """The pruning table on the terminal (``pruning.md`` holds it as markdown)."""
    from rich.console import Console
    from rich.table import Table

    key, label, scale, fmt = (
        ("error", "test error (%)", 100.0, "{:.2f}")
        if task == "classification"
        else ("rmse", "test RMSE", 1.0, "{:.4f}")
    )
    table = Table(title="pruning by signal-to-noise ratio vs magnitude")
    for header in ("pruned", "weights removed", f"{label}, by |μ|/σ", f"{label}, by |μ|"):
        table.add_column(header, justify="right")
    for r in rows:
        table.add_row(
            f"{100 * r['fraction']:.0f} %",
            f"{r['num_pruned']} / {r['num_prunable']}",
            fmt.format(scale * r["snr"][key]),
            fmt.format(scale * r["magnitude"][key]),
        )
    console = Console()
    if not console.is_terminal:  # piped or captured: no width to fit, keep rows on one line
        console = Console(width=100)
    console.print(table)


COMMAND = Command(
    help="prune a VI run's weights by signal-to-noise ratio or magnitude",
    add_arguments=add_arguments,
    run=run,
    docs="guides/vi.md",
)
