"""Which check each argument of each public entry point gets (:data:`ENTRY_POINTS`), and
:func:`check_call`, which an entry point calls first thing on its ``locals()``.

The checks themselves, one per kind of value, are :mod:`bnnkit.arguments`'; those that know
bnnkit's own types (a problem, a method's Config) are here, above the modules that define them.
The entry points below those modules (building a problem, loading a dataset) keep their rows
beside them and check with :func:`bnnkit.arguments.check_arguments`; the table holds them too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bnnkit import data
from bnnkit import problem as problem_lib
from bnnkit.arguments import (
    callable_argument,
    check_arguments,
    count_argument,
    flag_argument,
    number_argument,
    passed_on,
    path_argument,
    positions_argument,
    refuse,
    text_argument,
)
from bnnkit.arguments import with_options as _optional
from bnnkit.errors import ArgumentError
from bnnkit.inference.base import RunSettings


def problem_argument(
    value: Any,
    name: str = "problem",
    *,
    where: str = "",
    optional: bool = False,
    built_only: bool = False,
) -> Any:
    """A :class:`~bnnkit.problem.ProblemConfig` or a built :class:`~bnnkit.problem.Problem`
    (only the latter with ``built_only``); ``None`` where ``optional``.

    Example:
        >>> problem_argument("yacht_0", where="bnnkit.run")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ArgumentError: bnnkit.run: problem='yacht_0' is a str; allowed: \
bnnkit.ProblemConfig('yacht_0', MODEL) or a bnnkit.Problem (bnnkit.Problem.from_arrays)
    """
    kinds = (
        (problem_lib.Problem,) if built_only else (problem_lib.Problem, problem_lib.ProblemConfig)
    )
    if (value is None and optional) or isinstance(value, kinds):
        return value
    config = (
        ""
        if built_only
        else f"bnnkit.ProblemConfig({value!r}, MODEL) or "
        if isinstance(value, str)
        else "a bnnkit.ProblemConfig(DATASET, MODEL) or "
    )
    allowed = f"{config}a bnnkit.Problem (bnnkit.Problem.from_arrays)"
    if optional:
        allowed += (
            " or None (the run's own)"
            if built_only
            else " or None (the problem of the run the config starts from)"
        )
    refuse(value, name, allowed, where=where)


def config_argument(value: Any, name: str = "config", *, where: str = "") -> Any:
    """A method's Config instance (``bnnkit.HMC(...)``, ``bnnkit.SGD(...)``, ...).

    Example:
        >>> from bnnkit.inference import hmc
        >>> config_argument(hmc.Config, where="bnnkit.run")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ArgumentError: bnnkit.run: config=bnnkit.HMC is a class, not an \
instance; allowed: a method's Config with its settings, such as bnnkit.HMC(step_size=..., \
trajectory_len=...)
    """
    if isinstance(value, RunSettings):
        return value
    refuse(
        value,
        name,
        "a method's Config with its settings, such as bnnkit.HMC(step_size=..., "
        "trajectory_len=...)",
        where=where,
    )


#: Each public entry point's arguments and the check each gets (``where`` is the key, the
#: public name). Every parameter of the entry point's signature has a row:
#: :func:`~bnnkit.arguments.check_arguments` refuses to skip one, and
#: ``tests/test_entry_points.py`` holds each row set to its signature.
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
        "trust_model": _optional(text_argument, optional=True),
    },
    "bnnkit.export_samples": {
        "run_dir": _optional(path_argument),
        "out": _optional(path_argument),
        "trust_model": _optional(text_argument, optional=True),
    },
    "bnnkit.load_chains": {
        "run_dir": _optional(path_argument),
        "like": _optional(passed_on),  # any pytree; its leaves are compared with the stored
    },
    "bnnkit.build_problem": problem_lib.BUILD_CHECKS,
    "bnnkit.load_dataset": data.LOAD_CHECKS,
}


def _alpha(value: Any, name: str, where: str) -> float | None:
    """A miscoverage level: a finite number (:func:`number_argument`) in (0, 1); ``None`` for
    none. A value refused as a number is refused as a level, saying what a level is.

    Example:
        >>> _alpha(1.5, "conformal", "bnnkit.evaluate")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ArgumentError: bnnkit.evaluate: conformal=1.5 is outside (0, 1); \
allowed: a miscoverage level α in (0, 1) (0.1 for 90 % coverage) or None
    """
    allowed = "a miscoverage level α in (0, 1) (0.1 for 90 % coverage)"
    try:
        alpha = number_argument(value, name, where=where, optional=True)
    except ArgumentError as err:  # the same refusal, saying what a level is
        raise ArgumentError(where, name, err.given, allowed, " or None") from None
    if alpha is not None and not 0 < alpha < 1:
        refuse(value, name, allowed, where=where, what="outside (0, 1)", optional=True)
    return alpha


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
        bnnkit.errors.ArgumentError: bnnkit.export_samples: out=3 is an int; allowed: a path (a \
str or an os.PathLike such as pathlib.Path)
    """
    check_arguments(where, arguments, ENTRY_POINTS[where])
