r"""Level 0 of a reference's verdict: whether the sampler's numerics can be trusted, from what
it logged per iteration after burn-in.

- **Adjusted samplers** (HMC, NUTS, adjusted MCLMC): a divergent transition marks a region the
  integrator could not enter, so the chain under-visits it; the share of kept iterations with
  a divergence must be at most ``max_divergent_share``, and the acceptance at least
  ``min_acceptance`` (a stuck chain; both in :data:`~bnnkit.metrics.findings.THRESHOLDS`).
- **Unadjusted MCLMC**: no Metropolis step corrects its integration error, so its bias follows
  the energy error of its steps, which the tuning aims at ``Var[ΔE]/d = v`` (the
  ``energy_var_end`` the run was given). The log holds, per iteration and chain, the mean of
  ``ΔE²/d`` over the iteration's steps (``energy_var``; :class:`~bnnkit.inference.mclmc_state.
  MCLMCInfo`) and the steps cut off for an energy error beyond ``energy_var_max_ratio · d · v``
  (``num_divergent``). Two checks, each on every chain:

  - the bulk: the median over kept iterations of ``energy_var / v`` at most
    ``max_energy_ratio`` (``ΔE² ∝ ε⁶``: a ratio of 3 is a step 20 % longer than tuned, beyond
    the tuning's precision on a well-posed problem; an over-stepped chain reads tens to
    thousands);
  - spikes: an iteration whose ``energy_var`` exceeds ``spike_factor`` · v. When the
    energy errors are as Gaussian as at the target, an iteration's mean of 10 steps'
    ``ΔE²/(d v)`` is a tenth of a χ²₁₀, past 10 with probability about 1e-16: a spike is a
    step from outside that bulk, where the unadjusted chain is biased most. Their share of
    kept iterations must be at most ``max_spike_share``;
  - cut-off steps: an iteration that undid a step (``ΔE²`` beyond ``energy_var_max_ratio``
    times its target, or not finite, at ε and at every shorter step retried,
    ``num_divergent``): the integration failed there. At most ``max_spike_share`` of kept
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

**Measured, not counted.** Where the verdict would be "certified" or "reproducible" by every
other level, the chains are continued at half their step (:mod:`bnnkit.runs.step_check`) and
the step's bias is measured (:func:`step_bias`): the model average of that continuation
against two at the run's step, beyond the floor of their own distance, in level 2's distance.
Within the halves' own distance (level 2's: what the run can resolve) level 0 passes, the
spikes reported but no longer failing it; beyond it, level 0 fails as spikes did (softly:
not certified, may still rank). A bulk above its target or cut-off steps still fail,
measured or not.

A run whose log lacks these records (a run made before MCLMC logged its energy errors, a
minibatch sampler, which logs neither) has level 0 "not recorded".

Example:
    >>> kept = [{"divergent": [False, True], "acceptance_rate": [0.9, 0.8]}] * 3 + [
    ...     {"divergent": [False, False], "acceptance_rate": [0.9, 0.8]}] * 97
    >>> found = numerics(kept, "hmc", {})
    >>> found.status, found.figures["divergent_share"]  # 3 of 200 kept iterations
    ('fail', 0.015)
    >>> found.remedies[0].text()[:52]
    'a smaller step: a smaller step_size or a longer num_'
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from bnnkit.metrics import halves
from bnnkit.metrics.findings import THRESHOLDS, Finding, Remedy, not_recorded

#: The samplers whose every transition is Metropolis-corrected (``mclmc`` only with
#: ``adjusted``).
ADJUSTED = ("hmc", "nuts")
#: A longer burn-in (each command calls it one of these).
LONGER_BURN_IN = (("num_burn_in", "longer"), ("num_tuning", "longer"))
#: A Metropolis-adjusted sampler: a step whose energy error spikes is rejected.
ADJUSTED_SAMPLER = Remedy(
    "a Metropolis-adjusted sampler",
    (("adjusted", "on"), ("sampler", "nuts")),
    "a step whose energy error spikes is rejected",
)


class HalfStep(NamedTuple):
    """A run's chains continued from their last state (:mod:`bnnkit.runs.step_check`), each
    segment's predictive at the test inputs (chains, draws).

    Attributes:
        half: at half the run's step, twice the steps per draw.
        same: at the run's step.
        again: at the run's step, with other noise.
        gradients: the gradient evaluations the three took.
        chain_gradients: those of the run's chains, burn-in included.
    """

    half: Any
    same: Any
    again: Any
    gradients: int
    chain_gradients: int


def step_bias(prediction: Any, half_step: HalfStep, y: np.ndarray) -> dict[str, Any]:
    """The step's bias, measured: how far the model average of the chains continued at half
    their step lies from the two continuations at the run's step, beyond the distance between
    those two (their Monte Carlo floor), against the distance between the run's two halves of
    chains (level 2's: what the run can resolve).

    With :math:`H, E, E'` the segments' model averages (half step, run's step twice) and
    :math:`H_1, H_2` the halves', in the task's distance :math:`d` (regression: the mean W₁
    per test point; classification: total variation), by the triangle inequality the bias is
    at least what exceeds the floor::

        half_step = (d(H, E) + d(H, E')) / 2,   floor = d(E, E'),
        passes when half_step - floor <= d(H_1, H_2).

    Args:
        prediction: the run's predictive at the test inputs (chains, draws).
        half_step: the continuations.
        y: the test targets or labels.

    Returns:
        ``distance`` (its name), ``half_step``, ``floor``, ``halves`` (``None`` for a single
        chain), ``draws`` (per chain and segment), ``gradients`` and ``chain_gradients``.

    Example:
        >>> from bnnkit.predict import Prediction
        >>> rng = np.random.default_rng(0)
        >>> def drawn(chains, draws, shift=0.0):
        ...     means = rng.normal(size=(chains * draws, 3)) + shift
        ...     return Prediction("regression", means=means, stds=np.ones_like(means),
        ...                       per_sample=np.zeros((chains, draws, 3)))
        >>> run = drawn(4, 40)
        >>> found = step_bias(run, HalfStep(drawn(4, 10), drawn(4, 10), drawn(4, 10), 0, 0),
        ...                   np.zeros(3))
        >>> found["distance"], found["half_step"] - found["floor"] <= found["halves"]
        ('wasserstein_1', True)
        >>> moved = HalfStep(drawn(4, 10, shift=3.0), drawn(4, 10), drawn(4, 10), 0, 0)
        >>> found = step_bias(run, moved, np.zeros(3))
        >>> found["half_step"] - found["floor"] <= found["halves"]
        False
    """
    draws = int(half_step.half.per_sample.shape[1])
    average = {
        name: halves.last_draws(getattr(half_step, name), draws)
        for name in ("half", "same", "again")
    }

    def apart(a: halves.Average, b: halves.Average) -> dict[str, float]:
        return halves.distances(a, b, y)

    name = "total_variation" if prediction.task == "classification" else "wasserstein_1"
    found = halves.averages(prediction)
    moved = [apart(average["half"], average[other])[name] for other in ("same", "again")]
    return {
        "distance": name,
        "half_step": float(np.mean(moved)),
        "floor": apart(average["same"], average["again"])[name],
        "halves": None if found is None else apart(found[1], found[2])[name],
        "draws": draws,
        "gradients": int(half_step.gradients),
        "chain_gradients": int(half_step.chain_gradients),
    }


def step_remedy(step_size: float | None, given_step_size: float | None) -> Remedy:
    """What helps a stuck or diverging adjusted sampler, following the step size it ran at:
    when burn-in raised it above the given one (dual averaging on a short burn-in can
    overshoot), a smaller given step would change nothing, so a longer burn-in, a higher target
    acceptance or the given step kept.

    Example:
        >>> step_remedy(1.4e-4, 1e-5).helps
        'a step size that burn-in does not raise'
        >>> step_remedy(None, None).changes[0]
        ('step_size', 'smaller')
    """
    raised = step_size is not None and given_step_size is not None
    if raised and step_size > THRESHOLDS.raised_step * given_step_size:
        return Remedy(
            "a step size that burn-in does not raise",
            (*LONGER_BURN_IN, ("target_accept_rate", "higher"), ("adapt", "none")),
            f"burn-in raised it to {step_size:.2g} from {given_step_size:.2g}",
        )
    why = "" if step_size is None else f"the chains ran at {step_size:.2g}"
    changes = (("step_size", "smaller"), *LONGER_BURN_IN, ("adapt", "mass"))
    return Remedy("a smaller step", changes, why)


def energy_remedies(target: float, *, spikes: bool) -> tuple[Remedy, ...]:
    """What makes an unadjusted MCLMC chain's steps more accurate. For spikes alone (the bulk
    at its target) a Metropolis-adjusted sampler comes first: a spike is a step too long for
    the region it starts in, which a longer tuning does not change (the tuning sets one step
    for the whole chain) and a rejection undoes.

    Example:
        >>> [r.helps for r in energy_remedies(0.1, spikes=True)]
        ['a Metropolis-adjusted sampler', 'shorter steps']
    """
    shorter = Remedy(
        "shorter steps",
        (("energy_var_end", "smaller"), *LONGER_BURN_IN),
        f"the energy-variance target was {target:g}",
    )
    return (ADJUSTED_SAMPLER, shorter) if spikes else (shorter, ADJUSTED_SAMPLER)


def numerics(
    kept: list[dict],
    method: str | None,
    method_config: dict[str, Any],
    measured: dict[str, Any] | None = None,
) -> Finding:
    """Level 0: the numerics of a Markov chain sampler after burn-in.

    Args:
        kept: the log lines of the kept iterations (after burn-in), one per iteration with a
            value per chain.
        method: the sampler (``"hmc"``, ``"nuts"``, ``"mclmc"``, ...).
        method_config: its settings as the run recorded them (``adjusted``,
            ``energy_var_end``, ``step_size``).
        measured: unadjusted MCLMC: its step's bias as :func:`step_bias` measured it, which
            then judges in place of the spikes.

    Returns:
        The finding, with the figures judged (``kind``: "divergences" or "energy").
    """
    if not kept or "divergent" not in kept[0]:
        return not_recorded("the sampler logs no divergences or energy errors")
    if method == "mclmc" and not method_config.get("adjusted"):
        if "energy_var" not in kept[0]:
            return not_recorded("the run's log holds no energy errors (made before they were)")
        return _energy(kept, method_config, measured)
    return _divergences(kept, method_config)


def _divergences(kept: list[dict], method_config: dict[str, Any]) -> Finding:
    """Level 0 of an adjusted sampler: divergences and acceptance."""
    limit = THRESHOLDS.max_divergent_share
    divergent = np.asarray([line["divergent"] for line in kept], bool)
    share = float(divergent.mean())
    acceptance = (
        float(np.mean([line["acceptance_rate"] for line in kept]))
        if "acceptance_rate" in kept[0]
        else None
    )
    problems = []
    if share > limit:
        problems.append(
            f"{int(divergent.sum())} of {divergent.size} kept iterations diverged "
            f"({share:.1%}; at most {limit:.0%})"
        )
    if acceptance is not None and acceptance < THRESHOLDS.min_acceptance:
        problems.append(
            f"acceptance after burn-in is {acceptance:.3f} (< {THRESHOLDS.min_acceptance})"
        )
    steps = [float(s) for s in kept[-1].get("step_size", ())]
    ran_at = float(np.mean(steps)) if steps else None
    return Finding(
        "fail" if problems else "pass",
        tuple(problems),
        {"kind": "divergences", "divergent_share": share, "acceptance_rate": acceptance},
        (step_remedy(ran_at, method_config.get("step_size")),) if problems else (),
    )


def _energy(
    kept: list[dict], method_config: dict[str, Any], measured: dict[str, Any] | None
) -> Finding:
    """Level 0 of unadjusted MCLMC: the bulk's energy variance, the cut-off steps, and the
    spikes per chain or, where it was measured, the step's bias."""
    limit, factor, ratio_limit = (
        THRESHOLDS.max_spike_share,
        THRESHOLDS.spike_factor,
        THRESHOLDS.max_energy_ratio,
    )
    if method_config.get("energy_var_end") is None:
        # The run's settings hold every setting with its value; without its target the
        # energy error has nothing to be measured against.
        return not_recorded("the run's settings hold no energy-variance target")
    target = float(method_config["energy_var_end"])
    energy = np.asarray([line["energy_var"] for line in kept], np.float64)  # (iterations, chains)
    cut = np.asarray([line["divergent"] for line in kept], bool)
    # Runs made before steps were retried log no retries (their cut-off steps were undone).
    retried = (
        np.asarray([line.get("num_retried", [0] * len(line["divergent"])) for line in kept]) > 0
    )
    ratio = np.median(energy, axis=0) / target
    failed = (cut | ~np.isfinite(energy)).mean(axis=0)
    spikes = ((energy > factor * target) | cut | retried | ~np.isfinite(energy)).mean(axis=0)
    problems = []
    bulky = np.flatnonzero(~(ratio <= ratio_limit))
    if bulky.size:
        problems.append(
            "the energy error of chain "
            + ", ".join(f"{c} ({ratio[c]:.3g}×)" for c in bulky)
            + f" exceeds its target Var[ΔE]/d = {target:g} (median over kept iterations; at "
            f"most {ratio_limit:g}×): its steps are too long for their accuracy"
        )
    broken = np.flatnonzero(failed > limit)
    if broken.size:
        problems.append(
            "steps cut off (an energy error beyond the cap, or not finite) in chain "
            + ", ".join(f"{c} ({failed[c]:.1%})" for c in broken)
            + f" of kept iterations (at most {limit:.0%}): the integration failed"
        )
    hard = bool(problems)
    spiky = np.flatnonzero(spikes > limit)
    measured_ok = measured is not None and measured.get("halves") is not None
    if measured_ok and not measured["half_step"] - measured["floor"] <= measured["halves"]:
        word = halves.WORDS[measured["distance"]]
        problems.append(
            f"continued at half the step, the model average lies {measured['half_step']:.3g} "
            f"in {word} from the run's step, {measured['half_step'] - measured['floor']:.3g} "
            f"beyond their Monte Carlo floor {measured['floor']:.3g} and more than the "
            f"halves' {measured['halves']:.3g}: the step's bias shows"
            + ("" if hard else "; not certified, though the model average may still rank")
        )
    elif spiky.size and not measured_ok:
        problems.append(
            "energy spikes (an iteration's ΔE²/d above "
            f"{factor:g}× the target, or a step cut off or taken again shorter) in chain "
            + ", ".join(f"{c} ({spikes[c]:.1%})" for c in spiky)
            + f" of kept iterations (at most {limit:.0%})"
            + ("" if hard else ": not certified, though the model average may still rank")
        )
    figures = {
        "kind": "energy",
        "energy_var_target": target,
        "energy_ratio": [float(r) for r in ratio],
        "spike_share": [float(s) for s in spikes],
        "cut_share": [float(s) for s in failed],
        "retry_share": [float(s) for s in retried.mean(axis=0)],
        "measured": measured,
    }
    return Finding(
        "fail" if problems else "pass",
        tuple(problems),
        figures,
        energy_remedies(target, spikes=not bulky.size) if problems else (),
        soft=bool(problems) and not hard,
    )
