"""A problem made from arrays in memory and a model given as an object.

:meth:`bnnkit.Problem.from_arrays` lets a Python user skip the catalog: NumPy arrays and a Flax
module (or an ``apply`` function with its parameters) become a :class:`~bnnkit.problem.Problem`
assembled exactly as a named dataset's (:func:`bnnkit.problem_assembly.assemble`). The arrays
get the checks of a user's ``.npz`` file, and the problem is named by their sha256
(:data:`ARRAYS_PREFIX`), so that a run on them records what it was made on: it stores the
arrays (:data:`DATA_FILE`) and the model's import path, and
:func:`bnnkit.problem.build_recorded` rebuilds the same problem in another process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from bnnkit import data, models
from bnnkit.arguments import array_argument
from bnnkit.data.npz import from_arrays as dataset_from_arrays
from bnnkit.errors import ConfigError
from bnnkit.models import imported
from bnnkit.priors.spec import PRIOR_FIELDS
from bnnkit.problem_config import ProblemConfig

#: The dataset name of a problem made from arrays in memory: ``arrays:`` and the first 16 hex
#: digits of the arrays' sha256, so runs on the same arrays compare equal and others do not.
ARRAYS_PREFIX = "arrays:"
#: Where a run made from arrays keeps them, in its run directory.
DATA_FILE = "data.npz"
#: The arrays :meth:`Problem.from_arrays` takes and a run stores (the validation pair optional).
ARRAY_NAMES = ("x_train", "y_train", "x_test", "y_test", "x_val", "y_val")
#: The settings :meth:`Problem.from_arrays` takes as keywords: the problem's, less those that
#: name data or a model (it is given them as objects).
ARRAY_SETTINGS = (
    "noise_std",
    "min_noise_std",
    "weight_decay",
    "temperature",
    "float64",
    "standardize",
    "subset_train_to",
    "chunk_size",
    *PRIOR_FIELDS,
)


def arrays_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """The sha256 of named arrays: each name, dtype, shape and bytes, in name order; the
    fingerprint a run on arrays records (equal arrays give equal digests, wherever they are).

    Example:
        >>> a = arrays_sha256({"x": np.zeros((2, 3), np.float32)})
        >>> a == arrays_sha256({"x": np.zeros((2, 3), np.float32)}), len(a)
        (True, 64)
        >>> a == arrays_sha256({"x": np.zeros((3, 2), np.float32)})
        False
    """
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def from_given(
    arrays: Mapping[str, Any],
    x_val: Any,
    y_val: Any,
    *,
    model: Any,
    likelihood: str | None,
    params: Any,
    settings: Mapping[str, Any],
) -> ArrayParts:
    """:meth:`Problem.from_arrays` on the values as the user gave them: the settings' names,
    the validation pair and each array's kind checked at the door; the parts a problem is
    assembled from (:func:`bnnkit.problem_assembly.assembled`)."""
    unknown = sorted(set(settings) - set(ARRAY_SETTINGS) - {"model_args"})
    if unknown:
        raise ConfigError(
            f"Problem.from_arrays got {', '.join(unknown)}; allowed settings: "
            f"{', '.join(ARRAY_SETTINGS)}"
        )
    if (x_val is None) != (y_val is None):
        raise ConfigError("Problem.from_arrays: give x_val and y_val together, or neither")
    given = {**arrays, "x_val": x_val, "y_val": y_val}
    # Kinds at the door; finiteness and shapes by the checks of a user's data file.
    checked = {
        k: array_argument(v, k, where="Problem.from_arrays")
        for k, v in given.items()
        if v is not None or k not in ("x_val", "y_val")
    }
    return array_parts(
        checked, model=model, likelihood=likelihood, params=params, settings=settings
    )


class ArrayParts(NamedTuple):
    """What a problem made from arrays is assembled from: its settings, its dataset, how its
    model is made (``None``: from its import path) and the arrays themselves."""

    config: ProblemConfig
    dataset: Any
    maker: Any
    arrays: dict[str, np.ndarray]


def array_parts(
    arrays: dict[str, np.ndarray],
    *,
    model: Any,
    likelihood: str | None,
    params: Any,
    settings: Mapping[str, Any],
) -> ArrayParts:
    """:meth:`Problem.from_arrays` on checked names: the dataset and the model's record."""
    digest = arrays_sha256(arrays)
    name = ARRAYS_PREFIX + digest[:16]
    dataset = _dataset(arrays, name, digest, standardize=bool(settings.get("standardize")))
    model_name, model_args, maker = _model_maker(model, params, settings.get("model_args"))
    config = ProblemConfig(
        dataset=name,
        model=model_name,
        likelihood=likelihood,
        model_args=model_args,
        **{k: v for k, v in settings.items() if k != "model_args"},
    )
    return ArrayParts(config, dataset, maker, arrays)


def _dataset(
    arrays: Mapping[str, np.ndarray], name: str, digest: str, *, standardize: bool
) -> data.Dataset:
    """The arrays as a dataset, checked as a user's data file is, with the validation pair
    (checked against the training arrays) in ``info["validation"]``."""
    dataset = dataset_from_arrays(
        arrays,
        name=name,
        where="Problem.from_arrays",
        info={"source": "arrays in memory", "sha256": digest},
        standardize_data=standardize,
    )
    if "x_val" in arrays:
        validation = dataset_from_arrays(
            {
                "x_train": arrays["x_train"],
                "y_train": arrays["y_train"],
                "x_test": arrays["x_val"],
                "y_test": arrays["y_val"],
            },
            name=name,
            where="Problem.from_arrays (x_val, y_val)",
            info={},
            standardize_data=standardize,
        )
        dataset.info["validation"] = (validation.x_test, validation.y_test)
    return dataset


def _model_maker(
    model: Any, params: Any, model_args: str | None
) -> tuple[str, str | None, Callable[[int], models.Model] | None]:
    """The model's recorded name and arguments, and what makes it for a number of outputs
    (``None``: :func:`~bnnkit.problem_assembly.assemble` builds it from its import path, as
    ``--model`` is)."""
    maker: Callable[[int], models.Model] | None = None
    if params is not None and (isinstance(model, str) or hasattr(model, "init")):
        raise ConfigError(
            "Problem.from_arrays: params= goes with an apply(params, x) function; "
            "a flax module draws its own"
        )
    if isinstance(model, str):
        if not imported.is_import_path(model):
            raise ConfigError(
                f"Problem.from_arrays: model {model!r} is not package.module:"
                "ClassName; allowed: a flax module, an apply function with "
                "params=, or an import path"
            )
        model_name = model  # built by assemble from the path, as --model is
    elif callable(getattr(model, "init", None)) and callable(getattr(model, "apply", None)):
        if model_args is not None:
            raise ConfigError(
                "Problem.from_arrays: model_args goes with an import path; a "
                "module instance carries its own arguments"
            )
        model_name, model_args = imported.describe(model)

        def maker(num_outputs: int, module: Any = model) -> models.Model:
            return imported.from_module(module, model_name, num_outputs)
    elif callable(model):
        if params is None:
            raise ConfigError(
                "Problem.from_arrays: an apply(params, x) function needs params= "
                "(the initial parameters, or an init(key, x) function)"
            )
        model_name = imported.from_function(model, params, num_outputs=0).name

        def maker(num_outputs: int, fn: Any = model) -> models.Model:
            return imported.from_function(fn, params, num_outputs)
    else:
        raise ConfigError(
            f"Problem.from_arrays: model {type(model).__name__} is none of a flax "
            "module, an apply(params, x) function or package.module:ClassName"
        )
    return model_name, model_args, maker
