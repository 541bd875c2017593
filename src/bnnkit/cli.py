"""``bnnkit`` command line: parse, then call the same functions a Python user calls.

Every failure ends in one line on stderr:

- bad input (a :class:`~bnnkit.errors.ConfigError`, or the operating system refusing a path
  the user named) prints ``bnnkit: error: ...`` and exits with code 2;
- anything unexpected (a bug) prints ``bnnkit: error: unexpected ...; run with --debug for the
  traceback`` and exits with code 1;
- ``--debug`` (anywhere on the command line) lets the exception through with its traceback.
"""

from __future__ import annotations

import argparse
import sys

from bnnkit.commands import COMMANDS
from bnnkit.errors import ConfigError

DEBUG_FLAG = "--debug"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"bnnkit: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bnnkit", description="Bayesian neural networks: HMC and friends.")
    parser.add_argument(DEBUG_FLAG, action="store_true",
                        help="show the traceback of an unexpected error (accepted anywhere)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS().items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def os_error_message(err: OSError) -> str:
    """An operating-system refusal (permission, a file where a folder is needed, ...) in one
    line naming the path."""
    names = [repr(str(n)) for n in (err.filename, err.filename2) if n is not None]
    reason = err.strerror or type(err).__name__
    where = f"{' -> '.join(names)}: " if names else ""
    return _one_line(f"{where}{reason}")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Accepted anywhere, so that re-running a failed command needs only one word more.
    debug = DEBUG_FLAG in argv
    argv = [a for a in argv if a != DEBUG_FLAG]
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "float64", False):
            import jax

            jax.config.update("jax_enable_x64", True)
        return COMMANDS()[args.command].run(args)
    except ConfigError as err:
        if debug:
            raise
        print(f"bnnkit: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:
        # A path the user gave that the system refuses (not writable, a file in the way).
        if debug:
            raise
        print(f"bnnkit: error: {os_error_message(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bnnkit: interrupted; the run directory holds the last complete iteration "
              "(continue with --resume)", file=sys.stderr)
        return 130
    except Exception as err:  # the one place that turns a bug into one line
        if debug:
            raise
        print(f"bnnkit: error: unexpected {type(err).__name__}: {_one_line(err)[:300]}; run "
              f"with {DEBUG_FLAG} for the traceback", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
