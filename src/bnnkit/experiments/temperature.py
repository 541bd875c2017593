"""Cold posteriors: test metrics against the posterior temperature (Izmailov et al. 2021, §6).

The tempered posterior is

    p_T(θ | D) ∝ exp([log p(θ) + Σ_i log p(y_i | x_i, θ)] / T),

set by :class:`~bnnkit.problem.ProblemConfig`'s ``temperature`` (the one place T enters; the
samplers take the gradient of the tempered log posterior). For each T of ``temperatures``
the sweep runs full-batch HMC and an SGMCMC sampler (SGLD or the paper's cyclical SGHMC,
SGHMC-CLR), the latter with and without ``augment`` (random crops and flips; HMC is
full-batch and never augments), and reports the BMA's test accuracy and NLL (regression: RMSE
and NLL) against T: the paper found HMC best at T = 1 without augmentation, while the cold
posterior effect of SGMCMC appears with augmentation.

Step sizes: the gradient of log p_T is that of the untempered posterior divided by T, so with
``scale_with_temperature`` (the default) the SGMCMC step is η₀ · T, which keeps the drift
η₀ ∇ log p fixed and shrinks the noise √(2 η₀ T) as √T (Wenzel et al. 2020's tempered
SG-MCMC), and HMC's initial leapfrog step ε and trajectory length are multiplied by √T, the
time scale of a potential divided by T, so every T takes about as many leapfrog steps.

Runs go to ``OUT/runs/<line>_T<T>`` (finished ones reused, cut-off ones resumed);
``bnnkit experiment temperature --out OUT`` is the command line.

Example:
    >>> config = Config(temperatures="1,0.1", methods="sgmcmc", augment="both")
    >>> [(label, augment) for label, _, augment in lines(config)]
    [('SGHMC-CLR', False), ('SGHMC-CLR + augment', True)]
    >>> sgmcmc_config(config, 0.1, False).init_step_size  # η₀ · T
    1.0000000000000001e-08
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import run_or_reuse, run_seconds
from bnnkit.settings import check_numbers, flag, setting

RESULTS_FILE = "results.json"
TABLE_FILE = "temperature.md"
FIGURE_FILE = "temperature.png"
METHODS = ("hmc", "sgmcmc")
#: The full-batch samplers the "hmc" line can use.
SAMPLERS = ("hmc", "mclmc")
SGMCMC_VARIANTS = ("sghmc-clr", "sgld")
AUGMENT = ("both", "without", "with")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The problem, the temperatures, the methods and their settings."""

    dataset: str = setting(
        "mnist", help="registry name or .npz file (images N x H x W x C for --augment with)"
    )
    model: str = setting("mlp_classification", help="registered model")
    subset_train_to: int | None = setting(
        1000, help="keep only the first N training examples (HMC is full-batch)", bounds=(1, None)
    )
    noise_std: float | None = setting(None, help="regression: fixed Gaussian noise std")
    prior: str | None = setting(
        None,
        metavar="SPEC",
        help="prior of every weight and bias, as bnnkit hmc's --prior "
        "(default: the Gaussian N(0, 1))",
    )
    data_dir: str | None = setting(
        None, help="folder with dataset files (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    temperatures: str = setting(
        "1,0.3,0.1,0.03,0.01",
        metavar="T,...",
        help="comma-separated posterior temperatures, each > 0",
    )
    methods: str = setting(
        "hmc,sgmcmc", metavar="NAME,...", help=f"comma-separated subset of: {', '.join(METHODS)}"
    )
    sampler: str = setting(
        "hmc",
        choices=SAMPLERS,
        help="the full-batch sampler of the hmc line: HMC with ε adapted "
        "and the trajectory fixed, or MCLMC at its defaults (tuned "
        "per chain; --hmc-step-size and --hmc-trajectory-len unused)",
    )
    sgmcmc: str = setting(
        "sghmc-clr",
        choices=SGMCMC_VARIANTS,
        help="SGMCMC variant: the paper's cyclical SGHMC, or SGLD",
    )
    augment: str = setting(
        "both", choices=AUGMENT, help="SGMCMC runs with and without --augment, or only one"
    )
    scale_with_temperature: bool = setting(
        True,
        flag="--no-scale-with-temperature",
        help="keep HMC's ε and trajectory length ×√T and the SGMCMC step ×T, so every T "
        "moves as far per step (see the module docs); off: the same values at every T",
    )
    hmc_step_size: float = setting(
        5e-4, help="HMC's initial leapfrog step ε at T = 1 (adapted)", bounds=(1e-300, None)
    )
    hmc_trajectory_len: float = setting(
        0.1, help="HMC's trajectory length at T = 1", bounds=(1e-300, None)
    )
    hmc_num_iterations: int = setting(
        120, help="HMC iterations, burn-in included", bounds=(2, None)
    )
    hmc_num_burn_in: int = setting(40, help="HMC burn-in iterations", bounds=(0, None))
    hmc_num_chains: int = setting(2, help="HMC chains", bounds=(1, None))
    hmc_init_checkpoint: str | None = setting(
        None,
        metavar="RUN",
        help="a deep-ensemble run (or a reference folder's ensemble/) whose members start the "
        "HMC chains, chain k at member k; they are modes of every tempered posterior, "
        "since dividing log p by T moves no mode (default: random initialisations)",
    )
    hmc_max_num_leapfrog_steps: int = setting(
        2000, help="HMC's cap on leapfrog steps", bounds=(1, None)
    )
    step_size: float = setting(
        1e-7, help="SGMCMC's initial step η₀ at T = 1", bounds=(1e-300, None)
    )
    num_epochs: int = setting(300, help="SGMCMC epochs", bounds=(1, None))
    num_burn_in: int = setting(100, help="SGMCMC burn-in epochs", bounds=(0, None))
    cycle_length: int = setting(20, help="SGHMC-CLR's cycle length in epochs", bounds=(1, None))
    batch_size: int = setting(100, help="SGMCMC minibatch size", bounds=(1, None))
    seed: int = setting(0, help="seed of every run", bounds=(0, 2**32 - 1))

    def __post_init__(self) -> None:
        check_numbers(self)
        self.chosen_temperatures()
        self.chosen_methods()
        cls = type(self)
        for name, allowed in (
            ("sgmcmc", SGMCMC_VARIANTS),
            ("augment", AUGMENT),
            ("sampler", SAMPLERS),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"unknown {flag(cls, name)} {getattr(self, name)!r}; "
                    f"allowed: {', '.join(allowed)}"
                )
        if self.hmc_num_burn_in >= self.hmc_num_iterations:
            raise ConfigError(
                f"--hmc-num-burn-in {self.hmc_num_burn_in} must be below "
                f"--hmc-num-iterations {self.hmc_num_iterations}"
            )
        if self.num_burn_in >= self.num_epochs:
            raise ConfigError(
                f"--num-burn-in {self.num_burn_in} must be below --num-epochs {self.num_epochs}"
            )

    def chosen_temperatures(self) -> list[float]:
        """The temperatures, in the order given.

        Raises:
            ConfigError: none, a repeat, or one that is not a finite number > 0.
        """
        values = []
        for text in (t.strip() for t in self.temperatures.split(",")):
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(
                    f"--temperatures: {text!r} is not a temperature; allowed: "
                    "finite numbers > 0, comma-separated"
                )
            if value in values:
                raise ConfigError(f"--temperatures: {text} given twice")
            values.append(value)
        return values

    def chosen_methods(self) -> list[str]:
        """The methods asked for, in :data:`METHODS` order.

        Raises:
            ConfigError: none, or an unknown one.
        """
        names = [n.strip() for n in self.methods.split(",") if n.strip()]
        bad = [n for n in names if n not in METHODS] or ([] if names else [self.methods])
        if bad:
            raise ConfigError(f"unknown --methods {bad[0]!r}; allowed: {', '.join(METHODS)}")
        return [m for m in METHODS if m in names]

    def problem(self, temperature: float):
        """The :class:`~bnnkit.problem.ProblemConfig` at ``temperature``."""
        from bnnkit.problem import ProblemConfig

        return ProblemConfig(
            dataset=self.dataset,
            model=self.model,
            noise_std=self.noise_std,
            subset_train_to=self.subset_train_to,
            data_dir=self.data_dir,
            temperature=temperature,
            prior=self.prior,
        )


def lines(config: Config) -> list[tuple[str, str, bool]]:
    """(label, method, augment) of each line of the plot."""
    out = []
    if "hmc" in config.chosen_methods():
        out.append((config.sampler.upper(), "hmc", False))
    if "sgmcmc" in config.chosen_methods():
        label = config.sgmcmc.upper()
        out += [
            (label + (" + augment" if aug else ""), "sgmcmc", aug)
            for aug in (False, True)
            if config.augment == "both" or (config.augment == "with") == aug
        ]
    return out


def hmc_config(config: Config, temperature: float):
    """The full-batch sampler's Config at ``temperature``: HMC's with ε and trajectory length
    ×√T when scaled, or MCLMC's (which tunes its own step and L at every T)."""
    from bnnkit.inference import hmc, mclmc

    if config.sampler == "mclmc":
        return mclmc.Config(
            num_iterations=config.hmc_num_iterations,
            num_burn_in=config.hmc_num_burn_in,
            num_chains=config.hmc_num_chains,
            init_checkpoint=config.hmc_init_checkpoint,
            seed=config.seed,
        )

    factor = math.sqrt(temperature) if config.scale_with_temperature else 1.0
    return hmc.Config(
        step_size=config.hmc_step_size * factor,
        trajectory_len=config.hmc_trajectory_len * factor,
        num_iterations=config.hmc_num_iterations,
        num_burn_in=config.hmc_num_burn_in,
        num_chains=config.hmc_num_chains,
        max_num_leapfrog_steps=config.hmc_max_num_leapfrog_steps,
        init_checkpoint=config.hmc_init_checkpoint,
        seed=config.seed,
    )


def sgmcmc_config(config: Config, temperature: float, augment: bool):
    """The SGMCMC Config at ``temperature`` (η₀ ×T when scaled)."""
    from bnnkit.inference import sgmcmc

    eta = config.step_size * (temperature if config.scale_with_temperature else 1.0)
    common = dict(
        init_step_size=eta,
        num_epochs=config.num_epochs,
        batch_size=config.batch_size,
        num_burn_in=config.num_burn_in,
        augment=augment,
        seed=config.seed,
    )
    if config.sgmcmc == "sgld":
        return sgmcmc.Config(
            **common,
            momentum_decay=0.0,
            final_step_size=eta,
            ensemble_freq=max((config.num_epochs - config.num_burn_in) // 50, 1),
        )
    return sgmcmc.Config(
        **common,
        momentum_decay=0.9,
        step_size_schedule="cyclical",
        cycle_length=config.cycle_length,
    )


def _dir_name(label: str, temperature: float) -> str:
    return f"{label.lower().replace(' + ', '_')}_T{temperature:g}"


@dataclasses.dataclass(frozen=True)
class TemperatureSweep:
    """One row per line and temperature: ``line``, ``method``, ``augment``, ``temperature``,
    the test metrics (accuracy/NLL/ECE or RMSE/NLL), ``seconds``, ``run`` and ``levels`` (the
    run's verdict of :data:`bnnkit.metrics.levels.VERDICTS`, None where none was judged); and
    ``task``."""

    rows: list[dict[str, Any]]
    task: str

    @property
    def metrics(self) -> list[str]:
        """The metrics plotted: accuracy and NLL, or RMSE and NLL."""
        return ["accuracy", "nll"] if self.task == "classification" else ["rmse", "nll"]

    def markdown(self) -> str:
        """A table: a row per temperature, a column per line and metric."""
        names = list(dict.fromkeys(r["line"] for r in self.rows))
        temps = sorted({r["temperature"] for r in self.rows}, reverse=True)
        cells = {(r["line"], r["temperature"]): r for r in self.rows}
        head = [f"{n}: {m}" for n in names for m in self.metrics]
        out = ["| T | " + " | ".join(head) + " |", "|---:|" + "---:|" * len(head)]
        for t in temps:
            vals = [
                f"{cells[n, t][m]:.4f}" if (n, t) in cells else "—"
                for n in names
                for m in self.metrics
            ]
            out.append(f"| {t:g} | " + " | ".join(vals) + " |")
        return "\n".join(["# Test metrics against the posterior temperature", "", *out, ""])

    def write(self, out: str | os.PathLike) -> list[Path]:
        """``results.json``, ``temperature.md`` and ``temperature.png`` into ``out``."""
        from bnnkit.report.experiment_plots import temperature_png

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        storage.write_json(out / RESULTS_FILE, {"task": self.task, "rows": self.rows})
        storage.atomic_write_bytes(out / TABLE_FILE, self.markdown().encode())
        storage.atomic_write_bytes(out / FIGURE_FILE, temperature_png(self.rows, self.metrics))
        return [out / RESULTS_FILE, out / TABLE_FILE, out / FIGURE_FILE]


def check(config: Config) -> str:
    """Everything the runs will need, before any is made; returns the task."""
    from bnnkit import problem as problem_lib

    built = problem_lib.build(config.problem(1.0))
    num_train = built.dataset.num_train
    for _, method, augment in lines(config):
        if method == "sgmcmc":
            sgmcmc_config(config, 1.0, augment).loop(num_train)
            if augment and len(built.dataset.input_shape) != 3:
                raise ConfigError(
                    f"--augment with crops and flips images, inputs of shape N x "
                    f"H x W x C; {built.dataset.name!r} has inputs of shape "
                    f"{' x '.join(['N', *map(str, built.dataset.input_shape)])};"
                    " allowed: --augment without"
                )
    return built.dataset.task


def temperature_sweep(
    config: Config, out: str | os.PathLike, *, progress: bool = True
) -> TemperatureSweep:
    """Run (or reuse) every line at every temperature in ``out`` and write the report there.

    Raises:
        ConfigError: bad settings, or a run of other settings in ``out``; all checked before
            the first run.
    """
    from bnnkit.evaluation import evaluate

    task = check(config)
    out = Path(out)
    rows: list[dict[str, Any]] = []
    todo = [(t, line) for line in lines(config) for t in config.chosen_temperatures()]
    for k, (t, (label, method, augment)) in enumerate(todo):
        run_dir = out / "runs" / _dir_name(label, t)
        settings = hmc_config(config, t) if method == "hmc" else sgmcmc_config(config, t, augment)
        if progress:
            print(f"[{k + 1}/{len(todo)}] {label}, T = {t:g}", flush=True)
        ran = run_or_reuse(config.problem(t), settings, run_dir, progress=progress)
        if progress and not ran:
            print("  finished earlier, reused", flush=True)
        evaluation = evaluate(run_dir)
        rows.append(
            {
                "line": label,
                "method": method,
                "augment": augment,
                "temperature": t,
                **{m: float(v) for m, v in evaluation["test"].items()},
                "seconds": run_seconds(run_dir),
                "run": str(run_dir.relative_to(out)),
                # Its verdict (None where none was judged).
                "levels": (evaluation.get("levels") or {}).get("verdict"),
            }
        )
        storage.write_json(out / RESULTS_FILE, {"task": task, "rows": rows})
    result = TemperatureSweep(rows, task)
    result.write(out)
    return result
