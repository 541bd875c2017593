"""The sampler's own health while a run samples: stuck (acceptance after burn-in below
``min_acceptance``), unstable (divergences above ``max_divergent_share`` of the kept
iterations; both the verdict's level 0 thresholds, :data:`~bnnkit.metrics.findings.
THRESHOLDS`), and trajectories cut short by the cap on their length (HMC, NUTS).

One set of thresholds and one remedy serve the warning and the verdict, so a run warned about
during sampling is one whose level 0 will fail, and both advise the same change
(:func:`bnnkit.metrics.numerics.step_remedy`: it follows the step size the chains ran at).
Each sentence names settings as the caller's ``spell`` does (the flags of the command that
made the run, :func:`bnnkit.command_flags.spelling`; or Config fields in Python).

Example:
    >>> warning = sampler_warning(0.0, 70, 360)
    >>> warning.split(";")[:2]
    ['the chains look stuck: acceptance 0.00 after burn-in (below 0.05)', \
' 70 divergences in 360 transitions (19%, above 1%)']
    >>> warning.split("; ")[-1][:35]
    'a smaller step: a smaller step_size'
    >>> sampler_warning(0.85, 3, 360) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable

from bnnkit.metrics.findings import THRESHOLDS, Remedy, python_name
from bnnkit.metrics.numerics import step_remedy


def sampler_warning(
    acceptance_rate: float,
    num_divergent: int,
    num_transitions: int,
    *,
    step_size: float | None = None,
    given_step_size: float | None = None,
    spell: Callable[[str], str | None] = python_name,
) -> str | None:
    """A warning naming the numbers when a sampler is stuck or unstable after burn-in, with
    what would help.

    Args:
        acceptance_rate: mean acceptance after burn-in.
        num_divergent: divergent transitions after burn-in, all chains together.
        num_transitions: transitions after burn-in, all chains together.
        step_size: the step size the chains ran at after burn-in (the remedy follows it).
        given_step_size: the step size the run was given.
        spell: how the caller names a setting.

    Returns:
        One sentence, or ``None`` when the sampler looks healthy.
    """
    t = THRESHOLDS
    problems = []
    if acceptance_rate < t.min_acceptance:
        problems.append(
            f"acceptance {acceptance_rate:.2f} after burn-in (below {t.min_acceptance})"
        )
    if num_transitions and num_divergent > t.max_divergent_share * num_transitions:
        problems.append(
            f"{num_divergent} divergences in {num_transitions} transitions "
            f"({num_divergent / num_transitions:.0%}, above {t.max_divergent_share:.0%})"
        )
    if not problems:
        return None
    what = "stuck" if acceptance_rate < t.min_acceptance else "unstable"
    remedy = step_remedy(step_size, given_step_size).text(spell)
    return f"the chains look {what}: {'; '.join(problems)}; {remedy}"


#: Each sampler's setting that caps its trajectory's length.
CAP_SETTINGS = {"hmc": "max_num_leapfrog_steps", "nuts": "max_tree_depth"}


def capped_remedy(method: str | None) -> Remedy:
    """What helps trajectories cut short by ``method``'s cap (``None``: HMC's).

    Example:
        >>> capped_remedy("nuts").text()[:44]
        'longer trajectories: a larger max_tree_depth'
    """
    cap = CAP_SETTINGS.get(str(method), CAP_SETTINGS["hmc"])
    return Remedy(
        "longer trajectories",
        ((cap, "larger"),),
        "or standardise badly scaled or strongly correlated parameters",
    )


def capped_warning(
    num_capped: int,
    num_transitions: int,
    method: str | None = None,
    spell: Callable[[str], str | None] = python_name,
) -> str | None:
    """A sentence naming the share of iterations after burn-in whose trajectory hit the cap on
    its length (HMC's ``max_num_leapfrog_steps``, NUTS's ``max_tree_depth``), with what helps.

    A capped trajectory is still a valid transition (the cap is fixed), so this is no
    failure of the verdict: the chains mix more slowly than the tuning asked for and every
    capped iteration costs the cap's gradients, which is where such a run's time goes.

    Args:
        num_capped: capped iterations after burn-in, all chains together.
        num_transitions: iterations after burn-in, all chains together.
        method: ``"hmc"`` or ``"nuts"``, whose cap it is (``None``: HMC's).
        spell: how the caller names a setting (a command without the cap's flag: left out).

    Example:
        >>> capped_warning(970, 1000, "hmc")[:72]
        '970 of 1000 iterations after burn-in (97%) hit the cap on trajectory len'
        >>> capped_warning(0, 1000, "hmc") is None
        True
    """
    if not num_capped or not num_transitions:
        return None
    return (
        f"{num_capped} of {num_transitions} iterations after burn-in "
        f"({num_capped / num_transitions:.0%}) hit the cap on trajectory length: they were "
        f"cut short, so the chains mix more slowly than tuned; {capped_remedy(method).text(spell)}"
    )
