"""Chains that more iterations will not make mix, told apart from chains that need only more.

A chain that fails the within-chain checks (:mod:`bnnkit.metrics.within_chain`) usually needs a
longer run, and the verdict says so. But a chain whose within-chain ESS hardly grows as it runs
longer (a posterior whose geometry the sampler cannot cross at this step size) fails the same
way after ten times the budget, and the advice to run longer would only repeat what did not
help. Judging each failing chain also on its first part tells the two apart
(:func:`stalled_chains`), and :func:`stall_advice` then names what changes the posterior
instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bnnkit.metrics.verdict_sentences import chain_names
from bnnkit.metrics.vocabulary import FUNCTION_CLI, Vocabulary
from bnnkit.metrics.within_chain import MIN_WITHIN_DRAWS, ChainCheck, check_chains

#: A chain judged on its first 1/STALL_LENGTH too (at least :data:`STALL_MIN_DRAWS` draws
#: there): one that has run this many times longer ...
STALL_LENGTH = 10
STALL_MIN_DRAWS = 100
#: ... and whose within-chain ESS grew less than this many times (a mixing chain's grows with
#: its length, so about STALL_LENGTH times) gains nothing from more iterations.
STALL_GAIN = 2.0


def stalled_chains(draws: np.ndarray, checks: Sequence[ChainCheck]) -> dict[str, Any] | None:
    """The failing chains that more iterations will not make mix: each failed already on its
    first 1/:data:`STALL_LENGTH`, and its within-chain ESS grew less than :data:`STALL_GAIN`
    times over the :data:`STALL_LENGTH` times longer run. ``None`` when no chain fails, a chain
    that fails is still gaining, or the first part is too short to judge.

    Args:
        draws: (chains, samples, quantities).
        checks: the within-chain checks of all the draws.

    Returns:
        ``chains`` (their indices), ``draws`` (kept per chain), ``early`` (draws of the first
        part), ``ess_early`` and ``ess`` (the smallest ESS at 5 % of the quantities, over the
        failing chains).

    Example:
        >>> walk = np.cumsum(np.random.default_rng(0).normal(size=(2, 1000, 5)), axis=1)
        >>> from bnnkit.metrics.within_chain import check_chains
        >>> stalled_chains(walk, check_chains(walk))["chains"]
        [0, 1]
    """
    failing = [c for c in checks if not c.mixed]
    early = draws.shape[1] // STALL_LENGTH
    if not failing or early < max(STALL_MIN_DRAWS, MIN_WITHIN_DRAWS):
        return None
    first = {c.chain: c for c in check_chains(draws[:, :early])}
    gains = []
    for check in failing:
        before = first[check.chain]
        if before.mixed:
            return None  # it mixed on its first part: what it fails now is no stall
        gains.append(
            check.ess_low / before.ess_low
            if np.isfinite(check.ess_low) and np.isfinite(before.ess_low) and before.ess_low > 0
            else 1.0
        )
    if max(gains) >= STALL_GAIN:
        return None
    return {
        "chains": [c.chain for c in failing],
        "draws": int(draws.shape[1]),
        "early": int(early),
        "ess_early": float(np.nanmin([first[c.chain].ess_low for c in failing] + [np.inf])),
        "ess": float(np.nanmin([c.ess_low for c in failing] + [np.inf])),
    }


def stall_advice(stall: Mapping[str, Any], vocabulary: Vocabulary = FUNCTION_CLI) -> str:
    """What to say of chains that more iterations do not make mix (:func:`stalled_chains`):
    that more will not help, and what changes the posterior instead.

    Example:
        >>> stall_advice({"chains": [0, 2], "draws": 1000, "early": 100, "ess_early": 1.6,
        ...               "ess": 2.1})[:72]
        'more iterations will not help here: chains 0 and 2 kept 1000 draws each,'
    """
    unit = vocabulary.settings.budget_unit
    change = vocabulary.settings.posterior_change
    instead = (
        f"; what helps is another posterior: {change} (docs/concepts/reference.md, "
        "when a larger budget does not help)"
        if change
        else ""
    )
    return (
        f"more {unit} will not help here: {chain_names(stall['chains'])} kept "
        f"{stall['draws']} draws each, {STALL_LENGTH} times their first {stall['early']}, "
        f"and their {vocabulary.ess} at the slowest 5 % grew only from "
        f"{stall['ess_early']:.1f} to {stall['ess']:.1f} (a mixing chain's grows with its "
        f"length){instead}"
    )
