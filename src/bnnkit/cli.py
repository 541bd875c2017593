"""``bnnkit`` command line: parse, then call the same functions a Python user calls.

Bad input (a :class:`~bnnkit.errors.ConfigError`) prints one line, ``bnnkit: error: ...``, and
exits with code 2 and no traceback.
"""

from __future__ import annotations

import argparse
import sys

from bnnkit.commands import COMMANDS
from bnnkit.errors import ConfigError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"bnnkit: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bnnkit", description="Bayesian neural networks: HMC and friends.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS().items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    if getattr(args, "float64", False):
        import jax

        jax.config.update("jax_enable_x64", True)
    try:
        return COMMANDS()[args.command].run(args)
    except ConfigError as err:
        print(f"bnnkit: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bnnkit: interrupted; the run directory holds the last complete iteration "
              "(continue with --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
