"""The verdict of a run of Markov chains: whether it is a reference, level by level.

Ranking approximations by their distance to a reference needs a reference that another run
would reproduce well below those distances; it does not need each chain to have mixed. A run
of chains (``bnnkit hmc``, ``nuts``, ``mclmc``, ``sgmcmc``, ``reference``) is judged at the
levels of :data:`LEVELS`, in order, each one :class:`Level` record: its name, what it asks, its
check, the thresholds it applies, whether a reproducible run needs it, what helps when it fails
and how a report row shows its figures. The verdict, its summary, the report's rows and the
advice all come from that list, so a new level is one entry in it.

``L0`` numerics (:mod:`bnnkit.metrics.numerics`)
    divergences and acceptance of an adjusted sampler, or the energy errors and their spikes
    of unadjusted MCLMC, after burn-in;
``L1`` stationary chains (:mod:`bnnkit.metrics.stationarity`)
    each chain's R-hat over its quarters, its bulk ESS, no drift of its slow functionals (its
    log posterior still rising among them) from its first quarter to its last, and whether
    more draws would help a chain that fails (a stall);
``L2`` reproducible halves (:mod:`bnnkit.metrics.halves`)
    the model averages of the two halves of the chains agree, well within the run's distance
    to its own deep ensemble; the modes the chains sit in where they do not;
``L3`` plateau (:mod:`bnnkit.metrics.plateau`)
    the test LPD and the predictive's spread no longer move with more draws by as much as the
    run's difference to its own deep ensemble (or, without one, by their absolute tolerances).

The verdict (:data:`VERDICTS`): **certified** when every level passes; **reproducible** when
every level a reproducible run needs passes (L0, L2, L3; a soft failure, an unadjusted chain's
energy spikes alone, counts as passing there, never for certified) — good enough to rank
approximations; otherwise **not a reference**. Each failing level's finding says what would
help in the run's settings (:class:`~bnnkit.metrics.findings.Remedy`); the layer that prints the
verdict spells them (:meth:`Verdict.advice`). Every threshold is in
:data:`~bnnkit.metrics.findings.THRESHOLDS`, stored with the verdict.

Example:
    >>> from bnnkit.metrics.findings import Finding
    >>> passed, failed = Finding("pass"), Finding("fail", ("a chain drifts",))
    >>> found = verdict({"L0": passed, "L1": failed, "L2": passed, "L3": passed})
    >>> found.outcome, found.failed
    ('reproducible', ['L1'])
    >>> found.line()[:53]
    'verdict: reproducible (L0 pass, L1 FAIL, L2 pass, L3 '
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from bnnkit.metrics import halves, measured_advice, numerics, plateau, stationarity
from bnnkit.metrics.findings import THRESHOLDS, Finding, Remedy, not_recorded, python_name

#: The verdicts, best first.
VERDICTS = ("certified", "reproducible", "not a reference")
#: The levels a run can extend itself until (``until``), the lowest first.
UNTIL = ("reproducible", "certified")
#: How each status reads in a line and a table.
MARKS = {"pass": "pass", "fail": "FAIL", "not recorded": "not recorded"}


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the levels judge a run by.

    Attributes:
        prediction: its predictive at the test inputs (:class:`bnnkit.predict.Prediction`).
        y: the test targets (original units) or labels.
        log_density: ``log p(y_i | x_i, θ_cs)`` of each draw, (chains, samples, points).
        kept: its log lines after burn-in.
        method: its sampler.
        method_config: the sampler's settings as recorded.
        log_posterior: the log posterior of each kept iteration, (chains, iterations).
        ensemble: the predictive of its own deep ensemble at the same inputs, if any.
        ensemble_run: where that ensemble is.
        half_step: unadjusted MCLMC: its chains continued at half their step
            (:class:`~bnnkit.metrics.numerics.HalfStep`), which level 0 measures the step's
            bias with; ``None``: not continued, level 0 counts spikes.
    """

    prediction: Any
    y: np.ndarray
    log_density: np.ndarray
    kept: Sequence[dict]
    method: str | None
    method_config: Mapping[str, Any]
    log_posterior: np.ndarray | None = None
    ensemble: Any | None = None
    ensemble_run: str | None = None
    half_step: numerics.HalfStep | None = None

    def stds(self) -> np.ndarray | None:
        """Regression: each draw's predicted std, (chains, samples, points)."""
        p = self.prediction
        if p.task != "regression":
            return None
        return np.asarray(p.stds).reshape(*p.per_sample.shape[:2], -1)


@dataclasses.dataclass(frozen=True)
class Level:
    """One level of the verdict.

    Attributes:
        name: its short name (``"L0"``).
        asks: what it asks, in a few words.
        passes: what a pass says, for the summary of a certified run.
        check: its check of a run's :class:`Evidence`.
        thresholds: the names of the thresholds it applies (:data:`THRESHOLDS`).
        reproducible: whether a reproducible run needs it.
        remedies: what helps when it fails and its finding names nothing.
        row: its figures in a line of a report.
    """

    name: str
    asks: str
    passes: str
    check: Callable[[Evidence], Finding]
    thresholds: tuple[str, ...]
    reproducible: bool
    remedies: tuple[Remedy, ...]
    row: Callable[[Mapping[str, Any]], str]


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


def _numerics(evidence: Evidence) -> Finding:
    measured = (
        None
        if evidence.half_step is None
        else numerics.step_bias(evidence.prediction, evidence.half_step, evidence.y)
    )
    return numerics.numerics(
        list(evidence.kept), evidence.method, dict(evidence.method_config), measured
    )


def _stationarity(evidence: Evidence) -> Finding:
    traces = functionals(evidence.log_density, evidence.log_posterior, evidence.stds())
    return stationarity.stationarity(evidence.prediction.per_sample, functionals=traces)


def _halves(evidence: Evidence) -> Finding:
    return halves.reproducibility(
        evidence.prediction, evidence.y, evidence.ensemble, ensemble_run=evidence.ensemble_run
    )


def _plateau(evidence: Evidence) -> Finding:
    p = evidence.prediction
    theirs = None
    if evidence.ensemble is not None:
        points = p.per_sample.shape[2] if p.task == "classification" else None
        theirs = plateau.ensemble_figures(evidence.ensemble, evidence.y, points)
    if p.task == "classification":
        return plateau.plateau(evidence.log_density, probs=p.per_sample, ensemble=theirs)
    means = np.asarray(p.means).reshape(*p.per_sample.shape[:2], -1)
    return plateau.plateau(evidence.log_density, means=means, stds=evidence.stds(), ensemble=theirs)


def _numerics_row(figures: Mapping[str, Any]) -> str:
    if figures.get("kind") == "energy":
        line = (
            f"energy error {max(figures['energy_ratio']):.3g}× its target "
            f"{figures['energy_var_target']:g} (median, worst chain), spikes "
            f"{max(figures['spike_share']):.1%} of kept iterations"
        )
        measured = figures.get("measured")
        if measured and measured.get("halves") is not None:
            word = halves.WORDS[measured["distance"]]
            line += (
                f"; at half the step the model average moves {measured['half_step']:.3g} in "
                f"{word} (floor {measured['floor']:.3g}, halves {measured['halves']:.3g}; "
                f"{measured['gradients']:,} gradients, "
                f"{measured['gradients'] / measured['chain_gradients']:.0%} of the chains')"
            )
        return line
    line = f"divergences {figures['divergent_share']:.1%} of kept iterations"
    if figures.get("acceptance_rate") is not None:
        line += f", acceptance {figures['acceptance_rate']:.3f}"
    return line


def _stationarity_row(figures: Mapping[str, Any]) -> str:
    chains = figures.get("chains")
    if not chains:
        return "too few draws per chain to judge"
    ok = sum(c["stationary"] for c in chains)
    ess = [c["ess_p5"] for c in chains if c["ess_p5"] is not None]
    worst = f", smallest ESS {min(ess):.0f}" if ess else ""
    rhat = min(c["rhat_share_below"] for c in chains)
    line = f"{ok} of {len(chains)} chains stationary{worst}, R-hat within ≥ {rhat:.0%}"
    return line + ("; stalled" if figures.get("stalled") else "")


def _halves_row(figures: Mapping[str, Any]) -> str:
    apart = figures.get("halves")
    if not apart:
        return "one chain: no halves"
    name = "wasserstein_1" if "wasserstein_1" in apart else "total_variation"
    short = {"wasserstein_1": "W₁", "total_variation": "TV"}[name]
    line = f"{short} {apart[name]:.3g} between halves"
    theirs = figures.get("ensemble")
    if theirs:
        share = apart[name] / theirs[name] if theirs[name] else float("inf")
        line += f", {share:.0%} of the run's {theirs[name]:.3g} to its ensemble"
    else:
        line += f" (at most {figures['tolerances'][name]:.3g}; no ensemble to compare)"
    line += f"; LPD {apart['lpd_difference']:+.4f}"
    groups = figures.get("modes")
    return line + (f"; chains in {len(groups)} modes" if groups and len(groups) > 1 else "")


def _plateau_row(figures: Mapping[str, Any]) -> str:
    line = f"test LPD moves {figures['lpd']['change']:+.4f}"
    if "std" in figures:
        std = figures["std"]
        line += f", mean predictive std {std['change'] / std['all']:+.2%}" if std["all"] else ""
    else:
        line += f", mean entropy {figures['entropy']['change']:+.4f}"
    return line + " with the first half of the draws"


#: The levels, in order: what each asks, its check and thresholds, what helps, its row.
LEVELS: list[Level] = [
    Level(
        "L0",
        "numerics",
        "sound numerics",
        _numerics,
        (
            "max_divergent_share",
            "min_acceptance",
            "max_energy_ratio",
            "spike_factor",
            "max_spike_share",
        ),
        True,
        (numerics.step_remedy(None, None),),
        _numerics_row,
    ),
    Level(
        "L1",
        "stationary chains",
        "stationary chains",
        _stationarity,
        (
            "within_rhat_threshold",
            "within_rhat_share",
            "min_chain_ess",
            "chain_ess_share",
            "drift_z",
            "lpd_tolerance",
            "stall_length",
            "stall_gain",
        ),
        False,
        (stationarity.MORE_DRAWS,),
        _stationarity_row,
    ),
    Level(
        "L2",
        "reproducible halves",
        "reproducible halves",
        _halves,
        (
            "halves_ratio",
            "absolute_w1",
            "absolute_tv",
            "lpd_tolerance",
            "mode_rhat",
            "mode_rhat_share",
        ),
        True,
        (halves.MORE_CHAINS_OR_DRAWS,),
        _halves_row,
    ),
    Level(
        "L3",
        "plateau",
        "a plateau",
        _plateau,
        ("lpd_tolerance", "std_tolerance", "entropy_tolerance", "plateau_ratio"),
        True,
        (stationarity.MORE_DRAWS,),
        _plateau_row,
    ),
]


def reaches(outcome: str, target: str) -> bool:
    """Whether a verdict's ``outcome`` is ``target`` or better.

    Example:
        >>> reaches("certified", "reproducible"), reaches("reproducible", "certified")
        (True, False)
    """
    return VERDICTS.index(outcome) <= VERDICTS.index(target)


def level(name: str) -> Level | None:
    """The level of :data:`LEVELS` called ``name`` (``None``: none, a level of an older
    version)."""
    return next((each for each in LEVELS if each.name == name), None)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The verdict of a run of chains.

    Attributes:
        outcome: one of :data:`VERDICTS`.
        findings: each level's finding, by name, in the order of :data:`LEVELS`.
        thresholds: the thresholds it was judged by, by name.
        unhelpful: by level, the changes its advice leaves out there, measured not to help
            that level of runs of its kind (:mod:`bnnkit.metrics.measured_advice`).
    """

    outcome: str
    findings: Mapping[str, Finding]
    thresholds: Mapping[str, float]
    unhelpful: Mapping[str, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        """The levels that did not pass ("not recorded" included)."""
        return [name for name, found in self.findings.items() if not found.passed]

    @property
    def problems(self) -> list[str]:
        """Each failing level's problems, prefixed by the level."""
        out = []
        for name in self.failed:
            found, asks = self.findings[name], _asks(name)
            if found.status == "not recorded":
                out.append(f"{name} ({asks}) not recorded: {found.why}")
            out += [f"{name} ({asks}): {problem}" for problem in found.problems]
        return out

    @property
    def remedies(self) -> list[Remedy]:
        """What would help, each once, in the order of the levels that need it."""
        out: list[Remedy] = []
        for name in self.failed:
            found = self.findings[name]
            if found.status == "not recorded":
                continue
            known = level(name)
            for remedy in found.remedies or (known.remedies if known else ()):
                if remedy not in out:
                    out.append(remedy)
        return out

    @property
    def summary(self) -> str:
        """The verdict in a sentence."""
        named = ", ".join(
            f"{name} ({_asks(name)}) "
            + ("failed" if self.findings[name].status == "fail" else "not recorded")
            for name in self.failed
        )
        if self.outcome == "certified":
            phrases = [(level(name) or _unknown(name)).passes for name in self.findings]
            return (
                ", ".join(phrases[:-1]) + " and " + phrases[-1] if len(phrases) > 1 else phrases[0]
            )
        if self.outcome == "reproducible":
            return f"good enough to rank approximations, not certified: {named}"
        return named

    def advice(self, spell: Callable[[str], str | None] = python_name) -> list[str]:
        """What to do, one sentence per remedy, each setting as ``spell`` names it; without
        the changes measured not to help the level that names them (:attr:`unhelpful`), a
        remedy left with none that ``spell`` names not printed, and where that leaves
        nothing, what was measured instead.

        Example:
            >>> tried = Remedy("more draws", (("num_samples", "larger"),))
            >>> found = {"L1": Finding("fail", remedies=(tried,))}
            >>> Verdict("not a reference", found, {}).advice()
            ['more draws: a larger num_samples']
            >>> measured = {"L1": (("num_samples", "larger"),)}
            >>> Verdict("not a reference", found, {}, measured).advice()[0][:32]
            'no change measured reaches certi'
        """
        out: list[str] = []
        for name in self.failed:
            found, known = self.findings[name], level(name)
            if found.status == "not recorded":
                continue
            dropped = self.unhelpful.get(name, ())
            for remedy in found.remedies or (known.remedies if known else ()):
                kept = tuple(c for c in remedy.changes if c not in dropped)
                # A remedy whose measured changes are gone, and whose others the interface
                # cannot name, has nothing left to say.
                if kept != remedy.changes and all(spell(s) is None for s, _ in kept):
                    continue
                text = dataclasses.replace(remedy, changes=kept).text(spell)
                if text not in out:
                    out.append(text)
        if self.remedies and not out:
            out.append(measured_advice.NOTHING_MEASURED_HELPS)
        return out

    def line(
        self, spell: Callable[[str], str | None] = python_name, advice: list[str] | None = None
    ) -> str:
        """The verdict in one line: each level's status and what to do (``advice``, or the
        remedies spelt by ``spell``).

        Example:
            >>> print(verdict({name.name: Finding("pass") for name in LEVELS}).line())
            verdict: certified (L0 pass, L1 pass, L2 pass, L3 pass)
        """
        statuses = ", ".join(f"{n} {MARKS[f.status]}" for n, f in self.findings.items())
        text = f"verdict: {self.outcome} ({statuses})"
        advice = self.advice(spell) if advice is None else advice
        if advice:
            goal = "to certify" if self.outcome == "reproducible" else "to do"
            text += f"; {goal}: " + "; ".join(advice)
        return text

    def to_dict(self, spell: Callable[[str], str | None] = python_name) -> dict[str, Any]:
        """JSON-serialisable, as ``evaluation.json`` stores it under ``levels``: ``verdict``,
        ``summary``, ``failed``, ``problems``, ``remedies``, ``advice`` (spelt by ``spell``),
        each level's finding by name, ``order`` (the levels' names) and ``thresholds``."""
        return {
            "verdict": self.outcome,
            "summary": self.summary,
            "failed": self.failed,
            "problems": self.problems,
            "remedies": [r.to_dict() for r in self.remedies],
            "advice": self.advice(spell),
            **{name: found.to_dict() for name, found in self.findings.items()},
            "order": list(self.findings),
            "thresholds": dict(self.thresholds),
            "unhelpful": {n: [list(c) for c in cs] for n, cs in self.unhelpful.items()},
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Verdict:
        """A verdict as :meth:`to_dict` stored it, or as evaluations before typed findings did
        (levels L0 to L3, no ``order``)."""
        names = values.get("order") or [n for n in ("L0", "L1", "L2", "L3") if n in values]
        return cls(
            outcome=values["verdict"],
            findings={name: Finding.from_dict(values[name]) for name in names},
            thresholds=dict(values.get("thresholds") or {}),
            unhelpful={
                str(n): tuple((str(s), str(c)) for s, c in cs)
                for n, cs in (values.get("unhelpful") or {}).items()
            },
        )


def _unknown(name: str) -> Level:
    """A level of an older version: its name only."""
    return Level(name, name, name, lambda _: not_recorded(""), (), True, (), lambda _: "")


def _asks(name: str) -> str:
    return (level(name) or _unknown(name)).asks


def verdict(found: Mapping[str, Finding]) -> Verdict:
    """The verdict of the levels' findings (by name, in order): certified when all pass,
    reproducible when every level a reproducible run needs passes or fails softly, else not a
    reference."""
    failed = [name for name, finding in found.items() if not finding.passed]
    blocking = [
        name
        for name in failed
        if (level(name) or _unknown(name)).reproducible and not found[name].soft
    ]
    outcome = VERDICTS[0] if not failed else VERDICTS[1] if not blocking else VERDICTS[2]
    return Verdict(outcome, dict(found), THRESHOLDS.to_dict())


def judge(evidence: Evidence) -> Verdict:
    """Every level of :data:`LEVELS` on a run's evidence, and their verdict."""
    return verdict({each.name: each.check(evidence) for each in LEVELS})
