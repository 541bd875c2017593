"""Settings: dataclass fields that carry what the command line needs to offer them.

Every Config (a method's, the problem's) declares its fields with :func:`setting`: default,
one line of help, and optionally the flag's name, aliases, choices and whether the value may
change on ``--resume``. ``bnnkit``'s flags are derived from these fields
(:mod:`bnnkit.commands.flags`), so a default lives in exactly one place. The ``check_*``
helpers give the one-line errors that name the flag.

Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Example:
    ...     step_size: float = setting(0.1, help="leapfrog step size")
    >>> check_positive(Example, "step_size", 0.0)
    Traceback (most recent call last):
    ...
    bnnkit.errors.ConfigError: --step-size 0.0 must be a finite number > 0
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from typing import Any

from bnnkit.errors import ConfigError

#: Seeds ``jax.random.PRNGKey`` takes without wrapping around or overflowing.
SEED_BOUNDS = (0, 2**32 - 1)


class Exclusive(float):
    """A bound of :func:`setting` that the value may not reach: ``bounds=(Exclusive(0), None)``
    allows every number > 0, ``(Exclusive(0), Exclusive(1))`` the open interval (0, 1).

    Example:
        >>> Exclusive(0) == 0, repr(Exclusive(0.5))
        (True, 'Exclusive(0.5)')
    """

    def __repr__(self) -> str:
        return f"Exclusive({float(self)!r})"


def _allowed(low: float | None, high: float | None) -> str:
    """The allowed range in words: ``0..10``, ``> 0``, ``in (0, 1]``."""
    if low is not None and high is not None:
        if not isinstance(low, Exclusive) and not isinstance(high, Exclusive):
            return f"{low}..{high}"
        left = "(" if isinstance(low, Exclusive) else "["
        right = ")" if isinstance(high, Exclusive) else "]"
        return f"in {left}{_number(low)}, {_number(high)}{right}"
    if low is not None:
        return f"{'>' if isinstance(low, Exclusive) else '>='} {_number(low)}"
    return f"{'<' if isinstance(high, Exclusive) else '<='} {_number(high)}"


def _number(bound: float) -> str:
    value = float(bound)
    return str(int(value)) if value.is_integer() else str(value)


def _outside(value: float, low: float | None, high: float | None) -> bool:
    if low is not None and (value <= low if isinstance(low, Exclusive) else value < low):
        return True
    return high is not None and (value >= high if isinstance(high, Exclusive) else value > high)


def setting(default: Any = dataclasses.MISSING, *, help: str, flag: str | None = None,
            aliases: tuple[str, ...] = (), choices: tuple[str, ...] | None = None,
            metavar: str | None = None, resumable: bool = False, action: str | None = None,
            cli: bool = True, bounds: tuple[float | None, float | None] | None = None) -> Any:
    """A Config field with what the CLI needs to offer it as a flag.

    Args:
        default: the default (omit for a required setting).
        help: one line for ``--help``.
        flag: the flag (default ``--`` + the field name with dashes).
        aliases: other accepted spellings (e.g. the paper's names).
        choices: allowed values, listed by ``--help``.
        metavar: placeholder in ``--help``.
        resumable: may differ on ``--resume`` (it does not change the samples' values).
        action: an argparse action other than the type's default (``"append"``).
        cli: offered on the command line at all.
        bounds: ``(low, high)``, inclusive unless given as :class:`Exclusive`, either ``None``
            for no limit; checked with every other number by :func:`check_numbers`.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "flag": flag, "aliases": tuple(aliases), "choices": choices,
        "metavar": metavar, "resumable": resumable, "action": action, "cli": cli,
        "bounds": bounds})


#: Units a duration may be written in, and their seconds.
DURATION_UNITS = {"d": 86_400.0, "h": 3_600.0, "min": 60.0, "m": 60.0, "s": 1.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(d|h|min|m|s)")


def parse_duration(value: Any, name: str = "--max-time") -> float:
    """Seconds from a duration: a number of seconds, or numbers with units (``90s``,
    ``30m``, ``2h``, ``1h30m``, ``1.5h``; ``d``, ``h``, ``m`` or ``min``, ``s``).

    Raises:
        ConfigError: anything else, or a duration that is not positive and finite, naming
            ``name``.

    Example:
        >>> parse_duration("30m"), parse_duration("1h30m"), parse_duration("90s"), parse_duration(5)
        (1800.0, 5400.0, 90.0, 5.0)
        >>> parse_duration("3x")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --max-time '3x' is not a duration; allowed: seconds (90) \
or numbers with units d, h, m (min), s, such as 90s, 30m, 2h, 1h30m
    """
    seconds = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION.findall(text)
            if parts and "".join(number + unit for number, unit in parts) == text:
                seconds = sum(float(number) * DURATION_UNITS[unit] for number, unit in parts)
    if seconds is None:
        raise ConfigError(f"{name} {value!r} is not a duration; allowed: seconds (90) or numbers "
                          "with units d, h, m (min), s, such as 90s, 30m, 2h, 1h30m")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"{name} {value!r} out of range; allowed: a duration > 0")
    return seconds


def flag(cls: type, name: str) -> str:
    """The command-line flag of a Config field.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass(frozen=True)
        ... class Example:
        ...     num_burn_in: int = setting(0, help="iterations discarded")
        ...     resume_from: str = setting("", flag="--from", help="a run")
        >>> flag(Example, "num_burn_in"), flag(Example, "resume_from")
        ('--num-burn-in', '--from')
    """
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return field.metadata.get("flag") or "--" + name.replace("_", "-")


def field_types(cls: type) -> dict[str, Any]:
    """The resolved type annotation of every field of a Config dataclass."""
    return typing.get_type_hints(cls)


def check_positive(cls: type, name: str, value: float) -> None:
    """A finite number > 0, or a one-line ConfigError naming the flag."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{flag(cls, name)} {value} must be a finite number > 0")


def check_at_least(cls: type, name: str, value: int, low: int) -> None:
    """An integer >= ``low``, or a one-line ConfigError naming the flag."""
    if int(value) != value or value < low:
        raise ConfigError(f"{flag(cls, name)} {value} must be an integer >= {low}")


def check_choice(cls: type, name: str, value: str, allowed: tuple[str, ...]) -> None:
    """One of ``allowed``, or a one-line ConfigError listing them."""
    if value not in allowed:
        raise ConfigError(f"unknown {flag(cls, name)} {value!r}; allowed: {', '.join(allowed)}")


def check_numbers(config: Any) -> None:
    """Every number of a Config finite, and within the ``bounds`` its field declares.

    Called once by each Config's ``__post_init__``, so the command line and Python users get
    the same one-line refusal before anything runs.

    Raises:
        ConfigError: naming the flag, the value and what is allowed.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Example:
        ...     seed: int = setting(0, help="seed", bounds=(0, 2**32 - 1))
        ...     scale: float = setting(1.0, help="a scale")
        >>> check_numbers(Example(seed=-1))
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --seed -1 out of range; allowed: 0..4294967295
        >>> check_numbers(Example(scale=float("inf")))
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --scale inf must be a finite number
        >>> @dataclasses.dataclass(frozen=True)
        ... class Rate:
        ...     target: float = setting(0.8, help="a rate", bounds=(Exclusive(0), Exclusive(1)))
        >>> check_numbers(Rate(target=1.0))
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --target 1.0 out of range; allowed: in (0, 1)
    """
    cls = type(config)
    for field in dataclasses.fields(cls):
        value = getattr(config, field.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{flag(cls, field.name)} {value} must be a finite number")
        low, high = field.metadata.get("bounds") or (None, None)
        if _outside(value, low, high):
            raise ConfigError(f"{flag(cls, field.name)} {value} out of range; allowed: "
                              f"{_allowed(low, high)}")
