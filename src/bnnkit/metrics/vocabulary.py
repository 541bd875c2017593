"""The words of the sampler's warnings while a run samples: how they name the settings.

A stuck or unstable sampler is warned about (:mod:`bnnkit.metrics.sampler_health`) to someone
at a command line (flags: ``--step-size``) or in Python (Config fields: ``step_size``), and on
the command line only in the flags of the command that made the run (``bnnkit reference``
takes ``--num-tuning``, not ``--num-burn-in``). A :class:`Vocabulary` is that choice; the
warning builds every sentence from it. (The verdict's advice is data, spelt by the command
that prints it: :mod:`bnnkit.metrics.findings`.)

Example:
    >>> CLI_WORDS.settings.step_size, PYTHON_WORDS.settings.step_size
    ('--step-size', 'step_size')
    >>> cli_vocabulary("reference").settings.num_burn_in
    '--num-tuning'
"""

from __future__ import annotations

import dataclasses
import functools
import json


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a warning names the settings a user can change.

    A field that is ``None`` is a setting the caller cannot change (a command without that
    flag): the warning then leaves it out rather than name something that is refused.

    Attributes:
        num_burn_in, step_size, target_accept_rate: the settings' names.
        adapt_mass: how to ask for the mass-matrix adaptation.
        adapt_none: how to keep the given step size (no adaptation).
    """

    num_burn_in: str | None
    step_size: str | None
    target_accept_rate: str | None
    adapt_mass: str | None
    adapt_none: str | None


#: Command-line flags.
FLAGS = Settings(
    num_burn_in="--num-burn-in",
    step_size="--step-size",
    target_accept_rate="--target-accept-rate",
    adapt_mass="--adapt mass",
    adapt_none="--adapt none",
)

#: Config fields, for a caller in Python.
FIELDS = Settings(
    num_burn_in="num_burn_in",
    step_size="step_size",
    target_accept_rate="target_accept_rate",
    adapt_mass='adapt="mass"',
    adapt_none='adapt="none"',
)

#: For each setting a warning names, the flags that may spell it, in order: a command's
#: warning uses the first its parser takes (``--num-tuning`` is ``bnnkit reference``'s).
CANDIDATES: dict[str, tuple[str, ...]] = {
    "num_burn_in": ("--num-burn-in", "--num-tuning"),
    "step_size": ("--step-size", "--init-step-size"),
    "target_accept_rate": ("--target-accept-rate",),
    "adapt": ("--adapt",),
}


@functools.cache
def _table() -> dict[str, dict[str, list[str] | None]]:
    from importlib import resources

    text = resources.files("bnnkit.metrics").joinpath("command_flags.json").read_text()
    return json.loads(text)


def command_flags(command: str) -> dict[str, list[str] | None]:
    """The flags ``bnnkit COMMAND`` takes, each with its allowed values (``None``: any), as its
    parser has them (:mod:`bnnkit.flag_table` writes and checks the table).

    Raises:
        ConfigError: no such command.

    Example:
        >>> command_flags("samples")["--format"], command_flags("hmc")["--num-iterations"]
        (['npz', 'netcdf'], None)
        >>> "--members" in command_flags("hmc"), "--members" in command_flags("reference")
        (False, True)
    """
    from bnnkit.errors import ConfigError

    flags = _table()
    if command not in flags:
        raise ConfigError(f"no bnnkit command {command!r}; allowed: {', '.join(flags)}")
    return flags[command]


def _choice(flags: dict[str, list[str] | None], flag: str | None, value: str) -> str | None:
    """``FLAG VALUE`` when the command takes ``value`` for ``flag``."""
    if flag is None:
        return None
    choices = flags[flag]
    return f"{flag} {value}" if choices is None or value in choices else None


def command_settings(command: str) -> Settings:
    """The flags a warning names for a run made by ``bnnkit COMMAND``: only those its parser
    takes, so every suggestion can be typed after that command.

    Example:
        >>> reference = command_settings("reference")
        >>> reference.num_burn_in, reference.step_size, reference.adapt_mass
        ('--num-tuning', None, None)
        >>> command_settings("hmc").adapt_none
        '--adapt none'
    """
    flags = command_flags(command)
    names = {key: next((f for f in CANDIDATES[key] if f in flags), None) for key in CANDIDATES}
    return Settings(
        num_burn_in=names["num_burn_in"],
        step_size=names["step_size"],
        target_accept_rate=names["target_accept_rate"],
        adapt_mass=_choice(flags, names["adapt"], "mass"),
        adapt_none=_choice(flags, names["adapt"], "none"),
    )


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """How a warning names settings.

    Attributes:
        settings: the names (:data:`FLAGS`, :data:`FIELDS`, or a command's flags).
    """

    settings: Settings


#: Warnings in command-line flags (of no command in particular).
CLI_WORDS = Vocabulary(FLAGS)
#: Warnings in Config fields (:func:`bnnkit.sample`).
PYTHON_WORDS = Vocabulary(FIELDS)


def cli_vocabulary(command: str | None) -> Vocabulary:
    """The words of the flags of ``bnnkit COMMAND``, or :data:`CLI_WORDS` for a command bnnkit
    does not know (a run made by another version).

    Example:
        >>> cli_vocabulary(None) is CLI_WORDS
        True
    """
    from bnnkit.errors import ConfigError

    if command is None:
        return CLI_WORDS
    try:
        return Vocabulary(command_settings(command))
    except ConfigError:
        return CLI_WORDS


def either(options: list[str | None]) -> str:
    """The options that are offered (not ``None``), joined as alternatives.

    Example:
        >>> either(["a", None, "b", "c"]), either(["a", "b"]), either(["a"]), either([None])
        ('a, b, or c', 'a, or b', 'a', '')
    """
    offered = [o for o in options if o]
    if len(offered) < 2:
        return "".join(offered)
    return f"{', '.join(offered[:-1])}, or {offered[-1]}"
