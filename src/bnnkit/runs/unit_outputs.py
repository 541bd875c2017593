"""What each unit of a run leaves behind: its kept posterior, its log line, its test metrics.

After each unit the run driver (:mod:`bnnkit.runs.loop`) stores the posterior
``method.posterior`` returns for each member when the unit is kept (:func:`store_posterior`,
one file through :mod:`bnnkit.posterior.store`, recorded in the manifest before it is renamed
into place; a posterior that is not finite is refused, not stored), appends one log line
(:func:`log_line`) and, every ``eval_every`` units, the ensembled metrics of the members'
current positions on the test set (:func:`metrics_on_test_set`).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from bnnkit.inference.base import Loop, Method, RunSettings
from bnnkit.metrics.predictive import metrics_for
from bnnkit.posterior import Samples, store
from bnnkit.predict import predict
from bnnkit.runs import faults, manifest
from bnnkit.runs.lifecycle import Lifecycle
from bnnkit.types import Params


def store_posterior(
    life: Lifecycle, unit: int, method: Method, state, config: RunSettings, loop: Loop
) -> dict[str, Any]:
    """Store ``method.posterior`` of each member's state (a kept axis of one) in one file.

    Returns:
        Member 0's posterior metadata (e.g. a Laplace approximation's evidence).

    Raises:
        DivergenceError: a member's posterior holds a NaN or infinite value (a Laplace
            precision that overflowed, say): it is not stored.
    """
    # One transfer, then NumPy slices: slicing device arrays costs a dispatch per leaf and
    # member (docs/performance.md, "Runs").
    host = jax.device_get(state)
    members = [
        method.posterior(jax.tree.map(lambda a, m=m: a[m][None], host))
        for m in range(loop.num_members)
    ]
    finite_posteriors(life, config, loop, unit, members)
    store.save(
        life.rundir.sample_file(unit),
        members,
        before_rename=life.recorder(manifest.sample_name(unit), unit=unit),
    )
    faults.point("sample-written")
    return members[0].meta()


def finite_posteriors(
    life: Lifecycle, config: RunSettings, loop: Loop, unit: int, members: list
) -> None:
    """Refuse to store posteriors of which one holds a NaN or infinite value.

    Raises:
        DivergenceError: a member's posterior is not finite (a Laplace precision that
            overflowed, say), naming ``unit`` and the members.
    """
    broken = [
        m
        for m, posterior in enumerate(members)
        if not all(
            np.isfinite(a).all()
            for a in posterior.arrays().values()
            if np.issubdtype(np.asarray(a).dtype, np.floating)
        )
    ]
    if broken:
        raise life.diverged(config, loop, unit, ["the posterior"], broken)


def log_line(unit: int, loop: Loop, info, seconds: float) -> dict[str, Any]:
    log: dict[str, Any] = {"iteration": unit, "burn_in": unit < loop.burn_in}
    if loop.kind == "epochs":
        log["epoch"] = unit + 1
    for name, value in info._asdict().items():
        value = np.asarray(value)
        log[name] = (
            value.tolist()
            if value.dtype == bool
            else (
                value.astype(int).tolist()
                if np.issubdtype(value.dtype, np.integer)
                else value.astype(float).tolist()
            )
        )
    log["seconds"] = seconds
    return log


def metrics_on_test_set(built, position: Params) -> dict[str, float]:
    """Metrics of the members' current positions, ensembled, on the test set."""
    samples = Samples(jax.tree.map(lambda a: np.asarray(a)[:, None], position))
    prediction = predict(built, samples, built.dataset.x_test, max_diagnostic_points=1)
    return metrics_for(prediction, built.dataset.y_test_original)
