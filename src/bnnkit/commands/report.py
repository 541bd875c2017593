"""``bnnkit report DIR [DIR ...] --out OUT``: one markdown and one self-contained HTML report
of run directories and experiment output folders (:func:`bnnkit.report.document.document`)."""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.models.imported import trusting_model
from bnnkit.report.document import document
from bnnkit.report.kinds import KINDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "folders",
        nargs="+",
        metavar="DIR",
        help=f"run directories and experiment outputs ({', '.join(KINDS)})",
    )
    p.add_argument("--out", required=True, help="output folder (report.md, figures/, report.html)")
    p.add_argument("--overwrite", action="store_true", help="replace the report in --out")
    add_trust_model_argument(p, when="for the runs that record it: ")


def run(args: argparse.Namespace) -> int:
    with trusting_model(args.trust_model):
        report = document(args.folders, args.out, overwrite=args.overwrite)
    for section in report.sections:
        print(f"{section.kind}: {section.source}")
    print(f"report in {report.markdown} and {report.html} ({len(report.figures)} figures)")
    return 0


COMMAND = Command(
    help="one markdown and self-contained HTML report of runs and experiments",
    add_arguments=add_arguments,
    run=run,
    docs="guides/report.md",
)
