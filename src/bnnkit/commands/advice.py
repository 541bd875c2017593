"""The verdict of a run of chains as the command line prints it: its advice in the flags of
the command that made the run.

The levels (:mod:`bnnkit.metrics.levels`) say what would help in the run's settings
(``num_samples``, ``members``, ``energy_var_end``...); each is spelt as the flag of the
command that made the run (:func:`bnnkit.command_flags.spelling`) and left out where that
command has none, so every flag a suggestion names is one that command takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bnnkit.command_flags import spelling
from bnnkit.metrics.levels import Verdict


def advice(found: Mapping[str, Any], command: str | None = None) -> list[str]:
    """A stored verdict's advice (``evaluate``'s ``levels``) in the flags of ``command``
    (default: the command that made the run, as the verdict records it)."""
    if "remedies" not in found:  # stored before remedies: as recorded
        return list(found.get("advice", ()))
    command = command or found.get("command")
    return Verdict.from_dict(found).advice(spelling(command))


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
