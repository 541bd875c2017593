"""The parameters a prior family takes, the values each may hold, and one-line refusals.

Every family declares its parameters as a tuple of :class:`Param`; the spec parser, the TOML
loader and the families' constructors all check values through :meth:`Param.check`, so a bad
value gets the same message wherever it comes from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

from bnnkit.errors import ConfigError

# Kinds of value; lists are written ``a/b/c`` in a spec and as arrays in TOML.
POSITIVE = "positive"
UNIT_INTERVAL = "unit_interval"
REAL = "real"
POSITIVE_LIST = "positive_list"
SIMPLEX = "simplex"
REAL_LIST = "real_list"

LIST_SEPARATOR = "/"
# Mixture weights come from people typing decimals: accept a sum this close to 1.
SIMPLEX_TOLERANCE = 1e-6

_ALLOWED = {
    POSITIVE: "{name} > 0",
    UNIT_INTERVAL: "0 < {name} < 1",
    REAL: "{name} a finite number",
    POSITIVE_LIST: "{name} a '/'-separated list of numbers > 0",
    SIMPLEX: "{name} a '/'-separated list of numbers > 0 that sum to 1",
    REAL_LIST: "{name} a '/'-separated list of finite numbers",
}

Value = float | tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of a prior family.

    Attributes:
        name: the key in a spec (``scale`` in ``laplace:scale=0.1``).
        kind: one of :data:`POSITIVE`, :data:`UNIT_INTERVAL`, :data:`REAL`, or a list kind.
        default: value when the spec omits it.
        required: a spec without it is refused (otherwise the default, or nothing, is used).

    Example:
        >>> Param("scale", POSITIVE).check("laplace", "0.1")
        0.1
    """

    name: str
    kind: str
    default: Value | None = None
    required: bool = False

    @property
    def allowed(self) -> str:
        """What the parameter may hold, e.g. ``"scale > 0"``."""
        return _ALLOWED[self.kind].format(name=self.name)

    @property
    def is_list(self) -> bool:
        return self.kind in (POSITIVE_LIST, SIMPLEX, REAL_LIST)

    def check(self, family: str, raw: Any) -> Value:
        """``raw`` (text, a number, or a sequence for list kinds) as a valid value.

        Raises:
            ConfigError: not a number, or outside the allowed range; the message names the
                family, the parameter, the value and what is allowed.
        """
        if self.is_list:
            items = raw.split(LIST_SEPARATOR) if isinstance(raw, str) else raw
            if not isinstance(items, Sequence) or isinstance(items, str) or not items:
                self._refuse(family, raw)
            value = tuple(self._number(family, raw, item) for item in items)
            numbers = value
        else:
            value = self._number(family, raw, raw)
            numbers = (value,)
        if self.kind in (POSITIVE, POSITIVE_LIST, SIMPLEX) and not all(v > 0 for v in numbers):
            self._refuse(family, raw)
        if self.kind == UNIT_INTERVAL and not 0 < value < 1:
            self._refuse(family, raw)
        if self.kind == SIMPLEX and abs(sum(numbers) - 1) > SIMPLEX_TOLERANCE:
            self._refuse(family, raw)
        return value

    def _number(self, family: str, raw: Any, item: Any) -> float:
        if isinstance(item, bool):
            self._refuse(family, raw)
        try:
            number = float(item)
        except (TypeError, ValueError):
            self._refuse(family, raw)
        if not math.isfinite(number):
            self._refuse(family, raw)
        return number

    def _refuse(self, family: str, raw: Any) -> None:
        shown = format_value(raw) if isinstance(raw, (int, float, tuple, list)) else str(raw)
        raise ConfigError(f"prior {family!r}: invalid {self.name}={shown}; allowed: {self.allowed}")


class CheckedFamily:
    """A prior family whose constructor checks every declared parameter (mixin).

    Subclasses are frozen dataclasses declaring ``name`` and ``PARAMS``; Python users get the
    same refusals as the spec parser. A parameter left at ``None`` (an optional one not given)
    is not checked.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Scaled(CheckedFamily):
        ...     scale: float
        ...     name = "scaled"
        ...     PARAMS = (Param("scale", POSITIVE),)
        >>> Scaled.from_values({"scale": 2}).scale
        2.0
    """

    name: ClassVar[str]
    PARAMS: ClassVar[tuple[Param, ...]]

    def __post_init__(self) -> None:
        for p in self.PARAMS:
            value = getattr(self, p.name, None)
            if value is not None:
                object.__setattr__(self, p.name, p.check(self.name, value))

    @classmethod
    def from_values(cls, values: dict[str, Any], *, weight_decay: float = 1.0) -> CheckedFamily:
        """Build from checked spec values (``weight_decay`` only matters to ``gaussian``)."""
        del weight_decay
        return cls(**values)


def format_value(value: Any) -> str:
    """A number or list as a spec writes it: shortest exact decimal, lists joined by ``/``.

    Example:
        >>> format_value(3.0), format_value(0.0025), format_value((0.2, 0.8))
        ('3', '0.0025', '0.2/0.8')
    """
    if isinstance(value, (tuple, list)):
        return LIST_SEPARATOR.join(format_value(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def check_values(family: str, params: tuple[Param, ...], values: dict[str, Any]) -> dict:
    """Every given value checked, unknown names refused, required ones present; defaults added.

    Raises:
        ConfigError: an unknown or missing parameter, or an invalid value.
    """
    names = [p.name for p in params]
    for key in values:
        if key not in names:
            allowed = ", ".join(p.allowed for p in params) or "no parameters"
            raise ConfigError(f"prior {family!r} has no parameter {key!r}; allowed: {allowed}")
    out = {}
    for p in params:
        if p.name in values:
            out[p.name] = p.check(family, values[p.name])
        elif p.required:
            raise ConfigError(f"prior {family!r} needs {p.name}; allowed: {p.allowed}")
        elif p.default is not None:
            out[p.name] = p.default
    return out
