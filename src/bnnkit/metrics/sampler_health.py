"""The sampler's own health, as the convergence verdict and the warnings while a run samples
judge it: stuck (acceptance after burn-in below ``min_acceptance``), unstable (divergences
above ``max_divergent_share`` of the kept iterations; both the verdict's level 0 thresholds,
:data:`~bnnkit.metrics.findings.THRESHOLDS`), and trajectories cut short by the
cap on their length (HMC, NUTS).

One set of thresholds and one wording serve both, so a run warned about during sampling is
one whose verdict will fail, and both advise the same change. The advice follows the step size
the chains ran at: when burn-in raised it above the given one, a smaller given step size would
change nothing (:func:`stuck_advice`). Each sentence names settings in the caller's
:class:`~bnnkit.metrics.vocabulary.Vocabulary` (flags or Config fields), and only the flags of
the command that made the run.
"""

from __future__ import annotations

from bnnkit.metrics.findings import THRESHOLDS
from bnnkit.metrics.vocabulary import CLI_WORDS, Vocabulary, either

__all__ = [
    "CAPPED_ADVICE",
    "CAP_FLAGS",
    "RAISED",
    "STUCK_ADVICE",
    "capped_advice",
    "capped_warning",
    "sampler_warning",
    "stuck_advice",
]

#: An adapted step size this many times the given one counts as raised by burn-in.
RAISED = 1.5


def stuck_advice(
    step_size: float | None = None,
    given_step_size: float | None = None,
    burn_in: int | None = None,
    *,
    vocabulary: Vocabulary = CLI_WORDS,
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
        >>> from bnnkit.metrics.vocabulary import PYTHON_WORDS
        >>> stuck_advice(vocabulary=PYTHON_WORDS)
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
    vocabulary: Vocabulary = CLI_WORDS,
) -> str | None:
    """A warning naming the numbers when a sampler is stuck or unstable after burn-in.

    The thresholds are the verdict's level 0 (``min_acceptance``, ``max_divergent_share``), so
    a run warned about during sampling is one whose verdict will fail.

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
' 70 divergences in 360 transitions (19%, above 1%)']
        >>> warning.endswith("or --adapt mass")
        True
        >>> from bnnkit.metrics.vocabulary import PYTHON_WORDS
        >>> sampler_warning(0.0, 70, 360, vocabulary=PYTHON_WORDS).endswith('adapt="mass"')
        True
        >>> sampler_warning(0.85, 3, 360) is None
        True
    """
    problems = []
    if acceptance_rate < THRESHOLDS.min_acceptance:
        problems.append(
            f"acceptance {acceptance_rate:.2f} after burn-in (below {THRESHOLDS.min_acceptance})"
        )
    if num_transitions and num_divergent > THRESHOLDS.max_divergent_share * num_transitions:
        problems.append(
            f"{num_divergent} divergences in {num_transitions} transitions "
            f"({num_divergent / num_transitions:.0%}, above "
            f"{THRESHOLDS.max_divergent_share:.0%})"
        )
    if not problems:
        return None
    what = "stuck" if acceptance_rate < THRESHOLDS.min_acceptance else "unstable"
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
    from bnnkit.metrics.vocabulary import command_flags

    cap, why = CAP_FLAGS.get(str(method), CAP_FLAGS["hmc"])
    if command is not None and cap not in command_flags(command):
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
