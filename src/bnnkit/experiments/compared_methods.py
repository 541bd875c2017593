"""The methods compared with HMC, each setting's problem and run lengths, and each method's steps.

:data:`SETTINGS` holds the comparison's problems and their HMC references;
:func:`methods` gives every method's Config for one setting, its step sizes derived from the
reference's as below. They are kept apart from the running and scoring
(:mod:`bnnkit.experiments.compare_methods`) because the paper's study scales them and tests
choose among them without running anything.

The SGLD step size comes from HMC's adapted leapfrog step ε: one leapfrog step of HMC without
the accept step is Langevin dynamics with

    η = ε² / 2.

RMSprop divides the step by ``M = √v``, the root mean square of the minibatch gradient, so the
preconditioned variant gets η · median(M), with M measured at an HMC sample: the typical
coordinate then moves as without preconditioning.

The later methods take their settings from their own defaults where the papers give them, and
SGD's step otherwise:

- MultiSWAG (Wilson & Izmailov 2020): M = 5 SWAG members (as many as the ensemble has), SGD's
  step and momentum held constant, collecting every epoch after the same burn-in as SGMCMC,
  rank K = 20 and 20 draws per member (:mod:`bnnkit.inference.swag`'s defaults);
- MC dropout (Gal & Ghahramani 2016): SGD's step and momentum on the setting's model's dropout
  variant (``<model>_dropout``, p = 0.1, T = 20 passes: :mod:`bnnkit.inference.dropout`'s
  defaults); a model without one in the registry gets a row that says so and no run;
- IVON (Shen et al. 2024): the paper's defaults (β₁ = 0.9, β₂ = 0.99999, h₀ = 0.1, λ = N/T, one
  Monte Carlo sample) and the cosine schedule. Its update is ``α g / (h + δ)`` with g the
  gradient of the mean per-example loss ℓ̄ = −log p_T / N; while h is still near h₀ (β₂ = 0.99999
  moves it slowly) that is SGD on −log p_T with step ``α / (N h₀)``, so

      α = min(0.1, N h₀ · 10 η)

  starts IVON at SGD's step, capped at the paper's α = 0.1 (which, on a Gaussian likelihood of
  small noise, diverges: ℓ̄'s curvature is then far above h₀);
- MFVI: Adam at 10⁻³ from the SGD run's weights, as Izmailov et al. start it
  (:mod:`bnnkit.inference.vi`).

A setting with ``baseline_priors`` gives the point-estimate methods (:data:`POINT_ESTIMATES`:
SGD, the deep ensemble, MultiSWAG, MC dropout) the candidate prior under which SGD's validation
NLL is lowest (:mod:`bnnkit.experiments.prior_choice`), as their weight decay is tuned in
practice; the reference, SGMCMC, IVON and MFVI keep the setting's prior, the posterior they
approximate. Without it every method has the setting's prior.

Example:
    >>> sorted(methods(SETTINGS["yacht"], eta=1e-6, grad_rms=2.0, num_train=277))[:3]
    ['Deep ensemble (K=5)', 'IVON', 'MC-dropout (T=20)']
    >>> skipped_methods(SETTINGS["mnist160"])
    {}
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from bnnkit import models
from bnnkit.inference import dropout, ensemble, hmc, ivon, sgd, sgmcmc, swag, vi
from bnnkit.problem import ProblemConfig

#: The label of MC dropout's row, which a setting whose model has no dropout variant skips.
DROPOUT_LABEL = "MC-dropout (T=20)"
#: IVON's largest learning rate α: Shen et al.'s (2024) value for their image classifiers.
IVON_STEP_SIZE = 0.1
#: Adam's step for MFVI, started at the SGD run's weights (Izmailov et al. 2021).
VI_STEP_SIZE = 1e-3
#: The methods that return optimised weights (one point, or draws around it): under
#: ``Setting.baseline_priors`` their prior is picked on validation data.
POINT_ESTIMATES = ("SGD", "Deep ensemble (K=5)", "MultiSWAG (M=5)", DROPOUT_LABEL)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One problem, its HMC reference and the minibatch methods' epochs, burn-in and cycle.

    Attributes:
        problem: the posterior every method targets.
        hmc: the reference's HMC run (the paper's layout: chains from random initialisations,
            ε adapted, τ fixed), unless ``reference`` is given.
        batch_size, epochs, burn_in, cycle: the minibatch methods' settings.
        reference: the reference made by ``bnnkit reference``'s recipe instead
            (:mod:`bnnkit.experiments.reference`: a deep ensemble, then one chain per member,
            each tuned on its own). With ``hmc`` or ``nuts`` their adapted leapfrog step ε
            sets SGLD's η; an MCLMC step is a move of the whole position on a unit-speed
            path, not a leapfrog step, so with ``mclmc`` ε is ``hmc.step_size``, the paper's
            HMC step for the setting.
        methods: the labels of :func:`methods` to run (None: all of them).
        baseline_priors: candidate priors of the :data:`POINT_ESTIMATES`, picked by SGD's
            NLL on ``baseline_validation`` held-out training examples (the problem's own
            ``validation_size`` if it has one); None: the problem's prior for every method.
        baseline_validation: the examples held out for that choice.
    """

    problem: ProblemConfig
    hmc: hmc.Config
    batch_size: int
    epochs: int
    burn_in: int
    cycle: int
    reference: Any = None
    methods: tuple[str, ...] | None = None
    baseline_priors: tuple[str, ...] | None = None
    baseline_validation: int = 1000


SETTINGS: dict[str, Setting] = {
    "yacht": Setting(
        problem=ProblemConfig(dataset="yacht_0", model="mlp_regression_small", noise_std=0.1),
        hmc=hmc.Config(
            step_size=5e-4, trajectory_len=0.15, num_iterations=300, num_burn_in=100, num_chains=4
        ),
        batch_size=32,
        epochs=1500,
        burn_in=500,
        cycle=100,
    ),
    "mnist160": Setting(
        problem=ProblemConfig(dataset="mnist", model="mlp_classification", subset_train_to=160),
        hmc=hmc.Config(
            step_size=5e-4,
            trajectory_len=0.1,
            num_iterations=120,
            num_burn_in=40,
            num_chains=4,
            max_num_leapfrog_steps=2000,
        ),
        batch_size=32,
        epochs=1500,
        burn_in=500,
        cycle=100,
    ),
}


def dropout_model(model: str) -> str | None:
    """The registered dropout variant of ``model`` (``<model>_dropout``), if there is one.

    Example:
        >>> dropout_model("mlp_regression_small"), dropout_model("resnet20_frn")
        ('mlp_regression_small_dropout', None)
    """
    name = f"{model}_dropout"
    return name if name in models.dropout_names() else None


def skipped_methods(setting: Setting) -> dict[str, str]:
    """Method label -> why this setting does not run it."""
    model = setting.problem.model
    if dropout_model(model) is None:
        return {DROPOUT_LABEL: f"skipped: the model registry has no {model}_dropout"}
    return {}


def method_problem(problem: ProblemConfig, config: Any) -> ProblemConfig:
    """The problem a method's run is on: the setting's, with MC dropout on the dropout variant
    of its model (same weights' shapes, same data and prior)."""
    if isinstance(config, dropout.Config):
        return dataclasses.replace(problem, model=dropout_model(problem.model))
    return problem


def methods(
    setting: Setting,
    eta: float,
    grad_rms: float,
    *,
    num_train: int,
    sgd_run: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Method label -> its Config, from the SGLD step ``eta``, the gradient's RMS and the
    training examples N (IVON's step, see the module's docstring).

    ``sgd_run``: the SGD run whose weights start MFVI's means (none: a random start).
    """
    epochs, burn, cycle = setting.epochs, setting.burn_in, setting.cycle
    common = dict(num_epochs=epochs, batch_size=setting.batch_size)
    sgd_eta = 10 * eta  # optimisation tolerates larger steps than sampling
    constant = dict(
        common,
        init_step_size=eta,
        final_step_size=eta,
        num_burn_in=burn,
        ensemble_freq=max((epochs - burn) // 50, 1),
    )
    clr = dict(
        common,
        init_step_size=2 * eta,
        step_size_schedule="cyclical",
        cycle_length=cycle,
        num_burn_in=burn,
        momentum_decay=0.9,
    )
    table: dict[str, Any] = {
        "SGD": sgd.Config(**common, init_step_size=sgd_eta, momentum_decay=0.9),
        "Deep ensemble (K=5)": ensemble.Config(
            **common, init_step_size=sgd_eta, momentum_decay=0.9, num_members=5
        ),
        "SGLD": sgmcmc.Config(**constant, momentum_decay=0.0),
        "SGHMC": sgmcmc.Config(**constant, momentum_decay=0.9),
        "SGHMC-CLR": sgmcmc.Config(**clr),
        "SGHMC-CLR-Prec": sgmcmc.Config(
            **{**clr, "init_step_size": 2 * eta * grad_rms}, preconditioner="rmsprop"
        ),
    }
    # Its state holds K = 20 deviations of every parameter per member: written every epoch,
    # as the other methods' small states are, it costs more than the epoch itself
    # (docs/performance.md). Every 10 % of the run, as bnnkit reference writes its chains.
    multiswag = swag.Config(
        **common,
        init_step_size=sgd_eta,
        momentum_decay=0.9,
        num_burn_in=burn,
        num_members=5,
        checkpoint_every=max(1, setting.epochs // 10),
    )
    table[multiswag.label] = multiswag
    if DROPOUT_LABEL not in skipped_methods(setting):
        table[DROPOUT_LABEL] = dropout.Config(**common, init_step_size=sgd_eta, momentum_decay=0.9)
    ivon_default = ivon.Config(**common, init_step_size=IVON_STEP_SIZE)
    table["IVON"] = dataclasses.replace(
        ivon_default,
        init_step_size=min(IVON_STEP_SIZE, num_train * ivon_default.hess_init * sgd_eta),
    )
    table["MFVI"] = vi.Config(
        **common,
        init_step_size=VI_STEP_SIZE,
        init_checkpoint=None if sgd_run is None else os.fspath(sgd_run),
    )
    return table
