"""The whole study of Izmailov et al. (2021) end to end, at three sizes: ``bnnkit paper``.

"What are Bayesian neural network posteriors really like?" asks six questions; each has an
experiment in :mod:`bnnkit.experiments`, and :func:`paper` runs them in turn on the data this
machine has, then scores the paper's findings and writes one report:

1. ``compare_methods/``: SGD, a deep ensemble, four SGMCMC variants, MultiSWAG, MC dropout, IVON
   and MFVI against the reference on UCI yacht (regression) and an MNIST subset
   (:mod:`~bnnkit.experiments.compare_methods`), at ``full`` also a Fashion-MNIST subset; and
   SGD and the ensemble against the reference on a CIFAR-10 proxy subset;
2. ``convergence/``: split R-hat of the MNIST reference in weight and function space, and one
   long chain against several short ones (:mod:`~bnnkit.experiments.convergence`);
3. ``shift/``: HMC, SGD and the deep ensemble of a CIFAR-10 proxy subset on its corrupted test
   images (:mod:`~bnnkit.experiments.covariate_shift`), and ``shift_mnist/`` the MNIST runs on
   corrupted digits (every corruption is photometric, a blur, noise or an elastic warp: none
   mirrors or rotates, so each keeps a digit's label);
4. ``surface/``: the log posterior on the plane through the ends of three of the MNIST
   reference's chains (:mod:`~bnnkit.experiments.surface`);
5. ``temperature/``: MCLMC from the CIFAR-10 proxy reference's ensemble and cyclical SGHMC
   with and without augmentation against the posterior temperature on that subset, whose
   crops and flips keep the labels (:mod:`~bnnkit.experiments.temperature`);
6. ``prior_sweep/``: the model average under priors of several scales and shapes, each
   sampled by MCLMC from the members of that dataset's reference ensemble
   (:mod:`~bnnkit.experiments.prior_sweep`);
7. ``bbb_mnist/``: Bayes by Backprop in Blundell et al.'s setting
   (:mod:`~bnnkit.experiments.bbb_mnist`);
8. ``findings.md``: each finding of the paper's abstract, the measured figures it rests on, and
   whether they reproduce it (:func:`findings`); ``figures/finding_<n>.png``, each finding's
   figure as the paper draws it (:func:`finding_figures`); then ``report/`` (``bnnkit report``
   of all of the above, each finding's figure with its verdict under it).

Every HMC reference is made the way ``bnnkit reference`` makes one
(:mod:`~bnnkit.experiments.reference`): a deep ensemble, then one HMC chain from each member,
tuned on its own; each finding names the convergence level its references reached and is
"not assessable" when one failed the within-chain verdict. The image networks have the prior
:data:`IMAGE_PRIOR`, fixed by a rule before any data are seen. The CIFAR-10 proxy
(``cifar10_proxy``) is a lossy JPEG copy of CIFAR-10: fine for the qualitative questions asked
of it here, never a source of CIFAR-10 numbers.

A :class:`Scale` fixes every size: ``tiny`` is a smoke test of the whole pipeline (minutes on
two CPU cores), ``small`` about 72 minutes on two CPU cores, ``full`` the longer chains and larger
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

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.metrics.convergence import FEW_DRAWS
from bnnkit.report.kinds import FINDING_FIGURE
from bnnkit.settings import check_numbers, setting

SETTINGS_FILE = "paper.json"
FINDINGS_FILE = "findings.md"
FINDINGS_JSON = "findings.json"
REPORT_DIR = "report"
#: The parts, in the order they run; each is a subfolder of ``--out``.
PARTS = (
    "compare_methods",
    "convergence",
    "shift",
    "shift_mnist",
    "surface",
    "temperature",
    "prior_sweep",
    "bbb_mnist",
)
#: The study's prior on image networks, fixed by a rule before any data are seen: the
#: fan-in-scaled Gaussian of He et al. (2015), w ~ N(0, 2 / fan_in) with fan_in the inputs of
#: the weight's unit (``fanin_gaussian`` with σ = √2; a bias has fan_in 1, so N(0, 2)). Under it
#: a ReLU layer keeps the second moment of its input, so the prior's networks neither blow up
#: nor vanish with depth; N(0, 1) on 784-256-256-10 makes the prior's logits about 16 x 16
#: times larger than its inputs.
IMAGE_PRIOR = "fanin_gaussian:scale=1.4142"
#: The candidate priors of the image settings' point-estimate methods (SGD, the ensemble,
#: MultiSWAG, MC dropout), picked by SGD's validation NLL
#: (:mod:`bnnkit.experiments.prior_choice`): the fan-in Gaussian at 1, 10 and 100 times the
#: rule's variance. On 160 MNIST images the rule's own weight decay makes the zero network
#: their optimum (accuracy 0.11, NLL ln 10), while the sampler's posterior predicts 0.63.
BASELINE_PRIORS = (
    "fanin_gaussian:scale=1.4142",
    "fanin_gaussian:scale=4.4721",
    "fanin_gaussian:scale=14.142",
)
#: The methods the ``tiny`` scale compares on yacht and MNIST: those its findings read (1: SGD
#: and the ensemble; 6: the ensemble, SGLD and MFVI). Every method's path through the comparison
#: is checked on its own by the comparison's tests.
TINY_METHODS = ("SGD", "Deep ensemble (K=5)", "SGLD", "MFVI")
#: The model of the natural-image parts: an MLP of 2 x 64 ReLU units on the 32 x 32 x 3 pixels
#: (about 200k weights). A CNN's gradient costs about ten times an MLP's on a CPU (LeNet-5
#: against 3072-256-256-10 on 500 images), and an MCLMC step also costs a few passes over
#: every weight, so 3072-256-256-10's 855k weights make each step about ten times
#: 784-256-256-10's on MNIST; at 200k weights it is about the same.
CIFAR_MODEL = "mlp_classification_small"
#: Chains per temperature (from the first members of the reference's ensemble): each T is a
#: posterior of its own, and the sweep has several, so it keeps fewer chains than a reference.
TEMPERATURE_CHAINS = 2
#: The natural-image datasets the study can ask its image questions on.
IMAGE_DATASETS = ("cifar10_proxy", "cifar10")


@dataclasses.dataclass(frozen=True)
class Scale:
    """Every size the study depends on (iterations, epochs, subsets, grids).

    Attributes:
        description: what the scale is for.
        mnist_train: training images of the MNIST (and Fashion-MNIST) subsets.
        cifar_train: training images of the CIFAR-10 proxy subset.
        hmc_iterations: iterations (tuning included) of each image reference's chains, and
            of the temperature sweep's; yacht runs ``yacht_factor`` times as many.
        hmc_burn_in: tuning iterations of each image reference's chains (yacht: ×
            ``yacht_factor``).
        hmc_chains: the references' ensemble members, so chains (≥ 3: the surface goes
            through three chains' last samples).
        ensemble_steps: optimiser updates of each member of a reference's ensemble.
        reference_max_time: with a duration, each image reference's chains extend
            themselves in blocks until each chain mixes or this much time has passed
            (``--until-converged``); None: the fixed budget. Yacht's keeps its fixed budget:
            no finding rests on it.
        epochs: epochs of SGD, the ensemble and SGMCMC (burn-in a third, cycles a fifteenth).
        fashion: also compare the methods on a Fashion-MNIST subset.
        methods: the methods compared on yacht and MNIST (None: every one); the CIFAR-10
            proxy runs :data:`CIFAR_METHODS`.
        baseline_priors: the candidate priors of the image settings' point-estimate methods
            (of :data:`BASELINE_PRIORS`).
        test_points: test images for the convergence and shift analyses (None: all).
        mnist_shift: also the MNIST runs on corrupted digits (``shift_mnist/``).
        corruptions: corruptions of the shift (None: all of them).
        severities: their severities.
        grid: points per axis of the surface.
        temperatures: posterior temperatures of the sweep.
        temperature_hmc_iterations: full-batch sampler iterations per temperature, the first
            third tuning (small: 100 tuning iterations, as the references have).
        temperature_epochs: SGHMC-CLR epochs per temperature (a third burn-in).
        prior_datasets: datasets of the prior sweep.
        prior_chains: MCLMC chains per prior (from the first members of the reference's
            ensemble). One chain is judged by the within-chain verdict alone (it cannot show
            whether other modes exist); ``small`` has one so that its sweep of 8 priors fits its
            budget (2 chains made the whole study about 82 minutes on 2 cores).
        priors: priors of the sweep.
        bbb_epochs: Bayes-by-Backprop epochs per prior on full MNIST.
        bbb_priors: its priors.
    """

    description: str
    mnist_train: int
    cifar_train: int
    hmc_iterations: int
    hmc_burn_in: int
    hmc_chains: int
    ensemble_steps: int
    reference_max_time: str | None
    yacht_factor: int
    epochs: int
    fashion: bool
    methods: tuple[str, ...] | None
    baseline_priors: tuple[str, ...]
    test_points: int | None
    mnist_shift: bool
    corruptions: tuple[str, ...] | None
    severities: tuple[int, ...]
    grid: int
    temperatures: str
    temperature_hmc_iterations: int
    temperature_epochs: int
    prior_datasets: str
    prior_chains: int
    priors: str
    bbb_epochs: int
    bbb_priors: str


SCALES: dict[str, Scale] = {
    "tiny": Scale(
        description="every part on the smallest inputs that exercise it: minutes on 2 CPU "
        "cores; checks the pipeline, not the findings",
        mnist_train=160,
        cifar_train=100,
        hmc_iterations=24,
        hmc_burn_in=8,
        hmc_chains=3,
        ensemble_steps=100,
        reference_max_time=None,
        yacht_factor=2,
        epochs=60,
        fashion=False,
        methods=TINY_METHODS,
        baseline_priors=(BASELINE_PRIORS[0], BASELINE_PRIORS[-1]),
        test_points=500,
        mnist_shift=False,
        corruptions=("gaussian_noise", "fog"),
        severities=(1, 3, 5),
        grid=8,
        temperatures="1,0.1",
        temperature_hmc_iterations=12,
        temperature_epochs=30,
        prior_datasets="yacht",
        prior_chains=1,
        priors="gaussian_small,gaussian,fanin_gaussian",
        bbb_epochs=1,
        bbb_priors="gaussian",
    ),
    "small": Scale(
        description="the paper's small-data settings (UCI yacht, 160 MNIST images) at CPU "
        "length: about an hour on 2 CPU cores",
        mnist_train=160,
        cifar_train=500,
        hmc_iterations=250,
        hmc_burn_in=100,
        hmc_chains=4,
        ensemble_steps=2000,
        reference_max_time="10m",
        yacht_factor=2,
        epochs=1000,
        fashion=False,
        methods=None,
        baseline_priors=BASELINE_PRIORS,
        test_points=500,
        mnist_shift=True,
        corruptions=None,
        severities=(1, 3, 5),
        grid=20,
        temperatures="1,0.3,0.1,0.03",
        temperature_hmc_iterations=300,
        temperature_epochs=1000,
        prior_datasets="yacht,mnist160",
        prior_chains=1,
        priors="gaussian_small,gaussian,gaussian_large,fanin_gaussian,scale_mixture,logistic,"
        "laplace,student_t",
        bbb_epochs=10,
        bbb_priors="gaussian,scale_mixture",
    ),
    "full": Scale(
        description="longer chains on 1,000 training images and every test image: for an "
        "accelerator, or a long night on a CPU",
        mnist_train=1000,
        cifar_train=2000,
        hmc_iterations=400,
        hmc_burn_in=150,
        hmc_chains=8,
        ensemble_steps=4000,
        reference_max_time="30m",
        yacht_factor=2,
        epochs=1500,
        fashion=True,
        methods=None,
        baseline_priors=BASELINE_PRIORS,
        test_points=None,
        mnist_shift=True,
        corruptions=None,
        severities=(1, 2, 3, 4, 5),
        grid=40,
        temperatures="1,0.3,0.1,0.03,0.01",
        temperature_hmc_iterations=450,
        temperature_epochs=600,
        prior_datasets="yacht,mnist160",
        prior_chains=2,
        priors="gaussian_small,gaussian,gaussian_large,fanin_gaussian,scale_mixture,logistic,"
        "laplace,student_t",
        bbb_epochs=40,
        bbb_priors="gaussian,scale_mixture",
    ),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The scale of the study and where its data are."""

    scale: str = setting(
        "tiny",
        choices=tuple(SCALES),
        help="tiny: a pipeline check in minutes; small: about 72 minutes on 2 "
        "CPU cores; full: for an accelerator",
    )
    data_dir: str | None = setting(
        None, help="folder with the datasets (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    seed: int = setting(0, help="seed of every run", bounds=(0, 2**32 - 1))
    images: str = setting(
        "cifar10_proxy",
        choices=IMAGE_DATASETS,
        help="the natural images of the cold-posterior and shift questions: the CIFAR-10 "
        "proxy (a lossy JPEG copy; no download, from the data folder) or CIFAR-10 "
        "itself (downloaded once, 160 MB)",
    )

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.scale not in SCALES:
            raise ConfigError(f"unknown --scale {self.scale!r}; allowed: {', '.join(SCALES)}")
        if self.images not in IMAGE_DATASETS:
            raise ConfigError(
                f"unknown --images {self.images!r}; allowed: {', '.join(IMAGE_DATASETS)}"
            )

    def plan(self) -> Scale:
        """The sizes of :attr:`scale`."""
        return SCALES[self.scale]


#: The methods run on the CIFAR-10 proxy subset: those the shift question compares with HMC.
CIFAR_METHODS = ("SGD", "Deep ensemble (K=5)")


def compare_settings(config: Config) -> dict[str, Any]:
    """The compare-methods settings at this scale: yacht, MNIST (and Fashion-MNIST) subsets,
    and the CIFAR-10 proxy subset with :data:`CIFAR_METHODS` only.

    Each reference is made by ``bnnkit reference``'s recipe at its defaults
    (:class:`bnnkit.experiments.reference.Config`: MCLMC tuned per chain): ``hmc_chains``
    members, then ``hmc_burn_in`` tuning and ``hmc_iterations - hmc_burn_in`` kept iterations
    per chain (× ``yacht_factor`` on yacht), the image settings' extended until each chain
    mixes for at most ``reference_max_time``. The image settings have the prior
    :data:`IMAGE_PRIOR`, and their point-estimate methods the one of :data:`BASELINE_PRIORS`
    that SGD's validation NLL picks.
    """
    from bnnkit.experiments import reference
    from bnnkit.experiments.compare_methods import SETTINGS, Setting

    plan = config.plan()
    epochs = plan.epochs

    def scaled(base: Setting, factor: int, **problem: Any) -> Setting:
        tuning = plan.hmc_burn_in * factor
        kept = (plan.hmc_iterations - plan.hmc_burn_in) * factor
        images = "prior" in problem
        extend = images and plan.reference_max_time is not None
        recipe = reference.Config(
            members=plan.hmc_chains,
            num_tuning=tuning,
            num_samples=kept,
            ensemble_steps=plan.ensemble_steps,
            until_converged=extend,
            max_time=plan.reference_max_time if extend else None,
            seed=config.seed,
        )
        hmc = dataclasses.replace(
            base.hmc,
            num_iterations=tuning + kept,
            num_burn_in=tuning,
            num_chains=plan.hmc_chains,
            seed=config.seed,
        )
        return dataclasses.replace(
            base,
            problem=dataclasses.replace(base.problem, data_dir=config.data_dir, **problem),
            hmc=hmc,
            reference=recipe,
            epochs=epochs,
            burn_in=epochs // 3,
            cycle=max(epochs // 15, 1),
            methods=plan.methods,
            baseline_priors=plan.baseline_priors if images else None,
        )

    mnist = SETTINGS["mnist160"]
    chosen = {
        "yacht": scaled(SETTINGS["yacht"], plan.yacht_factor),
        "mnist": scaled(mnist, 1, subset_train_to=plan.mnist_train, prior=IMAGE_PRIOR),
    }
    if plan.fashion:
        chosen["fashion_mnist"] = scaled(
            mnist, 1, dataset="fashion_mnist", subset_train_to=plan.mnist_train, prior=IMAGE_PRIOR
        )
    chosen[config.images] = dataclasses.replace(
        scaled(
            mnist,
            1,
            dataset=config.images,
            model=CIFAR_MODEL,
            subset_train_to=plan.cifar_train,
            prior=IMAGE_PRIOR,
        ),
        methods=CIFAR_METHODS,
    )
    return chosen


def temperature_config(
    config: Config, hmc_step_size: float | None = None, ensemble: str | os.PathLike | None = None
):
    """The temperature sweep at this scale: the CIFAR-10 proxy subset (whose crops and flips
    keep the labels), MCLMC from the reference's ensemble (one chain per member, tuned at every
    T) and SGHMC-CLR ± augmentation, the prior :data:`IMAGE_PRIOR`.

    Args:
        config: the study's settings.
        hmc_step_size: a leapfrog step ε for this network (the paper's HMC step of the
            compare-methods setting): the SGHMC-CLR step at T = 1 is SGD's there, η₀ = 5 ε²
            (ten times Langevin's ε²/2), a step known to train this network on these data in
            these epochs.
        ensemble: the compare-methods CIFAR-10 proxy reference's deep ensemble, whose members
            start the chains at every temperature (they are modes of every tempered posterior:
            dividing log p by T moves no mode).
    """
    from bnnkit.experiments import temperature

    plan = config.plan()
    iters, epochs = plan.temperature_hmc_iterations, plan.temperature_epochs
    given: dict[str, Any] = {}
    if hmc_step_size is not None:
        given.update(step_size=float(f"{5 * hmc_step_size**2:.3g}"))
    if ensemble is not None:
        given.update(hmc_init_checkpoint=os.fspath(Path(ensemble).resolve()))
    return temperature.Config(
        dataset=config.images,
        model=CIFAR_MODEL,
        subset_train_to=plan.cifar_train,
        prior=IMAGE_PRIOR,
        data_dir=config.data_dir,
        sampler="mclmc",
        hmc_num_chains=min(plan.hmc_chains, TEMPERATURE_CHAINS),
        temperatures=plan.temperatures,
        hmc_num_iterations=iters,
        hmc_num_burn_in=iters // 3,
        num_epochs=epochs,
        num_burn_in=epochs // 3,
        cycle_length=max(epochs // 10, 1),
        seed=config.seed,
        **given,
    )


def prior_settings(config: Config, out: str | os.PathLike) -> dict[str, Any]:
    """The prior sweep's datasets sampled by the reference's recipe: per prior,
    ``prior_chains`` MCLMC chains tuned per chain, chain k started at member k of the
    deep ensemble of that dataset's compare-methods reference (in ``out``), for as many
    iterations as that reference's base budget (``hmc_iterations`` with ``hmc_burn_in``
    tuning; × ``yacht_factor`` on yacht).

    Example:
        >>> mnist = prior_settings(Config(scale="small"), "/study")["mnist160"]
        >>> mnist.sampler, mnist.hmc["num_chains"], mnist.hmc["num_iterations"]
        ('mclmc', 1, 250)
        >>> mnist.hmc["init_checkpoint"]
        '/study/compare_methods/mnist/hmc/ensemble'
    """
    from bnnkit.experiments import prior_sweep, reference

    plan = config.plan()
    # The compare-methods setting whose reference's members start each dataset's chains.
    source = {"yacht": "yacht", "mnist160": "mnist"}
    chosen = {}
    for name, base in prior_sweep.settings().items():
        factor = plan.yacht_factor if name == "yacht" else 1
        ensemble = (
            Path(out).absolute() / "compare_methods" / source[name] / "hmc" / reference.ENSEMBLE_DIR
        )
        chosen[name] = dataclasses.replace(
            base,
            sampler="mclmc",
            hmc=dict(
                num_iterations=plan.hmc_iterations * factor,
                num_burn_in=plan.hmc_burn_in * factor,
                num_chains=min(plan.hmc_chains, plan.prior_chains),
                init_checkpoint=os.fspath(ensemble),
            ),
        )
    return chosen


def prior_config(config: Config):
    """The prior sweep at this scale."""
    from bnnkit.experiments import prior_sweep

    plan = config.plan()
    return prior_sweep.Config(
        datasets=plan.prior_datasets, priors=plan.priors, data_dir=config.data_dir, seed=config.seed
    )


def bbb_config(config: Config):
    """Bayes by Backprop in Blundell et al.'s setting, for this scale's epochs."""
    from bnnkit.experiments import bbb_mnist

    plan = config.plan()
    return bbb_mnist.Config(
        priors=plan.bbb_priors, epochs=plan.bbb_epochs, data_dir=config.data_dir, seed=config.seed
    )


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
#: Every level a reference can have, best first: the verdict's three
#: (:data:`bnnkit.metrics.convergence.LEVELS`) with ``mixed-few-draws`` between the last two
#: (each chain mixed and the chains agree, but the pooled draws give an ESS below 100 at the
#: worst test point: :func:`bnnkit.metrics.convergence.reference_level`), then "not judged".
REFERENCE_LEVELS = ("converged", "mixed-multimodal", FEW_DRAWS, "not-mixed", UNJUDGED)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding of the paper: its claim, the figures measured here, the verdict (one of
    :data:`VERDICTS`) with the reason, and ``reference``: the weakest convergence level
    (:data:`REFERENCE_LEVELS`) of the HMC runs its figures rest on ("" when they rest on
    none)."""

    number: int
    claim: str
    measured: str
    verdict: str
    caveat: str = ""
    reference: str = ""


def weakest_level(levels: Sequence[str | None]) -> str:
    """The weakest of some runs' convergence levels (:data:`REFERENCE_LEVELS`; ``None``: a
    run without a verdict, :data:`UNJUDGED`); "" for no run.

    Example:
        >>> weakest_level(["converged", "mixed-multimodal"]), weakest_level([])
        ('mixed-multimodal', '')
        >>> weakest_level(["not-mixed", None]), weakest_level(["converged", FEW_DRAWS])
        ('not judged', 'mixed-few-draws')
    """
    order = REFERENCE_LEVELS
    known = [level if level in order else UNJUDGED for level in levels]
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
    if level == FEW_DRAWS and finding.verdict != "not measured":
        return dataclasses.replace(
            finding,
            caveat=(
                "each chain of its HMC reference mixed and the chains agree, but their pooled "
                "draws are fewer than the verdict asks (ESS < 100 at the worst test point): the "
                "figures carry more Monte Carlo error"
            ),
        )
    if level not in UNASSESSABLE or finding.verdict == "not measured":
        return finding
    why = (
        "failed the within-chain verdict: its chains did not mix"
        if level == "not-mixed"
        else "has no convergence verdict (too few kept draws to judge)"
    )
    return dataclasses.replace(
        finding,
        verdict="not assessable",
        caveat=f"its HMC reference {why}, so the figures do not describe the posterior",
    )


def _rows_by_method(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {r["method"]: r for r in rows}


def _classification_settings(compare: Mapping[str, Any]) -> list[str]:
    # compare-methods' results.json: {setting: {"problem": ..., "rows": [...]}}.
    return [
        name
        for name, setting_ in compare.items()
        if setting_["rows"] and "accuracy" in setting_["rows"][0]
    ]


def _sgld_settings(compare: Mapping[str, Any]) -> list[str]:
    # The classification settings that ran SGLD (the CIFAR-10 proxy runs only SGD and the
    # ensemble against HMC).
    return [
        name
        for name in _classification_settings(compare)
        if any(r["method"] == "SGLD" for r in compare[name]["rows"])
    ]


def _verdict(ok: bool) -> str:
    return "reproduced" if ok else "not reproduced"


def finding_hmc_beats_standard(
    compare: Mapping[str, Any], converged: bool | None = None
) -> Finding:
    """(1) The HMC model average beats standard training (SGD) and deep ensembles.

    Reproduced when, on every classification setting, HMC's test NLL is below SGD's and the
    deep ensemble's.
    """
    claim = (
        "BNNs (HMC) can outperform standard training and deep ensembles in accuracy and likelihood"
    )
    names = _classification_settings(compare)
    if not names:
        return Finding(1, claim, "no classification setting ran", "not measured")
    parts, ok = [], True
    for name in names:
        by = _rows_by_method(compare[name]["rows"])
        hmc = _reference_row(compare[name]["rows"])
        sgd, ens = by["SGD"], by["Deep ensemble (K=5)"]
        ok &= hmc["nll"] < sgd["nll"] and hmc["nll"] < ens["nll"]
        parts.append(
            f"{name}: NLL reference {hmc['nll']:.3f}, SGD {sgd['nll']:.3f}, ensemble "
            f"{ens['nll']:.3f}; accuracy {hmc['accuracy']:.3f} / {sgd['accuracy']:.3f}"
            f" / {ens['accuracy']:.3f}"
            + (f" (their prior {sgd['prior']}, picked on validation)" if sgd.get("prior") else "")
        )
    return Finding(1, claim, "; ".join(parts), _verdict(ok), _convergence_caveat(converged))


def finding_one_long_chain(
    convergence: Mapping[str, Any] | None, converged: bool | None = None
) -> Finding:
    """(2) One long chain represents the posterior about as well as several short ones.

    Reproduced when the long chain's agreement with the reference model average is within 2
    binomial standard errors, 2·√(a(1−a)/n) on n test points, of the short chains' (or
    better); a gap larger than that is a real difference on these test points.
    """
    claim = "a single long HMC chain gives a comparable posterior to several shorter chains"
    chains = (convergence or {}).get("chains") or []
    if len(chains) < 2 or "agreement" not in chains[0]:
        return Finding(
            2, claim, "no chain comparison (regression, or too few samples)", "not measured"
        )
    one, several = chains[0], chains[1]
    n = int(convergence["num_test_points"])
    a = several["agreement"]
    tolerance = 2 * math.sqrt(max(a * (1 - a), 1 / n) / n)
    ok = one["agreement"] >= a - tolerance
    measured = (
        f"agreement with {convergence['reference']}: {one['scheme']} "
        f"{one['agreement']:.3f} (mean over chains), {several['scheme']} {a:.3f} "
        f"(2 SE {tolerance:.3f}); TV {one['total_variation']:.3f} vs "
        f"{several['total_variation']:.3f}"
    )
    return Finding(2, claim, measured, _verdict(ok), _convergence_caveat(converged))


def finding_no_cold_posterior(temperature: Mapping[str, Any] | None) -> Finding:
    """(3) No cold posterior effect for HMC without augmentation; it appears with it.

    Reproduced when HMC's test NLL at T = 1 is the lowest over the temperatures tried (or
    within 1 % of it), and SGHMC-CLR with augmentation gains more from cooling (its best NLL
    below T = 1 relative to its NLL at T = 1) than without augmentation. A temperature T < 1
    whose sampler failed the within-chain verdict is left out of the comparison (and named):
    its chains say nothing about that tempered posterior (:func:`judged_temperature_rows`).
    """
    claim = (
        "posterior tempering is not needed (no cold posterior effect for HMC); the "
        "effect is largely an artifact of data augmentation"
    )
    rows, dropped = judged_temperature_rows((temperature or {}).get("rows") or [])
    if not rows:
        return Finding(3, claim, "the temperature sweep did not run", "not measured")
    lines: dict[str, dict[float, float]] = {}
    for r in rows:
        lines.setdefault(r["line"], {})[float(r["temperature"])] = float(r["nll"])

    def gain(line: dict[float, float]) -> float:
        # Relative NLL improvement of the best T < 1 over T = 1 (positive: cooling helps).
        colder = [v for t, v in line.items() if t < 1]
        return (line[1.0] - min(colder)) / abs(line[1.0]) if colder and 1.0 in line else 0.0

    # The full-batch sampler's line is "HMC" or "MCLMC" (rows say method "hmc" for either).
    full_batch = {
        r["line"] for r in rows if r.get("method") == "hmc" or r["line"] in ("HMC", "MCLMC")
    }
    sampler = next((k for k in lines if k in full_batch), "HMC")
    hmc = lines.get(sampler)
    plain = next((v for k, v in lines.items() if k not in full_batch and "augment" not in k), None)
    augmented = next((v for k, v in lines.items() if "augment" in k), None)
    if hmc is None or 1.0 not in hmc or plain is None or augmented is None:
        return Finding(3, claim, "the sweep lacks HMC at T = 1 or an SGMCMC line", "not measured")
    hmc_ok = hmc[1.0] <= min(hmc.values()) * 1.01
    aug_ok = gain(augmented) > gain(plain)
    measured = (
        f"{sampler} NLL at T=1 {hmc[1.0]:.3f}, best {min(hmc.values()):.3f} at "
        f"T={min(hmc, key=hmc.get):g}; NLL gain from cooling: SGHMC-CLR "
        f"{100 * gain(plain):+.1f} %, with augmentation {100 * gain(augmented):+.1f} %"
        + (
            f"; left out, their {sampler} chains did not mix: T="
            + ", ".join(f"{t:g}" for t in dropped)
            if dropped
            else ""
        )
    )
    return Finding(3, claim, measured, _verdict(hmc_ok and aug_ok))


def judged_temperature_rows(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[float]]:
    """The temperature sweep's rows finding 3 compares, and the temperatures left out: the
    full-batch sampler's rows at T < 1 whose level is :data:`UNASSESSABLE` (T = 1 is always
    kept: the finding is measured against it, and its own level decides whether it can be).
    When every T < 1 would go, none does: with nothing colder to compare, the finding rests
    on those runs, and their level makes it not assessable.

    Example:
        >>> rows = [{"method": "hmc", "temperature": t, "level": level} for t, level in
        ...         ((1.0, "converged"), (0.3, "mixed-multimodal"), (0.1, "not-mixed"))]
        >>> kept, dropped = judged_temperature_rows(rows)
        >>> [r["temperature"] for r in kept], dropped
        ([1.0, 0.3], [0.1])
    """

    def unjudged(r: Mapping[str, Any]) -> bool:
        return (
            r.get("method") == "hmc"
            and float(r["temperature"]) != 1.0
            and weakest_level([r.get("level")]) in UNASSESSABLE
        )

    colder = {
        float(r["temperature"])
        for r in rows
        if r.get("method") == "hmc" and float(r["temperature"]) != 1.0
    }
    dropped = sorted({float(r["temperature"]) for r in rows if unjudged(r)}, reverse=True)
    if set(dropped) == colder:
        return list(rows), []
    return [r for r in rows if not unjudged(r)], dropped


#: The sweep's priors that finding 4 reports but does not judge: the Gaussian at a third of
#: the base scale s. s is about the fan-in rule's scale for the sweep's networks (σ ≈ 0.09 on
#: the hidden layers of 784-256-256-10, s = 0.1), and a prior three times narrower shrinks
#: each ReLU layer's output by 3, so the prior's networks are near-constant functions: it
#: underfits by construction, before any data are seen. The range judged is s to 3 s for the
#: Gaussian, the fan-in rule, and four other shapes at variance s².
UNJUDGED_PRIORS = ("gaussian_small",)


def judged_prior_rows(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The prior sweep's rows finding 4 compares, and the rows left out because their chains
    did not mix (level in :data:`UNASSESSABLE`); rows of :data:`UNJUDGED_PRIORS` are in
    neither (rows without a ``key``, from before the sweep recorded it, are all judged).

    A dataset with fewer than two priors whose chains mixed is left out whole: there is no
    comparison left on it. When that leaves nothing, nothing is left out: the finding then
    rests on those runs, and their level makes it not assessable.

    Example:
        >>> rows = [{"dataset": "a", "key": k, "level": level} for k, level in
        ...         (("gaussian", "converged"), ("laplace", "not-mixed"),
        ...          ("logistic", "mixed-few-draws"))]
        >>> rows.append({"dataset": "b", "key": "gaussian", "level": "converged"})
        >>> kept, dropped = judged_prior_rows(rows)
        >>> [(r["dataset"], r["key"]) for r in kept]
        [('a', 'gaussian'), ('a', 'logistic')]
        >>> [(r["dataset"], r["key"]) for r in dropped]
        [('a', 'laplace'), ('b', 'gaussian')]
    """
    scored = [r for r in rows if r.get("key") not in UNJUDGED_PRIORS]
    mixed = [r for r in scored if weakest_level([r.get("level")]) not in UNASSESSABLE]
    counts: dict[str, int] = {}
    for r in mixed:
        counts[r["dataset"]] = counts.get(r["dataset"], 0) + 1
    kept = [r for r in mixed if counts[r["dataset"]] >= 2]
    if not kept:
        return scored, []
    return kept, [r for r in scored if r not in kept]


def finding_prior_robust(prior: Sequence[Mapping[str, Any]] | None) -> Finding:
    """(4) The model average is robust to the prior's scale and shape.

    Judged over the rows :func:`judged_prior_rows` keeps: the sweep's priors but
    :data:`UNJUDGED_PRIORS`, less those whose chains did not mix. Reproduced when, on every
    classification dataset of the sweep, the accuracies under those priors lie within 4
    binomial standard errors (4·√(a(1−a)/n), n test points) of each other; and on regression
    the RMSEs within 10 % of their mean. (Differences inside these bounds are what
    resampling the test set alone would give.)
    """
    claim = (
        "the BMA is robust to the prior scale, and similar under Gaussian, mixture and "
        "logistic priors"
    )
    every = list(prior or [])
    rows, dropped = judged_prior_rows(every)
    if not rows:
        return Finding(4, claim, "the prior sweep did not run", "not measured")
    aside = [r for r in every if r.get("key") in UNJUDGED_PRIORS]
    parts, ok = [], True
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == dataset]
        if "accuracy" in mine[0]:
            acc = [r["accuracy"] for r in mine]
            mean = sum(acc) / len(acc)
            n = int(mine[0]["num_test"])
            bound = 4 * math.sqrt(mean * (1 - mean) / n)
            ok &= max(acc) - min(acc) <= bound
            parts.append(
                f"{dataset}: accuracy {min(acc):.3f}–{max(acc):.3f} over "
                f"{len(acc)} priors (bound {bound:.3f})"
                + "".join(
                    f"; {r['prior']}, not judged: {r['accuracy']:.3f}"
                    for r in aside
                    if r["dataset"] == dataset
                )
            )
        else:
            rmse = [r["rmse"] for r in mine]
            mean = sum(rmse) / len(rmse)
            ok &= max(rmse) - min(rmse) <= 0.1 * mean
            parts.append(
                f"{dataset}: RMSE {min(rmse):.3f}–{max(rmse):.3f} over {len(rmse)} "
                "priors (bound 10 % of the mean)"
                + "".join(
                    f"; {r['prior']}, not judged: {r['rmse']:.3f}"
                    for r in aside
                    if r["dataset"] == dataset
                )
            )
    if dropped:
        parts.append(
            "left out, their chains did not mix: "
            + ", ".join(f"{r['dataset']} {r['prior']}" for r in dropped)
        )
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
        values = [r["accuracy"] for r in rows if r["label"] == label and r["severity"] == severity]
        return sum(values) / len(values) if values else None

    labels = list(dict.fromkeys(r["label"] for r in rows))
    hmc = next((x for x in labels if x.endswith("hmc")), None)
    others = [x for x in labels if x.endswith(("sgd", "deep"))]
    if hmc is None or not others:
        return Finding(5, claim, "the table lacks HMC, SGD or the ensemble", "not measured")
    clean_lead = accuracy(hmc, 0) - max(accuracy(x, 0) for x in others)
    shifted_lead = accuracy(hmc, top) - max(accuracy(x, top) for x in others)
    ok = shifted_lead < clean_lead
    measured = (
        f"accuracy lead of HMC over the best of SGD and the ensemble: clean "
        f"{clean_lead:+.3f}, severity {top} {shifted_lead:+.3f} (mean over "
        f"{len({r['corruption'] for r in rows}) - 1} corruptions)"
    )
    return Finding(5, claim, measured, _verdict(ok))


def finding_ensembles_close(compare: Mapping[str, Any]) -> Finding:
    """(6) Deep ensembles are about as close to HMC's predictive as SGLD, and closer than
    mean-field VI.

    Reproduced when, on every classification setting, the ensemble's total variation to HMC
    is at most SGLD's plus 10 % of it, and below MFVI's where MFVI ran. An ensemble whose
    prior was picked on validation (``Setting.baseline_priors``) is not on the reference's
    posterior: the caveat says that its distance includes the priors' difference.
    """
    claim = (
        "cheaper methods differ from HMC; deep ensembles are about as close to HMC as "
        "SGLD, and closer than mean-field VI"
    )
    names = _sgld_settings(compare)
    if not names:
        return Finding(6, claim, "no classification setting ran SGLD", "not measured")
    parts, ok, priors = [], True, []
    for name in names:
        by = _rows_by_method(compare[name]["rows"])
        ens, sgld, mfvi = by["Deep ensemble (K=5)"], by["SGLD"], by.get("MFVI")
        ok &= ens["total_variation"] <= 1.1 * sgld["total_variation"]
        line = (
            f"{name}: TV to HMC ensemble {ens['total_variation']:.3f}, SGLD "
            f"{sgld['total_variation']:.3f}"
        )
        if mfvi is not None and "total_variation" in mfvi:
            ok &= ens["total_variation"] < mfvi["total_variation"]
            line += f", MFVI {mfvi['total_variation']:.3f}"
        parts.append(line + f"; agreement {ens['agreement']:.3f} / {sgld['agreement']:.3f}")
        if ens.get("prior"):
            priors.append(f"{name}: {ens['prior']}")
    caveat = (
        "the ensemble's prior was picked on validation (" + "; ".join(priors) + "), not "
        "the reference's, so its distance to HMC includes the priors' difference"
        if priors
        else ""
    )
    return Finding(6, claim, "; ".join(parts), _verdict(ok), caveat)


def _convergence_caveat(converged: bool | None) -> str:
    if converged is None or converged:
        return ""
    return "the HMC reference did not pass the convergence verdict"


def _reference_level(compare: Mapping[str, Any], name: str) -> list[str | None]:
    """The convergence level of setting ``name``'s HMC reference, as the compare-methods table
    recorded it ([] when the setting did not run; [None] when no level was recorded)."""
    rows = (compare.get(name) or {}).get("rows") or []
    found = _reference_row(rows)
    return [] if found is None else [found.get("level")]


def _reference_row(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    # The reference's row ("HMC (reference)", "MCLMC (reference)"): the table's first.
    from bnnkit.experiments.compare_methods import REFERENCE_SUFFIX

    return next((r for r in rows if r.get("method", "").endswith(REFERENCE_SUFFIX)), None)


def findings(out: str | os.PathLike) -> list[Finding]:
    """Score the paper's findings from the results written in ``out`` by :func:`paper`."""
    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    classification = _classification_settings(compare)
    mnist_hmc = _reference_level(compare, "mnist")
    image_hmc = [level for name in classification for level in _reference_level(compare, name)]
    sgld_hmc = [
        level for name in _sgld_settings(compare) for level in _reference_level(compare, name)
    ]
    converged = None if not mnist_hmc or mnist_hmc[0] is None else mnist_hmc[0] not in UNASSESSABLE
    temperature = read("temperature", "results.json")
    prior = read("prior_sweep", "results.json")
    shift = read("shift", "shift_table.json")
    images = (read(SETTINGS_FILE) or {}).get("images", "cifar10_proxy")
    shift_hmc = _reference_level(compare, images) or mnist_hmc
    temperature_hmc = [
        r.get("level")
        for r in judged_temperature_rows((temperature or {}).get("rows") or [])[0]
        if r.get("method") == "hmc"
    ]
    prior_hmc = [r.get("level") for r in judged_prior_rows(prior or [])[0]]
    return [
        assessed(finding_hmc_beats_standard(compare, converged), image_hmc),
        assessed(
            finding_one_long_chain(read("convergence", "convergence.json"), converged), mnist_hmc
        ),
        assessed(finding_no_cold_posterior(temperature), temperature_hmc),
        assessed(finding_prior_robust(prior), prior_hmc),
        assessed(finding_poor_under_shift((shift or {}).get("rows")), shift_hmc),
        assessed(finding_ensembles_close(compare), sgld_hmc),
    ]


def finding_figures(out: str | os.PathLike) -> dict[int, bytes]:
    """Each finding's figure (:mod:`bnnkit.report.finding_plots`), drawn as the paper draws
    it from the results in ``out``, by finding number; a finding whose part did not run has
    none."""
    from bnnkit.report import finding_plots as plots

    out = Path(out)

    def read(*parts: str) -> Any:
        file = out.joinpath(*parts)
        return storage.read_json(file) if file.is_file() else None

    compare = read("compare_methods", "results.json") or {}
    classification = {name: compare[name]["rows"] for name in _classification_settings(compare)}
    figures: dict[int, bytes] = {}
    if classification:
        figures[1] = plots.methods_png(classification)
        figures[6] = plots.closeness_png(classification)
    chains = read("convergence", "convergence.json") or {}
    if len(chains.get("chains") or []) >= 2 and "agreement" in chains["chains"][0]:
        figures[2] = plots.chains_png(chains["chains"], str(chains.get("reference", "")))
    temperature = (read("temperature", "results.json") or {}).get("rows")
    if temperature:
        figures[3] = plots.temperature_nll_png(temperature)
    prior = read("prior_sweep", "results.json")
    if prior:
        figures[4] = plots.priors_png(prior, judged_prior_rows(prior)[0])
    shift = (read("shift", "shift_table.json") or {}).get("rows")
    if shift:
        figures[5] = plots.severity_png(shift)
    return figures


def findings_markdown(items: Sequence[Finding], scale: str) -> str:
    """The findings as a markdown table, with the scale they were measured at."""
    lines = [
        "# The paper's findings, measured",
        "",
        f"Scale `{scale}`: {SCALES[scale].description}.",
        "",
        "A finding whose HMC reference failed the within-chain verdict (its chains did "
        "not mix), or was not judged, is *not assessable*: its figures are shown, but "
        "they do not describe the posterior, so they neither reproduce the paper nor "
        "contradict it.",
        "",
        "| # | the paper finds | measured here | HMC reference | verdict |",
        "|---|---|---|---|---|",
    ]
    for f in items:
        verdict = f.verdict + (f" ({f.caveat})" if f.caveat else "")
        lines.append(
            f"| {f.number} | {f.claim} | {f.measured} | {f.reference or '—'} | {verdict} |"
        )
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
        images = stored.get("images", "cifar10_proxy")
        if (stored.get("scale"), stored.get("seed"), images) != (
            config.scale,
            config.seed,
            config.images,
        ):
            raise ConfigError(
                f"--out {given!r} holds a study of --scale {stored.get('scale')}, --seed "
                f"{stored.get('seed')} and --images {images}; allowed: the same, or another "
                "--out"
            )
        return True
    from bnnkit import output_folder

    output_folder.check(out, SETTINGS_FILE, "paper study", resume=False, overwrite=False, flags=())
    return False


def _shift_runs(out: Path, setting: str, names: Sequence[str]) -> list[str]:
    root = out / "compare_methods" / setting
    return [os.fspath(root / name) for name in names]


def paper(
    config: Config,
    out: str | os.PathLike,
    *,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> Study:
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
        reference,
        surface,
        temperature,
    )
    from bnnkit.report.document import document

    out = Path(out)
    plan = config.plan()
    continuing = _check_out(out, config)
    settings = compare_settings(config)
    # Its chains start at the members of the CIFAR-10 proxy reference's ensemble.
    temperature_cfg = temperature_config(
        config,
        settings[config.images].hmc.step_size,
        out / "compare_methods" / config.images / "hmc" / reference.ENSEMBLE_DIR,
    )
    prior_cfg = prior_config(config)
    bbb_cfg = bbb_config(config)
    corruptions = covariate_shift.check_corruptions(plan.corruptions)
    severities = covariate_shift.check_severities(plan.severities)
    for setting_ in settings.values():  # loads every dataset now: a missing one stops here
        problem_lib.build(setting_.problem)
    temperature.check(temperature_cfg)

    out.mkdir(parents=True, exist_ok=True)
    if not continuing:
        storage.write_json(
            out / SETTINGS_FILE,
            {
                "scale": config.scale,
                "seed": config.seed,
                "images": config.images,
                "data_dir": config.data_dir,
                "plan": dataclasses.asdict(plan),
            },
        )
    parts = {name: out / name for name in PARTS}
    steps = len(PARTS) - 1  # the two shift tables are one step

    def announce(k: int, what: str) -> None:
        if progress:
            say(f"[paper {k}/{steps}] {what}")

    announce(1, "cheaper methods against the reference")
    compare_methods.compare_methods(
        compare_methods.Config(settings=",".join(settings)),
        parts["compare_methods"],
        settings=settings,
        progress=progress,
    )

    hmc_dir = parts["compare_methods"] / "mnist" / "hmc"
    announce(2, "convergence in weight and function space")
    convergence.convergence_report(
        hmc_dir,
        parts["convergence"],
        convergence.Config(max_test=plan.test_points),
        overwrite=(parts["convergence"] / "convergence.json").is_file(),
    )

    announce(3, "covariate shift: CIFAR-10 proxy, then MNIST")
    for part, setting_, names in (
        ("shift", config.images, ("hmc", "sgd", "deep")),
        ("shift_mnist", "mnist", ("hmc", "sgd", "deep", "sghmc-clr")),
    ):
        if part == "shift_mnist" and not plan.mnist_shift:
            continue
        if not (parts[part] / covariate_shift.TABLE_FILE).is_file():
            covariate_shift.covariate_shift(
                _shift_runs(out, setting_, names),
                parts[part],
                covariate_shift.Config(max_test=plan.test_points, seed=config.seed),
                corruptions=corruptions,
                severities=severities,
                resume=(parts[part] / covariate_shift.SETTINGS_FILE).is_file(),
                progress=progress,
            )

    announce(4, "posterior surface through three reference chains")
    if not (parts["surface"] / "surface.npz").is_file():
        surface.posterior_surface(
            [f"{hmc_dir}:{c}:-1" for c in range(3)],
            parts["surface"],
            surface.Config(grid_size=plan.grid),
            resume=(parts["surface"] / "surface.json").is_file(),
            progress=progress,
        )

    announce(5, "posterior temperature, with and without augmentation")
    temperature.temperature_sweep(temperature_cfg, parts["temperature"], progress=progress)

    announce(6, "priors of several scales and shapes")
    prior_sweep.prior_sweep(
        prior_cfg, parts["prior_sweep"], settings_=prior_settings(config, out), progress=progress
    )

    announce(7, "Bayes by Backprop on MNIST")
    bbb_mnist.bbb_mnist(bbb_cfg, parts["bbb_mnist"], progress=progress)

    items = findings(out)
    for number, png in finding_figures(out).items():
        file = out / FINDING_FIGURE.format(number)
        file.parent.mkdir(exist_ok=True)
        storage.atomic_write_bytes(file, png)
    storage.write_json(out / FINDINGS_JSON, [dataclasses.asdict(f) for f in items])
    storage.atomic_write_bytes(out / FINDINGS_FILE, findings_markdown(items, config.scale).encode())
    report_dir = out / REPORT_DIR
    document(
        [out, *(parts[name] for name in PARTS if parts[name].is_dir())],
        report_dir,
        overwrite=(report_dir / "report.md").is_file(),
    )
    return Study(config.scale, parts, items, report_dir)
