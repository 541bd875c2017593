"""The verdict of a run of chains as the command line prints it: its advice in the flags of
the command that made the run.

The levels (:mod:`bnnkit.metrics.levels`) say what would help in the run's settings
(``num_samples``, ``members``, ``energy_var_end``...). A command that makes a run (a method's,
or ``bnnkit reference``) spells a setting as the flag that its problem's and its Config's
flags store it under (``--num-samples``), the flags its parser is built from; a setting the
command has no flag for is left out of the sentence, so every flag a suggestion names is one
that command takes.

Example:
    >>> spell = flag_spelling("reference")
    >>> spell("num_samples"), spell("num_iterations"), spell("sampler")
    ('--num-samples', None, '--sampler')
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Mapping
from typing import Any

from bnnkit.commands.flags import add_config_arguments
from bnnkit.commands.problem_flags import add_problem_arguments
from bnnkit.experiments import reference
from bnnkit.inference import METHODS
from bnnkit.metrics.levels import Verdict


@functools.cache
def _flags(command: str) -> dict[str, str]:
    """Each setting ``bnnkit COMMAND`` takes, by the name its parser stores it under, and its
    long flag."""
    parser = argparse.ArgumentParser(add_help=False)
    config = reference.Config if command == "reference" else METHODS[command].Config
    if not getattr(config, "PROBLEM_FROM_SOURCE", False):  # as its command line: the source's
        add_problem_arguments(parser)
    add_config_arguments(parser, config)
    found = {}
    for action in parser._actions:
        long = [flag for flag in action.option_strings if flag.startswith("--")]
        if long and action.dest not in found:
            found[action.dest] = long[0]
    return found


def flag_spelling(command: str | None) -> Callable[[str], str | None]:
    """How ``bnnkit COMMAND`` spells a run's setting: its flag, ``None`` for one it does not
    take (for a command that makes no run, or none known, the setting's name as a flag)."""
    if command != "reference" and command not in METHODS:
        return lambda setting: "--" + setting.replace("_", "-")
    return _flags(command).get


def advice(found: Mapping[str, Any], command: str | None = None) -> list[str]:
    """A stored verdict's advice (``evaluate``'s ``levels``) in the flags of ``command``
    (default: the command that made the run, as the verdict records it)."""
    if "remedies" not in found:  # stored before remedies: as recorded
        return list(found.get("advice", ()))
    command = command or found.get("command")
    return Verdict.from_dict(found).advice(flag_spelling(command))


def line(found: Mapping[str, Any], command: str | None = None) -> str:
    """A stored verdict in one line, its advice in the flags of ``command`` (default: the
    command that made the run)."""
    return Verdict.from_dict(found).line(advice=advice(found, command))


def spelt(result: dict[str, Any]) -> dict[str, Any]:
    """An evaluation with its verdict's advice in the flags of the command that made the run,
    as ``--json`` prints it on the command line."""
    found = result.get("levels")
    if not found:
        return result
    return {**result, "levels": {**found, "advice": advice(found)}}
