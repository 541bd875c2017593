r"""Level 0 of a reference's verdict: whether the sampler's numerics can be trusted, from what
it logged per iteration after burn-in.

- **Adjusted samplers** (HMC, NUTS, ``mclmc --adjusted``): a divergent transition marks a region
  the integrator could not enter, so the chain under-visits it; the share of kept iterations
  with a divergence must be at most :data:`MAX_DIVERGENT_SHARE`, and the acceptance at least
  the sampler health's :data:`~bnnkit.metrics.sampler_health.MIN_ACCEPTANCE` (a stuck chain).
- **Unadjusted MCLMC**: no Metropolis step corrects its integration error, so its bias follows
  the energy error of its steps, which the tuning aims at ``Var[ΔE]/d = v`` (the
  ``energy_var_end`` the run was given). The log holds, per iteration and chain, the mean of
  ``ΔE²/d`` over the iteration's steps (``energy_var``; :class:`~bnnkit.inference.mclmc_state.
  MCLMCInfo`) and the steps cut off for an energy error beyond ``energy_var_max_ratio · d · v``
  (``num_divergent``). Two checks, each on every chain:

  - the bulk: the median over kept iterations of ``energy_var / v`` at most
    :data:`MAX_ENERGY_RATIO` (``ΔE² ∝ ε⁶``: a ratio of 2 is a step 12 % longer than tuned; an
    over-stepped chain reads tens to thousands);
  - spikes: an iteration whose ``energy_var`` exceeds :data:`SPIKE_FACTOR` · v. When the
    energy errors are as Gaussian as at the target, an iteration's mean of 10 steps'
    ``ΔE²/(d v)`` is a tenth of a χ²₁₀, past 10 with probability about 1e-16: a spike is a
    step from outside that bulk, where the unadjusted chain is biased most. Their share of
    kept iterations must be at most :data:`MAX_SPIKE_SHARE`;
  - cut-off steps: an iteration that undid a step (``ΔE²`` beyond ``energy_var_max_ratio``
    times its target, or not finite, at ε and at every shorter step retried,
    ``num_divergent``): the integration failed there. At most :data:`MAX_SPIKE_SHARE` of kept
    iterations too. A step that a shorter retry resolved (``num_retried``) counts as a spike:
    the tuned ε failed there.

  Spikes alone fail level 0, so the run is never certified, but leave it ``spikes_only``: the
  verdict can still call it reproducible (:mod:`bnnkit.metrics.levels`). On a network's
  posterior the energy error's tail is heavy wherever the curvature varies (spikes in a few
  per cent of iterations, with a ReLU or a smooth activation, a fixed or a learned noise
  alike), and the calibration in ``docs/concepts/reference.md`` measured such a chain's model
  average against an exact (HMC) reference of the same posterior: apart by about its own
  half-to-half distance, far within the distance to a deep ensemble. A bulk above its target
  or steps cut off are numerics that failed, and block every verdict above "not a
  reference".

A run whose log lacks these records (a run made before MCLMC logged its energy errors, a
minibatch sampler, which logs neither) has level 0 "not recorded".

Example:
    >>> kept = [{"divergent": [False, True], "acceptance_rate": [0.9, 0.8]}] * 3 + [
    ...     {"divergent": [False, False], "acceptance_rate": [0.9, 0.8]}] * 97
    >>> found = numerics(kept, "hmc", {})
    >>> found["status"], found["divergent_share"]  # 3 of 200 kept iterations
    ('fail', 0.015)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnnkit.metrics.sampler_health import MIN_ACCEPTANCE, stuck_advice
from bnnkit.metrics.vocabulary import FUNCTION_CLI, Vocabulary, either

#: The samplers whose every transition is Metropolis-corrected (``mclmc`` only with
#: ``adjusted``).
ADJUSTED = ("hmc", "nuts")
#: Share of kept iterations with a divergence an adjusted sampler may have. A divergence marks a
#: region of the posterior the chain could not enter; at 1 % what the chain misses is below the
#: precision (about 2 % in total variation, :mod:`bnnkit.metrics.halves`) at which a reference
#: ranks approximations. Stricter than the sampler health's 10 %, which flags a broken run.
MAX_DIVERGENT_SHARE = 0.01
#: The bulk's energy variance (median over kept iterations) at most this many times its target.
MAX_ENERGY_RATIO = 2.0
#: An iteration whose mean ``ΔE²/d`` exceeds this many times the target is a spike.
SPIKE_FACTOR = 10.0
#: Share of kept iterations (per chain) that may spike.
MAX_SPIKE_SHARE = 0.01
#: The unadjusted MCLMC's target when the run's settings do not name one (its default).
DEFAULT_ENERGY_VAR = 0.1


def _takes(command: str | None, flag: str) -> bool:
    """Whether ``bnnkit COMMAND`` takes ``flag`` (any command's flags for an unknown one)."""
    from bnnkit.errors import ConfigError
    from bnnkit.metrics.vocabulary import command_flags

    if command is None:
        return True
    try:
        return flag in command_flags(command)
    except ConfigError:
        return True


def energy_advice(
    target: float, vocabulary: Vocabulary, command: str | None, *, spikes: bool = False
) -> str:
    """What makes an unadjusted MCLMC chain's steps more accurate, in the flags of the command
    that made the run. For spikes alone (the bulk at its target) a Metropolis-adjusted sampler
    comes first: a spike is a step too long for the region it starts in, which a longer tuning
    does not change (the tuning sets one step for the whole chain) and a rejection undoes.

    Example:
        >>> energy_advice(0.1, FUNCTION_CLI, "mclmc")[:54]
        'a smaller --energy-var-end (it was 0.1) for shorter st'
        >>> from bnnkit.metrics.vocabulary import cli_vocabulary
        >>> energy_advice(0.1, cli_vocabulary("reference", from_ensemble=True), "reference")
        'a longer --num-tuning so the step size settles, or --sampler nuts (Metropolis-adjusted)'
        >>> energy_advice(0.1, FUNCTION_CLI, "mclmc", spikes=True)[:46]
        '--adjusted (Metropolis-adjusted: a step whose '
    """
    names = vocabulary.settings
    adjusted = [
        "--adjusted (Metropolis-adjusted" if _takes(command, "--adjusted") else None,
        "--sampler nuts (Metropolis-adjusted"
        if command is not None and _takes(command, "--sampler")
        else None,
    ]
    smaller = (
        f"a smaller --energy-var-end (it was {target:g}) for shorter steps"
        if _takes(command, "--energy-var-end")
        else None
    )
    if spikes:
        rejects = ": a step whose energy error spikes is rejected)"
        return either([a + rejects if a else None for a in adjusted] + [smaller])
    longer = (
        None
        if names.num_burn_in is None
        else f"a longer {names.num_burn_in} so the step size settles"
    )
    return either([smaller, longer] + [a + ")" if a else None for a in adjusted])


def _unrecorded(why: str) -> dict[str, Any]:
    return {"status": "not recorded", "why": why, "problems": [], "advice": []}


def numerics(
    kept: list[dict],
    method: str | None,
    method_config: dict[str, Any],
    *,
    vocabulary: Vocabulary = FUNCTION_CLI,
    command: str | None = None,
) -> dict[str, Any]:
    """Level 0: the numerics of a Markov chain sampler after burn-in.

    Args:
        kept: the log lines of the kept iterations (after burn-in), one per iteration with a
            value per chain.
        method: the sampler (``"hmc"``, ``"nuts"``, ``"mclmc"``, ...).
        method_config: its settings as the run recorded them (``adjusted``,
            ``energy_var_end``, ``step_size``, ``num_burn_in``).
        vocabulary: the words of the advice (the flags of the command that made the run).
        command: that command (``None``: unknown), whose flags alone the advice names.

    Returns:
        ``status`` ("pass", "fail" or "not recorded", with ``why``), the figures judged,
        ``problems`` and ``advice``.
    """
    if not kept or "divergent" not in kept[0]:
        return _unrecorded("the sampler logs no divergences or energy errors")
    if method == "mclmc" and not method_config.get("adjusted"):
        if "energy_var" not in kept[0]:
            return _unrecorded("the run's log holds no energy errors (made before they were)")
        return _energy(kept, method_config, vocabulary, command)
    return _divergences(kept, method_config, vocabulary)


def _divergences(
    kept: list[dict], method_config: dict[str, Any], vocabulary: Vocabulary
) -> dict[str, Any]:
    """Level 0 of an adjusted sampler: divergences and acceptance."""
    divergent = np.asarray([line["divergent"] for line in kept], bool)
    share = float(divergent.mean())
    acceptance = (
        float(np.mean([line["acceptance_rate"] for line in kept]))
        if "acceptance_rate" in kept[0]
        else None
    )
    problems = []
    if share > MAX_DIVERGENT_SHARE:
        problems.append(
            f"{int(divergent.sum())} of {divergent.size} kept iterations diverged "
            f"({share:.1%}; at most {MAX_DIVERGENT_SHARE:.0%})"
        )
    if acceptance is not None and acceptance < MIN_ACCEPTANCE:
        problems.append(f"acceptance after burn-in is {acceptance:.3f} (< {MIN_ACCEPTANCE})")
    steps = [float(s) for s in kept[-1].get("step_size", ())]
    advice = (
        [
            stuck_advice(
                float(np.mean(steps)) if steps else None,
                method_config.get("step_size"),
                method_config.get("num_burn_in"),
                vocabulary=vocabulary,
            )
        ]
        if problems
        else []
    )
    return {
        "status": "fail" if problems else "pass",
        "kind": "divergences",
        "divergent_share": share,
        "acceptance_rate": acceptance,
        "problems": problems,
        "advice": advice,
    }


def _energy(
    kept: list[dict], method_config: dict[str, Any], vocabulary: Vocabulary, command: str | None
) -> dict[str, Any]:
    """Level 0 of unadjusted MCLMC: the bulk's energy variance and the spikes, per chain."""
    target = float(method_config.get("energy_var_end") or DEFAULT_ENERGY_VAR)
    energy = np.asarray([line["energy_var"] for line in kept], np.float64)  # (iterations, chains)
    cut = np.asarray([line["divergent"] for line in kept], bool)
    # Runs made before steps were retried log no retries (their cut-off steps were undone).
    retried = (
        np.asarray([line.get("num_retried", [0] * len(line["divergent"])) for line in kept]) > 0
    )
    ratio = np.median(energy, axis=0) / target
    failed = (cut | ~np.isfinite(energy)).mean(axis=0)
    spikes = ((energy > SPIKE_FACTOR * target) | cut | retried | ~np.isfinite(energy)).mean(axis=0)
    problems = []
    bulky = np.flatnonzero(~(ratio <= MAX_ENERGY_RATIO))
    if bulky.size:
        problems.append(
            "the energy error of chain "
            + ", ".join(f"{c} ({ratio[c]:.3g}×)" for c in bulky)
            + f" exceeds its target Var[ΔE]/d = {target:g} (median over kept iterations; at "
            f"most {MAX_ENERGY_RATIO:g}×): its steps are too long for their accuracy"
        )
    broken = np.flatnonzero(failed > MAX_SPIKE_SHARE)
    if broken.size:
        problems.append(
            "steps cut off (an energy error beyond the cap, or not finite) in chain "
            + ", ".join(f"{c} ({failed[c]:.1%})" for c in broken)
            + f" of kept iterations (at most {MAX_SPIKE_SHARE:.0%}): the integration failed"
        )
    hard = bool(problems)
    spiky = np.flatnonzero(spikes > MAX_SPIKE_SHARE)
    if spiky.size:
        problems.append(
            "energy spikes (an iteration's ΔE²/d above "
            f"{SPIKE_FACTOR:g}× the target, or a step cut off or taken again shorter) in chain "
            + ", ".join(f"{c} ({spikes[c]:.1%})" for c in spiky)
            + f" of kept iterations (at most {MAX_SPIKE_SHARE:.0%})"
            + ("" if hard else ": not certified, though the model average may still rank")
        )
    return {
        "status": "fail" if problems else "pass",
        "kind": "energy",
        "spikes_only": bool(problems) and not hard,
        "energy_var_target": target,
        "energy_ratio": [float(r) for r in ratio],
        "spike_share": [float(s) for s in spikes],
        "cut_share": [float(s) for s in failed],
        "retry_share": [float(s) for s in retried.mean(axis=0)],
        "problems": problems,
        "advice": [energy_advice(target, vocabulary, command, spikes=not bulky.size)]
        if problems
        else [],
    }
