"""The compare-methods table as the findings read it: its settings by task, each setting's
reference row and method rows, and which settings finding 1 judges.

The table is compare-methods' ``results.json``, ``{setting: {"problem": ..., "rows": [...]}}``,
the reference's row first (:data:`bnnkit.experiments.compare_methods.REFERENCE_SUFFIX`). A
regression setting is judged by finding 1 only where the reference, SGD and the ensemble all
ran, and only where its reference can carry a verdict (:func:`assessable`): a regression
reference that is not a reference would otherwise withhold the image settings' verdict too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bnnkit.experiments.compare_methods import REFERENCE_SUFFIX
from bnnkit.experiments.paper.levels import passes

#: The methods finding 1 sets against the reference: standard training and the ensemble.
STANDARD = ("SGD", "Deep ensemble (K=5)")


def rows_by_method(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """A setting's rows by their method's label."""
    return {r["method"]: r for r in rows}


def reference_row(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The reference's row ("HMC (reference)", "MCLMC (reference)"), or ``None``."""

    return next((r for r in rows if r.get("method", "").endswith(REFERENCE_SUFFIX)), None)


def classification_settings(compare: Mapping[str, Any]) -> list[str]:
    """The settings whose first row (the reference's) has an accuracy."""
    return [
        name
        for name, setting_ in compare.items()
        if setting_["rows"] and "accuracy" in setting_["rows"][0]
    ]


def regression_settings(compare: Mapping[str, Any]) -> list[str]:
    """The settings whose first row (the reference's) has an RMSE and no accuracy."""
    return [
        name
        for name, setting_ in compare.items()
        if setting_["rows"]
        and "rmse" in setting_["rows"][0]
        and "accuracy" not in setting_["rows"][0]
    ]


def sgld_settings(compare: Mapping[str, Any]) -> list[str]:
    """The classification settings that ran SGLD (the CIFAR-10 proxy runs only SGD and the
    ensemble against HMC)."""
    return [
        name
        for name in classification_settings(compare)
        if any(r["method"] == "SGLD" for r in compare[name]["rows"])
    ]


def ran(row: Mapping[str, Any] | None) -> bool:
    """Whether a method ran: one left out (a skipped row holds its note only) or not
    compared has no NLL."""
    return row is not None and "nll" in row


def assessable(row: Mapping[str, Any]) -> bool:
    """Whether a reference row can carry a verdict (:func:`~bnnkit.experiments.paper.levels.
    passes`)."""
    return passes(row)


def beats_standard_settings(compare: Mapping[str, Any]) -> list[str]:
    """The settings finding 1 judges, whose references it rests on: every classification
    setting, and each regression setting where the reference, SGD and the ensemble all ran
    and whose reference is :func:`assessable`. With no classification setting and no such
    regression setting, the regression settings where all three ran: the finding then rests
    on them, and their verdict makes it not assessable.

    Example:
        >>> rows = [{"method": "HMC (reference)", "rmse": 1.0, "nll": 1.0,
        ...          "levels": "not a reference"}]
        >>> rows += [{"method": m, "rmse": 1.0, "nll": 1.0} for m in STANDARD]
        >>> image = [{"method": "HMC (reference)", "accuracy": 0.9, "nll": 0.3}]
        >>> compare = {"mnist": {"rows": image}, "yacht": {"rows": rows}}
        >>> beats_standard_settings(compare), beats_standard_settings({"yacht": {"rows": rows}})
        (['mnist'], ['yacht'])
        >>> rows[0]["levels"] = "reproducible"
        >>> beats_standard_settings(compare)
        ['mnist', 'yacht']
    """
    measured = [
        name
        for name in regression_settings(compare)
        if ran(reference_row(compare[name]["rows"]))
        and all(ran(rows_by_method(compare[name]["rows"]).get(m)) for m in STANDARD)
    ]
    judged = [name for name in measured if assessable(reference_row(compare[name]["rows"]))]
    images = classification_settings(compare)
    return images + (judged if images or judged else measured)
