"""How close do the cheaper methods come to HMC? The paper's central comparison, on small data.

For each setting an HMC reference run is made first; then SGD, a deep ensemble, the four
SGMCMC variants of the paper (SGLD, SGHMC, SGHMC-CLR, SGHMC-CLR-Prec) and the cheaper methods
of the later literature (MultiSWAG, MC dropout, IVON, mean-field VI) run on the same posterior
and are evaluated against it with ``bnnkit.evaluation.evaluate(run, reference=hmc_run)``:
accuracy / NLL / ECE / Brier / agreement / total variation (classification) or RMSE / NLL / RMSE
to the HMC predictive mean / Wasserstein-1 to the HMC predictive (regression; the
approximate-inference competition's "W2", computed as scipy's W₁). With ``--validation-size N``
each problem holds out the last N training examples and every method also gets split conformal
sets or intervals at ``--conformal`` α, their test coverage and mean size or width (``bnnkit
evaluate --conformal``); without it the runs train on the whole training set, as before. A
classification setting also gets a reliability diagram of every method's test predictive, HMC
first (``reliability_<setting>.png``).

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

Runs go to ``OUT/<setting>/<method>`` (:func:`~bnnkit.experiments.run_reuse.run_or_reuse`:
finished ones are reused, cut-off ones resumed); ``bnnkit experiment compare-methods --out OUT``
is the command line.

Example:
    >>> Config(settings="yacht").chosen()
    ['yacht']
    >>> sorted(methods(SETTINGS["yacht"], eta=1e-6, grad_rms=2.0, num_train=277))[:3]
    ['Deep ensemble (K=5)', 'IVON', 'MC-dropout (T=20)']
    >>> skipped_methods(SETTINGS["mnist160"])
    {}
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import models, storage
from bnnkit.errors import ConfigError
from bnnkit.experiments import prior_choice
from bnnkit.experiments.run_reuse import run_or_reuse, run_or_reuse_stable, run_seconds
from bnnkit.inference import dropout, ensemble, hmc, ivon, sgd, sgmcmc, swag, vi
from bnnkit.metrics.convergence import reference_level
from bnnkit.problem import ProblemConfig
from bnnkit.report.kinds import SETTING_RELIABILITY_FILE
from bnnkit.settings import Exclusive, check_numbers, setting

RESULTS_FILE = "results.json"
#: How the reference row's label ends (it starts with the sampler: "HMC (reference)").
REFERENCE_SUFFIX = " (reference)"
TABLE_FILE = "table.md"
FIGURE_FILE = "compare_methods.png"
#: A classification setting's reliability diagram of every method, by the setting's name.
RELIABILITY_FILE = SETTING_RELIABILITY_FILE
#: Test metrics and closeness to HMC, in the table's column order.
COLUMNS = (
    "accuracy",
    "rmse",
    "nll",
    "ece",
    "brier",
    "agreement",
    "total_variation",
    "rmse_to_reference_mean",
    "wasserstein_1",
    "conformal_coverage",
    "conformal_set_size",
    "conformal_width",
)
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Which settings to run, and where their data are."""

    settings: str = setting(
        ",".join(SETTINGS),
        metavar="NAME,...",
        help=f"comma-separated settings to run, of: {', '.join(SETTINGS)}",
    )
    data_dir: str | None = setting(
        None, help="folder with MNIST (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    validation_size: int | None = setting(
        None,
        bounds=(1, None),
        help="hold out the last N training examples of every setting for split conformal "
        "prediction at --conformal (default: none held out, no conformal columns)",
    )
    conformal: float = setting(
        0.1,
        help="α, the miscoverage level of the conformal sets or intervals, in (0, 1)",
        bounds=(Exclusive(0), Exclusive(1)),
    )

    def __post_init__(self) -> None:
        check_numbers(self)

    def chosen(self, known: Mapping[str, Setting] = SETTINGS) -> list[str]:
        """The settings' names, in order.

        Raises:
            ConfigError: none, or one not in ``known``.
        """
        names = [n.strip() for n in self.settings.split(",") if n.strip()]
        if not names:
            raise ConfigError(
                f"--settings {self.settings!r} names none; allowed: {', '.join(known)}"
            )
        for name in names:
            if name not in known:
                raise ConfigError(f"unknown --settings {name!r}; allowed: {', '.join(known)}")
        return names


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The table rows per setting (``rows[name]``: one dict per method, HMC first, with the
    test metrics, the closeness to HMC, ``seconds``, a ``note`` and, for classification, the
    ``calibration`` bins of its test predictive) and each problem."""

    rows: dict[str, list[dict[str, Any]]]
    problems: dict[str, dict[str, Any]]

    def markdown(self) -> str:
        return "\n".join(
            [
                "# Cheaper methods against HMC",
                "",
                *(markdown(name, rows) for name, rows in self.rows.items()),
            ]
        )

    def write(self, out: str | os.PathLike) -> list[Path]:
        """``results.json``, ``table.md``, ``compare_methods.png`` and per classification
        setting ``reliability_<setting>.png`` (every method's curve, HMC first) into ``out``."""
        from bnnkit.report.experiment_plots import compare_methods_png
        from bnnkit.report.reliability_plots import reliability_png

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        storage.write_json(
            out / RESULTS_FILE,
            {
                name: {"problem": self.problems[name], "rows": rows}
                for name, rows in self.rows.items()
            },
        )
        storage.atomic_write_bytes(out / TABLE_FILE, self.markdown().encode())
        storage.atomic_write_bytes(out / FIGURE_FILE, compare_methods_png(self.rows))
        written = [out / RESULTS_FILE, out / TABLE_FILE, out / FIGURE_FILE]
        for name, rows in self.rows.items():
            curves = {r["method"]: r["calibration"] for r in rows if "calibration" in r}
            if curves:  # a classification setting
                file = out / RELIABILITY_FILE.format(name)
                storage.atomic_write_bytes(file, reliability_png(curves, title=f"{name}, test set"))
                written.append(file)
        return written


def gradient_rms(hmc_dir: str | os.PathLike, batch_size: int) -> float:
    """Median over coordinates of the RMS minibatch gradient at HMC's last sample of chain 0."""
    import jax
    import jax.numpy as jnp

    from bnnkit.runs import load_run
    from bnnkit.runs.loop import minibatch_indices
    from bnnkit.types import Batch

    _, problem, samples, _ = load_run(hmc_dir, network=True)
    params = jax.tree.map(lambda a: jnp.asarray(a[0, -1]), samples.params)
    train = problem.train_batch()
    idx = minibatch_indices(jax.random.PRNGKey(0), problem.dataset.num_train, batch_size)
    grad = jax.jit(jax.grad(problem.log_posterior))
    sq = None
    for i in idx:
        g = jnp.concatenate(
            [x.ravel() for x in jax.tree.leaves(grad(params, Batch(train.x[i], train.y[i])))]
        )
        sq = g**2 if sq is None else sq + g**2
    return float(jnp.median(jnp.sqrt(sq / len(idx))))


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
    # Its state holds K = 20 deviations of every parameter per member (129 MB on MNIST's
    # MLP): written every epoch, as the other methods' small states are, it took 3x the
    # epoch's own time. Every 10 % of the run, as bnnkit reference writes its chains.
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


def run_setting(
    name: str, setting: Setting, root: Path, progress: bool = True, conformal: float | None = None
) -> list[dict[str, Any]]:
    """HMC, then every method of :func:`methods` against it; the table rows.

    ``conformal``: α of split conformal prediction on the problem's validation set (which
    ``setting.problem.validation_size`` must hold out), or none.
    """
    from bnnkit.evaluation import evaluate
    from bnnkit.experiments import reference

    problem = setting.problem
    hmc_dir = root / name / "hmc"
    if setting.reference is None:
        ran = run_or_reuse(problem, setting.hmc, hmc_dir, progress=progress)
        seconds, made, sampler_name = run_seconds(hmc_dir), "random starts", "hmc"
    else:
        ran = reference.reference_or_reuse(problem, setting.reference, hmc_dir, progress=progress)
        seconds = reference.reference_seconds(hmc_dir)
        made = f"from the {setting.reference.members} members of a deep ensemble"
        sampler_name = setting.reference.sampler
    label = sampler_name.upper() + REFERENCE_SUFFIX
    _announce(progress, name, label, ran)
    ref = evaluate(hmc_dir, conformal=conformal)
    sampler = ref["sampler"]
    step = float(np.median(sampler["step_size"]))
    eps = setting.hmc.step_size if sampler_name == "mclmc" else step
    eta = eps**2 / 2
    level = reference_level(ref.get("convergence")) or "not judged"
    rows = [
        {
            "method": label,
            **ref["test"],
            **_conformal(ref),
            **_calibration(ref),
            "seconds": seconds,
            "level": level,
            "note": f"{made}; acc. {sampler['acceptance_rate']:.2f}, step {step:.2g}, "
            f"{sampler['num_divergent']} div.; verdict {level}",
        }
    ]
    rms = gradient_rms(hmc_dir, setting.batch_size)
    skipped = skipped_methods(setting)
    chosen = methods(setting, eta, rms, num_train=_num_train(hmc_dir), sgd_run=root / name / "sgd")
    choice = None
    if setting.baseline_priors:
        choice = prior_choice.choose(
            problem,
            setting.baseline_priors,
            chosen["SGD"],
            root / name / "prior_choice",
            validation_size=problem.validation_size or setting.baseline_validation,
            progress=progress,
        )
    if setting.methods is not None:
        chosen = {k: v for k, v in chosen.items() if k in setting.methods}
        skipped = {k: v for k, v in skipped.items() if k in setting.methods}
    for label, config in chosen.items():
        run_dir = root / name / label.split(" ")[0].lower()
        on = method_problem(problem, config)
        picked = choice is not None and label in POINT_ESTIMATES
        if picked:
            on = dataclasses.replace(on, prior=choice.prior)
        given = config.init_step_size
        # η derives from HMC's ε, not from this method's own stability: a step that diverges
        # is divided by ten (and the note says so).
        config, ran = run_or_reuse_stable(on, config, run_dir, progress=progress)
        _announce(progress, name, label, ran)
        res = evaluate(run_dir, reference=hmc_dir, conformal=conformal)
        rows.append(
            {
                "method": label,
                **res["test"],
                **{
                    k: v for k, v in res["reference"].items() if k not in ("run", "settings_differ")
                },
                **_conformal(res),
                **_calibration(res),
                "seconds": run_seconds(run_dir),
                "note": f"η₀ {config.init_step_size:.2g}"
                + (
                    ""
                    if config.init_step_size == given
                    else f" (÷{given / config.init_step_size:.0f} after divergence)"
                )
                + f", {res['num_chains']}x{res['num_samples_per_chain']} samples"
                + ("" if on.model == problem.model else f"; {on.model}")
                + (
                    ("; " + choice.note() if label == "SGD" else f"; prior {choice.prior}")
                    if picked
                    else ""
                ),
                **({"prior": choice.prior} if picked else {}),
                **(
                    {"prior_choice": dataclasses.asdict(choice)}
                    if picked and label == "SGD"
                    else {}
                ),
            }
        )
    rows.extend({"method": label, "note": why} for label, why in skipped.items())
    return rows


def _num_train(run_dir: Path) -> int:
    from bnnkit.runs import load_run

    _, problem, _, _ = load_run(run_dir, network=True)
    return int(problem.dataset.num_train)


def _conformal(evaluation: dict[str, Any]) -> dict[str, Any]:
    # One number per column: coverage, and the mean set size or interval width.
    found = evaluation.get("conformal")
    if found is None:
        return {}
    size = {k: found[k] for k in ("mean_set_size", "mean_width") if k in found}
    return {
        "conformal_coverage": found["coverage"],
        **{"conformal_" + k.removeprefix("mean_"): v for k, v in size.items()},
    }


def _calibration(evaluation: dict[str, Any]) -> dict[str, Any]:
    # Kept for the reliability diagram; the markdown table shows only COLUMNS.
    return {k: evaluation[k] for k in ("calibration",) if k in evaluation}


def _announce(progress: bool, name: str, label: str, ran: bool) -> None:
    if progress:
        print(f"[{name}] {label}: {'done' if ran else 'finished earlier, reused'}", flush=True)


def markdown(name: str, rows: list[dict[str, Any]]) -> str:
    """One setting's table: a row per method, the metrics it has."""
    keys = [k for k in COLUMNS if any(k in r for r in rows)]
    head = "| method | " + " | ".join(keys) + " | seconds | note |"
    lines = [f"### {name}", "", head, "|" + "---|" * (len(keys) + 3)]
    for r in rows:
        vals = [f"{r[k]:.4f}" if k in r else "—" for k in keys]
        seconds = f"{r['seconds']:.0f}" if "seconds" in r else "—"  # a skipped method: no run
        lines.append(f"| {r['method']} | " + " | ".join(vals) + f" | {seconds} | {r['note']} |")
    return "\n".join(lines) + "\n"


def compare_methods(
    config: Config,
    out: str | os.PathLike,
    *,
    settings: Mapping[str, Setting] | None = None,
    progress: bool = True,
) -> Comparison:
    """Run (or reuse) every chosen setting's methods in ``out`` and write the report there.

    Args:
        config: which settings.
        out: the output folder: runs in ``out/<setting>/<method>``, the report beside them
            (:meth:`Comparison.write`), rewritten after each setting.
        settings: the settings to choose from (default :data:`SETTINGS`).
        progress: progress of each run and a line per method.

    Raises:
        ConfigError: an unknown setting, or a run directory of other settings in ``out``.
    """
    known = SETTINGS if settings is None else settings
    names = config.chosen(known)
    out = Path(out)
    rows: dict[str, list[dict[str, Any]]] = {}
    problems: dict[str, dict[str, Any]] = {}
    for name in names:
        setting_ = known[name]
        if config.data_dir is not None:
            setting_ = dataclasses.replace(
                setting_, problem=dataclasses.replace(setting_.problem, data_dir=config.data_dir)
            )
        if config.validation_size is not None:
            setting_ = dataclasses.replace(
                setting_,
                problem=dataclasses.replace(
                    setting_.problem, validation_size=config.validation_size
                ),
            )
        rows[name] = run_setting(
            name,
            setting_,
            out,
            progress,
            None if config.validation_size is None else config.conformal,
        )
        problems[name] = dataclasses.asdict(setting_.problem)
        result = Comparison(rows, problems)
        result.write(out)
    return result
