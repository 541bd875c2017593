"""Settings: dataclass fields that carry what the command line needs to offer them.

Every Config (a method's, the problem's) declares its fields with :func:`setting`: default,
one line of help, and optionally the flag's name, aliases, choices and whether the value may
change on ``--resume``. ``bnnkit``'s flags are derived from these fields
(:mod:`bnnkit.commands.flags`), so a default lives in exactly one place. The ``check_*``
helpers give the one-line errors that name the flag.

What every Config's values are checked against, once, by :func:`check_numbers` (the command
line and Python users get the same one-line :class:`~bnnkit.errors.ConfigError`):

- the field's type annotation: ``int`` takes integers only (``num_chains=2.5`` is refused),
  ``float`` numbers, ``bool`` ``True``/``False``, ``str`` text, ``X | None`` also ``None``;
  NumPy scalars and 0-d NumPy or JAX arrays of numbers are taken as the Python number they
  hold, and anything else (a list, an array of values, a complex number) is refused;
- the field's ``bounds``; an integer setting without a declared upper bound still has one,
  :data:`MAX_INT32`, the most a shape or a jitted argument holds, so no count becomes an
  overflow deep inside JAX;
- and, once the run's dtype is known, every real number after conversion to it
  (:func:`check_dtype`): a value that float32 turns into inf, or into 0 (XLA flushes
  subnormals), is refused naming the value and the range, while a float64 run allows more.

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
import types
import typing
from typing import Any

import numpy as np

from bnnkit.arguments import shown, type_words
from bnnkit.errors import ConfigError

#: Seeds ``jax.random.PRNGKey`` takes without wrapping around or overflowing.
SEED_BOUNDS = (0, 2**32 - 1)
#: The largest integer a shape or a jitted int32 argument holds: the upper bound of every
#: integer setting that declares none.
MAX_INT32 = 2**31 - 1
#: Iterations, epochs and every count of them (burn-in, checkpoint and evaluation intervals):
#: a unit's index is folded into a uint32 key and counted as int32 on the device.
UNITS = (1, MAX_INT32)
#: Chains or ensemble members run together: each holds a whole state (a network's
#: parameters, momenta, adaptation), so more than 2^16 of them is a mistake, not a run.
MEMBERS = (1, 2**16)
#: Draws of the weights per step or per evaluation (VI, Laplace): each is a network to
#: evaluate on the data, so more than 2^16 cannot be what was meant.
DRAWS = (1, 2**16)
#: Leapfrog steps in one HMC iteration: counts stay exact as float32 up to 2^24.
LEAPFROG_STEPS = (1, 2**24)


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
    if abs(value) >= 1e16:
        return f"{value:.2g}"
    return str(int(value)) if value.is_integer() else str(value)


def _outside(value: float, low: float | None, high: float | None) -> bool:
    if low is not None and (value <= low if isinstance(low, Exclusive) else value < low):
        return True
    return high is not None and (value >= high if isinstance(high, Exclusive) else value > high)


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str | None = None,
    aliases: tuple[str, ...] = (),
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    resumable: bool = False,
    action: str | None = None,
    cli: bool = True,
    bounds: tuple[float | None, float | None] | None = None,
) -> Any:
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
    return dataclasses.field(
        default=default,
        metadata={
            "help": help,
            "flag": flag,
            "aliases": tuple(aliases),
            "choices": choices,
            "metavar": metavar,
            "resumable": resumable,
            "action": action,
            "cli": cli,
            "bounds": bounds,
        },
    )


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
        raise ConfigError(
            f"{name} {value!r} is not a duration; allowed: seconds (90) or numbers "
            "with units d, h, m (min), s, such as 90s, 30m, 2h, 1h30m"
        )
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


def resumable_settings(cls: type) -> tuple[str, ...]:
    """The fields of the Config ``cls`` declared ``setting(..., resumable=True)``: those a
    resume may change, in field order. A method's Config and a recipe's settings (a composite
    run's :class:`~bnnkit.runs.composite.Recipe`) both say it this one way.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass(frozen=True)
        ... class Example:
        ...     num_samples: int = setting(200, help="kept draws", resumable=True)
        ...     seed: int = setting(0, help="seed")
        >>> resumable_settings(Example)
        ('num_samples',)
    """
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("resumable"))


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


def _kinds(hint: Any) -> tuple[set[type], bool]:
    """The basic types a field's annotation allows, and whether ``None`` is allowed."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
    else:
        args = (hint,)
    kinds = {a for a in args if a in (bool, int, float, str)}
    return kinds, type(None) in args


_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _typed(cls: type, field: dataclasses.Field, value: Any, hint: Any) -> Any:
    """``value`` as the field's type allows it (NumPy scalars and 0-d NumPy or JAX arrays of
    numbers as Python numbers, integers of a real field as floats), or a one-line refusal."""
    kinds, optional = _kinds(hint)
    if not kinds or (value is None and optional):
        return value
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        value = value.item()
    elif getattr(value, "shape", None) == () and getattr(
        getattr(value, "dtype", None), "kind", None
    ) in ("b", "i", "u", "f"):
        value = value.item()  # jnp.float32(1e-3) is such an array
    if (
        field.metadata.get("action") == "append"
        and isinstance(value, (list, tuple))
        and all(isinstance(v, str) for v in value)
    ):
        return value  # a repeatable flag's values, joined by the Config itself
    if isinstance(value, bool):
        ok = bool in kinds
    elif isinstance(value, int):
        ok = int in kinds or float in kinds
        if ok and int not in kinds:
            value = float(value)
    elif isinstance(value, float):
        ok = float in kinds
    elif isinstance(value, str):
        ok = str in kinds
    else:
        ok = False
    if not ok:
        words = [_WORDS[k] for k in (bool, int, float, str) if k in kinds]
        if int in kinds and float in kinds:
            words.remove("an integer")
        if optional:
            words.append("None")
        low, high = field.metadata.get("bounds") or (None, None)
        if int in kinds and high is None:
            high = MAX_INT32
        where = (
            f" {_allowed(low, high)}"
            if (low is not None or high is not None) and (int in kinds or float in kinds)
            else ""
        )
        raise ConfigError(
            f"{field.name}={shown(value)} ({flag(cls, field.name)}) is "
            f"{type_words(value)}; allowed: {' or '.join(words)}{where}"
        )
    return value


def check_numbers(config: Any) -> None:
    """Every value of a Config of the type its field declares, every number finite, and
    within the ``bounds`` its field declares (an integer without a declared upper bound:
    at most :data:`MAX_INT32`).

    Called once by each Config's ``__post_init__``, before anything else reads the values, so
    the command line and Python users get the same one-line refusal before anything runs.
    NumPy scalars are stored as the Python numbers they hold (so the Config stays JSON).

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
    hints = field_types(cls)
    for field in dataclasses.fields(cls):
        value = getattr(config, field.name)
        typed = _typed(cls, field, value, hints[field.name])
        if typed is not value:
            object.__setattr__(config, field.name, typed)
            value = typed
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{flag(cls, field.name)} {value} must be a finite number")
        low, high = field.metadata.get("bounds") or (None, None)
        if isinstance(value, int) and high is None:
            high = MAX_INT32
        if _outside(value, low, high):
            raise ConfigError(
                f"{flag(cls, field.name)} {value} out of range; allowed: {_allowed(low, high)}"
            )


def check_dtype(config: Any, dtype: Any) -> None:
    """Every real number of a Config representable in the run's ``dtype``: not beyond its
    largest value (it would become inf) and, unless 0, not below its smallest normal one (it
    would become 0: XLA flushes subnormals).

    Called by the run driver once the dtype is known (float32 unless the problem asks for
    float64), and by :class:`~bnnkit.problem.ProblemConfig` for its own numbers.

    Raises:
        ConfigError: naming the flag, the value and the range the dtype allows.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Example:
        ...     weight_decay: float = setting(1.0, help="λ", bounds=(0, None))
        >>> check_dtype(Example(weight_decay=1e40), np.float64)
        >>> check_dtype(Example(weight_decay=1e40), np.float32)
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --weight-decay 1e+40 is beyond float32, ... (it would become
        inf); allowed: 0..3.4e+38 (a float64 run allows up to 1.8e+308)
    """
    cls = type(config)
    hints = field_types(cls)
    for field in dataclasses.fields(cls):
        value = getattr(config, field.name)
        if float not in _kinds(hints[field.name])[0]:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        check_representable(
            flag(cls, field.name), value, dtype, field.metadata.get("bounds") or (None, None)
        )


def check_representable(
    name: str, value: float, dtype: Any, bounds: tuple[float | None, float | None] = (None, None)
) -> None:
    """A real number as ``dtype`` holds it: refused when it would become inf or 0.

    Args:
        name: what the value is, for the message (a flag, ``"prior 'laplace': scale"``).
        value: the number.
        dtype: the run's floating dtype.
        bounds: the range the value's setting declares, shown with the dtype's.

    Raises:
        ConfigError: naming ``name``, the value and the range.
    """
    info = np.finfo(dtype)
    size = abs(float(value))
    if size <= float(info.max) and (size == 0 or size >= float(info.tiny)):
        return
    big = size > float(info.max)
    low, high = bounds
    wide = np.finfo(np.float64)
    if big:
        high = float(info.max) if high is None else min(float(high), float(info.max))
        limit = f"up to {float(wide.max):.2g}"
    else:
        limit = f"down to {float(wide.tiny):.2g}"
    low_text = "" if big else f"|x| >= {float(info.tiny):.2g} or 0"
    allowed = _allowed(low, high) if big else low_text
    more = "" if info.dtype == np.float64 else f" (a float64 run allows {limit})"
    raise ConfigError(
        f"{name} {value:g} is beyond {info.dtype}, in which the run computes "
        f"(it would become {'inf' if big else '0'}); allowed: {allowed}{more}"
    )
