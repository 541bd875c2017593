"""Prior specs people type, and the same from a TOML table.

A spec is ``name`` or ``name:key=value,key=value``; list values are written ``a/b/c``::

    gaussian                                  # σ² = 1/--weight-decay
    gaussian:scale=0.5
    scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025
    mixture:weights=0.2/0.8,scales=1/0.01
    student_t:df=3,scale=0.1
    hierarchical:concentration=2,scale=2

:func:`parse` checks the family and every parameter and returns a frozen :class:`Spec` whose
``str`` is the canonical spec (parameters in the family's order, numbers in their shortest
exact form), so ``parse(str(spec)) == spec``. Layer rules are ``PATTERN=SPEC``
(``Dense_2=gaussian:scale=0.5``) and several are joined with ``;``.

A TOML file holds the same in a ``[prior]`` table::

    [prior]
    family = "laplace"
    scale = 0.1

    [prior.bias]
    family = "gaussian"
    scale = 1.0

    [prior.layers.Dense_2]           # or [prior.layers."Dense_2/kernel"]
    family = "gaussian"
    scale = 0.5

    [prior.noise]
    family = "gamma"
    concentration = 0.5
    rate = 1.0
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from bnnkit.errors import ConfigError
from bnnkit.priors.constraints import Value, check_values, format_value
from bnnkit.priors.families import ELEMENTWISE
from bnnkit.priors.hierarchical import HIERARCHICAL
from bnnkit.priors.noise import NOISE

WEIGHT_FAMILIES = {cls.name: cls for cls in (*ELEMENTWISE, *HIERARCHICAL)}
NOISE_FAMILIES = {cls.name: cls for cls in NOISE}
_REGISTRIES = {"weight": WEIGHT_FAMILIES, "noise": NOISE_FAMILIES}
RULE_SEPARATOR = ";"


#: The prior fields of a problem's settings (:class:`~bnnkit.problem.ProblemConfig`'s), named
#: once: a spec for every weight and bias, one for the biases, the layer rules, and one for the
#: noise std. :func:`load_toml` returns them; the flags, the TOML table and the plain-Gaussian
#: test of a problem read them from here.
PRIOR_FIELDS = ("prior", "bias_prior", "layer_priors", "noise_prior")


@dataclasses.dataclass(frozen=True)
class Spec:
    """A checked prior spec.

    Attributes:
        family: the family's name (``"laplace"``).
        params: ``(name, value)`` pairs as given, in the family's order (defaults not filled).
        kind: ``"weight"`` for network parameters, ``"noise"`` for the regression noise std.

    Example:
        >>> spec = parse("student_t:scale=0.1,df=3")
        >>> str(spec)
        'student_t:df=3,scale=0.1'
        >>> parse(str(spec)) == spec
        True
    """

    family: str
    params: tuple[tuple[str, Value], ...] = ()
    kind: str = "weight"

    def __str__(self) -> str:
        if not self.params:
            return self.family
        return self.family + ":" + ",".join(f"{k}={format_value(v)}" for k, v in self.params)

    @property
    def values(self) -> dict[str, Value]:
        return dict(self.params)

    def build(self, *, weight_decay: float = 1.0) -> Any:
        """The family object; ``weight_decay`` is the variance 1/λ of a bare ``gaussian``."""
        cls = _REGISTRIES[self.kind][self.family]
        values = check_values(self.family, cls.PARAMS, self.values)
        return cls.from_values(values, weight_decay=weight_decay)


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """``PATTERN=SPEC``: the prior of the parameters whose path matches PATTERN.

    The path of a parameter is its flax path without the ``params`` collection, e.g.
    ``Dense_0/kernel``; PATTERN is a shell-style glob matched against the whole path or any
    leading part of it, so ``Dense_0`` covers ``Dense_0/kernel`` and ``Dense_0/bias``.

    Example:
        >>> str(parse_layer_rule("Dense_2 = gaussian:scale=0.50"))
        'Dense_2=gaussian:scale=0.5'
    """

    pattern: str
    spec: Spec

    def __str__(self) -> str:
        return f"{self.pattern}={self.spec}"


def families(kind: str = "weight") -> tuple[str, ...]:
    """The family names of a kind (``"weight"`` or ``"noise"``)."""
    return tuple(_REGISTRIES[kind])


def _registry(family: str, kind: str) -> type:
    registry = _REGISTRIES[kind]
    if family not in registry:
        what = "noise prior" if kind == "noise" else "prior"
        raise ConfigError(f"unknown {what} family {family!r}; allowed: {', '.join(registry)}")
    return registry[family]


def from_values(family: str, raw: Mapping[str, Any], kind: str = "weight") -> Spec:
    """A checked :class:`Spec` from a family name and raw values (text, numbers or lists).

    Raises:
        ConfigError: unknown family, unknown/missing parameter, or an invalid value.
    """
    cls = _registry(family, kind)
    values = check_values(family, cls.PARAMS, dict(raw))
    cls.from_values(values)  # constraints between parameters (e.g. mixture list lengths)
    given = tuple((p.name, values[p.name]) for p in cls.PARAMS if p.name in raw)
    return Spec(family=family, params=given, kind=kind)


def parse(text: str | Spec, kind: str = "weight") -> Spec:
    """Parse ``name`` or ``name:key=value,...`` into a checked :class:`Spec`.

    Args:
        text: the spec (a :class:`Spec` is returned as is).
        kind: ``"weight"`` (network parameters) or ``"noise"`` (regression noise std).

    Raises:
        ConfigError: one line naming the unknown family (listing all), or the unknown,
            missing, repeated or invalid parameter and what it allows.

    Example:
        >>> parse("scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025").values
        {'pi': 0.5, 'sigma1': 1.0, 'sigma2': 0.0025}
    """
    if isinstance(text, Spec):
        return text
    family, _, rest = str(text).strip().partition(":")
    family = family.strip()
    if not family:
        raise ConfigError(
            f"empty prior spec {text!r}; allowed: NAME or NAME:key=value,... with "
            f"NAME one of {', '.join(_REGISTRIES[kind])}"
        )
    cls = _registry(family, kind)
    raw: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not key or not value:
            allowed = ", ".join(p.allowed for p in cls.PARAMS) or "no parameters"
            raise ConfigError(f"prior {family!r}: {item!r} is not key=value; allowed: {allowed}")
        if key in raw:
            raise ConfigError(f"prior {family!r}: {key} given twice; allowed: once")
        raw[key] = value
    return from_values(family, raw, kind)


def parse_layer_rule(text: str | LayerRule) -> LayerRule:
    """Parse ``PATTERN=SPEC`` (split at the first ``=``).

    Raises:
        ConfigError: no ``=``, an empty pattern, or a bad spec.
    """
    if isinstance(text, LayerRule):
        return text
    pattern, eq, spec = (s.strip() for s in str(text).partition("="))
    if not eq or not pattern or RULE_SEPARATOR in pattern or ":" in pattern:
        raise ConfigError(
            f"layer prior {text!r} must be PATTERN=SPEC, e.g. Dense_2=gaussian:scale=0.5"
        )
    return LayerRule(pattern, parse(spec))


def parse_layer_rules(value: str | Sequence[str | LayerRule] | None) -> tuple[LayerRule, ...]:
    """Rules from ``"A=spec;B=spec"`` or a sequence of ``"A=spec"``; ``None`` gives none."""
    if value is None:
        return ()
    items = value.split(RULE_SEPARATOR) if isinstance(value, str) else value
    return tuple(parse_layer_rule(item) for item in items if str(item).strip())


def canonical(text: str | Spec | None, kind: str = "weight") -> str | None:
    """The canonical form of a spec (``None`` stays ``None``)."""
    return None if text is None else str(parse(text, kind))


def canonical_layer_rules(value: str | Sequence[str] | None) -> str | None:
    """Layer rules as one canonical ``;``-joined string, ``None`` when there are none.

    One string (not a list) so that a config stored as JSON reads back equal to itself.
    """
    rules = parse_layer_rules(value)
    return RULE_SEPARATOR.join(str(r) for r in rules) if rules else None


def numbers(
    prior: str | None,
    bias_prior: str | None = None,
    layer_priors: str | None = None,
    noise_prior: str | None = None,
) -> list[tuple[str, float]]:
    """Every number of a problem's prior specs, named as a message would name it.

    Example:
        >>> numbers("laplace:scale=0.1", layer_priors="Dense_0=student_t:df=3,scale=2")
        [("prior 'laplace': scale", 0.1), ("prior 'student_t': df", 3.0),
         ("prior 'student_t': scale", 2.0)]
    """
    specs = [parse(text) for text in (prior, bias_prior) if text is not None]
    specs += [rule.spec for rule in parse_layer_rules(layer_priors)]
    if noise_prior is not None:
        specs.append(parse(noise_prior, "noise"))
    out = []
    for spec in specs:
        for name, value in spec.params:
            for number in value if isinstance(value, tuple) else (value,):
                out.append((f"prior {spec.family!r}: {name}", float(number)))
    return out


def _table_spec(table: Any, where: str, kind: str) -> Spec:
    if not isinstance(table, Mapping) or not isinstance(table.get("family"), str):
        raise ConfigError(
            f'{where} needs family = "NAME"; allowed NAME: {", ".join(_REGISTRIES[kind])}'
        )
    values = {k: v for k, v in table.items() if k != "family"}
    return from_values(table["family"], values, kind)


def load_toml(path: str | os.PathLike) -> dict[str, str | None]:
    """Read a ``[prior]`` table from a TOML file.

    Returns:
        Each of :data:`PRIOR_FIELDS`: a canonical string (or ``None``), the form
        :class:`~bnnkit.problem.ProblemConfig` stores.

    Raises:
        ConfigError: a missing or unreadable file, invalid TOML, no ``[prior]`` table, or any
            bad family or parameter (named with its table).

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/priors.toml"
        >>> with open(path, "w") as f:
        ...     _ = f.write('[prior]\\nfamily = "laplace"\\nscale = 0.1\\n'
        ...                 '[prior.bias]\\nfamily = "gaussian"\\nscale = 1\\n')
        >>> load_toml(path)
        {'prior': 'laplace:scale=0.1', 'bias_prior': 'gaussian:scale=1', 'layer_priors': None,
         'noise_prior': None}
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, a dependency there
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"prior file {os.fspath(path)!r} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"prior file {os.fspath(path)!r} cannot be read as TOML: {' '.join(str(err).split())}"
        ) from None
    table = data.get("prior")
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"prior file {os.fspath(path)!r} has no [prior] table; allowed: "
            '[prior] with family = "NAME" and its parameters'
        )
    sub = {"bias", "layers", "noise"}
    own = {k: v for k, v in table.items() if k not in sub}
    out: dict[str, str | None] = dict.fromkeys(PRIOR_FIELDS)
    if own:
        out["prior"] = str(_table_spec(own, "[prior]", "weight"))
    if "bias" in table:
        out["bias_prior"] = str(_table_spec(table["bias"], "[prior.bias]", "weight"))
    if "noise" in table:
        out["noise_prior"] = str(_table_spec(table["noise"], "[prior.noise]", "noise"))
    layers = table.get("layers", {})
    if not isinstance(layers, Mapping):
        raise ConfigError(
            "[prior.layers] must hold one table per layer pattern, e.g. [prior.layers.Dense_2]"
        )
    rules = [
        LayerRule(pattern, _table_spec(t, f"[prior.layers.{pattern}]", "weight"))
        for pattern, t in layers.items()
    ]
    out["layer_priors"] = canonical_layer_rules([str(r) for r in rules]) if rules else None
    return out
