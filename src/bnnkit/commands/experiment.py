"""``bnnkit experiment NAME --out DIR``: the paper's analyses, each writing its runs and report.

One command with a subcommand per experiment (``compare-methods``, ``prior-sweep``,
``bbb-mnist``, ``temperature``), so they share ``--out`` and ``--no-progress``, read alike in
``bnnkit --help`` and keep the list of experiments in one place (:data:`EXPERIMENTS`). Each
subcommand's other flags are its Config's fields (:mod:`bnnkit.commands.flags`). Runs are
made in ``DIR`` once: called again, finished runs are reused and cut-off ones resumed.
"""

from __future__ import annotations

import argparse
import importlib
from typing import NamedTuple

from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, add_progress_flag, config_from_args
from bnnkit.models.imported import is_import_path, trusting_model


class Experiment(NamedTuple):
    module: str  # in bnnkit.experiments
    function: str  # (config, out, progress=...) -> a result with .write(out) and .markdown()
    help: str


EXPERIMENTS = {
    "compare-methods": Experiment(
        "compare_methods",
        "compare_methods",
        "SGD, deep ensemble, four SGMCMC variants, MultiSWAG, MC dropout, IVON and MFVI "
        "against an HMC reference",
    ),
    "prior-sweep": Experiment(
        "prior_sweep",
        "prior_sweep",
        "HMC BMAs under Gaussian priors of three scales and other shapes of equal variance",
    ),
    "bbb-mnist": Experiment(
        "bbb_mnist",
        "bbb_mnist",
        "Bayes by Backprop on MNIST in Blundell et al.'s setting, with the pruning table",
    ),
    "temperature": Experiment(
        "temperature",
        "temperature_sweep",
        "test metrics of HMC and SGMCMC (with and without augmentation) against the "
        "posterior temperature",
    ),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(
        dest="experiment",
        required=True,
        metavar="EXPERIMENT",
        parser_class=type(p),
        help="which experiment: " + ", ".join(EXPERIMENTS),
    )
    for name, experiment in EXPERIMENTS.items():
        q = sub.add_parser(
            name,
            help=experiment.help,
            description=experiment.help,
            formatter_class=p.formatter_class,
        )
        q.add_argument(
            "--out",
            required=True,
            help="output folder: the runs, then the JSON, markdown and PNG report",
        )
        add_progress_flag(q)
        module = importlib.import_module(f"bnnkit.experiments.{experiment.module}")
        add_config_arguments(q.add_argument_group("experiment"), module.Config)


def run(args: argparse.Namespace) -> int:
    experiment = EXPERIMENTS[args.experiment]
    module = importlib.import_module(f"bnnkit.experiments.{experiment.module}")
    config = config_from_args(args, module.Config)
    # A model this call names is the user's word: the experiment may read back the runs it makes
    # with it (a model outside bnnkit is imported only when named, bnnkit.models.imported).
    named = getattr(config, "model", None)
    with trusting_model(named if isinstance(named, str) and is_import_path(named) else None):
        result = getattr(module, experiment.function)(config, args.out, progress=args.progress)
    print(result.markdown())
    print(f"report and runs in {args.out}")
    return 0


COMMAND = Command(
    help="the paper's experiments (compare-methods, prior-sweep, bbb-mnist, "
    "temperature): runs and a JSON, markdown and PNG report in --out",
    add_arguments=add_arguments,
    run=run,
    docs="guides/experiments.md",
)
