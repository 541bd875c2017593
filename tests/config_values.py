"""Configs of any registered method built from their required settings alone.

Tests that iterate over :data:`bnnkit.inference.METHODS` (every numeric setting's limits, a
divergence per method) need a valid Config of each method without a row per method: each
required setting takes a small value by its name here, so a new method is covered as soon as
its required settings are names this table knows (it fails naming the one it does not).
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: A value for every required setting of the registered Configs, by name.
REQUIRED: dict[str, Any] = {
    "init_step_size": 1e-3,
    "num_epochs": 2,
    "batch_size": 16,
    "step_size": 1e-2,
    "trajectory_len": 0.05,
    "num_members": 2,
    "num_burn_in": 1,
    "dataset": "yacht_0",
    "model": "linear",
}


def required(cls: type) -> dict[str, Any]:
    """The values of ``cls``'s required settings (those without a default)."""
    values = {}
    for field in dataclasses.fields(cls):
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            assert field.name in REQUIRED, (
                f"{cls.__module__}.{cls.__name__}.{field.name} is required: give it a value in "
                "tests/config_values.py REQUIRED"
            )
            values[field.name] = REQUIRED[field.name]
    return values


def minimal(cls: type, **overrides: Any) -> Any:
    """``cls`` built from its required settings, with ``overrides``."""
    return cls(**{**required(cls), **overrides})
