"""``bnnkit reference``: a deep ensemble, then one tuned chain per member, evaluated as one.

The flags are the problem's (the same as every method's), the recipe's
(:class:`bnnkit.experiments.reference.Config`) and the folder's. ``bnnkit evaluate DIR`` of the
folder later gives the pooled model average again, and ``--reference DIR`` compares another
method's run with it. Chains stopped by ``--max-time`` report what they have, then the line
of :mod:`bnnkit.commands.budget` and exit code 3.
"""

from __future__ import annotations

import argparse
import json
import sys

from bnnkit.commands.advice import line, spelt
from bnnkit.commands.budget import BudgetEnded
from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, add_folder_flags, config_from_args
from bnnkit.commands.problem_flags import add_problem_arguments, problem_config
from bnnkit.experiments.reference import Config, reference
from bnnkit.report.tables import print_table


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_arguments(p)
    add_config_arguments(p.add_argument_group("reference"), Config)
    r = p.add_argument_group("folder")
    r.add_argument(
        "--dir", required=True, help="the reference folder: ensemble/, chains/ and reference.json"
    )
    add_folder_flags(
        r, "the reference", "--dir", "continue the reference in --dir exactly where it stopped"
    )
    r.add_argument(
        "--json", action="store_true", help="print the evaluation as machine-readable JSON"
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args, Config)
    problem = problem_config(args)
    result = reference(
        problem,
        config,
        args.dir,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=args.progress,
    )
    if args.json:
        # A stopped reference says so in its JSON too (and holds no metrics before a kept draw).
        stopped = {} if result.stopped is None else {"stopped": result.stopped}
        evaluation = spelt(result.evaluation)
        print(json.dumps({**evaluation, **stopped}, indent=2, sort_keys=True))
    else:
        stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.seconds.items())
        print(f"reference in {args.dir} ({stages})", file=sys.stderr)
        if result.evaluation:
            print_table(
                result.evaluation,
                title=f"reference ({config.sampler} from {config.members} ensemble "
                f"members) on {problem.dataset}",
                brief=True,
            )
            if result.evaluation.get("levels"):  # the last line: the verdict and what to do
                print(line(result.evaluation["levels"], "reference"))
        else:
            print(
                "nothing to evaluate yet: no sample was kept before the time budget ended; "
                "the continued reference is evaluated when it ends"
            )
    if result.stopped is not None:  # bnnkit.cli prints the continuing command, exits 3
        raise BudgetEnded(result.stopped)
    return 0


COMMAND = Command(
    help="a reference posterior in one command: a deep ensemble, then one tuned "
    "chain per member (MCLMC by default), evaluated as one model average",
    add_arguments=add_arguments,
    run=run,
    docs="concepts/reference.md",
)
