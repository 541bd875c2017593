"""Every flag each ``bnnkit`` command takes, as data the layers below the command line read.

A warning while a run samples names only flags the command that made the run takes
(:mod:`bnnkit.metrics.vocabulary`), but the parsers are built here, at the top, from every
command's settings: the runs and metrics below cannot import them without importing the whole
command line back. So the flags are kept as data beside the vocabulary
(``metrics/command_flags.json``: each command's options, and the values of those with a fixed
set), written from the parsers by this module and checked against them by the tests
(``tests/commands/test_flag_table.py``), as the generated documentation pages are:

    python -m bnnkit.flag_table      # rewrite src/bnnkit/metrics/command_flags.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

#: The table the vocabulary reads.
TABLE_FILE = Path(__file__).resolve().parent / "metrics" / "command_flags.json"


def table() -> dict[str, dict[str, list[str] | None]]:
    """Each command's option strings and their choices (``None``: any value, or none taken)."""
    from bnnkit.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name: {
            flag: None if action.choices is None else [str(c) for c in action.choices]
            for flag, action in sorted(sub._option_string_actions.items())
        }
        for name, sub in sorted(commands.choices.items())
    }


def render(flags: dict[str, Any] | None = None) -> str:
    """The table file's text."""
    return json.dumps(table() if flags is None else flags, indent=1, sort_keys=True) + "\n"


def main() -> None:
    TABLE_FILE.write_text(render())
    print(f"wrote {TABLE_FILE}")


if __name__ == "__main__":
    main()
