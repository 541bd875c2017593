"""``bnnkit convergence RUN --out DIR``: R-hat in weight and function space, and one long
chain against several short ones.

The flags of the histograms are :class:`bnnkit.experiments.convergence.Config`'s.
"""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, config_from_args
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.experiments import convergence
from bnnkit.experiments.convergence import Config
from bnnkit.models.imported import trusting_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dir", metavar="RUN", help="a run of 2 or more Markov chains (hmc, nuts, sgmcmc)"
    )
    p.add_argument(
        "--out", required=True, help="output folder (convergence.json, chains.md and two PNGs)"
    )
    p.add_argument(
        "--reference",
        default=None,
        metavar="RUN",
        help="a longer run on the same data to score the chain schemes against "
        "(default: the run's own full model average)",
    )
    add_config_arguments(p.add_argument_group("histograms"), Config)
    p.add_argument("--overwrite", action="store_true", help="replace the report in --out")
    add_trust_model_argument(p, when="for RUN and --reference: ")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args, convergence.Config)
    with trusting_model(args.trust_model):
        result = convergence.convergence_report(
            args.run_dir, args.out, config, reference=args.reference, overwrite=args.overwrite
        )
    for space in convergence.SPACES:
        s = result.histograms[space]["summary"]
        print(
            f"split R-hat, {space}: median {s['median']:.3f}, p90 {s['p90']:.3f}, "
            f"max {s['max']:.3f}"
        )
    for row in result.chains:
        scores = ", ".join(f"{k} {v:.4f}" for k, v in row.items() if isinstance(v, float))
        print(f"{row['scheme']}: {scores}")
    print(f"histograms, table and figures in {args.out}")
    return 0


COMMAND = Command(
    help="split R-hat in weight and function space, and one long chain against several short ones",
    add_arguments=add_arguments,
    run=run,
    docs="guides/convergence.md",
)
