"""Networks by name; see :mod:`bnnkit.models.registry`."""

from bnnkit.models import cnn_lstm, lenet, mlp, resnet  # noqa: F401  (each registers its models)
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
