"""Networks by name; see :mod:`bnnkit.models.registry`."""

from bnnkit.models import mlp  # noqa: F401  (registers the MLPs)
from bnnkit.models.registry import (
    MODELS,
    Model,
    ModelSpec,
    check_compatible,
    get,
    num_params,
    register,
)

__all__ = ["MODELS", "Model", "ModelSpec", "check_compatible", "get", "num_params", "register"]
