"""Subcommands of the ``bnnkit`` CLI, one module each, collected in :data:`COMMANDS`.

A command is two functions: ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code).
Commands raise :class:`bnnkit.errors.ConfigError` for bad input; :mod:`bnnkit.cli` prints its
one-line message and exits with code 2. Adding a command touches its module and one line here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _load() -> dict[str, Command]:
    # Imported lazily so that `bnnkit --help` does not pay for importing JAX.
    from bnnkit.commands import (
        datasets,
        ensemble,
        evaluate,
        hmc,
        laplace,
        models,
        prior_predictive,
        prune,
        samples,
        sgd,
        sgmcmc,
        vi,
    )

    return {
        "hmc": hmc.COMMAND,
        "sgd": sgd.COMMAND,
        "ensemble": ensemble.COMMAND,
        "sgmcmc": sgmcmc.COMMAND,
        "vi": vi.COMMAND,
        "laplace": laplace.COMMAND,
        "prune": prune.COMMAND,
        "evaluate": evaluate.COMMAND,
        "samples": samples.COMMAND,
        "models": models.COMMAND,
        "prior-predictive": prior_predictive.COMMAND,
        "datasets": datasets.COMMAND,
    }


COMMANDS: Callable[[], dict[str, Command]] = _load
