"""Subcommands of the ``bnnkit`` CLI, collected in :data:`COMMANDS`.

A command is two functions: ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code).
Every method of :data:`bnnkit.inference.METHODS` gets its command from its Config
(:mod:`bnnkit.commands.method`); the others have a module each. Commands raise
:class:`bnnkit.errors.ConfigError` for bad input; :mod:`bnnkit.cli` prints its one-line message
and exits with code 2.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import NamedTuple


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: The commands that run no method, in ``bnnkit --help``'s order; each is the ``COMMAND`` of
#: the module named after it. They never join the processes of a distributed run.
OTHER_COMMANDS: tuple[str, ...] = ("reference", "prune", "evaluate", "samples", "verify", "models",
                                   "prior-predictive", "surface", "shift", "convergence",
                                   "experiment", "paper", "report", "datasets")


def _load() -> dict[str, Command]:
    # Imported when a command runs or --help is asked, not when bnnkit is imported.
    from bnnkit.commands.method import method_command
    from bnnkit.inference import METHODS

    return {
        **{name: method_command(name, module) for name, module in METHODS.items()},
        **{name: importlib.import_module(f"bnnkit.commands.{name.replace('-', '_')}").COMMAND
           for name in OTHER_COMMANDS},
    }


COMMANDS: Callable[[], dict[str, Command]] = _load
