"""``bnnkit`` command line: parse, then call the same functions a Python user calls.

Every failure ends in one line on stderr:

- bad input (a :class:`~bnnkit.errors.ConfigError`, or the operating system refusing a path
  the user named) prints ``bnnkit: error: ...`` and exits with code 2; an argument a Python
  entry point refused is named by the flag it came from (:func:`in_flag_words`);
- anything unexpected (a bug) prints ``bnnkit: error: unexpected ...; run with --debug for the
  traceback`` and exits with code 1;
- ``--debug`` (anywhere on the command line) lets the exception through with its traceback;
- Ctrl-C exits with code 130, SIGTERM and SIGHUP with 128 + the signal's number, each with
  one line saying what was kept and how to go on (``--resume`` only for commands that take
  it); a run stopped so lets go of its lock and keeps its last state.

A run stopped by its time budget (``--max-time``, or ``--until-converged``'s) is not a
failure: after the command's report, one line on stderr says how far the run got and gives the
command that continues it (the same command line with ``--resume``), and the exit code is 3
(:data:`bnnkit.commands.budget.EXIT_BUDGET`), so that a script tells it from a success (0) and
from bad input (2).

Flags may be spelt with underscores, as bnn_hmc's commands spell them (``--dataset_name=yacht_2``
is ``--dataset-name=yacht_2``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import signal
import sys

from bnnkit import cpu_devices, distributed
from bnnkit.command_flags import command_line_words
from bnnkit.commands import COMMANDS, GROUPS, OTHER_COMMANDS, config_file, groups
from bnnkit.commands.budget import EXIT_BUDGET, BudgetEnded, command_line, resume_argv
from bnnkit.commands.flags import add_config_arguments, config_from_args
from bnnkit.compile_cache import enable_for_command_line
from bnnkit.errors import ArgumentError, ConfigError

DEBUG_FLAG = "--debug"
#: The exit codes, at the end of ``bnnkit --help`` (docs/reference/cli.md says the same).
EXIT_CODES = (
    "exit codes: 0 done; 1 unexpected error (a bug); 2 bad input;",
    f"{EXIT_BUDGET} stopped by its time budget (--max-time), resume to continue;",
    "130 Ctrl-C, 128 + N signal N (SIGTERM, SIGHUP)",
)
#: Where the docs pages are: the repository's ``docs/`` folder (``mkdocs serve`` shows them as
#: a site with the same layout). ``bnnkit COMMAND --help`` ends with the command's page.
DOCS_ROOT = "docs"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"bnnkit: error: {message}\n")


class _HelpFormatter(argparse.HelpFormatter):
    """Adds ``(default: X)`` to an option's help where a default means something, and names
    the value of a flag with several spellings once (``--a, --b X``, as Python 3.13 does), so
    that its line fits 80 columns."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if len(action.option_strings) < 2 or action.nargs == 0:
            return super()._format_action_invocation(action)
        value = self._format_args(action, self._get_default_metavar_for_optional(action))
        return f"{', '.join(action.option_strings)} {value}"

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text
            or default is None
            or isinstance(default, bool)
            or default is argparse.SUPPRESS
        ):
            return text
        if isinstance(default, (list, tuple)):
            default = " ".join(map(str, default))
        return f"{text} (default: {default})"


def version() -> str:
    """The installed bnnkit's version (``"unknown"`` when run from a source tree alone)."""
    from importlib import metadata

    try:
        return metadata.version("bnnkit")
    except metadata.PackageNotFoundError:
        return "unknown"


class _TopHelpFormatter(_HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``bnnkit --help``: the grouped command list in the epilog, kept as it is laid out."""


def docs_pointer(command: str) -> str:
    """The last line of ``bnnkit COMMAND --help``: where the command's docs page is.

    Example:
        >>> docs_pointer("hmc")
        'docs: docs/reference/methods/hmc.md'
    """
    return f"docs: {DOCS_ROOT}/{COMMANDS()[command].docs}"


def command_list() -> str:
    """``bnnkit --help``'s list of commands, grouped (methods, analysis, data, runs)."""
    import textwrap

    commands = COMMANDS()
    indent = " " * (max(map(len, commands)) + 4)
    lines = []
    for group, names in groups().items():
        lines.append(f"{GROUPS[group]}:")
        for name in names:
            # wrapped at 79 columns, the help under the help, as argparse lays out flags
            lines += textwrap.wrap(
                commands[name].sentence,
                79,
                break_on_hyphens=False,
                initial_indent=f"  {name:<{len(indent) - 2}}",
                subsequent_indent=indent,
            )
        lines.append("")
    lines.append(f"`bnnkit COMMAND --help` lists a command's flags; docs: {DOCS_ROOT}/index.md")
    lines.append("")
    lines += EXIT_CODES
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bnnkit",
        description="Bayesian neural networks: HMC and friends.",
        formatter_class=_TopHelpFormatter,
        epilog=command_list(),
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"bnnkit {version()}",
        help="print the version and exit",
    )
    parser.add_argument(
        DEBUG_FLAG,
        action="store_true",
        help="show the traceback of an unexpected error (accepted anywhere)",
    )
    # The commands are listed by group in the epilog, so the parsers carry no help of their own.
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=_Parser,
        metavar="COMMAND",
        help="one of the commands below",
    )
    for name, command in COMMANDS().items():
        p = sub.add_parser(
            name,
            description=command.sentence,
            formatter_class=_HelpFormatter,
            epilog=docs_pointer(name),
        )
        command.add_arguments(p)
        p.add_argument(
            config_file.FLAG,
            metavar="FILE",
            help="read flags from a TOML file (key = value, the flag without its "
            "dashes), or a run's settings from its run.json; flags given here "
            "override it",
        )
    return parser


def join_processes(argv: list[str]) -> None:
    """Join a distributed run as the method command's flags or the cluster ask.

    Done before the parser is built: importing the methods' libraries already starts JAX,
    after which ``jax.distributed.initialize`` is refused.
    """
    command = next((a for a in argv if not a.startswith("-")), None)
    if command is None or command in OTHER_COMMANDS or "-h" in argv or "--help" in argv:
        return

    parser = _Parser(prog=f"bnnkit {command}", add_help=False)
    add_config_arguments(parser, distributed.Hosts)
    known, _ = parser.parse_known_args(argv)
    hosts = config_from_args(known, distributed.Hosts)
    if not hosts.wanted():  # several processes keep one CPU device each
        cpu_devices.enable_for_command_line()
    distributed.initialize(hosts)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def os_error_message(err: OSError) -> str:
    """An operating-system refusal (permission, a file where a folder is needed, ...) in one
    line naming the path."""
    names = [repr(str(n)) for n in (err.filename, err.filename2) if n is not None]
    reason = err.strerror or type(err).__name__
    where = f"{' -> '.join(names)}: " if names else ""
    return _one_line(f"{where}{reason}")


def _command_parser(
    parser: argparse.ArgumentParser, command: str | None
) -> argparse.ArgumentParser | None:
    """The parser of ``command`` (``None`` for no such command)."""
    sub = parser._subparsers._group_actions[0].choices if parser._subparsers else {}
    return sub.get(command)


def in_flag_words(err: ConfigError, parser: argparse.ArgumentParser | None) -> str:
    """The one line of ``err`` in the command line's words: an argument that an entry point
    refused (:class:`~bnnkit.errors.ArgumentError`, which names the Python parameter) named by
    the flag its value came from. A command passes each flag's value to the parameter its
    ``dest`` names; an argument no flag gave keeps its Python name.

    Example:
        >>> p = argparse.ArgumentParser()
        >>> _ = p.add_argument("--conformal", type=float)
        >>> err = ArgumentError("bnnkit.evaluate", "conformal", "nan is not finite",
        ...                     "a finite real number", " or None")
        >>> in_flag_words(err, p)
        '--conformal nan is not finite; allowed: a finite real number'
    """
    if isinstance(err, ArgumentError) and parser is not None:
        for action in parser._actions:
            if action.dest == err.argument:
                long = [s for s in action.option_strings if s.startswith("--")]
                return _one_line(err.naming(long[0] if long else action.metavar or action.dest))
    return _one_line(err)


def _apply_config_file(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Defaults of the command's flags from its ``--config`` file, if one is given."""
    path = config_file.config_path(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser_of_command = _command_parser(parser, command)
    if path is None or parser_of_command is None:
        return
    dests = {a.dest for a in parser_of_command._actions}
    values = config_file.read(path, command, problem="temperature" in dests)
    config_file.apply(parser_of_command, values, f"{config_file.FLAG} {path}")


def dashed(argv: list[str]) -> list[str]:
    """Option names with underscores written with dashes; values and positionals untouched.

    Example:
        >>> dashed(["hmc", "--dataset_name=yacht_2", "--model_name", "mlp_regression_small"])
        ['hmc', '--dataset-name=yacht_2', '--model-name', 'mlp_regression_small']
    """
    out = []
    for i, arg in enumerate(argv):
        if arg == "--":  # everything after it is positional
            return out + argv[i:]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def _after_stop(resumes: bool) -> str:
    """What a stopped command leaves, and how to go on, naming only flags it takes."""
    if resumes:
        return (
            "what was complete is kept (a run directory holds its last complete iteration "
            "or epoch); continue with the same command and --resume"
        )
    return "it did not finish; run it again"


def _continue(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """How to continue a run its budget stopped: ``argv`` with ``--resume``, checked against
    the command's own parser (a plain sentence in the unlikely case it does not parse)."""
    again = resume_argv(argv)
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # argparse's own message: not shown
            parser.parse_args(again)
    except SystemExit:
        return _after_stop(True)
    return f"continue with: {command_line(again)}"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    argv = dashed(list(sys.argv[1:] if argv is None else argv))
    # Accepted anywhere, so that re-running a failed command needs only one word more.
    debug = DEBUG_FLAG in argv
    argv = [a for a in argv if a != DEBUG_FLAG]
    try:
        join_processes(argv)
        # Before the parser (importing the methods' libraries may start JAX), for the
        # commands join_processes left alone.
        cpu_devices.enable_for_command_line()
        parser = build_parser()
        _apply_config_file(parser, argv)
    except ConfigError as err:
        if debug:
            raise
        print(f"bnnkit: error: {_one_line(err)}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    # Here, not at the top: bnnkit.runs starts JAX, which must wait for bnnkit.cpu_devices.
    from bnnkit.runs.signals import Terminated, stopped_by_signals

    enable_for_command_line()  # a second run loads what the first compiled

    # Only commands that continue what was cut off (a run, a surface) advise --resume.
    resumes = hasattr(args, "resume")
    try:
        if getattr(args, "float64", False):
            import jax

            jax.config.update("jax_enable_x64", True)
        with stopped_by_signals(), command_line_words():
            return COMMANDS()[args.command].run(args)
    except ConfigError as err:
        if debug:
            raise
        message = in_flag_words(err, _command_parser(parser, args.command))
        print(f"bnnkit: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:
        # A path the user gave that the system refuses (not writable, a file in the way).
        if debug:
            raise
        print(f"bnnkit: error: {os_error_message(err)}", file=sys.stderr)
        return 2
    except BudgetEnded as stop:
        print(f"bnnkit: stopped: {stop.progress}; {_continue(parser, argv)}", file=sys.stderr)
        return EXIT_BUDGET
    except Terminated as stop:
        print(
            f"bnnkit: stopped by {signal.Signals(stop.signum).name}; {_after_stop(resumes)}",
            file=sys.stderr,
        )
        return 128 + stop.signum
    except KeyboardInterrupt:
        print(f"bnnkit: interrupted; {_after_stop(resumes)}", file=sys.stderr)
        return 130
    except Exception as err:  # the one place that turns a bug into one line
        if debug:
            raise
        print(
            f"bnnkit: error: unexpected {type(err).__name__}: {_one_line(err)[:300]}; run "
            f"with {DEBUG_FLAG} for the traceback",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
