"""Which check each argument of each public entry point gets (:data:`ENTRY_POINTS`), and
:func:`check_call`, which an entry point calls first thing on its ``locals()``.

The checks themselves, one per kind of value, are :mod:`bnnkit.arguments`'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bnnkit.arguments import (
    callable_argument,
    config_argument,
    count_argument,
    flag_argument,
    number_argument,
    path_argument,
    positions_argument,
    problem_argument,
    refuse,
    text_argument,
)


def _optional(check: Callable[..., Any], **options: Any) -> Callable[[Any, str, str], Any]:
    return lambda value, name, where: check(value, name, where=where, **options)


#: Each public entry point's arguments and the check each gets (``where`` is the key).
ENTRY_POINTS: dict[str, dict[str, Callable[[Any, str, str], Any]]] = {
    "bnnkit.run": {
        "problem": _optional(problem_argument, optional=True),
        "config": _optional(config_argument),
        "run_dir": _optional(path_argument),
        "resume": _optional(flag_argument),
        "overwrite": _optional(flag_argument),
        "progress": _optional(flag_argument),
        "log_every": _optional(count_argument, optional=True),
        "shard": _optional(text_argument),
        "on_unit": _optional(callable_argument, optional=True),
    },
    "bnnkit.sample": {
        "log_density": _optional(callable_argument),
        "initial_positions": _optional(positions_argument),
        "config": _optional(config_argument),
        "run_dir": _optional(path_argument, optional=True),
        "resume": _optional(flag_argument),
        "overwrite": _optional(flag_argument),
        "name": _optional(text_argument, optional=True),
        "progress": _optional(flag_argument),
    },
    "bnnkit.evaluate": {
        "run_dir": _optional(path_argument),
        "reference": _optional(path_argument, optional=True),
        "reference_probs": _optional(path_argument, optional=True),
        "corruption": _optional(text_argument, optional=True),
        "severity": _optional(count_argument, optional=True),
        "calibrate": _optional(flag_argument),
        "conformal": lambda value, name, where: _alpha(value, name, where),
        "ood": _optional(text_argument, optional=True),
        "write": _optional(flag_argument),
        "problem": _optional(problem_argument, optional=True, built_only=True),
    },
    "bnnkit.export_samples": {
        "run_dir": _optional(path_argument),
        "out": _optional(path_argument),
    },
    "bnnkit.load_chains": {
        "run_dir": _optional(path_argument),
    },
    "bnnkit.build_problem": {
        "config": lambda value, name, where: _problem_config(value, name, where),
    },
    "bnnkit.load_dataset": {
        "name": _optional(text_argument),
    },
}


def _alpha(value: Any, name: str, where: str) -> float | None:
    """A miscoverage level: a number (:func:`number_argument`) in (0, 1)."""
    from bnnkit.posthoc import check_alpha

    alpha = number_argument(value, name, where=where, optional=True)
    if alpha is not None:
        check_alpha(alpha)
    return alpha


def _problem_config(value: Any, name: str, where: str) -> Any:
    from bnnkit.problem import ProblemConfig

    if isinstance(value, ProblemConfig):
        return value
    refuse(value, name, "a bnnkit.ProblemConfig(DATASET, MODEL)", where=where)


def check_call(where: str, arguments: Mapping[str, Any]) -> None:
    """Check an entry point's arguments by :data:`ENTRY_POINTS`; called first thing in it as
    ``check_call("bnnkit.run", locals())``.

    Args:
        where: the entry point, a key of :data:`ENTRY_POINTS`.
        arguments: its arguments by name (its ``locals()`` before anything else is bound).

    Raises:
        ConfigError: the first argument of a kind it does not take, in one line.

    Example:
        >>> check_call("bnnkit.export_samples", {"run_dir": "runs/hmc", "out": 3})
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: bnnkit.export_samples: out=3 is an int; allowed: a path (a \
str or an os.PathLike such as pathlib.Path)
    """
    for name, check in ENTRY_POINTS[where].items():
        check(arguments[name], name, where)
