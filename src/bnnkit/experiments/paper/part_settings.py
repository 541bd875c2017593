"""Each part's settings at a study's scale: the compare-methods settings, the temperature
sweep, the prior sweep and Bayes by Backprop, each made from a :class:`Config` so that every
size comes from its :class:`~bnnkit.experiments.paper.scales.Scale`.

The experiments' modules are imported inside the functions: the command line imports this
package to read its settings, and loads the experiments only when a study runs.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from bnnkit.experiments import bbb_mnist, prior_sweep, reference, temperature
from bnnkit.experiments.compared_methods import SETTINGS, Setting
from bnnkit.experiments.paper.scales import (
    CIFAR_METHODS,
    CIFAR_MODEL,
    IMAGE_PRIOR,
    TEMPERATURE_CHAINS,
    Config,
)


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
            until="reproducible" if extend else None,
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

    plan = config.plan()
    return prior_sweep.Config(
        datasets=plan.prior_datasets, priors=plan.priors, data_dir=config.data_dir, seed=config.seed
    )


def bbb_config(config: Config):
    """Bayes by Backprop in Blundell et al.'s setting, for this scale's epochs."""

    plan = config.plan()
    return bbb_mnist.Config(
        priors=plan.bbb_priors, epochs=plan.bbb_epochs, data_dir=config.data_dir, seed=config.seed
    )
