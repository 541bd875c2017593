"""The sentences of the convergence verdict (:func:`bnnkit.metrics.convergence.verdict`): its
summary, one line per chain, one problem per within-chain check that fails, and the advice
that does not concern the sampler itself (:mod:`bnnkit.metrics.sampler_health` words that).

Kept apart from the verdict's logic so that what it decides and how it says it can be read,
and changed, each on its own. Every sentence names the quantities and the settings in the
caller's :class:`~bnnkit.metrics.vocabulary.Vocabulary`: test predictions or parameters, flags
or Config fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bnnkit.metrics.vocabulary import FUNCTION_CLI, Vocabulary, either
from bnnkit.metrics.within_chain import (
    CHAIN_ESS_SHARE,
    LPD_TOLERANCE,
    LPD_Z,
    MIN_CHAIN_ESS,
    NUM_SPLITS,
    WITHIN_RHAT_SHARE,
    WITHIN_RHAT_THRESHOLD,
    ChainCheck,
)

#: The summary of a ``not-mixed`` verdict whose only failing is the pooled ESS.
FEW_DRAWS_SUMMARY = "the chains agree but have too few effective draws in all"


def rising_advice(vocabulary: Vocabulary) -> str:
    """What to do about chains still climbing after burn-in."""
    names = vocabulary.settings
    longer = None if names.num_burn_in is None else f"run a longer {names.num_burn_in}"
    return either([longer, names.good_start]) or "run a longer burn-in"


#: What to do about chains still climbing after burn-in (command-line words).
RISING_ADVICE = rising_advice(FUNCTION_CLI)


def more_chains(names: Any) -> str | None:
    """More chains, in the words of ``names`` (a vocabulary's settings); ``None`` where the
    caller sets no number of chains."""
    return None if names.num_chains is None else f"more chains (a larger {names.num_chains})"


def tuning_advice(vocabulary: Vocabulary, method: str | None) -> str:
    """What to change when more iterations do not make a chain mix, per sampler."""
    burn_in = vocabulary.settings.num_burn_in or "burn-in"
    if method == "mclmc":
        return (
            f"if a chain still fails, a longer {burn_in} for the tuning of its step size "
            "and trajectory, or a smaller energy-variance target so its steps are more "
            "accurate"
        )
    return f"if a chain still fails, a longer {burn_in} so its step size and mass matrix adapt"


def chain_line(check: dict[str, Any]) -> str:
    """One chain's within-chain checks in a line (an entry of a verdict's ``within``).

    Example:
        >>> chain_line({"mixed": True, "rhat_share_below": 1.0, "ess_p5": 212.4,
        ...             "lpd": {"drift": 0.0031, "drift_se": 0.004}, "rising": False})
        'mixed | R-hat within 100 % | ESS 212 | LPD drift +0.003 (se 0.004)'
    """
    parts = [
        "mixed" if check["mixed"] else "NOT mixed",
        f"R-hat within {100 * check['rhat_share_below']:.0f} %",
        f"ESS {check['ess_p5']:.0f}",
    ]
    if check.get("lpd"):
        parts.append(f"LPD drift {check['lpd']['drift']:+.3f} (se {check['lpd']['drift_se']:.3f})")
    if check.get("rising"):
        parts.append(f"log posterior rising ({check['rise_z']:.0f} se)")
    return " | ".join(parts)


def chain_names(indices: Sequence[int]) -> str:
    """``chain 2`` or ``chains 0, 1 and 3``."""
    names = [str(i) for i in indices]
    if len(names) == 1:
        return f"chain {names[0]}"
    return f"chains {', '.join(names[:-1])} and {names[-1]}"


def mode_groups(groups: Sequence[Sequence[int]]) -> str:
    """``0, 2 | 1, 3``: the chains of each mode."""
    return " | ".join(", ".join(str(c) for c in group) for group in groups)


def _values(values: Sequence[float], form: str) -> str:
    return ", ".join(format(v, form) for v in values)


def _in_errors(value: float, se: float) -> str:
    return f"{abs(value) / se:.0f}" if se > 0 else "∞"


def within_problems(checks: Sequence[ChainCheck], vocabulary: Vocabulary) -> list[str]:
    """One sentence per within-chain check that some chain fails, naming those chains (the
    rise is told by the verdict's own sentence)."""
    problems = []
    what = vocabulary.quantities
    bad = [c for c in checks if not c.rhat_ok]
    if bad:
        problems.append(
            f"split R-hat within {chain_names([c.chain for c in bad])} (its {NUM_SPLITS} "
            f"consecutive pieces as chains) is below {WITHIN_RHAT_THRESHOLD} on only "
            f"{_values([c.rhat_share_below for c in bad], '.0%')} of {what} (needs "
            f"{WITHIN_RHAT_SHARE:.0%}): the chain drifts or visits regions for long stretches"
        )
    bad = [c for c in checks if not c.ess_ok]
    if bad:
        problems.append(
            f"{vocabulary.ess} within {chain_names([c.chain for c in bad])} is "
            f"{_values([c.ess_low for c in bad], '.0f')} on {CHAIN_ESS_SHARE:.0%} of {what} "
            f"(needs {MIN_CHAIN_ESS:.0f} per chain)"
        )
    bad = [c for c in checks if not c.lpd_ok]
    if bad:
        problems.append(
            f"the running log predictive density of {chain_names([c.chain for c in bad])} still "
            f"changes over its last half: the model averages of its two halves differ by "
            f"{_values([c.lpd.drift for c in bad], '+.3f')} nats per test point "
            f"({', '.join(_in_errors(c.lpd.drift, c.lpd.drift_se) for c in bad)} standard "
            f"errors; flat within max({LPD_Z:.0f} standard errors, {LPD_TOLERANCE}))"
        )
    return problems


def summary(
    level: str,
    checks: Sequence[ChainCheck] | None,
    groups: list[list[int]],
    chains: int,
    sampler_problem: bool,
    vocabulary: Vocabulary,
) -> str:
    """The verdict in one sentence."""
    if level == "converged":
        return f"each chain mixed and the {chains} chains agree"
    if level == "mixed-multimodal":
        if chains == 1:
            return "the chain mixed; one chain cannot show whether the posterior has other modes"
        return (
            f"each chain mixed; the chains sit in {len(groups)} distinct modes (chains "
            f"{mode_groups(groups)}); {vocabulary.pooled}"
        )
    if checks is None:
        return "too few kept draws per chain to judge each chain"
    failing = [c.chain for c in checks if not c.mixed]
    if failing:
        return f"{chain_names(failing)} failed the within-chain checks"
    if sampler_problem:
        return "the sampler is stuck or unstable"
    return FEW_DRAWS_SUMMARY
