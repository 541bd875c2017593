"""A Bayesian problem assembled from a config: data, model, likelihood, prior, log posterior.

This is the left half of the data flow (``dataset -> model -> prior + likelihood -> log
posterior``) in one place, so the CLI, ``bnnkit evaluate`` and Python users build exactly the same
objects from the same config. Two ways in:

- :func:`build` from a :class:`ProblemConfig`: a dataset and a model by name (a registry name, a
  user ``.npz`` file, an importable ``package.module:ClassName``);
- :meth:`Problem.from_arrays` from objects in memory: NumPy arrays and any Flax module (or an
  ``apply`` function with its parameters). A run made from it stores the arrays in its run
  directory (:data:`DATA_FILE`) and records their sha256 and the model's import path, so
  :func:`build_recorded` rebuilds the same problem in another process, or refuses in one line
  saying how to pass the model back in.

This module is the problem's public face: the settings are defined in
:mod:`bnnkit.problem_config`, the :class:`Problem` and its assembly in
:mod:`bnnkit.problem_assembly`, the way in from arrays in :mod:`bnnkit.problem_arrays`; every
public name of those is importable from here. What is left here is building from a name and
rebuilding the problem of a stored run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bnnkit import data, storage
from bnnkit.arguments import check_arguments, refuse
from bnnkit.errors import ConfigError
from bnnkit.models import imported
from bnnkit.problem_arrays import (
    ARRAY_NAMES,
    ARRAY_SETTINGS,
    ARRAYS_PREFIX,
    DATA_FILE,
    array_parts,
    arrays_sha256,
)
from bnnkit.problem_assembly import Problem, assemble, assembled, enable_float64, subset_train
from bnnkit.problem_config import (
    DATA_SETTINGS,
    POSTERIOR_SETTINGS,
    UNSET,
    ProblemConfig,
    differences,
    shown,
)

__all__ = [
    "ARRAYS_PREFIX",
    "ARRAY_NAMES",
    "ARRAY_SETTINGS",
    "DATA_FILE",
    "DATA_SETTINGS",
    "POSTERIOR_SETTINGS",
    "UNSET",
    "Problem",
    "ProblemConfig",
    "arrays_sha256",
    "build",
    "build_recorded",
    "check_same",
    "differences",
    "shown",
]


def _problem_config(value: Any, name: str, where: str) -> ProblemConfig:
    if isinstance(value, ProblemConfig):
        return value
    refuse(value, name, "a bnnkit.ProblemConfig(DATASET, MODEL)", where=where)


#: :func:`build`'s arguments and the check each gets (a row of
#: :data:`bnnkit.entry_points.ENTRY_POINTS`).
BUILD_CHECKS = {"config": _problem_config}


def build(config: ProblemConfig) -> Problem:
    """Load the data and build model, likelihood, prior and log posterior from ``config``.

    Raises:
        ConfigError: any invalid value, named in the message.

    Example:
        >>> import jax
        >>> problem = build(ProblemConfig(dataset="yacht_0", model="mlp_regression_small"))
        >>> params = problem.init_params(jax.random.PRNGKey(0))
        >>> float(problem.log_posterior(params, problem.train_batch()))
        -1170.6
    """
    check_arguments("bnnkit.build_problem", locals(), BUILD_CHECKS)
    if config.dataset.startswith(ARRAYS_PREFIX):
        raise ConfigError(
            f"dataset {config.dataset!r} was arrays in memory: rebuild it from "
            "its run (bnnkit.evaluate reads the run's copy), or pass the arrays "
            "with bnnkit.Problem.from_arrays"
        )
    enable_float64(config)
    options = {}
    if config.subset_train_to is not None:
        options["subset_train_to"] = config.subset_train_to
    if config.data_dir is not None:
        options["data_dir"] = config.data_dir
    if config.validation_size is not None:
        options["validation_size"] = config.validation_size
    dataset = data.load(config.dataset, standardize_data=config.standardize, **options)
    return assemble(config, subset_train(dataset, config.subset_train_to))


def build_recorded(
    config: ProblemConfig,
    run_dir: str | os.PathLike,
    dataset_info: Mapping[str, Any] | None = None,
    *,
    trust_model: str | None = None,
) -> Problem:
    """The problem of a stored run: :func:`build`, or for a run made from arrays, the arrays
    it stored (checked against the sha256 it recorded) and its model rebuilt by import path.

    This is where a model name comes from a file, so nothing is imported before
    :func:`bnnkit.models.imported.check_trusted` allows it: a model whose module is outside
    bnnkit only when the user named it (``trust_model``, or an enclosing
    :func:`~bnnkit.models.imported.trusting_model`).

    Args:
        config: the run's problem (``run.json``'s ``problem``).
        run_dir: the run directory.
        dataset_info: the run's recorded dataset (``run.json``'s ``dataset``), whose
            ``sha256`` the stored arrays must match.
        trust_model: the model import path the user allows importing (``--model`` on the
            reading command); ``None`` allows none outside bnnkit.

    Raises:
        ConfigError: the run's model imports code outside bnnkit that the user did not allow
            (naming the module and how to allow it), the stored arrays are missing or changed,
            or the model cannot be rebuilt here (a model recorded as in memory), in one line
            saying how to pass it back in.
    """
    imported.check_trusted(config.model, trust_model, where=f"the run {str(run_dir)!r}")
    if not config.dataset.startswith(ARRAYS_PREFIX):
        return build(config)
    path = Path(run_dir) / DATA_FILE
    if not path.is_file():
        raise ConfigError(
            f"{str(path)!r} is missing: the run was made from arrays in memory "
            "and keeps them there; pass them back in with problem="
            "bnnkit.Problem.from_arrays(...)"
        )
    arrays = storage.load_arrays(path)
    digest = arrays_sha256(arrays)
    recorded = (dataset_info or {}).get("sha256")
    if not config.dataset.startswith(ARRAYS_PREFIX + digest[:16]) or (
        isinstance(recorded, str) and recorded != digest
    ):
        raise ConfigError(
            f"{str(path)!r} was changed: its arrays' sha256 {digest[:12]}… is not "
            f"the {config.dataset!r} the run was made on"
        )
    if imported.is_in_memory(config.model):
        imported.module_from_path(config.model, None, num_outputs=0)  # raises, saying how
    settings = {name: getattr(config, name) for name in ARRAY_SETTINGS}
    return assembled(
        array_parts(
            arrays,
            model=config.model,
            likelihood=config.likelihood,
            params=None,
            settings={**settings, "model_args": config.model_args},
        )
    )


def check_same(
    problem: Problem, config: ProblemConfig, dataset_info: Mapping[str, Any], where: str
) -> None:
    """Refuse a problem passed back in for a stored run unless it is the run's.

    Raises:
        ConfigError: a setting or the data differ, naming the first.
    """
    names = tuple(f.name for f in dataclasses.fields(ProblemConfig) if f.name != "data_dir")
    differ = differences(problem.config, config, names, where)
    if differ:
        raise ConfigError(f"problem= is not the problem of {where}: {differ[0]}")
    recorded, given = dataset_info.get("sha256"), problem.dataset.info.get("sha256")
    if isinstance(recorded, str) and recorded != given:
        raise ConfigError(
            f"problem= holds other arrays than {where} was made on (sha256 "
            f"{str(given)[:12]}… against {recorded[:12]}…)"
        )
