"""Every flag each ``bnnkit`` command takes, as data the layers below the command line read.

What would help a run (:class:`bnnkit.metrics.findings.Remedy`) is said in the run's settings
(``step_size``, ``num_samples``); on the command line each is spelt as the flag of the command
that made the run, and left out where that command has none (``bnnkit reference`` takes
``--num-samples``, not ``--num-iterations``). The runs and the evaluation below the command
line cannot import its parsers without importing it all back, so the flags are kept as data
(``command_flags.json``: each command's options, and the values of those with a fixed set),
written from the parsers by :mod:`bnnkit.flag_table` and checked against them by the tests.

Example:
    >>> spell = spelling("reference")
    >>> spell("num_samples"), spell("num_iterations"), spell("sampler")
    ('--num-samples', None, '--sampler')
    >>> spelling(None)("energy_var_end")
    '--energy-var-end'
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from bnnkit.errors import ConfigError

#: The table: ``{command: {flag: allowed values, or None for any}}``.
TABLE_FILE = Path(__file__).resolve().parent / "command_flags.json"
#: Whether the work under way was asked for on the command line (:func:`command_line_words`), so
#: that what it prints names flags; from Python it names the Configs' fields.
_ON_COMMAND_LINE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bnnkit_on_command_line", default=False
)


@contextlib.contextmanager
def command_line_words() -> Iterator[None]:
    """Within it, the work under way speaks the command line's words (the CLI runs every
    command in it).

    Example:
        >>> speaks_command_line()
        False
        >>> with command_line_words():
        ...     speaks_command_line()
        True
    """
    token = _ON_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)


def speaks_command_line() -> bool:
    """Whether the work under way was asked for on the command line."""
    return _ON_COMMAND_LINE.get()


@functools.cache
def _table() -> dict[str, dict[str, list[str] | None]]:
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))


def command_flags(command: str) -> dict[str, list[str] | None]:
    """The flags ``bnnkit COMMAND`` takes, each with its allowed values (``None``: any).

    Raises:
        ConfigError: no such command.

    Example:
        >>> command_flags("samples")["--format"], command_flags("hmc")["--num-iterations"]
        (['npz', 'netcdf'], None)
    """
    flags = _table()
    if command not in flags:
        raise ConfigError(f"no bnnkit command {command!r}; allowed: {', '.join(flags)}")
    return flags[command]


def flag(setting: str) -> str:
    """A setting's flag: ``num_samples`` is ``--num-samples``."""
    return "--" + setting.replace("_", "-")


def spelling(command: str | None) -> Callable[[str], str | None]:
    """How ``bnnkit COMMAND`` spells a run's setting: its flag where the command takes it,
    ``None`` where it does not; for no command, or one bnnkit does not know (a run made by
    another version), every setting as its flag."""
    if command is None or command not in _table():
        return flag
    flags = command_flags(command)
    return lambda setting: flag(setting) if flag(setting) in flags else None
