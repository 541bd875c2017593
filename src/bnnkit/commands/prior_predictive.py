"""``bnnkit prior-predictive``: draws from the prior predictive, as a PNG.

The flags are :class:`bnnkit.experiments.prior_predictive.Config`'s, plus the prior flags and
``--noise-std``. With ``--dataset`` and ``--model`` it first prints the prior check of that
problem (:mod:`bnnkit.prior_check`), the one every run of it records: the share of the
prior mass at a noise std below the floor and the prior predictive's scale against the
training targets (class probabilities against uniform for a classifier). A regression dataset's
picture is then the functions of the model on the 1-D input grid, as without ``--dataset``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from bnnkit import prior_check
from bnnkit import problem as problem_lib
from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, config_from_args
from bnnkit.commands.problem_flags import add_prior_arguments, prior_fields
from bnnkit.errors import ConfigError
from bnnkit.experiments import prior_predictive
from bnnkit.experiments.prior_predictive import Config
from bnnkit.priors import predictive
from bnnkit.problem import ProblemConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p, Config, skip=("weight_decay",))
    g = p.add_argument_group("prior")
    add_config_arguments(g, Config, only=("weight_decay",))
    add_prior_arguments(g, noise=False)
    add_config_arguments(g, ProblemConfig, only=("noise_std",))


def _prior_check(config, noise_std: float | None) -> tuple[list[str], bool]:
    """The prior check of ``--dataset`` with ``--model`` (its lines, and whether the dataset
    is regression), printing its warning on stderr."""
    problem = problem_lib.build(prior_predictive.problem_config(config, noise_std))
    found = prior_check.check(problem)
    if found.warning is not None:
        print(f"bnnkit: warning: {found.warning}", file=sys.stderr)
    return [found.summary(), *([f"note: {found.note}"] if found.note else [])], (
        problem.dataset.task == "regression"
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args, prior_predictive.Config, **prior_fields(args))
    noise_std = getattr(args, "noise_std", None)
    checked: list[str] = []
    if config.dataset is not None and config.model is not None:
        predictive.check_out(config.out)  # before anything is built
        checked, regression = _prior_check(config, noise_std)
        if regression:  # its picture: the model's functions on the 1-D grid
            config = dataclasses.replace(config, dataset=None)
    elif noise_std is not None:
        raise ConfigError(
            f"--noise-std {noise_std} sets the noise of a prior check, which "
            "needs --dataset and --model; allowed: both with it, or neither"
        )
    result = prior_predictive.draw(config)
    for line in [*checked, *result.lines]:
        print(line)
    print(f"wrote {result.out}")
    return 0


COMMAND = Command(
    help="draw functions or class probabilities from the prior",
    add_arguments=add_arguments,
    run=run,
    docs="guides/priors.md",
)
