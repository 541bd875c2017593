"""A convergence verdict a user can act on, that tells mixing from multimodality.

Weights of a BNN are not identifiable (hidden-unit permutations and sign flips), so the verdict
looks at the predictions on test inputs, as Izmailov et al. (2021) do (for a plain log density,
:func:`bnnkit.sample`, at the parameters themselves). It judges the chains twice:

- **within each chain** (:mod:`bnnkit.metrics.within_chain`): split R-hat over 4 consecutive
  pieces of the chain below 1.1 on 95 % of the quantities, the chain's own bulk ESS at least 50
  on 95 % of them, its running log predictive density flat over its last half (when the
  predictive density of each draw is given), and its log posterior not still rising;
- **between chains**: split R-hat across chains below ``RHAT_THRESHOLD`` on at least
  ``RHAT_SHARE`` of the quantities, and a bulk ESS of all chains together of at least
  ``MIN_ESS`` on every quantity;

and counts the **modes** the chains sit in (:mod:`bnnkit.metrics.modes`): chains are in one
mode when they pass the between-chain R-hat rule together, so there is one mode exactly when
that rule passes for all chains.

Three outcomes (``level``), each with its remedy:

``converged``
    Every chain mixed and the chains agree: the chains are draws of one posterior region and
    their model average is the reference.
``mixed-multimodal``
    Each chain mixed; the chains sit in K distinct modes (``modes``); the model average pools
    them. This is a valid reference for the model average — what MILE and deep-ensemble-
    initialised HMC give — not a failure: chains in different modes rarely meet whatever the
    budget. Running longer only tests whether the modes connect; more chains cover more modes.
    (With one chain that mixed, K = 1: one chain cannot show whether other modes exist.)
``not-mixed``
    Some chain failed a within-chain check (each is named, with the check), the sampler is
    stuck or unstable, or the chains agree but have too few effective draws in all. Run more
    iterations (``--resume`` with a larger ``--num-iterations``, or ``--until-converged
    --max-time 2h`` to extend the run until each chain mixes); if a chain still fails, a longer
    burn-in so the adaptation settles (for MCLMC, a smaller energy-variance target); for a
    chain whose log posterior still rises, start from an ensemble's members.

Beside the level, ``converged`` is true only for a ``converged`` run that finished, and
``problems`` / ``advice`` name every failed check: the run is unfinished; the sampler is stuck
(acceptance after burn-in below ``MIN_ACCEPTANCE``) or unstable (divergences above
``MAX_DIVERGENT_SHARE`` of the kept iterations); a chain's log posterior still rises; a chain
fails a within-chain check; the chains disagree (with K); too few effective samples; one chain
only. The sentences speak the caller's :class:`~bnnkit.metrics.vocabulary.Vocabulary`: of test
predictions or of parameters, naming flags or Config fields.

The verdict's logic is here, in named pieces that each judge one thing and add its problems
and advice; its sentences are in :mod:`bnnkit.metrics.verdict_sentences`, the sampler's own
checks (shared with the warnings while a run samples) in :mod:`bnnkit.metrics.sampler_health`,
and the check for chains that more iterations will not make mix in
:mod:`bnnkit.metrics.stalls`. Their public names are importable from here too.

Example:
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(4, 500, 20))  # independent, mixed
    >>> v = verdict(draws)
    >>> v["converged"], v["level"], v["problems"]
    (True, 'converged', [])
    >>> v = verdict(draws + np.arange(4)[:, None, None])  # every chain somewhere else
    >>> v["converged"], v["level"], v["modes"]["count"], v["advice"][0][:24]
    (False, 'mixed-multimodal', 4, 'run more iterations (--r')
    >>> drifting = draws.copy()
    >>> drifting[2] += np.linspace(0.0, 3.0, 500)[:, None]  # chain 2 never settles
    >>> v = verdict(drifting)
    >>> v["level"], [w["chain"] for w in v["within"] if not w["mixed"]]
    ('not-mixed', [2])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from bnnkit.metrics import diagnostics
from bnnkit.metrics.findings import THRESHOLDS
from bnnkit.metrics.modes import HalfStatistics, group_modes, share_below, split_rhat
from bnnkit.metrics.sampler_health import (
    STUCK_ADVICE,
    capped_advice,
    capped_warning,
    sampler_warning,
    stuck_advice,
)
from bnnkit.metrics.stalls import stall_advice, stalled_chains
from bnnkit.metrics.verdict_sentences import (
    FEW_DRAWS_SUMMARY,
    RISING_ADVICE,
    chain_line,
    chain_names,
    mode_groups,
    more_chains,
    rising_advice,
    summary,
    tuning_advice,
    within_problems,
)
from bnnkit.metrics.vocabulary import (
    FUNCTION_CLI,
    FUNCTION_PYTHON,
    PARAMETERS_CLI,
    PARAMETERS_PYTHON,
    Vocabulary,
    either,
)
from bnnkit.metrics.within_chain import (
    CHAIN_ESS_SHARE,
    LPD_TOLERANCE,
    LPD_Z,
    MIN_CHAIN_ESS,
    MIN_WITHIN_DRAWS,
    NUM_SPLITS,
    RISE_Z,
    WITHIN_RHAT_SHARE,
    WITHIN_RHAT_THRESHOLD,
    ChainCheck,
    check_chains,
    rising_chains,
)

__all__ = [
    "FEW_DRAWS",
    "FUNCTION_CLI",
    "FUNCTION_PYTHON",
    "LEVELS",
    "MIN_ESS",
    "PARAMETERS_CLI",
    "PARAMETERS_PYTHON",
    "RHAT_SHARE",
    "RHAT_THRESHOLD",
    "RISE_Z",
    "RISING_ADVICE",
    "STUCK_ADVICE",
    "Vocabulary",
    "capped_advice",
    "capped_warning",
    "chain_line",
    "reference_level",
    "rising_chains",
    "sampler_warning",
    "stall_advice",
    "stalled_chains",
    "stuck_advice",
    "verdict",
]

#: Split R-hat below this counts as agreement between chains (Vehtari et al. 2021 use 1.01 for
#: final results; BNN predictions rarely reach it, and the paper reports ~1.05-1.1).
RHAT_THRESHOLD = 1.05
#: Share of test predictions that must be below the threshold.
RHAT_SHARE = 0.95
#: Smallest acceptable function-space bulk ESS (all chains together): Vehtari et al. (2021)
#: recommend about 100 per chain before trusting R-hat and Monte Carlo errors; 100 in all is the
#: least that makes the Monte Carlo error of an average a tenth of its posterior spread.
MIN_ESS = 100.0

#: The three outcomes, best first.
LEVELS = ("converged", "mixed-multimodal", "not-mixed")
#: The finer level of a ``not-mixed`` verdict that failed only for its pooled ESS: every chain
#: passed the within-chain checks, the chains agree, the sampler is sound, but the draws of
#: all chains together give fewer than :data:`MIN_ESS` at the worst test point
#: (:func:`reference_level`).
FEW_DRAWS = "mixed-few-draws"


def reference_level(found: Mapping[str, Any] | None) -> str | None:
    """The level of a verdict (:func:`verdict`'s dict) as a reference's standing: its
    ``level``, but :data:`FEW_DRAWS` for a ``not-mixed`` one whose only failing is the pooled
    ESS — every chain mixed on its own, which is what makes a reference's model average
    usable; more draws only shrink its Monte Carlo error. None: no verdict.

    Example:
        >>> import numpy as np
        >>> draws = np.random.default_rng(0).normal(size=(2, 150, 100))
        >>> for t in range(1, 150):  # one prediction of the 100 moves slowly (AR(1), 0.8)
        ...     draws[:, t, 0] = 0.8 * draws[:, t - 1, 0] + 0.6 * draws[:, t, 0]
        >>> v = verdict(draws)  # each chain mixed; that prediction has a pooled ESS of 54
        >>> v["level"], reference_level(v)
        ('not-mixed', 'mixed-few-draws')
        >>> reference_level(verdict(np.random.default_rng(0).normal(size=(4, 500, 20))))
        'converged'
    """
    if not found:
        return None
    if found.get("level") == "not-mixed" and found.get("summary") == FEW_DRAWS_SUMMARY:
        return FEW_DRAWS
    return found.get("level")


class _Chains(NamedTuple):
    """What the verdict measures of the draws, before it judges them."""

    draws: np.ndarray  # (chains, samples, quantities)
    share: float  # of the quantities whose split R-hat across chains is below the threshold
    ess_min: float  # the smallest bulk ESS of all chains together (NaN: none finite)
    groups: list[list[int]]  # the chains of each mode
    checks: list[ChainCheck] | None  # each chain's own; None below MIN_WITHIN_DRAWS samples

    @property
    def count(self) -> int:
        return self.draws.shape[0]

    @property
    def samples(self) -> int:
        return self.draws.shape[1]


def _measure(
    draws: np.ndarray, log_density: np.ndarray | None, log_posterior: np.ndarray | None
) -> _Chains:
    """The between-chain R-hat share, pooled ESS and modes, and the within-chain checks."""
    stats = HalfStatistics.of(draws)
    share = share_below(split_rhat(stats), RHAT_THRESHOLD)
    ess = diagnostics.ess(draws)
    ess_min = float(np.min(ess[np.isfinite(ess)])) if np.isfinite(ess).any() else float("nan")
    groups = group_modes(stats, threshold=RHAT_THRESHOLD, share=RHAT_SHARE)
    checks = (
        check_chains(draws, log_density=log_density, log_posterior=log_posterior)
        if draws.shape[1] >= MIN_WITHIN_DRAWS
        else None
    )
    return _Chains(draws, share, ess_min, groups, checks)


@dataclass
class _Findings:
    """The problems and the advice found so far, in the caller's words."""

    vocabulary: Vocabulary
    problems: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)


def _judge_sampler(
    found: _Findings,
    chains: _Chains,
    acceptance_rate: float | None,
    num_divergent: int | None,
    advice: Callable[[], str],
) -> bool:
    """Whether the sampler is stuck or unstable; each with its problem, and the advice."""
    stuck = acceptance_rate is not None and acceptance_rate < THRESHOLDS.min_acceptance
    unstable = (
        num_divergent is not None
        and num_divergent > THRESHOLDS.max_divergent_share * chains.count * chains.samples
    )
    if stuck:
        found.problems.append(
            f"acceptance after burn-in is {acceptance_rate:.3f} < "
            f"{THRESHOLDS.min_acceptance}: the chains are stuck"
        )
    if unstable:
        found.problems.append(
            f"{num_divergent} divergences in {chains.count * chains.samples} kept iterations "
            f"(> {THRESHOLDS.max_divergent_share:.0%})"
        )
    if stuck or unstable:
        found.advice.append(advice())
    return stuck or unstable


def _judge_rise(found: _Findings, log_posterior: np.ndarray | None) -> int | None:
    """How many chains' log posterior still rises while samples are kept (``None``: not
    judged, fewer than 8 per chain), with the problem and advice where some does."""
    if log_posterior is None or not np.shape(log_posterior)[1] >= 8:
        return None
    up, z = rising_chains(log_posterior)
    rising = int(up.sum())
    if rising:
        trace = np.asarray(log_posterior, np.float64)
        half = trace.shape[1] // 2
        climb = trace[:, trace.shape[1] - half :].mean(1) - trace[:, :half].mean(1)
        found.problems.append(
            f"the log posterior was still rising in {rising} of {len(up)} chains "
            f"({chain_names(np.flatnonzero(up).tolist())}) while samples were kept (by up to "
            f"{float(climb[up].max()):.3g} from the first to the second half, "
            f"{float(z[up].max()):.0f} standard errors): burn-in ended before they "
            "reached the typical set"
        )
        found.advice.append(rising_advice(found.vocabulary))
    return rising


def _judge_within(found: _Findings, chains: _Chains) -> bool:
    """Whether every chain mixed on its own; a problem per failed check, or for too few
    draws to judge."""
    if chains.checks is None:
        found.problems.append(
            f"{chains.samples} kept draws per chain are too few to judge each chain on "
            f"its own (its {NUM_SPLITS} pieces need at least {MIN_WITHIN_DRAWS})"
        )
        return False
    found.problems += within_problems(chains.checks, found.vocabulary)
    return all(c.mixed for c in chains.checks)


def _level(chains: _Chains, sampler_problem: bool, within_ok: bool) -> str:
    """One of :data:`LEVELS`."""
    between_ok = chains.count >= 2 and chains.share >= RHAT_SHARE and chains.ess_min >= MIN_ESS
    if sampler_problem or not within_ok:
        return "not-mixed"
    if between_ok:
        return "converged"
    if chains.count < 2 or len(chains.groups) > 1:
        return "mixed-multimodal"
    return "not-mixed"  # one mode, but too few effective draws in all


def _advise_mixing(
    found: _Findings, chains: _Chains, within_ok: bool, level: str, method: str | None
) -> dict[str, Any] | None:
    """The advice for chains that did not mix: first, for chains that more iterations will
    not help (returned, see :func:`stalled_chains`), what does; else running longer."""
    checks = chains.checks
    stall = stalled_chains(chains.draws, checks) if checks is not None and not within_ok else None
    if stall is not None:  # what helps first; longer runs would repeat what did not help
        found.advice.insert(0, stall_advice(stall, found.vocabulary))
    elif level == "not-mixed" and (checks is None or not within_ok):
        found.advice.append(found.vocabulary.extend_until_mixed())
        found.advice.append(tuning_advice(found.vocabulary, method))
    return stall


def _judge_agreement(found: _Findings, chains: _Chains, level: str, within_ok: bool) -> None:
    """The problem of chains that disagree (split R-hat across them), told as modes when each
    chain mixed in its own, and what to do."""
    vocabulary = found.vocabulary
    if chains.share < RHAT_SHARE:
        problem = (
            f"split R-hat < {RHAT_THRESHOLD} on only {chains.share:.0%} of "
            f"{vocabulary.quantities} (needs {RHAT_SHARE:.0%})"
        )
        if level == "mixed-multimodal":
            groups = chains.groups
            found.problems.append(
                f"{problem}: the chains sit in {len(groups)} distinct modes "
                f"(chains {mode_groups(groups)})"
            )
            more = more_chains(vocabulary.settings)
            found.advice.append(
                f"{vocabulary.more_iterations()} only to see whether the modes connect: chains "
                f"in different modes rarely meet; {vocabulary.pooled}"
                + (f"; {more} cover more modes" if more else "")
            )
        else:
            found.problems.append(problem)
            if within_ok:  # else the advice to extend the run until each chain mixes stands
                found.advice.append(
                    f"{vocabulary.more_iterations()} so the chains can meet, or a longer burn-in"
                )


def _judge_draws(
    found: _Findings, chains: _Chains, level: str, stall: dict[str, Any] | None
) -> None:
    """The problem of too few effective draws in all chains together, and the advice to keep
    more."""
    vocabulary = found.vocabulary
    names = vocabulary.settings
    # Chains in different modes have no pooled ESS worth asking for: each chain's own counts.
    if not chains.ess_min >= MIN_ESS and level != "mixed-multimodal":
        found.problems.append(
            f"{vocabulary.ess} is {chains.ess_min:.0f} at its smallest (needs {MIN_ESS:.0f})"
        )
        if stall is None:
            found.advice.append(
                f"keep more samples: {either([vocabulary.more_iterations(), more])}"
                if (more := more_chains(names)) or names.resume
                else "keep more samples"
            )


def _judge_count(found: _Findings, chains: _Chains) -> None:
    """The problem of a single chain, which cannot show that chains agree."""
    names = found.vocabulary.settings
    if chains.count < 2:
        found.problems.append("one chain cannot show that independent chains agree")
        found.advice.append(
            "run at least 2 chains (4 is usual"
            + (f"; {names.num_chains} 4)" if names.num_chains else ")")
        )


def _criteria() -> dict[str, float | int]:
    """The thresholds a verdict applied, stored with it."""
    return {
        "rhat_threshold": RHAT_THRESHOLD,
        "rhat_share": RHAT_SHARE,
        "min_ess": MIN_ESS,
        "min_acceptance": THRESHOLDS.min_acceptance,
        "max_divergent_share": THRESHOLDS.max_divergent_share,
        "rise_z": RISE_Z,
        "within_splits": NUM_SPLITS,
        "within_rhat_threshold": WITHIN_RHAT_THRESHOLD,
        "within_rhat_share": WITHIN_RHAT_SHARE,
        "min_chain_ess": MIN_CHAIN_ESS,
        "chain_ess_share": CHAIN_ESS_SHARE,
        "lpd_z": LPD_Z,
        "lpd_tolerance": LPD_TOLERANCE,
    }


def verdict(
    function_draws: np.ndarray,
    *,
    acceptance_rate: float | None = None,
    num_divergent: int | None = None,
    finished: bool = True,
    log_posterior: np.ndarray | None = None,
    log_density: np.ndarray | None = None,
    vocabulary: Vocabulary = FUNCTION_CLI,
    method: str | None = None,
    step_size: float | None = None,
    given_step_size: float | None = None,
    burn_in: int | None = None,
) -> dict[str, Any]:
    """Whether a run's chains have mixed and converged, how many modes they sit in, and what to
    do.

    Args:
        function_draws: the quantities judged, shaped (chains, samples, ...): predictions on
            test inputs (test points[, outputs]), or a density's parameters; at least 4
            samples per chain (the within-chain checks need ``MIN_WITHIN_DRAWS``).
        acceptance_rate: mean acceptance after burn-in (samplers that have one).
        num_divergent: divergent transitions after burn-in, all chains together.
        finished: whether the run ran all its iterations.
        log_posterior: the log posterior of each kept iteration, (chains, samples), to check
            that no chain is still climbing (skipped with fewer than 8 per chain).
        log_density: ``log p(y_i | x_i, θ_s)`` of each kept draw at each test point,
            (chains, samples, points), for each chain's running log predictive density.
        vocabulary: the words of the sentences: what the quantities are, and flags or Config
            fields (:mod:`bnnkit.metrics.vocabulary`).
        method: the sampler (``"hmc"``, ``"nuts"``, ``"mclmc"``), for its tuning advice.
        step_size: the step size the chains ran at after burn-in (the advice for a stuck
            sampler follows it, :func:`stuck_advice`).
        given_step_size: the step size the run was given.
        burn_in: the run's burn-in iterations.

    Returns:
        JSON-serialisable: ``level`` (one of :data:`LEVELS`), ``summary`` (the level in one
        sentence), ``converged``, ``problems`` and ``advice`` (sentences), ``within`` (per
        chain: ``mixed``, ``rhat_share_below`` over its pieces, ``ess_min``, ``ess_p5``,
        ``lpd`` with its running curve, ``rise_z``, ``rising``; ``None`` with fewer than
        ``MIN_WITHIN_DRAWS`` samples per chain), ``modes`` (``count`` and ``groups`` of chain
        indices), the between-chain ``rhat_share_below`` and ``ess_min``, ``rising_chains``
        (how many, ``None`` when no log posterior was given) and the ``criteria``.
    """
    draws = np.asarray(function_draws, np.float64)
    chains = _measure(draws.reshape((*draws.shape[:2], -1)), log_density, log_posterior)
    found = _Findings(vocabulary)
    if not finished:
        found.problems.append("the run is unfinished (interrupted or still running)")
        found.advice.append(vocabulary.settings.finish)
    sampler_problem = _judge_sampler(
        found,
        chains,
        acceptance_rate,
        num_divergent,
        lambda: stuck_advice(step_size, given_step_size, burn_in, vocabulary=vocabulary),
    )
    rising = _judge_rise(found, log_posterior)
    within_ok = _judge_within(found, chains)
    level = _level(chains, sampler_problem, within_ok)
    stall = _advise_mixing(found, chains, within_ok, level, method)
    _judge_agreement(found, chains, level, within_ok)
    _judge_draws(found, chains, level, stall)
    _judge_count(found, chains)
    return _result(level, found, chains, rising, sampler_problem)


def _result(
    level: str, found: _Findings, chains: _Chains, rising: int | None, sampler_problem: bool
) -> dict[str, Any]:
    """The verdict as :func:`verdict` returns it."""
    checks = chains.checks
    return {
        "level": level,
        "summary": summary(
            level, checks, chains.groups, chains.count, sampler_problem, found.vocabulary
        ),
        "converged": not found.problems,
        "problems": found.problems,
        "advice": list(dict.fromkeys(found.advice)),
        "within": None if checks is None else [c.to_dict() for c in checks],
        "modes": {"count": len(chains.groups), "groups": chains.groups},
        "criteria": _criteria(),
        "rhat_share_below": chains.share,
        "ess_min": chains.ess_min,
        "rising_chains": rising,
    }
