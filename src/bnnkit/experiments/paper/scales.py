"""The study's sizes and fixed choices: the :class:`Scale` of each size, the settings of a
study (:class:`Config`), and what every scale shares (the image prior, the candidate priors
of the point-estimate methods, the natural-image model and datasets).

A :class:`Scale` fixes every size in one place: ``tiny`` checks the whole pipeline on the
smallest inputs that exercise it, ``small`` is the paper's small-data settings at CPU length,
``full`` the longer chains and larger subsets an accelerator affords. The measured run times
of each scale are in ``docs/performance.md`` (The paper study).

Example:
    >>> sorted(SCALES)
    ['full', 'small', 'tiny']
    >>> Config(scale="tiny").plan().mnist_train
    160
"""

from __future__ import annotations

import dataclasses

from bnnkit.errors import ConfigError
from bnnkit.settings import check_numbers, setting

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
#: SGD's optimum, while the sampler's posterior predicts well under the same prior (the
#: figures: ``docs/performance.md``, The paper study).
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
#: (about 200k weights). An MLP, because on a CPU a CNN's gradient costs many times an MLP's;
#: and a narrow one, because an MCLMC step also costs a few passes over every weight: at about
#: 200k weights a step costs about what 784-256-256-10's does on MNIST, where the 855k weights
#: of 3072-256-256-10 cost many times that (the ratios measured: ``docs/performance.md``, The
#: paper study).
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
            budget (the run times: ``docs/performance.md``, The paper study).
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
        help="tiny: a pipeline check in minutes; small: about an hour on 2 "
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
