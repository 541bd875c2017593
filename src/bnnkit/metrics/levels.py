"""Whether a run of Markov chains is a reference, in four levels, and what to do.

Ranking approximations by their distance to a reference needs a reference that another run
would reproduce well below those distances; it does not need each chain to have mixed. So
beside the convergence verdict (:mod:`bnnkit.metrics.convergence`) a run is judged at four
levels, each a module of its own:

``L0`` numerics (:mod:`bnnkit.metrics.numerics`)
    divergences of an adjusted sampler, or the energy errors and their spikes of unadjusted
    MCLMC, after burn-in;
``L1`` stationary chains (:mod:`bnnkit.metrics.stationarity`)
    each chain's R-hat over its quarters, its bulk ESS, and no drift of its slow functionals
    from its first quarter to its last;
``L2`` reproducible halves (:mod:`bnnkit.metrics.halves`)
    the model averages of the two halves of the chains agree, well within the run's distance
    to its own deep ensemble;
``L3`` plateau (:mod:`bnnkit.metrics.plateau`)
    the test LPD and the predictive's spread no longer move with more draws.

The verdict (:data:`VERDICTS`): **certified** when all four pass; **reproducible** when L0, L2
and L3 pass — good enough to rank approximations, though some chain has not settled on its
own (an unadjusted chain whose L0 failed on energy spikes alone, ``spikes_only``, counts as
passing L0 here, never for certified: :mod:`bnnkit.metrics.numerics`); otherwise **not a
reference**, naming what failed. The advice names the flags of the
command that made the run (:class:`~bnnkit.metrics.vocabulary.Vocabulary`): more draws
(``--resume`` with a larger budget, or ``--until-converged --max-time``) for L1, L2 and L3,
more chains for L2, a smaller step for L0.

Example:
    >>> passed = {"status": "pass", "problems": [], "advice": []}
    >>> failed = {"status": "fail", "problems": ["a chain drifts"], "advice": []}
    >>> found = verdict({"L0": passed, "L1": failed, "L2": passed, "L3": passed})
    >>> found["verdict"], found["failed"]
    ('reproducible', ['L1'])
    >>> line(found)[:62]
    'reference levels: reproducible (L0 pass, L1 FAIL, L2 pass, L3 '
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnnkit.metrics import halves, numerics, plateau, stationarity
from bnnkit.metrics.verdict_sentences import more_chains
from bnnkit.metrics.vocabulary import FUNCTION_CLI, Vocabulary, either

#: The levels, in order.
LEVELS = ("L0", "L1", "L2", "L3")
#: What each level asks, in a few words.
NAMES = {
    "L0": "numerics",
    "L1": "stationary chains",
    "L2": "reproducible halves",
    "L3": "plateau",
}
#: The verdicts, best first.
VERDICTS = ("certified", "reproducible", "not a reference")
#: The levels a reproducible run passes: what ranking approximations needs.
REPRODUCIBLE = ("L0", "L2", "L3")


def thresholds() -> dict[str, float]:
    """Every threshold the levels apply, stored with them."""
    return {
        "max_divergent_share": numerics.MAX_DIVERGENT_SHARE,
        "max_energy_ratio": numerics.MAX_ENERGY_RATIO,
        "spike_factor": numerics.SPIKE_FACTOR,
        "max_spike_share": numerics.MAX_SPIKE_SHARE,
        "within_rhat_threshold": stationarity.WITHIN_RHAT_THRESHOLD,
        "within_rhat_share": stationarity.WITHIN_RHAT_SHARE,
        "min_chain_ess": stationarity.MIN_CHAIN_ESS,
        "drift_z": stationarity.DRIFT_Z,
        "halves_ratio": halves.RATIO,
        "absolute_w1": halves.ABSOLUTE_W1,
        "absolute_tv": halves.ABSOLUTE_TV,
        "lpd_tolerance": plateau.LPD_TOLERANCE,
        "std_tolerance": plateau.STD_TOLERANCE,
        "entropy_tolerance": plateau.ENTROPY_TOLERANCE,
    }


def _advice(level: str, found: dict[str, Any], vocabulary: Vocabulary) -> list[str]:
    """What to do about one level that did not pass."""
    if level == "L0":
        return list(found.get("advice", ()))
    if level == "L1":
        return [vocabulary.extend_until_mixed()]
    if level == "L2":  # chains in different modes need more chains, noisy ones more draws
        more = more_chains(vocabulary.settings)
        return [f"keep more samples: {either([vocabulary.more_iterations(), more])}"]
    return [vocabulary.more_iterations()]


def verdict(found: dict[str, dict[str, Any]], vocabulary: Vocabulary = FUNCTION_CLI) -> dict:
    """The verdict of the four levels' findings (each a dict with ``status``, ``problems`` and
    ``advice``).

    Returns:
        ``verdict`` (one of :data:`VERDICTS`), ``summary``, ``failed`` (the levels that did
        not pass, "not recorded" included), ``problems`` (each prefixed by its level),
        ``advice``, the four levels by name, and the ``thresholds``.
    """
    failed = [level for level in LEVELS if found[level]["status"] != "pass"]
    blocking = [level for level in failed if not found[level].get("spikes_only")]
    if not failed:
        outcome = "certified"
    elif not set(blocking) & set(REPRODUCIBLE):
        outcome = "reproducible"
    else:
        outcome = "not a reference"
    problems, advice = [], []
    for level in failed:
        what = found[level]
        if what["status"] == "not recorded":
            problems.append(f"{level} ({NAMES[level]}) not recorded: {what.get('why')}")
            continue
        problems += [f"{level} ({NAMES[level]}): {p}" for p in what["problems"]]
        if not (level == "L3" and "L1" in failed):  # L1's advice, more draws, covers it
            advice += _advice(level, what, vocabulary)
    return {
        "verdict": outcome,
        "summary": _summary(outcome, failed, found),
        "failed": failed,
        "problems": problems,
        "advice": list(dict.fromkeys(advice)),
        **{level: found[level] for level in LEVELS},
        "thresholds": thresholds(),
    }


def _summary(outcome: str, failed: list[str], found: dict[str, dict[str, Any]]) -> str:
    """The verdict in a sentence."""
    named = ", ".join(
        f"{level} ({NAMES[level]}) "
        + ("failed" if found[level]["status"] == "fail" else "not recorded")
        for level in failed
    )
    if outcome == "certified":
        return "sound numerics, stationary chains, reproducible halves and a plateau"
    if outcome == "reproducible":
        return f"good enough to rank approximations, not certified: {named}"
    return named


def line(found: dict[str, Any]) -> str:
    """The verdict in one line: each level's status and what to do first.

    Example:
        >>> passed = {"status": "pass", "problems": [], "advice": []}
        >>> line(verdict({level: passed for level in LEVELS}))
        'reference levels: certified (L0 pass, L1 pass, L2 pass, L3 pass)'
    """
    marks = {"pass": "pass", "fail": "FAIL", "not recorded": "not recorded"}
    statuses = ", ".join(f"{level} {marks[found[level]['status']]}" for level in LEVELS)
    text = f"reference levels: {found['verdict']} ({statuses})"
    if found["advice"]:
        goal = "to certify" if found["verdict"] == "reproducible" else "to do"
        text += f"; {goal}: " + "; ".join(found["advice"])
    return text


def functionals(
    log_density: np.ndarray,
    log_posterior: np.ndarray | None = None,
    stds: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The slow functionals L1 checks for drift, each (chains, draws): the training log
    posterior of each kept iteration (when logged for every chain), the test LPD of each draw,
    and the mean log noise std of each draw where the draws' stds differ (a noise head).

    Args:
        log_density: ``log p(y_i | x_i, θ_cs)``, (chains, samples, points).
        log_posterior: the log posterior of each kept iteration, (chains, iterations).
        stds: regression: each draw's predicted std, (chains, samples, points).
    """
    x = np.asarray(log_density, np.float64)
    found = {"test LPD": x.mean(axis=-1)}
    if log_posterior is not None and np.shape(log_posterior)[0] == x.shape[0]:
        found = {"log posterior": np.asarray(log_posterior, np.float64), **found}
    if stds is not None:
        log_std = np.log(np.asarray(stds, np.float64)).mean(axis=-1)
        if np.ptp(log_std) > 0:
            found["mean log noise std"] = log_std
    return found


def judge(
    prediction: Any,
    y: np.ndarray,
    log_density: np.ndarray,
    *,
    kept: list[dict],
    method: str | None,
    method_config: dict[str, Any],
    log_posterior: np.ndarray | None = None,
    ensemble: Any | None = None,
    ensemble_run: str | None = None,
    vocabulary: Vocabulary = FUNCTION_CLI,
    command: str | None = None,
) -> dict[str, Any]:
    """The four levels of a run of Markov chains and their verdict (:func:`verdict`).

    Args:
        prediction: its predictive at the test inputs (:class:`bnnkit.predict.Prediction`).
        y: the test targets (original units) or labels.
        log_density: ``log p(y_i | x_i, θ_cs)`` of each draw, (chains, samples, points)
            (:func:`bnnkit.predict.draw_log_density`).
        kept: its log lines after burn-in.
        method: its sampler.
        method_config: the sampler's settings as recorded.
        log_posterior: the log posterior of each kept iteration, (chains, iterations).
        ensemble: the predictive of its own deep ensemble at the same inputs, if any.
        ensemble_run: where that ensemble is.
        vocabulary: the words of the advice (the flags of the command that made the run).
        command: that command.
    """
    chains, samples = prediction.per_sample.shape[:2]
    stds = None
    if prediction.task == "regression":
        stds = np.asarray(prediction.stds).reshape(chains, samples, -1)
    found = {
        "L0": numerics.numerics(
            kept, method, method_config, vocabulary=vocabulary, command=command
        ),
        "L1": stationarity.stationarity(
            prediction.per_sample, functionals=functionals(log_density, log_posterior, stds)
        ),
        "L2": halves.reproducibility(prediction, y, ensemble, ensemble_run=ensemble_run),
        "L3": plateau.plateau(
            log_density,
            **(
                {"probs": prediction.per_sample}
                if prediction.task == "classification"
                else {
                    "means": np.asarray(prediction.means).reshape(chains, samples, -1),
                    "stds": stds,
                }
            ),
        ),
    }
    return verdict(found, vocabulary)
