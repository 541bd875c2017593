"""The files an evaluation writes into its run, and the checks that they can be written.

``evaluation<suffix>.json`` (the result) and ``predictions/test<suffix>.npz`` (the test
predictive: probabilities, or each draw's means and stds), plus whatever arrays a section
asked to store (the OOD scores). The suffix is empty on the clean test set and
``_<corruption>_<severity>`` under a corruption, so a shifted evaluation never replaces the
clean one. The JSON comes last: its presence says that every file of the evaluation is in place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.evaluation.checks import check_writable_folder
from bnnkit.runs import RunDir
from bnnkit.runs.directory import PREDICTIONS_DIR


def ood_file(dataset: str, suffix: str = "") -> str:
    """The file name, in a run's ``predictions/``, of the OOD scores against ``dataset`` (a name
    or a path; anything but letters, digits, ``._-`` becomes ``_``).

    Example:
        >>> ood_file("fashion_mnist"), ood_file("/data/my set.npz")
        ('ood_fashion_mnist.npz', 'ood_my_set.npz.npz')
    """
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(os.fspath(dataset)))
    return f"ood_{safe}{suffix}.npz"


def check_writes(rundir: RunDir, suffix: str) -> None:
    """Refuse, before anything is computed, an evaluation that could not write its files:
    an unwritable run directory, a link or a file where they go.

    Raises:
        ConfigError: naming the path.
    """
    check_writable_folder(rundir.path, "evaluation")
    rundir.check_links()
    predictions = rundir.path / PREDICTIONS_DIR
    if predictions.exists() and not predictions.is_dir():
        raise ConfigError(
            f"{str(predictions)!r} is a file; allowed: the folder where bnnkit "
            "evaluate writes the predictions (remove the file)"
        )
    if predictions.is_dir():
        check_writable_folder(predictions, "predictions")
    for target in (rundir.path / f"evaluation{suffix}.json", predictions / f"test{suffix}.npz"):
        if target.is_dir():
            raise ConfigError(
                f"{str(target)!r} is a folder; allowed: the file bnnkit evaluate "
                "writes (remove the folder)"
            )


def write(
    run_dir: Any,
    suffix: str,
    prediction: Any,
    extras: Mapping[str, Mapping[str, Any]],
    result: Mapping[str, Any],
) -> None:
    """Store an evaluation in its run: the test predictive, the sections' arrays (``extras``,
    by file name), then the result."""
    rundir = RunDir(run_dir)
    rundir.check_links()  # again, just before writing
    (rundir.path / PREDICTIONS_DIR).mkdir(exist_ok=True)
    arrays = (
        {"probs": prediction.probs}
        if prediction.task == "classification"
        else {"means": prediction.means, "stds": prediction.stds}
    )
    storage.save_arrays(rundir.path / PREDICTIONS_DIR / f"test{suffix}.npz", arrays)
    for name, extra in extras.items():
        storage.save_arrays(rundir.path / PREDICTIONS_DIR / name, extra)
    # Last: an evaluation.json says every file of the evaluation is in place.
    storage.write_json(rundir.path / f"evaluation{suffix}.json", result)
