"""``bnnkit paper --scale {tiny,small,full} --out DIR``: the whole study of Izmailov et al.
(2021) end to end, its findings scored and one report
(:func:`bnnkit.experiments.paper.study.paper`).

Called again on the same ``DIR`` (same scale and seed), it continues: finished runs are reused
and cut-off ones resumed.
"""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, add_progress_flag, config_from_args
from bnnkit.experiments.paper.scales import Config
from bnnkit.experiments.paper.study import paper


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        required=True,
        help="the study's folder: a subfolder per experiment, findings.md and "
        "report/ (an earlier study of the same scale and seed is continued)",
    )
    add_progress_flag(p)
    add_config_arguments(p.add_argument_group("study"), Config)


def run(args: argparse.Namespace) -> int:
    study = paper(config_from_args(args, Config), args.out, progress=args.progress)
    print(study.markdown())
    print(f"report in {study.report}")
    return 0


COMMAND = Command(
    help="the paper's whole study at --scale tiny, small or full: every "
    "experiment, the findings scored and one report in --out",
    add_arguments=add_arguments,
    run=run,
    docs="tutorials/paper-study.md",
)
