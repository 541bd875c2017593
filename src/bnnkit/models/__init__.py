"""Networks by name; see :mod:`bnnkit.models.registry`."""

from bnnkit.models import cnn_lstm, lenet, mlp, resnet  # noqa: F401  (each registers its models)
from bnnkit.models.registry import (
    ALIASES,
    MODELS,
    Model,
    ModelSpec,
    allowed_names,
    canonical_name,
    check_compatible,
    dropout_names,
    get,
    num_params,
    register,
)

__all__ = [
    "ALIASES",
    "MODELS",
    "Model",
    "ModelSpec",
    "allowed_names",
    "canonical_name",
    "check_compatible",
    "dropout_names",
    "get",
    "num_params",
    "register",
]
