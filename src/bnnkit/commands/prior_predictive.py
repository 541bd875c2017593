"""``bnnkit prior-predictive``: draws from the prior predictive, as a PNG.

The flags are :class:`bnnkit.experiments.prior_predictive.Config`'s, plus the prior flags.
"""

from __future__ import annotations

import argparse

from bnnkit.commands import Command


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bnnkit.commands.flags import add_config_arguments
    from bnnkit.commands.problem_flags import add_prior_arguments
    from bnnkit.experiments.prior_predictive import Config

    add_config_arguments(p, Config, skip=("weight_decay",))
    g = p.add_argument_group("prior")
    add_config_arguments(g, Config, only=("weight_decay",))
    add_prior_arguments(g, noise=False)


def run(args: argparse.Namespace) -> int:
    from bnnkit.commands.flags import config_from_args
    from bnnkit.commands.problem_flags import prior_fields
    from bnnkit.experiments import prior_predictive

    config = config_from_args(args, prior_predictive.Config, **prior_fields(args))
    result = prior_predictive.draw(config)
    for line in result.lines:
        print(line)
    print(f"wrote {result.out}")
    return 0


COMMAND = Command(help="draw functions or class probabilities from the prior",
                  add_arguments=add_arguments, run=run,
                  docs="guides/priors.md")
