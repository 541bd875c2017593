"""The table of every flag each ``bnnkit`` command takes (:mod:`bnnkit.command_flags`),
written from the command line's own parsers.

The parsers are built at the top, from every command's settings; the layers below read the
table instead (:func:`bnnkit.command_flags.spelling`). This module writes it and the tests
check it against the parsers (``tests/commands/test_flag_table.py``), as the generated
documentation pages are:

    python -m bnnkit.flag_table      # rewrite src/bnnkit/command_flags.json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bnnkit.cli import build_parser
from bnnkit.command_flags import TABLE_FILE


def table() -> dict[str, dict[str, list[str] | None]]:
    """Each command's option strings and their choices (``None``: any value, or none taken)."""
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
