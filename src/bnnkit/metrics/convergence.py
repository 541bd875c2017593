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

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bnnkit.metrics import diagnostics
from bnnkit.metrics.modes import HalfStatistics, group_modes, share_below, split_rhat
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
    "MAX_DIVERGENT_SHARE",
    "MIN_ACCEPTANCE",
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
#: A chain whose acceptance rate after burn-in is below this is stuck.
MIN_ACCEPTANCE = 0.05
#: Divergences above this share of the kept iterations mean the step size is unstable.
MAX_DIVERGENT_SHARE = 0.10

#: The three outcomes, best first.
LEVELS = ("converged", "mixed-multimodal", "not-mixed")
#: The finer level of a ``not-mixed`` verdict that failed only for its pooled ESS: every chain
#: passed the within-chain checks, the chains agree, the sampler is sound, but the draws of
#: all chains together give fewer than :data:`MIN_ESS` at the worst test point
#: (:func:`reference_level`).
FEW_DRAWS = "mixed-few-draws"
#: The summary of that case.
_FEW_DRAWS_SUMMARY = "the chains agree but have too few effective draws in all"

#: An adapted step size this many times the given one counts as raised by burn-in.
RAISED = 1.5
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
        f"more {unit} will not help here: {_chains(stall['chains'])} kept "
        f"{stall['draws']} draws each, {STALL_LENGTH} times their first {stall['early']}, "
        f"and their {vocabulary.ess} at the slowest 5 % grew only from "
        f"{stall['ess_early']:.1f} to {stall['ess']:.1f} (a mixing chain's grows with its "
        f"length){instead}"
    )


def _rising_advice(vocabulary: Vocabulary) -> str:
    names = vocabulary.settings
    longer = None if names.num_burn_in is None else f"run a longer {names.num_burn_in}"
    return either([longer, names.good_start]) or "run a longer burn-in"


def stuck_advice(
    step_size: float | None = None,
    given_step_size: float | None = None,
    burn_in: int | None = None,
    *,
    vocabulary: Vocabulary = FUNCTION_CLI,
) -> str:
    """What to do about a stuck or unstable sampler, following the step size it ran at.

    When burn-in raised the step size above the given one (dual averaging on a short burn-in
    can overshoot), a smaller given step size would change nothing: the advice is then a
    longer burn-in, a higher target acceptance, or keeping the given step size.

    Args:
        step_size: the step size the chains ran at after burn-in (their mean); ``None``
            when unknown.
        given_step_size: the step size the run was given.
        burn_in: the burn-in iterations the adaptation had.
        vocabulary: how the advice names settings (flags or Config fields).

    Example:
        >>> stuck_advice(1.4e-4, 1e-5, 10)[:66]
        'burn-in raised the step size to 0.00014 (from --step-size 1e-05), '
        >>> stuck_advice(1e-5, 1e-5).startswith("use a smaller --step-size (the chains ran at")
        True
        >>> stuck_advice(vocabulary=PARAMETERS_PYTHON)
        'use a smaller step_size, a longer num_burn_in so the step size adapts, or adapt="mass"'
    """
    names = vocabulary.settings
    adapts = (
        None
        if names.num_burn_in is None
        else f"a longer {names.num_burn_in} so the step size adapts"
    )
    if step_size is None:
        smaller = None if names.step_size is None else f"use a smaller {names.step_size}"
        return either([smaller, adapts, names.adapt_mass]) or "a longer burn-in"
    if given_step_size is not None and step_size > RAISED * given_step_size:
        longer = f" (it had {burn_in} iterations)" if burn_in is not None else ""
        given = (
            "" if names.step_size is None else f" (from {names.step_size} {given_step_size:.2g})"
        )
        keep = (
            None if names.adapt_none is None else f"{names.adapt_none} keeps the step size as given"
        )
        return (
            f"burn-in raised the step size to {step_size:.2g}{given}, too large for the "
            "chains after it: "
            + either(
                [
                    None
                    if names.num_burn_in is None
                    else f"a longer {names.num_burn_in}{longer} lets the adaptation settle",
                    None
                    if names.target_accept_rate is None
                    else f"a higher {names.target_accept_rate} makes it choose a smaller step",
                    keep,
                ]
            )
        )
    smaller = (
        f"the chains ran at {step_size:.2g}"
        if names.step_size is None
        else f"use a smaller {names.step_size} (the chains ran at {step_size:.2g})"
    )
    return either([smaller, adapts, names.adapt_mass])


def _more_chains(names: Any) -> str | None:
    return None if names.num_chains is None else f"more chains (a larger {names.num_chains})"


def _tuning_advice(vocabulary: Vocabulary, method: str | None) -> str:
    """What to change when more iterations do not make a chain mix, per sampler."""
    burn_in = vocabulary.settings.num_burn_in or "burn-in"
    if method == "mclmc":
        return (
            f"if a chain still fails, a longer {burn_in} for the tuning of its step size "
            "and trajectory, or a smaller energy-variance target so its steps are more "
            "accurate"
        )
    return f"if a chain still fails, a longer {burn_in} so its step size and mass matrix adapt"


#: What to do about chains still climbing after burn-in (command-line words).
RISING_ADVICE = _rising_advice(FUNCTION_CLI)
#: What to do about a stuck or unstable sampler when the step size it ran at is unknown
#: (command-line words).
STUCK_ADVICE = stuck_advice()


def sampler_warning(
    acceptance_rate: float,
    num_divergent: int,
    num_transitions: int,
    *,
    step_size: float | None = None,
    given_step_size: float | None = None,
    burn_in: int | None = None,
    vocabulary: Vocabulary = FUNCTION_CLI,
) -> str | None:
    """A warning naming the numbers when a sampler is stuck or unstable after burn-in.

    The thresholds are the verdict's (:data:`MIN_ACCEPTANCE`, :data:`MAX_DIVERGENT_SHARE`), so a
    run warned about during sampling is one whose verdict will fail.

    Args:
        acceptance_rate: mean acceptance after burn-in.
        num_divergent: divergent transitions after burn-in, all chains together.
        num_transitions: transitions after burn-in, all chains together.
        step_size: the step size the chains ran at after burn-in (the advice follows it,
            :func:`stuck_advice`).
        given_step_size: the step size the run was given.
        burn_in: the run's burn-in iterations.
        vocabulary: how the advice names settings (flags or Config fields).

    Returns:
        One sentence with the advice, or ``None`` when the sampler looks healthy.

    Example:
        >>> warning = sampler_warning(0.0, 70, 360)
        >>> warning.split(";")[:2]
        ['the chains look stuck: acceptance 0.00 after burn-in (below 0.05)', \
' 70 divergences in 360 transitions (19%, above 10%)']
        >>> warning.endswith("or --adapt mass")
        True
        >>> sampler_warning(0.0, 70, 360, vocabulary=PARAMETERS_PYTHON).endswith('adapt="mass"')
        True
        >>> sampler_warning(0.85, 1, 360) is None
        True
    """
    problems = []
    if acceptance_rate < MIN_ACCEPTANCE:
        problems.append(f"acceptance {acceptance_rate:.2f} after burn-in (below {MIN_ACCEPTANCE})")
    if num_transitions and num_divergent > MAX_DIVERGENT_SHARE * num_transitions:
        problems.append(
            f"{num_divergent} divergences in {num_transitions} transitions "
            f"({num_divergent / num_transitions:.0%}, above "
            f"{MAX_DIVERGENT_SHARE:.0%})"
        )
    if not problems:
        return None
    what = "stuck" if acceptance_rate < MIN_ACCEPTANCE else "unstable"
    advice = stuck_advice(step_size, given_step_size, burn_in, vocabulary=vocabulary)
    return f"the chains look {what}: {'; '.join(problems)}; {advice}"


#: The flag of each sampler's cap on its trajectory's length.
CAP_FLAGS = {
    "hmc": ("--max-num-leapfrog-steps", " (the tuning asked for longer trajectories)"),
    "nuts": ("--max-tree-depth", ""),
}
#: What to do about trajectories cut short by the cap, whatever the command.
_RESCALE = "standardise badly scaled or strongly correlated parameters"
#: What to do about trajectories cut short by the cap on their length, per sampler.
CAPPED_ADVICE = {
    method: f"raise {cap}{why}, or {_RESCALE}" for method, (cap, why) in CAP_FLAGS.items()
}


def capped_advice(method: str | None, command: str | None = None) -> str:
    """What to do about capped trajectories of ``method``'s chains, naming the cap's flag only
    where ``bnnkit COMMAND`` takes it (``bnnkit reference`` sets no cap).

    Example:
        >>> capped_advice("nuts")
        'raise --max-tree-depth, or standardise badly scaled or strongly correlated parameters'
        >>> capped_advice("hmc", "reference")
        'standardise badly scaled or strongly correlated parameters'
    """
    from bnnkit.metrics.vocabulary import command_parser

    cap, why = CAP_FLAGS.get(str(method), CAP_FLAGS["hmc"])
    if command is not None and cap not in command_parser(command)._option_string_actions:
        return _RESCALE
    return f"raise {cap}{why}, or {_RESCALE}"


def capped_warning(
    num_capped: int, num_transitions: int, method: str | None = None, command: str | None = None
) -> str | None:
    """A sentence naming the share of iterations after burn-in whose trajectory hit the cap on
    its length (HMC's ``max_num_leapfrog_steps``, NUTS's ``max_tree_depth``), with the advice
    that applies.

    A capped trajectory is still a valid transition (the cap is fixed), so this is no
    convergence failure: the chains mix more slowly than the tuning asked for and every capped
    iteration costs the cap's gradients, which is where such a run's time goes.

    Args:
        num_capped: capped iterations after burn-in, all chains together.
        num_transitions: iterations after burn-in, all chains together.
        method: ``"hmc"`` or ``"nuts"``, whose advice applies (``None``: HMC's).
        command: the command that made the run (``None``: the method's own); the advice names
            only flags it takes.

    Returns:
        The sentence, or ``None`` when no trajectory was capped.

    Example:
        >>> capped_warning(970, 1000, "hmc")[:72]
        '970 of 1000 iterations after burn-in (97%) hit the cap on trajectory len'
        >>> capped_warning(0, 1000, "hmc") is None
        True
    """
    if not num_capped or not num_transitions:
        return None
    advice = capped_advice(method, command)
    return (
        f"{num_capped} of {num_transitions} iterations after burn-in "
        f"({num_capped / num_transitions:.0%}) hit the cap on trajectory length: they were "
        f"cut short, so the chains mix more slowly than tuned; {advice}"
    )


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


def _chains(indices: Sequence[int]) -> str:
    """``chain 2`` or ``chains 0, 1 and 3``."""
    names = [str(i) for i in indices]
    if len(names) == 1:
        return f"chain {names[0]}"
    return f"chains {', '.join(names[:-1])} and {names[-1]}"


def _groups(groups: Sequence[Sequence[int]]) -> str:
    """``0, 2 | 1, 3``: the chains of each mode."""
    return " | ".join(", ".join(str(c) for c in group) for group in groups)


def _values(values: Sequence[float], form: str) -> str:
    return ", ".join(format(v, form) for v in values)


def _in_errors(value: float, se: float) -> str:
    return f"{abs(value) / se:.0f}" if se > 0 else "∞"


def _within_problems(checks: Sequence[ChainCheck], vocabulary: Vocabulary) -> list[str]:
    """One sentence per within-chain check that some chain fails, naming those chains (the
    rise is told by the verdict's own sentence)."""
    problems = []
    what = vocabulary.quantities
    bad = [c for c in checks if not c.rhat_ok]
    if bad:
        problems.append(
            f"split R-hat within {_chains([c.chain for c in bad])} (its {NUM_SPLITS} "
            f"consecutive pieces as chains) is below {WITHIN_RHAT_THRESHOLD} on only "
            f"{_values([c.rhat_share_below for c in bad], '.0%')} of {what} (needs "
            f"{WITHIN_RHAT_SHARE:.0%}): the chain drifts or visits regions for long stretches"
        )
    bad = [c for c in checks if not c.ess_ok]
    if bad:
        problems.append(
            f"{vocabulary.ess} within {_chains([c.chain for c in bad])} is "
            f"{_values([c.ess_low for c in bad], '.0f')} on {CHAIN_ESS_SHARE:.0%} of {what} "
            f"(needs {MIN_CHAIN_ESS:.0f} per chain)"
        )
    bad = [c for c in checks if not c.lpd_ok]
    if bad:
        problems.append(
            f"the running log predictive density of {_chains([c.chain for c in bad])} still "
            f"changes over its last half: the model averages of its two halves differ by "
            f"{_values([c.lpd.drift for c in bad], '+.3f')} nats per test point "
            f"({', '.join(_in_errors(c.lpd.drift, c.lpd.drift_se) for c in bad)} standard "
            f"errors; flat within max({LPD_Z:.0f} standard errors, {LPD_TOLERANCE}))"
        )
    return problems


def _summary(
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
            f"{_groups(groups)}); {vocabulary.pooled}"
        )
    if checks is None:
        return "too few kept draws per chain to judge each chain"
    failing = [c.chain for c in checks if not c.mixed]
    if failing:
        return f"{_chains(failing)} failed the within-chain checks"
    if sampler_problem:
        return "the sampler is stuck or unstable"
    return _FEW_DRAWS_SUMMARY


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
    if found.get("level") == "not-mixed" and found.get("summary") == _FEW_DRAWS_SUMMARY:
        return FEW_DRAWS
    return found.get("level")


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
    chains, samples = draws.shape[:2]
    draws = draws.reshape((chains, samples, -1))
    names = vocabulary.settings
    stats = HalfStatistics.of(draws)
    share = share_below(split_rhat(stats), RHAT_THRESHOLD)
    ess = diagnostics.ess(draws)
    ess_min = float(np.min(ess[np.isfinite(ess)])) if np.isfinite(ess).any() else float("nan")
    groups = group_modes(stats, threshold=RHAT_THRESHOLD, share=RHAT_SHARE)
    checks = (
        check_chains(draws, log_density=log_density, log_posterior=log_posterior)
        if samples >= MIN_WITHIN_DRAWS
        else None
    )

    problems: list[str] = []
    advice: list[str] = []
    if not finished:
        problems.append("the run is unfinished (interrupted or still running)")
        advice.append(names.finish)
    stuck = acceptance_rate is not None and acceptance_rate < MIN_ACCEPTANCE
    unstable = num_divergent is not None and num_divergent > MAX_DIVERGENT_SHARE * chains * samples
    if stuck:
        problems.append(
            f"acceptance after burn-in is {acceptance_rate:.3f} < "
            f"{MIN_ACCEPTANCE}: the chains are stuck"
        )
    if unstable:
        problems.append(
            f"{num_divergent} divergences in {chains * samples} kept iterations "
            f"(> {MAX_DIVERGENT_SHARE:.0%})"
        )
    if stuck or unstable:
        advice.append(stuck_advice(step_size, given_step_size, burn_in, vocabulary=vocabulary))
    rising = None
    if log_posterior is not None and np.shape(log_posterior)[1] >= 8:
        up, z = rising_chains(log_posterior)
        rising = int(up.sum())
        if rising:
            trace = np.asarray(log_posterior, np.float64)
            half = trace.shape[1] // 2
            climb = trace[:, trace.shape[1] - half :].mean(1) - trace[:, :half].mean(1)
            problems.append(
                f"the log posterior was still rising in {rising} of {len(up)} chains "
                f"({_chains(np.flatnonzero(up).tolist())}) while samples were kept (by up to "
                f"{float(climb[up].max()):.3g} from the first to the second half, "
                f"{float(z[up].max()):.0f} standard errors): burn-in ended before they "
                "reached the typical set"
            )
            advice.append(_rising_advice(vocabulary))

    within_ok = checks is not None and all(c.mixed for c in checks)
    if checks is None:
        problems.append(
            f"{samples} kept draws per chain are too few to judge each chain on "
            f"its own (its {NUM_SPLITS} pieces need at least {MIN_WITHIN_DRAWS})"
        )
    else:
        problems += _within_problems(checks, vocabulary)
    between_ok = chains >= 2 and share >= RHAT_SHARE and ess_min >= MIN_ESS
    if stuck or unstable or not within_ok:
        level = "not-mixed"
    elif between_ok:
        level = "converged"
    elif chains < 2 or len(groups) > 1:
        level = "mixed-multimodal"
    else:
        level = "not-mixed"  # one mode, but too few effective draws in all
    stall = stalled_chains(draws, checks) if checks is not None and not within_ok else None
    if stall is not None:  # what helps first; longer runs would repeat what did not help
        advice.insert(0, stall_advice(stall, vocabulary))
    elif level == "not-mixed" and (checks is None or not within_ok):
        advice.append(vocabulary.extend_until_mixed())
        advice.append(_tuning_advice(vocabulary, method))

    if share < RHAT_SHARE:
        problem = (
            f"split R-hat < {RHAT_THRESHOLD} on only {share:.0%} of "
            f"{vocabulary.quantities} (needs {RHAT_SHARE:.0%})"
        )
        if level == "mixed-multimodal":
            problems.append(
                f"{problem}: the chains sit in {len(groups)} distinct modes "
                f"(chains {_groups(groups)})"
            )
            advice.append(
                f"{vocabulary.more_iterations()} only to see whether the modes connect: chains "
                f"in different modes rarely meet; {vocabulary.pooled}"
                + (f"; {more} cover more modes" if (more := _more_chains(names)) else "")
            )
        else:
            problems.append(problem)
            if within_ok:  # else the advice to extend the run until each chain mixes stands
                advice.append(
                    f"{vocabulary.more_iterations()} so the chains can meet, or a longer burn-in"
                )
    # Chains in different modes have no pooled ESS worth asking for: each chain's own counts.
    if not ess_min >= MIN_ESS and level != "mixed-multimodal":
        problems.append(f"{vocabulary.ess} is {ess_min:.0f} at its smallest (needs {MIN_ESS:.0f})")
        if stall is None:
            advice.append(
                f"keep more samples: {either([vocabulary.more_iterations(), more])}"
                if (more := _more_chains(names)) or names.resume
                else "keep more samples"
            )
    if chains < 2:
        problems.append("one chain cannot show that independent chains agree")
        advice.append(
            "run at least 2 chains (4 is usual"
            + (f"; {names.num_chains} 4)" if names.num_chains else ")")
        )
    return {
        "level": level,
        "summary": _summary(level, checks, groups, chains, stuck or unstable, vocabulary),
        "converged": not problems,
        "problems": problems,
        "advice": list(dict.fromkeys(advice)),
        "within": None if checks is None else [c.to_dict() for c in checks],
        "modes": {"count": len(groups), "groups": groups},
        "criteria": {
            "rhat_threshold": RHAT_THRESHOLD,
            "rhat_share": RHAT_SHARE,
            "min_ess": MIN_ESS,
            "min_acceptance": MIN_ACCEPTANCE,
            "max_divergent_share": MAX_DIVERGENT_SHARE,
            "rise_z": RISE_Z,
            "within_splits": NUM_SPLITS,
            "within_rhat_threshold": WITHIN_RHAT_THRESHOLD,
            "within_rhat_share": WITHIN_RHAT_SHARE,
            "min_chain_ess": MIN_CHAIN_ESS,
            "chain_ess_share": CHAIN_ESS_SHARE,
            "lpd_z": LPD_Z,
            "lpd_tolerance": LPD_TOLERANCE,
        },
        "rhat_share_below": share,
        "ess_min": ess_min,
        "rising_chains": rising,
    }
