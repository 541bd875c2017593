"""``bnnkit sgmcmc``: SGLD, SGHMC, cyclical (CLR) and RMSprop-preconditioned SGMCMC.

The paper's four variants::

    SGLD            --momentum-decay 0   --step-size-schedule constant
    SGHMC           --momentum-decay 0.9 --step-size-schedule constant
    SGHMC-CLR       --momentum-decay 0.9 --step-size-schedule cyclical --cycle-length C
    SGHMC-CLR-Prec  ... as SGHMC-CLR ... --preconditioner RMSprop
"""

from __future__ import annotations

import argparse

from bnnkit.commands.common import add_problem_arguments
from bnnkit.commands.training_args import (
    add_epoch_arguments,
    add_run_dir_arguments,
    run_and_report,
    train_config,
)
from bnnkit.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_arguments(p)
    add_epoch_arguments(p)
    g = p.add_argument_group("SGMCMC")
    g.add_argument("--momentum-decay", type=float, default=0.0,
                   help="β in [0, 1): 0 is SGLD, > 0 SGHMC (the paper uses 0.9)")
    g.add_argument("--preconditioner", default="none",
                   help="none or RMSprop (pSGLD, Li et al. 2016)")
    g.add_argument("--noise", default="gaussian",
                   help="gaussian, or rademacher: ±1 signs with the same mean and covariance, "
                        "several times cheaper to draw (same weak order; see the README)")
    g.add_argument("--step-size-schedule", default="constant",
                   help="constant (cosine over the burn-in, then --final-step-size) or cyclical "
                        "(constant over the burn-in, then cosine cycles of --cycle-length epochs)")
    g.add_argument("--final-step-size", type=float, default=None,
                   help="constant schedule: the step size after the burn-in (default: initial)")
    g.add_argument("--cycle-length", type=int, default=None, help="cyclical: epochs per cycle")
    g.add_argument("--num-burnin-epochs", type=int, default=0,
                   help="epochs before the first kept sample")
    g.add_argument("--ensemble-freq", type=int, default=None,
                   help="keep a sample every N epochs after the burn-in (default: 1, or the "
                        "cycle length for the cyclical schedule: the end of each cycle). Every "
                        "kept sample is stored, since the BMA of `bnnkit evaluate` reads them")
    g.add_argument("--num-chains", type=int, default=1, help="independent chains, vmapped")
    add_run_dir_arguments(p)


SCHEDULES = ("constant", "cyclical")


def method_config(args: argparse.Namespace) -> dict:
    schedule = args.step_size_schedule.lower()
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown --step-size-schedule {args.step_size_schedule!r}; allowed: "
                          f"{', '.join(SCHEDULES)}")
    if schedule == "cyclical" and args.cycle_length is None:
        raise ConfigError("--step-size-schedule cyclical needs --cycle-length (epochs per cycle)")
    if schedule == "cyclical" and not 1 <= args.cycle_length <= (
        args.num_epochs - args.num_burnin_epochs
    ):
        raise ConfigError(
            f"--cycle-length {args.cycle_length} epochs does not fit in the "
            f"{args.num_epochs - args.num_burnin_epochs} epochs after the burn-in; allowed: "
            f"1..{max(args.num_epochs - args.num_burnin_epochs, 1)}"
        )
    if schedule == "constant" and args.cycle_length is not None:
        raise ConfigError("--cycle-length applies to --step-size-schedule cyclical only")
    config = {"schedule": schedule, "init_step_size": args.init_step_size,
              "momentum_decay": args.momentum_decay,
              "preconditioner": args.preconditioner.lower(),
              "schedule_burn_in_epochs": args.num_burnin_epochs, "noise": args.noise.lower()}
    if schedule == "constant":
        config["final_step_size"] = (args.final_step_size if args.final_step_size is not None
                                     else args.init_step_size)
    else:
        config["cycle_length"] = args.cycle_length
    return config


def variant_name(config: dict) -> str:
    name = "SGLD" if config["momentum_decay"] == 0 else "SGHMC"
    if config["schedule"] == "cyclical":
        name += "-CLR"
    if config["preconditioner"] == "rmsprop":
        name += "-Prec"
    return name


def run(args: argparse.Namespace) -> int:
    config = method_config(args)
    freq = args.ensemble_freq
    if freq is None:
        freq = args.cycle_length if config["schedule"] == "cyclical" else 1
    train = train_config(args, num_members=args.num_chains,
                         burn_in_epochs=args.num_burnin_epochs, ensemble_freq=freq)
    return run_and_report(args, "sgmcmc", config, train,
                          title=f"{variant_name(config)} on {args.dataset}")


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="SGMCMC: SGLD, SGHMC, cyclical and RMSprop-preconditioned",
                  add_arguments=add_arguments, run=run)
