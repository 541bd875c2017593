"""``bnnkit verify RUN_DIR``: check every file of a run against its manifest and record."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory")


def run(args: argparse.Namespace) -> int:
    from bnnkit.errors import ConfigError
    from bnnkit.runs.directory import verify

    findings, summary = verify(args.run_dir)
    print(f"{args.run_dir}: {summary}")
    for finding in findings:
        how = ("--resume recomputes it from the last intact state" if finding.repairable else
               "--resume cannot recompute it; rerun the same command with --overwrite (the "
               "run reproduces bit for bit)")
        print(f"  {finding.file} {finding.problem}: {how}")
    if not findings:
        print("every file matches its manifest and run.json its settings digest")
        return 0
    fixable = all(f.repairable for f in findings)
    raise ConfigError(
        f"{args.run_dir!r} has {len(findings)} damaged, missing or unrecorded file(s); "
        + ("--resume repairs them" if fixable else "--resume cannot repair them all; rerun "
           "with --overwrite"))


from bnnkit.commands import Command  # noqa: E402

COMMAND = Command(help="check a run directory's files against its manifest",
                  add_arguments=add_arguments, run=run,
                  docs="concepts/run-directories.md")
