"""``bnnkit verify RUN_DIR``: check every file of a run against its manifest and record."""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.errors import ConfigError
from bnnkit.models import canonical_name
from bnnkit.runs import composite_folder as composite
from bnnkit.runs.directory import RunDir, composite_record
from bnnkit.runs.resumable import resume_refusal
from bnnkit.runs.verification import DATA_FINDING, verify


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory")
    add_trust_model_argument(
        p,
        help="accepted as on the commands that read runs: checked "
        "against the model the run records (verify reads files "
        "and imports no model)",
    )


def run(args: argparse.Namespace) -> int:
    kind = composite_record(args.run_dir)
    if args.trust_model is not None:
        _check_model(args.run_dir, args.trust_model)
    if kind is not None:  # a run made of runs: every stage checked
        findings, summary = composite.verify(args.run_dir)
        made_by = composite.read_record(args.run_dir)["kind"]
        command = f"the {made_by}'s command (bnnkit {made_by} ... --dir {args.run_dir})"
    else:
        findings, summary = verify(args.run_dir)
        command = f"the run's command (bnnkit {_method(args.run_dir)} ...)"
    print(f"{args.run_dir}: {summary}")
    # verify takes no --resume or --overwrite: the advice names the command that does, and
    # only where it works: nothing writes past an entry in the way, and a resume refused
    # whatever the files hold (a run that diverged, say) repairs nothing.
    in_the_way = [f for f in findings if f.in_the_way]
    refused = (
        _resume_refusal(args.run_dir)
        if kind is None and not in_the_way and any(f.repairable for f in findings)
        else None
    )
    again = (
        f"a resume cannot recompute it; {command} with --overwrite makes the run again (it "
        "reproduces bit for bit)"
    )
    for finding in findings:
        if finding.file == DATA_FINDING:
            how = "restore the data file the run was made on"
        elif finding.in_the_way:
            how = "remove it (bnnkit keeps only its own files there), then verify again"
        elif finding.repairable and refused is None:
            how = f"{command} with --resume recomputes it from the last intact state"
        elif finding.repairable:
            how = f"a resume is refused: {refused}"
        else:
            how = again
        print(f"  {finding.file} {finding.problem}: {how}")
    if not findings:
        print("every file matches its manifest and run.json its settings digest")
        return 0
    # Data that changed is no damage to the run: remaking it (--overwrite) would replace a
    # good run with one on other data, so only restoring the file is advised for it.
    files = [f for f in findings if f.file != DATA_FINDING]
    data = (
        "the data file it was made on changed or is gone; restore that file"
        if len(files) < len(findings)
        else ""
    )
    if not files:
        raise ConfigError(f"{args.run_dir!r}: {data} (the run's own files are intact)")
    if in_the_way:
        names = ", ".join(repr(f.file) for f in in_the_way)
        advice = f"remove {names} first (bnnkit keeps only its own files there), then verify again"
    elif all(f.repairable for f in files) and refused is None:
        advice = f"{command} with --resume repairs them"
    elif all(f.repairable for f in files):
        advice = f"a resume is refused: {refused}"
    else:
        advice = f"a resume cannot repair them all; {command} with --overwrite makes the run again"
    raise ConfigError(
        f"{args.run_dir!r} has {len(files)} damaged, missing or unrecorded file(s); "
        + (f"{data} first, then {advice}" if data else advice)
    )


def _resume_refusal(run_dir: str) -> str | None:
    """Why a resume of the run in ``run_dir`` is refused whatever its files hold (``None``:
    it is not, or its record cannot be read, which is a finding of its own)."""
    try:
        record = RunDir(run_dir).read_record()
    except ConfigError:
        return None
    return resume_refusal(record)


def _field(run_dir: str, *keys: str) -> object:
    """``run.json``'s value at ``keys`` in ``run_dir``, or ``None`` if it cannot be read."""
    import json
    import os

    try:
        with open(os.path.join(run_dir, "run.json"), "rb") as f:
            value = json.loads(f.read())
        for key in keys:
            value = value.get(key)
    except (OSError, ValueError, RecursionError, AttributeError):
        value = None
    return value


def _method(run_dir: str) -> str:
    """The method of the run in ``run_dir`` as its command is named (``METHOD`` if unknown)."""
    method = _field(run_dir, "method")
    return method if isinstance(method, str) and method.isidentifier() else "METHOD"


def _check_model(run_dir: str, model: str) -> None:
    """Refuse a ``--model`` that is not the model the run records (nothing is imported)."""
    recorded = _field(run_dir, "problem", "model")
    if isinstance(recorded, str) and canonical_name(recorded) != canonical_name(model):
        raise ConfigError(
            f"--model {model} is not the model of the run {run_dir!r}, which "
            f"records {recorded}; allowed: --model {recorded}, or leave it out"
        )


COMMAND = Command(
    help="check a run directory's files against its manifest",
    add_arguments=add_arguments,
    run=run,
    docs="concepts/run-directories.md",
)
