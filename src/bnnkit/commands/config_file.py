"""``--config FILE``: any command's flags from a TOML file, or a run's settings from its run.json.

A TOML file holds one ``key = value`` per flag, the key being the flag without its dashes, in
either spelling (``step_size`` or ``step-size``; aliases too, e.g. ``dataset_name``)::

    dataset = "yacht_0"
    model = "mlp_regression_small"
    noise_std = 0.35
    step_size = 1e-3
    num_iterations = 200
    layer_prior = ["Dense_0=laplace:scale=0.1"]     # a repeatable flag takes a list

Switches take ``true``/``false`` under either name (``progress = false`` or
``no_progress = true``). Flags given on the command line override the file. A ``run.json``
reproduces the run it describes: its resolved problem and method settings (``--dir`` still
comes from the command line). ``--print-config`` prints the resolved settings in this format.

Example:
    >>> print(to_toml({"dataset": "yacht_0", "step_size": 1e-3, "float64": False,
    ...                "subset_train_to": None}))
    dataset = "yacht_0"
    step_size = 0.001
    float64 = false
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from bnnkit.errors import ConfigError
from bnnkit.storage import parse_json

FLAG = "--config"


def config_path(argv: list[str]) -> str | None:
    """The value of ``--config`` in ``argv`` (the last one if repeated), or ``None``."""
    path = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == FLAG and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith(FLAG + "="):
            path = arg[len(FLAG) + 1 :]
    return path


def read(path: str | os.PathLike, command: str, *, problem: bool = True) -> dict[str, Any]:
    """The settings a config file gives ``bnnkit COMMAND``, keyed as written.

    Args:
        path: a TOML file, or a run directory's ``run.json`` (or the directory itself).
        command: the command the settings are for (a run.json must be a run of it).
        problem: the command takes problem flags (a run.json's problem is then read too).

    Raises:
        ConfigError: a missing or unreadable file, invalid TOML or JSON, tables in the TOML
            file, or a run.json of another method.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "run.json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ConfigError(f"{FLAG} {path!r} does not exist") from None
    except OSError as err:
        raise ConfigError(f"{FLAG} {path!r} cannot be read: {err.strerror}") from None
    if path.endswith(".json"):
        return _from_record(path, raw, command, problem=problem)
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, a dependency there
        import tomli as tomllib
    try:
        values = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{FLAG} {path!r} is not valid TOML: {err}") from None
    tables = [k for k, v in values.items() if isinstance(v, Mapping)]
    if tables:
        raise ConfigError(
            f"{FLAG} {path!r}: [{tables[0]}] is a table; allowed: one "
            "key = value per flag at the top level"
        )
    return values


def _from_record(path: str, raw: bytes, command: str, *, problem: bool) -> dict[str, Any]:
    # Here, not at the top: the methods start JAX, which must wait for bnnkit.cpu_devices.
    from bnnkit.inference.base import RunSettings

    record = parse_json(raw, f"{FLAG} {path!r}")
    if not isinstance(record, dict) or not isinstance(record.get("method_config"), dict):
        raise ConfigError(
            f"{FLAG} {path!r} is no run.json of bnnkit (no method_config); "
            "allowed: a TOML file or a run directory's run.json"
        )
    if record.get("method") != command:
        raise ConfigError(
            f"{FLAG} {path!r} is a {record.get('method')!r} run; reproduce it "
            f"with bnnkit {record.get('method')} {FLAG} {path}"
        )
    values = dict(record["problem"]) if problem and isinstance(record.get("problem"), dict) else {}
    values.update(RunSettings.current_names(record["method_config"]))
    return values


def apply(parser: argparse.ArgumentParser, values: Mapping[str, Any], source: str) -> None:
    """Make ``values`` the defaults of ``parser``'s flags, so the command line overrides them.

    Raises:
        ConfigError: a key that names no flag of the command, or a value of the wrong kind.
    """
    flags: dict[str, tuple[argparse.Action, str | None]] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "config", "print_config"):
            continue
        for option in action.option_strings:
            flags[option.lstrip("-").replace("-", "_")] = (action, option)
        flags.setdefault(action.dest, (action, None))
    defaults: dict[str, Any] = {}
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in flags:
            raise ConfigError(
                f"{source}: unknown setting {key!r}; allowed: the flags of this "
                "command without their dashes (see --help)"
            )
        action, option = flags[name]
        defaults[action.dest] = _value(action, option, name, value, source)
        action.required = False
    parser.set_defaults(**defaults)


def _value(action: argparse.Action, option: str | None, name: str, value: Any, source: str) -> Any:
    where = f"{source}: {name} = {value!r}"
    if value is None:  # a run.json's unset setting
        return None
    if action.nargs == 0:  # a switch: store_true / store_false
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false")
        negated = option is not None and action.const is False
        return (not value) if negated else value
    if isinstance(action, argparse._AppendAction) or action.nargs in ("+", "*"):
        items = value if isinstance(value, list) else [value]
        return [_scalar(action, item, where) for item in items]
    if isinstance(value, (list, dict)):
        raise ConfigError(f"{where} must be a single value")
    return _scalar(action, value, where)


def _scalar(action: argparse.Action, value: Any, where: str) -> Any:
    kind = action.type or str
    if not isinstance(value, (bool, int, float, str)):
        # TOML's dates and times, for one: no flag takes them.
        wanted = {int: "an integer", float: "a number"}.get(kind, "a string")
        raise ConfigError(f"{where} is a {type(value).__name__}; allowed: {wanted}")
    if isinstance(value, bool):
        wanted = {int: "an integer", float: "a number"}.get(kind, "a string")
        raise ConfigError(f"{where} must be {wanted}, not true/false")
    if kind is int and not (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    ):
        raise ConfigError(f"{where} must be an integer")
    if kind in (int, float) and isinstance(value, str):
        raise ConfigError(f"{where} must be a number, not a string")
    converted = kind(value)
    if action.choices is not None and converted not in action.choices:
        raise ConfigError(f"{where}; allowed: {', '.join(map(str, action.choices))}")
    return converted


def to_toml(values: Mapping[str, Any]) -> str:
    """Settings as TOML ``key = value`` lines (``None`` values, which TOML lacks, left out)."""
    return "\n".join(
        f"{key} = {_toml_value(value)}" for key, value in values.items() if value is not None
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)
