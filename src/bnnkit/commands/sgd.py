"""``bnnkit sgd``: minibatch SGD with momentum to the MAP of the tempered posterior."""

from __future__ import annotations

import argparse

from bnnkit.commands.common import add_problem_arguments
from bnnkit.commands.training_args import (
    add_epoch_arguments,
    add_run_dir_arguments,
    run_and_report,
    train_config,
)


def add_sgd_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_arguments(p)
    add_epoch_arguments(p)
    p.add_argument("--momentum-decay", type=float, default=0.9,
                   help="heavy-ball momentum β in [0, 1); the step size follows a cosine schedule")
    add_run_dir_arguments(p)


def sgd_config(args: argparse.Namespace) -> dict:
    return {"schedule": "cosine", "init_step_size": args.init_step_size,
            "momentum_decay": args.momentum_decay}


def run(args: argparse.Namespace) -> int:
    return run_and_report(args, "sgd", sgd_config(args), train_config(args),
                          title=f"SGD on {args.dataset}")


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="SGD/MAP: minibatch SGD with momentum and a cosine schedule",
                  add_arguments=add_sgd_arguments, run=run)
