"""What a level of a run's verdict finds, what would help it pass, and the thresholds it
judges by (:mod:`bnnkit.metrics.levels`).

A level's check returns a :class:`Finding`: its status, its problems in sentences, its
figures (stored as measured, for the report and the evaluation's JSON) and its remedies.
A :class:`Remedy` says what would help in terms of the run's settings (``num_samples``,
``num_chains``, ``step_size``...), never in a command's flags: the layer that printed the run
spells them in its own words (:mod:`bnnkit.commands.advice` on the command line).

Every threshold the levels apply has one name and one value, in :data:`THRESHOLDS`, stored
with each verdict.

Example:
    >>> more = Remedy("more draws", (("num_samples", "larger"), ("num_iterations", "larger")))
    >>> more.text()
    'more draws: a larger num_samples or a larger num_iterations'
    >>> more.text({"num_samples": "NUM_SAMPLES"}.get)  # an interface without the other
    'more draws: a larger NUM_SAMPLES'
    >>> Finding("fail", ("a chain drifts",), remedies=(more,)).passed
    False
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal

#: A level's status: it passed, failed, or the run holds too little to judge it.
Status = Literal["pass", "fail", "not recorded"]
#: The comparatives a :class:`Remedy` changes a setting by; ``"another"``, ``"on"`` (a switch)
#: or any other change, a value to set.
COMPARATIVES = ("larger", "smaller", "longer", "higher")


def python_name(setting: str) -> str | None:
    """A setting as a caller in Python names it: the Config field itself."""
    return setting


@dataclasses.dataclass(frozen=True)
class Remedy:
    """What would help a level pass, in the run's settings.

    Attributes:
        helps: what it does, in words that name no setting (``"more draws"``).
        changes: the settings that give it, any one of them: ``(setting, change)``, the
            change a comparative of :data:`COMPARATIVES`, ``"another"``, ``"on"`` for a
            switch, or a value to set (``"nuts"``).
        why: the reason, in words that name no setting ("" for none).
    """

    helps: str
    changes: tuple[tuple[str, str], ...] = ()
    why: str = ""

    def text(self, spell: Callable[[str], str | None] = python_name) -> str:
        """The remedy in a sentence, each setting as ``spell`` names it; a setting it cannot
        name (``None``: the interface lacks it) is left out.

        Example:
            >>> Remedy("a Metropolis-adjusted sampler", (("adjusted", "on"),)).text()
            'a Metropolis-adjusted sampler: adjusted'
        """
        ways = []
        for setting, change in self.changes:
            name = spell(setting)
            if name is None:
                continue
            if change in COMPARATIVES:
                ways.append(f"a {change} {name}")
            elif change == "another":
                ways.append(f"another {name}")
            elif change == "on":
                ways.append(name)
            else:
                ways.append(f"{name} {change}")
        text = self.helps + (": " + " or ".join(dict.fromkeys(ways)) if ways else "")
        return text + (f" ({self.why})" if self.why else "")

    def to_dict(self) -> dict[str, Any]:
        return {"helps": self.helps, "changes": [list(c) for c in self.changes], "why": self.why}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Remedy:
        changes = tuple((str(s), str(c)) for s, c in values.get("changes", ()))
        return cls(str(values["helps"]), changes, str(values.get("why", "")))


@dataclasses.dataclass(frozen=True)
class Finding:
    """What one level found.

    Attributes:
        status: pass, fail or not recorded.
        problems: what failed, one sentence each.
        figures: what the check measured (JSON-serialisable), as the report reads it.
        remedies: what would help it pass.
        why: why it is not recorded ("" otherwise).
        soft: a failure that still lets the run rank approximations (an unadjusted chain's
            energy spikes alone: :mod:`bnnkit.metrics.numerics`); never certified.
    """

    status: Status
    problems: tuple[str, ...] = ()
    figures: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    remedies: tuple[Remedy, ...] = ()
    why: str = ""
    soft: bool = False

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "problems": list(self.problems),
            "figures": dict(self.figures),
            "remedies": [r.to_dict() for r in self.remedies],
            "why": self.why,
            "soft": self.soft,
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Finding:
        """A finding as :meth:`to_dict` stored it, or as evaluations before typed findings did
        (their figures beside the status, their advice in sentences, dropped)."""
        if "figures" in values:
            figures = values["figures"]
        else:
            known = ("status", "problems", "advice", "why", "spikes_only")
            figures = {k: v for k, v in values.items() if k not in known}
        return cls(
            status=values["status"],
            problems=tuple(values.get("problems", ())),
            figures=figures,
            remedies=tuple(Remedy.from_dict(r) for r in values.get("remedies", ())),
            why=str(values.get("why") or ""),
            soft=bool(values.get("soft", values.get("spikes_only", False))),
        )


def not_recorded(why: str) -> Finding:
    """A level the run holds too little to judge."""
    return Finding("not recorded", why=why)


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Every threshold of the levels, one name and one value each.

    Attributes:
        max_divergent_share: L0: share of kept iterations an adjusted sampler may diverge
            in. A divergence marks a region the chain could not enter; at 1 % what it misses
            is below the precision (about 2 % in total variation) at which a reference ranks
            approximations.
        min_acceptance: L0: a chain whose acceptance after burn-in is below this is stuck
            (also the warning while a run samples, :mod:`bnnkit.metrics.sampler_health`).
        max_energy_ratio: L0, unadjusted MCLMC: the bulk's energy variance (median over kept
            iterations) at most this many times its target (``ΔE² ∝ ε⁶``: 3 is a step 20 %
            longer than tuned). Tuned chains of a well-posed problem read 0.38 to 2.52, the
            tuning's precision on ε (48 chains, ``benchmarks/energy_ratio_calibration.py``,
            ``benchmarks/results/xeon/energy_ratio_calibration.log``): at 2, half of those
            references failed L0.
        spike_factor: L0: an iteration whose mean ``ΔE²/d`` exceeds this many times the
            target is a spike (a tenth of a χ²₁₀ past 10 has probability about 1e-16).
        max_spike_share: L0: share of kept iterations per chain that may spike, or cut off a
            step.
        within_rhat_threshold: L1: R-hat of a chain's 4 consecutive pieces below this counts
            as agreement (Gelman et al.'s classic 1.1: each piece is an eighth of the chain
            once R-hat splits it again, so it scatters more than between chains).
        within_rhat_share: L1: share of test predictions whose within-chain R-hat must be
            below the threshold.
        min_chain_ess: L1: bulk ESS a chain needs on ``chain_ess_share`` of the test
            predictions (with the R-hat bar, chains of about 100 effective draws pass).
        chain_ess_share: L1: not all of them: one chain's ESS estimate of thousands of
            quantities has a long left tail (independent draws, N = 100: the smallest of 2,000
            is about 3, the 5th percentile about 55).
        drift_z: L1: a slow functional's last quarter this many standard errors from its
            first is a drift (two-sided; about 6e-5 per test of a stationary chain).
        stall_length: L1: a failing chain is judged on its first 1/stall_length too ...
        stall_min_draws: L1: ... where that first part holds at least this many draws ...
        stall_gain: L1: ... and one whose ESS grew less than this many times over a run that
            many times longer gains nothing from more draws (a mixing chain's grows with its
            length).
        halves_ratio: L2: the halves' model averages may differ by at most this share of the
            run's distance to its own ensemble (the run's own error, about half the halves'
            distance, is then at most about 40 % of it). Calibrated against the ranking of
            six cheap methods by a 16-member long reference: the references that misranked
            them had halves 0.98 and 1.33 times that distance apart, and none below
            (docs/uci-benchmark.md, "Does the verdict say what a reference is for?",
            ``benchmarks/results/xeon/reference_calibration_precision3.md``).
        plateau_ratio: L3: the test LPD and the predictive's spread may move with more draws by
            this share of their difference to the ensemble's (calibrated by the same table:
            ``benchmarks/results/xeon/reference_calibration_split0.md``).
        absolute_w1: L2 without an ensemble: the halves' W₁ at most this share of the mean
            predictive std (two Gaussians a twentieth of their std apart overlap in 98 %).
        absolute_tv: L2 without an ensemble: the halves' mean total variation at most this.
        mode_rhat: L2's evidence: chains are in one mode when split R-hat across them is
            below this ...
        mode_rhat_share: ... on at least this share of the test predictions.
        lpd_tolerance: L1, L2 and L3: changes of the test LPD below this (nats per test
            point) count as none (tables report it to two decimals).
        noise_std_tolerance: L1: changes of the mean log noise std below this (1 % of the
            std) count as no drift whatever their standard error.
        raised_step: L0's advice: an adapted step size this many times the given one counts
            as raised by burn-in (then a smaller given step would change nothing).
        std_tolerance: L3: changes of the mean predictive std below this share of itself count
            as none (a run without an ensemble: at most this).
        entropy_tolerance: L3: changes of the mean predictive entropy below this (nats) count as
            none (a run without an ensemble: at most this).
    """

    max_divergent_share: float = 0.01
    min_acceptance: float = 0.05
    max_energy_ratio: float = 3.0
    spike_factor: float = 10.0
    max_spike_share: float = 0.01
    within_rhat_threshold: float = 1.1
    within_rhat_share: float = 0.95
    min_chain_ess: float = 50.0
    chain_ess_share: float = 0.95
    drift_z: float = 4.0
    stall_length: int = 10
    stall_min_draws: int = 100
    stall_gain: float = 2.0
    halves_ratio: float = 0.75
    absolute_w1: float = 0.05
    absolute_tv: float = 0.02
    mode_rhat: float = 1.05
    mode_rhat_share: float = 0.95
    lpd_tolerance: float = 0.01
    noise_std_tolerance: float = 0.01
    raised_step: float = 1.5
    std_tolerance: float = 0.01
    entropy_tolerance: float = 0.01
    plateau_ratio: float = 0.5

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


#: The thresholds the levels apply.
THRESHOLDS = Thresholds()
