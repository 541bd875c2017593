"""``bnnkit ensemble``: a deep ensemble of independently initialised SGD runs, one predictive."""

from __future__ import annotations

import argparse

from bnnkit.commands.sgd import add_sgd_arguments, sgd_config
from bnnkit.commands.training_args import run_and_report, train_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_sgd_arguments(p)
    p.add_argument("--num-members", type=int, required=True,
                   help="K members; each has its own initialisation and data order")
    p.add_argument("--sequential", action="store_true",
                   help="train members one after another instead of in one vmapped step "
                        "(for members that do not fit in memory together)")


def run(args: argparse.Namespace) -> int:
    train = train_config(args, num_members=args.num_members, vmap_members=not args.sequential)
    return run_and_report(args, "ensemble", sgd_config(args), train,
                          title=f"Deep ensemble (K={args.num_members}) on {args.dataset}")


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="deep ensemble: K SGD runs trained together, ensembled",
                  add_arguments=add_arguments, run=run)
