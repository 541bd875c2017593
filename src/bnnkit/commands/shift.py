"""``bnnkit shift RUN [RUN ...] --out DIR``: stored posteriors on corrupted test images.

The flags of what is scored are :class:`bnnkit.experiments.covariate_shift.Config`'s.
"""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, add_folder_flags, config_from_args
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.data.corruptions import CORRUPTIONS, SEVERITIES
from bnnkit.experiments import covariate_shift
from bnnkit.experiments.covariate_shift import Config
from bnnkit.models.imported import trusting_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="run directories of any method, on one image dataset"
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder (shift_table.json, shift.csv, shift.md, degradation.png)",
    )
    p.add_argument(
        "--corruptions",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"corruptions to apply (default: all {len(CORRUPTIONS)}: {' '.join(CORRUPTIONS)})",
    )
    p.add_argument(
        "--severities",
        nargs="+",
        type=int,
        default=list(SEVERITIES),
        metavar="S",
        help="severities, each in 1..5 (default: 1 2 3 4 5); the clean test set is "
        "always scored too, as severity 0",
    )
    add_config_arguments(p.add_argument_group("scoring"), Config)
    add_folder_flags(
        p,
        "the table",
        "--out",
        "continue a table in --out that was cut off (finished cells are kept)",
    )
    add_trust_model_argument(p, when="for the runs that record it: ")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    config = config_from_args(args, covariate_shift.Config)
    with trusting_model(args.trust_model):
        result = covariate_shift.covariate_shift(
            args.runs,
            args.out,
            config,
            corruptions=args.corruptions,
            severities=args.severities,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=args.progress,
        )
    print(f"covariate shift on {result.dataset}: mean over corruptions per severity")
    for label, by_severity in covariate_shift.degradation(result.rows, "accuracy").items():
        means = "  ".join(
            f"{'clean' if s == 0 else s}: {np.mean(v):.3f}" for s, v in sorted(by_severity.items())
        )
        print(f"  {label} accuracy  {means}")
    print(f"table and figure in {args.out}")
    return 0


COMMAND = Command(
    help="accuracy, NLL and ECE of stored runs on corrupted test images (covariate shift)",
    add_arguments=add_arguments,
    run=run,
    docs="guides/covariate-shift.md",
)
