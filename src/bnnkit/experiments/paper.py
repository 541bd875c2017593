"""The whole study of Izmailov et al. (2021) end to end, at three sizes: ``bnnkit paper``.

"What are Bayesian neural network posteriors really like?" asks six questions; each has an
experiment in :mod:`bnnkit.experiments`, and :func:`paper` runs them in turn on the data this
machine has, then scores the paper's findings and writes one report:

1. ``compare_methods/``: SGD, a deep ensemble, four SGMCMC variants, MultiSWAG, MC dropout, IVON
   and MFVI against an HMC reference on UCI yacht (regression) and an MNIST subset
   (:mod:`~bnnkit.experiments.compare_methods`);
   at ``small`` and ``full`` also a Fashion-MNIST subset;
2. ``convergence/``: split R-hat of that MNIST HMC run in weight and function space, and one
   long chain against several short ones (:mod:`~bnnkit.experiments.convergence`);
3. ``shift/``: the MNIST runs on corrupted test images (:mod:`~bnnkit.experiments.covariate_shift`);
4. ``surface/``: the log posterior on the plane through the ends of three HMC chains
   (:mod:`~bnnkit.experiments.surface`);
5. ``temperature/``: HMC and cyclical SGHMC with and without augmentation against the posterior
   temperature (:mod:`~bnnkit.experiments.temperature`);
6. ``prior_sweep/``: HMC under priors of several scales and shapes
   (:mod:`~bnnkit.experiments.prior_sweep`);
7. ``bbb_mnist/``: Bayes by Backprop in Blundell et al.'s setting
   (:mod:`~bnnkit.experiments.bbb_mnist`);
8. ``findings.md``: each finding of the paper's abstract, the measured figures it rests on, and
   whether they reproduce it (:func:`findings`); then ``report/`` (``bnnkit report`` of all of
   the above).

A :class:`Scale` fixes every size: ``tiny`` is a smoke test of the whole pipeline (minutes on
two CPU cores), ``small`` about an hour on two CPU cores, ``full`` the longer chains and larger
subsets an accelerator affords. Each experiment reuses finished runs and resumes cut-off ones,
so calling :func:`paper` again on the same folder continues it.

Example:
    >>> sorted(SCALES)
    ['full', 'small', 'tiny']
    >>> Config(scale="tiny").plan().mnist_train
    160
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.settings import check_numbers, setting

SETTINGS_FILE = "paper.json"
FINDINGS_FILE = "findings.md"
FINDINGS_JSON = "findings.json"
REPORT_DIR = "report"
#: The parts, in the order they run; each is a subfolder of ``--out``.
PARTS = ("compare_methods", "convergence", "shift", "surface", "temperature", "prior_sweep",
         "bbb_mnist")


@dataclasses.dataclass(frozen=True)
class Scale:
    """Every size the study depends on (iterations, epochs, subsets, grids).

    Attributes:
        description: what the scale is for.
        mnist_train: training images of the MNIST (and Fashion-MNIST) subsets.
        hmc_iterations: HMC iterations (burn-in included) of the MNIST reference; yacht runs
            ``yacht_factor`` times as many.
        hmc_burn_in: HMC burn-in iterations of the MNIST reference (yacht: × ``yacht_factor``).
        hmc_chains: HMC chains (≥ 3: the surface goes through three chains' last samples).
        epochs: epochs of SGD, the ensemble and SGMCMC (burn-in a third, cycles a fifteenth).
        fashion: also compare the methods on a Fashion-MNIST subset.
        test_points: test images for the convergence and shift analyses (None: all).
        corruptions: corruptions of the shift (None: all of them).
        severities: their severities.
        grid: points per axis of the surface.
        temperatures: posterior temperatures of the sweep.
        temperature_hmc_iterations: HMC iterations (and a third burn-in) per temperature.
        temperature_epochs: SGHMC-CLR epochs per temperature (a third burn-in).
        prior_datasets: datasets of the prior sweep.
        priors: priors of the sweep.
        prior_quick: the prior sweep's 4× shorter chains.
        bbb_epochs: Bayes-by-Backprop epochs per prior on full MNIST.
        bbb_priors: its priors.
    """

    description: str
    mnist_train: int
    hmc_iterations: int
    hmc_burn_in: int
    hmc_chains: int
    yacht_factor: int
    epochs: int
    fashion: bool
    test_points: int | None
    corruptions: tuple[str, ...] | None
    severities: tuple[int, ...]
    grid: int
    temperatures: str
    temperature_hmc_iterations: int
    temperature_epochs: int
    prior_datasets: str
    priors: str
    prior_quick: bool
    bbb_epochs: int
    bbb_priors: str


SCALES: dict[str, Scale] = {
    "tiny": Scale(
        description="every part on the smallest inputs that exercise it: minutes on 2 CPU "
                    "cores; checks the pipeline, not the findings",
        mnist_train=160, hmc_iterations=24, hmc_burn_in=8, hmc_chains=3, yacht_factor=2,
        epochs=60, fashion=False, test_points=500,
        corruptions=("gaussian_noise", "fog"), severities=(1, 3, 5),
        grid=8, temperatures="1,0.1", temperature_hmc_iterations=12, temperature_epochs=30,
        prior_datasets="yacht", priors="gaussian_small,gaussian,gaussian_large,logistic",
        prior_quick=True, bbb_epochs=1, bbb_priors="gaussian"),
    "small": Scale(
        description="the paper's small-data settings (UCI yacht, 160 MNIST images) at CPU "
                    "length: about an hour on 2 CPU cores",
        mnist_train=160, hmc_iterations=200, hmc_burn_in=50, hmc_chains=4, yacht_factor=2,
        epochs=1000, fashion=False, test_points=500, corruptions=None,
        severities=(1, 3, 5), grid=20, temperatures="1,0.3,0.1,0.03",
        temperature_hmc_iterations=200, temperature_epochs=1000, prior_datasets="yacht,mnist160",
        priors="gaussian_small,gaussian,gaussian_large,scale_mixture,logistic,laplace,"
               "student_t",
        prior_quick=False, bbb_epochs=10, bbb_priors="gaussian,scale_mixture"),
    "full": Scale(
        description="longer chains on 1,000 training images and every test image: for an "
                    "accelerator, or a long night on a CPU",
        mnist_train=1000, hmc_iterations=400, hmc_burn_in=100, hmc_chains=8, yacht_factor=2,
        epochs=1500, fashion=True, test_points=None, corruptions=None,
        severities=(1, 2, 3, 4, 5), grid=40, temperatures="1,0.3,0.1,0.03,0.01",
        temperature_hmc_iterations=200, temperature_epochs=600,
        prior_datasets="yacht,mnist160",
        priors="gaussian_small,gaussian,gaussian_large,scale_mixture,logistic,laplace,"
               "student_t",
        prior_quick=False, bbb_epochs=40, bbb_priors="gaussian,scale_mixture"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The scale of the study and where its data are."""

    scale: str = setting("tiny", choices=tuple(SCALES),
                         help="tiny: a pipeline check in minutes; small: about an hour on 2 "
                              "CPU cores; full: for an accelerator")
    data_dir: str | None = setting(None, help="folder with the datasets (default: "
                                              "$BNNKIT_DATA_DIR or the download cache)")
    seed: int = setting(0, help="seed of every run", bounds=(0, 2**32 - 1))

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.scale not in SCALES:
            raise ConfigError(f"unknown --scale {self.scale!r}; allowed: {', '.join(SCALES)}")

    def plan(self) -> Scale:
        """The sizes of :attr:`scale`."""
        return SCALES[self.scale]


def compare_settings(config: Config) -> dict[str, Any]:
    """The compare-methods settings at this scale: yacht, MNIST (and Fashion-MNIST) subsets.

    The HMC step sizes and trajectory lengths are those of
    :data:`bnnkit.experiments.compare_methods.SETTINGS`; only lengths and subsets scale.
    """
    from bnnkit.experiments.compare_methods import SETTINGS, Setting

    plan = config.plan()
    epochs = plan.epochs

    def scaled(base: Setting, factor: int, **problem: Any) -> Setting:
        hmc = dataclasses.replace(
            base.hmc, num_iterations=plan.hmc_iterations * factor,
            num_burn_in=plan.hmc_burn_in * factor, num_chains=plan.hmc_chains, seed=config.seed)
        return dataclasses.replace(
            base, problem=dataclasses.replace(base.problem, data_dir=config.data_dir,
                                              **problem),
            hmc=hmc, epochs=epochs, burn_in=epochs // 3, cycle=max(epochs // 15, 1))

    mnist = SETTINGS["mnist160"]
    chosen = {"yacht": scaled(SETTINGS["yacht"], plan.yacht_factor),
              "mnist": scaled(mnist, 1, subset_train_to=plan.mnist_train)}
    if plan.fashion:
        chosen["fashion_mnist"] = scaled(mnist, 1, dataset="fashion_mnist",
                                         subset_train_to=plan.mnist_train)
    return chosen


def temperature_config(config: Config, hmc_step_size: float | None = None):
    """The temperature sweep at this scale: MNIST subset, HMC and SGHMC-CLR ± augmentation.

    Args:
        config: the study's settings.
        hmc_step_size: the adapted leapfrog step ε of the compare-methods MNIST HMC run; the
            SGHMC-CLR step at T = 1 is then SGD's there, η₀ = 5 ε² (ten times Langevin's
            ε²/2), a step known to train this network on these data in these epochs.
    """
    from bnnkit.experiments import temperature

    plan = config.plan()
    iters, epochs = plan.temperature_hmc_iterations, plan.temperature_epochs
    return temperature.Config(
        dataset="mnist", subset_train_to=plan.mnist_train, data_dir=config.data_dir,
        temperatures=plan.temperatures, hmc_num_iterations=iters, hmc_num_burn_in=iters // 3,
        num_epochs=epochs, num_burn_in=epochs // 3, cycle_length=max(epochs // 10, 1),
        seed=config.seed,
        **({} if hmc_step_size is None else {"step_size": float(f"{5 * hmc_step_size**2:.3g}")}))


def prior_config(config: Config):
    """The prior sweep at this scale."""
    from bnnkit.experiments import prior_sweep

    plan = config.plan()
    return prior_sweep.Config(datasets=plan.prior_datasets, priors=plan.priors,
                              data_dir=config.data_dir, seed=config.seed,
                              quick=plan.prior_quick)


def bbb_config(config: Config):
    """Bayes by Backprop in Blundell et al.'s setting, for this scale's epochs."""
    from bnnkit.experiments import bbb_mnist

    plan = config.plan()
    return bbb_mnist.Config(priors=plan.bbb_priors, epochs=plan.bbb_epochs,
                            data_dir=config.data_dir, seed=config.seed)


# --- the findings -------------------------------------------------------------------------

#: The verdicts a finding can have. "not assessable": its figures rest on an HMC reference
#: that failed the within-chain verdict or was not judged, so they say nothing about the
#: posterior.
VERDICTS = ("reproduced", "not reproduced", "not assessable", "not measured")
#: The level of a run without a verdict (too few kept draws, or results written before the
#: levels were recorded).
UNJUDGED = "not judged"
#: The reference levels on which a finding cannot be assessed, weakest last.
UNASSESSABLE = ("not-mixed", UNJUDGED)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding of the paper: its claim, the figures measured here, the verdict (one of
    :data:`VERDICTS`) with the reason, and ``reference``: the weakest convergence level
    (:data:`bnnkit.metrics.convergence.LEVELS`, or :data:`UNJUDGED`) of the HMC runs its
    figures rest on ("" when they rest on none)."""

    number: int
    claim: str
    measured: str
    verdict: str
    caveat: str = ""
    reference: str = ""


def weakest_level(levels: Sequence[str | None]) -> str:
    """The weakest of some runs' convergence levels (``None``: a run without a verdict,
    :data:`UNJUDGED`); "" for no run.

    Example:
        >>> weakest_level(["converged", "mixed-multimodal"]), weakest_level([])
        ('mixed-multimodal', '')
        >>> weakest_level(["not-mixed", None])
        'not judged'
    """
    from bnnkit.metrics.convergence import LEVELS

    order = (*LEVELS, UNJUDGED)
    known = [level if level in LEVELS else UNJUDGED for level in levels]
    return max(known, key=order.index, default="")


def assessed(finding: Finding, levels: Sequence[str | None]) -> Finding:
    """``finding`` with the level of the HMC runs it rests on; "not assessable" when one of
    them failed the within-chain verdict or has none (its figures are kept, its verdict is
    withheld).

    Example:
        >>> found = Finding(1, "claim", "figures", "reproduced")
        >>> assessed(found, ["not-mixed"]).verdict, assessed(found, ["converged"]).verdict
        ('not assessable', 'reproduced')
    """
    level = weakest_level(levels)
    finding = dataclasses.replace(finding, reference=level)
    if level not in UNASSESSABLE or finding.verdict == "not measured":
        return finding
    why = ("failed the within-chain verdict: its chains did not mix" if level == "not-mixed"
           else "has no convergence verdict (too few kept draws to judge)")
    return dataclasses.replace(
        finding, verdict="not assessable",
        caveat=f"its HMC reference {why}, so the figures do not describe the posterior")


def _rows_by_method(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {r["method"]: r for r in rows}


def _classification_settings(compare: Mapping[str, Any]) -> list[str]:
    # compare-methods' results.json: {setting: {"problem": ..., "rows": [...]}}.
    return [name for name, setting_ in compare.items()
            if setting_["rows"] and "accuracy" in setting_["rows"][0]]


def _verdict(ok: bool) -> str:
    return "reproduced" if ok else "not reproduced"


def finding_hmc_beats_standard(compare: Mapping[str, Any],
                               converged: bool | None = None) -> Finding:
    """(1) The HMC model average beats standard training (SGD) and deep ensembles.

    Reproduced when, on every classification setting, HMC's test NLL is below SGD's and the
    deep ensemble's.
    """
    claim = ("BNNs (HMC) can outperform standard training and deep ensembles in accuracy "
             "and likelihood")
    names = _classification_settings(compare)
    if not names:
        return Finding(1, claim, "no classification setting ran", "not measured")
    parts, ok = [], True
    for name in names:
        by = _rows_by_method(compare[name]["rows"])
        hmc, sgd, ens = by["HMC (reference)"], by["SGD"], by["Deep ensemble (K=5)"]
        ok &= hmc["nll"] < sgd["nll"] and hmc["nll"] < ens["nll"]
        parts.append(f"{name}: NLL HMC {hmc['nll']:.3f}, SGD {sgd['nll']:.3f}, ensemble "
                     f"{ens['nll']:.3f}; accuracy {hmc['accuracy']:.3f} / {sgd['accuracy']:.3f}"
                     f" / {ens['accuracy']:.3f}")
    return Finding(1, claim, "; ".join(parts), _verdict(ok), _convergence_caveat(converged))


def finding_one_long_chain(convergence: Mapping[str, Any] | None,
                           converged: bool | None = None) -> Finding:
    """(2) One long chain represents the posterior about as well as several short ones.

    Reproduced when the long chain's agreement with the reference model average is within 2
    binomial standard errors, 2·√(a(1−a)/n) on n test points, of the short chains' (or
    better); a gap larger than that is a real difference on these test points.
    """
    claim = "a single long HMC chain gives a comparable posterior to several shorter chains"
    chains = (convergence or {}).get("chains") or []
    if len(chains) < 2 or "agreement" not in chains[0]:
        return Finding(2, claim, "no chain comparison (regression, or too few samples)",
                       "not measured")
    one, several = chains[0], chains[1]
    n = int(convergence["num_test_points"])
    a = several["agreement"]
    tolerance = 2 * math.sqrt(max(a * (1 - a), 1 / n) / n)
    ok = one["agreement"] >= a - tolerance
    measured = (f"agreement with {convergence['reference']}: {one['scheme']} "
                f"{one['agreement']:.3f} (mean over chains), {several['scheme']} {a:.3f} "
                f"(2 SE {tolerance:.3f}); TV {one['total_variation']:.3f} vs "
                f"{several['total_variation']:.3f}")
    return Finding(2, claim, measured, _verdict(ok), _convergence_caveat(converged))


def finding_no_cold_posterior(temperature: Mapping[str, Any] | None) -> Finding:
    """(3) No cold posterior effect for HMC without augmentation; it appears with it.

    Reproduced when HMC's test NLL at T = 1 is the lowest over the temperatures tried (or
    within 1 % of it), and SGHMC-CLR with augmentation gains more from cooling (its best NLL
    below T = 1 relative to its NLL at T = 1) than without augmentation.
    """
    claim = ("posterior tempering is not needed (no cold posterior effect for HMC); the "
             "effect is largely an artifact of data augmentation")
    rows = (temperature or {}).get("rows") or []
    if not rows:
        return Finding(3, claim, "the temperature sweep did not run", "not measured")
    lines: dict[str, dict[float, float]] = {}
    for r in rows:
        lines.setdefault(r["line"], {})[float(r["temperature"])] = float(r["nll"])

    def gain(line: dict[float, float]) -> float:
        # Relative NLL improvement of the best T < 1 over T = 1 (positive: cooling helps).
        colder = [v for t, v in line.items() if t < 1]
        return (line[1.0] - min(colder)) / abs(line[1.0]) if colder and 1.0 in line else 0.0

    hmc = next((v for k, v in lines.items() if k.startswith("HMC")), None)
    plain = next((v for k, v in lines.items() if not k.startswith("HMC")
                  and "augment" not in k), None)
    augmented = next((v for k, v in lines.items() if "augment" in k), None)
    if hmc is None or 1.0 not in hmc or plain is None or augmented is None:
        return Finding(3, claim, "the sweep lacks HMC at T = 1 or an SGMCMC line",
                       "not measured")
    hmc_ok = hmc[1.0] <= min(hmc.values()) * 1.01
    aug_ok = gain(augmented) > gain(plain)
    measured = (f"HMC NLL at T=1 {hmc[1.0]:.3f}, best {min(hmc.values()):.3f} at T="
                f"{min(hmc, key=hmc.get):g}; NLL gain from cooling: SGHMC-CLR "
                f"{100 * gain(plain):+.1f} %, with augmentation {100 * gain(augmented):+.1f} %")
    return Finding(3, claim, measured, _verdict(hmc_ok and aug_ok))


def finding_prior_robust(prior: Sequence[Mapping[str, Any]] | None) -> Finding:
    """(4) The model average is robust to the prior's scale and shape.

    Reproduced when, on every classification dataset of the sweep, the accuracies under the
    priors lie within 4 binomial standard errors (4·√(a(1−a)/n), n test points) of each
    other; and on regression the RMSEs within 10 % of their mean. (Differences inside these
    bounds are what resampling the test set alone would give.)
    """
    claim = ("the BMA is robust to the prior scale, and similar under Gaussian, mixture and "
             "logistic priors")
    rows = list(prior or [])
    if not rows:
        return Finding(4, claim, "the prior sweep did not run", "not measured")
    parts, ok = [], True
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == dataset]
        if "accuracy" in mine[0]:
            acc = [r["accuracy"] for r in mine]
            mean = sum(acc) / len(acc)
            n = int(mine[0]["num_test"])
            bound = 4 * math.sqrt(mean * (1 - mean) / n)
            ok &= max(acc) - min(acc) <= bound
            parts.append(f"{dataset}: accuracy {min(acc):.3f}–{max(acc):.3f} over "
                         f"{len(acc)} priors (bound {bound:.3f})")
        else:
            rmse = [r["rmse"] for r in mine]
            mean = sum(rmse) / len(rmse)
            ok &= max(rmse) - min(rmse) <= 0.1 * mean
            parts.append(f"{dataset}: RMSE {min(rmse):.3f}–{max(rmse):.3f} over {len(rmse)} "
                         "priors (bound 10 % of the mean)")
    return Finding(4, claim, "; ".join(parts), _verdict(ok))


def finding_poor_under_shift(shift: Sequence[Mapping[str, Any]] | None) -> Finding:
    """(5) HMC generalises poorly under covariate shift, relative to its clean advantage.

    Reproduced when HMC's accuracy lead over the best of SGD and the deep ensemble (negative:
    a deficit) shrinks from the clean images to the highest severity (mean over the
    corruptions): HMC then loses more to the shift than they do.
    """
    claim = "Bayesian neural networks (HMC) generalise surprisingly poorly under domain shift"
    rows = list(shift or [])
    if not rows:
        return Finding(5, claim, "the covariate-shift table did not run", "not measured")
    top = max(r["severity"] for r in rows)

    def accuracy(label: str, severity: int) -> float | None:
        values = [r["accuracy"] for r in rows if r["label"] == label
                  and r["severity"] == severity]
        return sum(values) / len(values) if values else None

    labels = list(dict.fromkeys(r["label"] for r in rows))
    hmc = next((x for x in labels if x.endswith("hmc")), None)
    others = [x for x in labels if x.endswith(("sgd", "deep"))]
    if hmc is None or not others:
        return Finding(5, claim, "the table lacks HMC, SGD or the ensemble", "not measured")
    clean_lead = accuracy(hmc, 0) - max(accuracy(x, 0) for x in others)
    shifted_lead = accuracy(hmc, top) - max(accuracy(x, top) for x in others)
    ok = shifted_lead < clean_lead
    measured = (f"accuracy lead of HMC over the best of SGD and the ensemble: clean "
                f"{clean_lead:+.3f}, severity {top} {shifted_lead:+.3f} (mean over "
                f"{len({r['corruption'] for r in rows}) - 1} corruptions)")
    return Finding(5, claim, measured, _verdict(ok))


def finding_ensembles_close(compare: Mapping[str, Any]) -> Finding:
    """(6) Deep ensembles are about as close to HMC's predictive as SGLD.

    Reproduced when, on every classification setting, the ensemble's total variation to HMC
    is at most SGLD's plus 10 % of it.
    """
    claim = ("cheaper methods differ from HMC; deep ensembles are about as close to HMC as "
             "SGLD (and closer than mean-field VI, not run here)")
    names = _classification_settings(compare)
    if not names:
        return Finding(6, claim, "no classification setting ran", "not measured")
    parts, ok = [], True
    for name in names:
        by = _rows_by_method(compare[name]["rows"])
        ens, sgld = by["Deep ensemble (K=5)"], by["SGLD"]
        ok &= ens["total_variation"] <= 1.1 * sgld["total_variation"]
        parts.append(f"{name}: TV to HMC ensemble {ens['total_variation']:.3f}, SGLD "
                     f"{sgld['total_variation']:.3f}; agreement {ens['agreement']:.3f} / "
                     f"{sgld['agreement']:.3f}")
    return Finding(6, claim, "; ".join(parts), _verdict(ok))


def _convergence_caveat(converged: bool | None) -> str:
    if converged is None or converged:
        return ""
    return "the HMC reference did not pass the convergence verdict"


def findings(out: str | os.PathLike) -> list[Finding]:
    """Score the paper's findings from the results written in ``out`` by :func:`paper`."""
    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    evaluation = read("compare_methods", "mnist", "hmc", "evaluation.json") or {}
    verdict = evaluation.get("convergence")
    converged = None if not verdict else bool(verdict.get("converged"))
    mnist_hmc = [(verdict or {}).get("level")]
    temperature = read("temperature", "results.json")
    prior = read("prior_sweep", "results.json")
    shift = read("shift", "shift_table.json")
    temperature_hmc = [r.get("level") for r in (temperature or {}).get("rows") or []
                       if r.get("method") == "hmc"]
    prior_hmc = [r.get("level") for r in prior or []]
    return [
        assessed(finding_hmc_beats_standard(compare, converged), mnist_hmc),
        assessed(finding_one_long_chain(read("convergence", "convergence.json"), converged),
                 mnist_hmc),
        assessed(finding_no_cold_posterior(temperature), temperature_hmc),
        assessed(finding_prior_robust(prior), prior_hmc),
        assessed(finding_poor_under_shift((shift or {}).get("rows")), mnist_hmc),
        assessed(finding_ensembles_close(compare), mnist_hmc),
    ]


def findings_markdown(items: Sequence[Finding], scale: str) -> str:
    """The findings as a markdown table, with the scale they were measured at."""
    lines = ["# The paper's findings, measured", "",
             f"Scale `{scale}`: {SCALES[scale].description}.", "",
             "A finding whose HMC reference failed the within-chain verdict (its chains did "
             "not mix), or was not judged, is *not assessable*: its figures are shown, but "
             "they do not describe the posterior, so they neither reproduce the paper nor "
             "contradict it.", "",
             "| # | the paper finds | measured here | HMC reference | verdict |",
             "|---|---|---|---|---|"]
    for f in items:
        verdict = f.verdict + (f" ({f.caveat})" if f.caveat else "")
        lines.append(f"| {f.number} | {f.claim} | {f.measured} | {f.reference or '—'} | "
                     f"{verdict} |")
    return "\n".join(lines) + "\n"


# --- the study ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Study:
    """What :func:`paper` made: the scale, each part's folder, the findings and the report."""

    scale: str
    parts: dict[str, Path]
    findings: list[Finding]
    report: Path

    def markdown(self) -> str:
        return findings_markdown(self.findings, self.scale)


def _check_out(out: Path, config: Config) -> bool:
    """Whether ``out`` continues an earlier study (of the same scale); refuses other folders."""
    given = os.fspath(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {given!r} is a file; allowed: a folder")
    settings = out / SETTINGS_FILE
    if settings.is_file():
        stored = storage.read_json(settings)
        if stored.get("scale") != config.scale or stored.get("seed") != config.seed:
            raise ConfigError(
                f"--out {given!r} holds a study of --scale {stored.get('scale')} and --seed "
                f"{stored.get('seed')}; allowed: the same, or another --out")
        return True
    from bnnkit import output_folder

    output_folder.check(out, SETTINGS_FILE, "paper study", resume=False, overwrite=False,
                        flags=())
    return False


def _mnist_runs(out: Path) -> list[str]:
    root = out / "compare_methods" / "mnist"
    return [os.fspath(root / name) for name in ("hmc", "sgd", "deep", "sghmc-clr")]


def paper(config: Config, out: str | os.PathLike, *, progress: bool = True,
          say: Callable[[str], None] = print) -> Study:
    """Run (or continue) the whole study at ``config.scale`` in ``out`` and write its report.

    Everything is checked (the folder, every part's settings, the data) before anything is
    written; each part reuses its finished runs, so a cut-off study continues where it was.

    Args:
        config: the scale, data folder and seed.
        out: the study's folder (new or empty, or an earlier study of the same scale and seed).
        progress: every run's progress bar, and a line per part.
        say: where the part lines go.

    Raises:
        ConfigError: a bad ``out`` or settings, or data that cannot be loaded.

    Example:
        (Minutes to hours; see docs/tutorials/paper-study.md.)

        >>> study = paper(Config(scale="tiny"), "runs/paper_tiny")  # doctest: +SKIP
    """
    from bnnkit import problem as problem_lib
    from bnnkit.experiments import (
        bbb_mnist,
        compare_methods,
        convergence,
        covariate_shift,
        prior_sweep,
        surface,
        temperature,
    )
    from bnnkit.report.document import document

    out = Path(out)
    plan = config.plan()
    continuing = _check_out(out, config)
    settings = compare_settings(config)
    temperature_cfg = temperature_config(config)
    prior_cfg = prior_config(config)
    bbb_cfg = bbb_config(config)
    corruptions = covariate_shift.check_corruptions(plan.corruptions)
    severities = covariate_shift.check_severities(plan.severities)
    for setting_ in settings.values():  # loads every dataset now: a missing one stops here
        problem_lib.build(setting_.problem)

    out.mkdir(parents=True, exist_ok=True)
    if not continuing:
        storage.write_json(out / SETTINGS_FILE, {"scale": config.scale, "seed": config.seed,
                                                 "data_dir": config.data_dir,
                                                 "plan": dataclasses.asdict(plan)})
    parts = {name: out / name for name in PARTS}
    steps = len(PARTS)

    def announce(k: int, what: str) -> None:
        if progress:
            say(f"[paper {k}/{steps}] {what}")

    announce(1, "cheaper methods against HMC")
    compare_methods.compare_methods(
        compare_methods.Config(settings=",".join(settings)), parts["compare_methods"],
        settings=settings, progress=progress)

    from bnnkit.evaluation import evaluate

    hmc_dir = parts["compare_methods"] / "mnist" / "hmc"
    # Stores evaluation.json, whose verdict the findings quote.
    epsilon = float(np.median(evaluate(hmc_dir)["sampler"]["step_size"]))
    temperature_cfg = temperature_config(config, epsilon)

    announce(2, "convergence in weight and function space")
    convergence.convergence_report(hmc_dir, parts["convergence"],
                                   convergence.Config(max_test=plan.test_points),
                                   overwrite=(parts["convergence"] / "convergence.json").is_file())

    announce(3, "covariate shift")
    shift_done = (parts["shift"] / "shift_table.json").is_file()
    if not shift_done:
        covariate_shift.covariate_shift(
            _mnist_runs(out), parts["shift"],
            covariate_shift.Config(max_test=plan.test_points, seed=config.seed),
            corruptions=corruptions, severities=severities,
            resume=(parts["shift"] / covariate_shift.SETTINGS_FILE).is_file(),
            progress=progress)

    announce(4, "posterior surface through three HMC chains")
    if not (parts["surface"] / "surface.npz").is_file():
        surface.posterior_surface(
            [f"{hmc_dir}:{c}:-1" for c in range(3)], parts["surface"],
            surface.Config(grid_size=plan.grid),
            resume=(parts["surface"] / "surface.json").is_file(), progress=progress)

    announce(5, "posterior temperature, with and without augmentation")
    temperature.temperature_sweep(temperature_cfg, parts["temperature"], progress=progress)

    announce(6, "priors of several scales and shapes")
    prior_sweep.prior_sweep(prior_cfg, parts["prior_sweep"], progress=progress)

    announce(7, "Bayes by Backprop on MNIST")
    bbb_mnist.bbb_mnist(bbb_cfg, parts["bbb_mnist"], progress=progress)

    items = findings(out)
    storage.write_json(out / FINDINGS_JSON, [dataclasses.asdict(f) for f in items])
    storage.atomic_write_bytes(out / FINDINGS_FILE,
                               findings_markdown(items, config.scale).encode())
    report_dir = out / REPORT_DIR
    document([out, *(parts[name] for name in PARTS)], report_dir,
             overwrite=(report_dir / "report.md").is_file())
    return Study(config.scale, parts, items, report_dir)
