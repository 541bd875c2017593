"""Subcommands of the ``bnnkit`` CLI, collected in :data:`COMMANDS`.

A command is two functions: ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code).
Every method of :data:`bnnkit.inference.METHODS` gets its command from its Config
(:mod:`bnnkit.commands.method`); the others have a module each. Commands raise
:class:`bnnkit.errors.ConfigError` for bad input; :mod:`bnnkit.cli` prints its one-line message
and exits with code 2.

A command module imports what it uses at its top, JAX and the methods included: the parser is
built from every method's Config, so it imports them anyway, and importing them only inside
``run()`` saves no measurable start-up time (docs/performance.md, "Command-line start-up").
What :mod:`bnnkit.cli` imports before it sets the number of CPU devices
(:mod:`bnnkit.cpu_devices`), this package and the modules ``budget``, ``command``,
``config_file`` and ``flags``, must not start JAX: there the methods are imported inside the
functions that need them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bnnkit.commands.command import Command

__all__ = [
    "COMMANDS",
    "COMMAND_GROUPS",
    "GROUPS",
    "OTHER_COMMANDS",
    "docs_page",
    "groups",
]


#: The commands that run no method, by group, in ``bnnkit --help``'s order; each is the
#: ``COMMAND`` of the module named after it. The methods' group comes from ``METHODS``.
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "analysis": (
        "reference",
        "evaluate",
        "convergence",
        "surface",
        "shift",
        "prune",
        "prior-predictive",
        "experiment",
        "paper",
        "report",
    ),
    "data": ("datasets", "models"),
    "runs": ("samples", "verify"),
}
#: Each group's heading in ``bnnkit --help`` and in the docs.
GROUPS: dict[str, str] = {
    "methods": "methods",
    "analysis": "analysis",
    "data": "data and models",
    "runs": "run management",
}
#: The commands that run no method. They never join the processes of a distributed run.
OTHER_COMMANDS: tuple[str, ...] = tuple(name for names in COMMAND_GROUPS.values() for name in names)


def groups() -> dict[str, tuple[str, ...]]:
    """Every command by group: the methods of ``METHODS`` first, then :data:`COMMAND_GROUPS`.

    Example:
        >>> all_groups = groups()
        >>> list(all_groups) == list(GROUPS), "hmc" in all_groups["methods"]
        (True, True)
    """
    # Here, not at the top: the methods start JAX, which must wait for bnnkit.cpu_devices.
    from bnnkit.inference import METHODS

    return {"methods": tuple(METHODS), **COMMAND_GROUPS}


def docs_page(name: str) -> str:
    """The docs page of command ``name``, relative to ``docs/``.

    Example:
        >>> docs_page("hmc"), docs_page("surface")
        ('reference/methods/hmc.md', 'guides/surface.md')
    """
    return COMMANDS()[name].docs


def _load() -> dict[str, Command]:
    # Here, not at the top: the methods start JAX, which must wait for bnnkit.cpu_devices; the
    # other commands' modules are imported by name for the same reason.
    from bnnkit.commands.method import method_command
    from bnnkit.inference import METHODS

    return {
        **{name: method_command(name, module) for name, module in METHODS.items()},
        **{
            name: importlib.import_module(f"bnnkit.commands.{name.replace('-', '_')}").COMMAND
            for name in OTHER_COMMANDS
        },
    }


COMMANDS: Callable[[], dict[str, Command]] = _load
