"""Which prior? HMC Bayesian model averages under different priors on two small problems.

The question of Izmailov et al. (2021, §7): does the shape of the prior matter, or only its
scale? For each dataset full-batch HMC (:func:`bnnkit.runs.run`) is run and the BMA is
evaluated on the test set (:func:`bnnkit.evaluation.evaluate`) under

- an isotropic Gaussian at three scales, s/3, s and 3s;
- the fan-in-scaled Gaussian of He et al. (2015), w ~ N(0, 2 / fan_in) (a bias: N(0, 2)), the
  rule by which ``bnnkit paper`` chooses its image networks' prior before seeing data;
- a scale mixture and logistic, Laplace and Student-t (ν = 3) priors, each scaled to the
  variance s² of the middle Gaussian, so that only their shape differs:

      scale mixture  π σ₁² + (1 − π) σ₂² = s²,  π = ½, σ₂ = σ₁ / 10
      logistic       π² b² / 3 = s²
      Laplace        2 b² = s²
      Student-t      ν b² / (ν − 2) = 3 b² = s²

with s = 1 on UCI yacht (split 0, ``mlp_regression_small``, fixed noise std in standardised
units) and s = 0.1 on the first 160 MNIST training images (``mlp_classification``,
784-256-256-10, where s = 1 would make the prior logits enormous).

The default settings fit in about 15 minutes on 2 CPU cores, so the chains are short: read the
function-space R-hat column before reading much into small differences. Runs go to
``OUT/runs/`` (finished ones reused, cut-off ones resumed); ``bnnkit experiment prior-sweep
--out OUT`` is the command line.

A setting with ``sampler="mclmc"`` samples each prior's posterior by ``bnnkit reference``'s
recipe instead (``bnnkit paper`` does): MCLMC tuned per chain, chain k started at member k of
a deep ensemble (``init_checkpoint`` among the sampler settings). Every prior's posterior has
the same data term, so the members, modes of the likelihood that a prior only reshapes, start
each prior's chains near its typical set, as they start a reference's.

Example:
    >>> [key for key, _, _ in prior_specs(1.0)][:4]
    ['gaussian_small', 'gaussian', 'gaussian_large', 'fanin_gaussian']
    >>> prior_specs(1.0)[6][2]  # Laplace with 2b² = 1
    'laplace:scale=0.707'
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import run_or_reuse, run_seconds
from bnnkit.inference import hmc
from bnnkit.priors.constraints import format_value
from bnnkit.problem import ProblemConfig
from bnnkit.settings import setting

RESULTS_FILE = "results.json"
TABLE_FILE = "prior_sweep.md"
FIGURE_FILE = "prior_sweep.png"
PRIOR_KEYS = (
    "gaussian_small",
    "gaussian",
    "gaussian_large",
    "fanin_gaussian",
    "scale_mixture",
    "logistic",
    "laplace",
    "student_t",
)
#: The fan-in-scaled Gaussian's σ: N(0, σ² / fan_in) with σ² = 2 (He et al. 2015).
FANIN_SCALE = 1.4142


#: The full-batch samplers a setting can use: the paper's HMC (fixed step and trajectory, from
#: the prior's initialisation), or MCLMC tuned per chain (the reference's recipe).
SAMPLERS = ("hmc", "mclmc")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One dataset's problem, base prior scale s and sampler settings.

    Attributes:
        name: the dataset's key (``--datasets``).
        title: its table heading.
        problem: :class:`~bnnkit.problem.ProblemConfig` fields but the prior.
        scale: the base prior scale s.
        hmc: the full-batch sampler's settings (:class:`bnnkit.inference.hmc.Config` or
            :class:`bnnkit.inference.mclmc.Config` fields but the seed).
        metric: ``"rmse"`` or ``"accuracy"``.
        sampler: one of :data:`SAMPLERS`.
    """

    name: str
    title: str
    problem: dict[str, Any]
    scale: float
    hmc: dict[str, Any]
    metric: str
    sampler: str = "hmc"

    def sampler_config(self, seed: int):
        """The sampler's Config for this setting.

        Example:
            >>> setting = settings()["yacht"]
            >>> type(setting.sampler_config(0)).__name__, setting.sampler_config(0).step_size
            ('Config', 0.001)
        """
        from bnnkit.inference import mclmc

        if self.sampler not in SAMPLERS:
            raise ConfigError(
                f"unknown prior-sweep sampler {self.sampler!r}; allowed: {', '.join(SAMPLERS)}"
            )
        module = mclmc if self.sampler == "mclmc" else hmc
        return module.Config(**self.hmc, seed=seed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Datasets, priors, and the few problem settings the sweep lets change."""

    datasets: str = setting(
        "yacht,mnist160", metavar="NAME,...", help="comma-separated subset of: yacht, mnist160"
    )
    priors: str = setting(
        ",".join(PRIOR_KEYS),
        metavar="NAME,...",
        help=f"comma-separated subset of: {', '.join(PRIOR_KEYS)} "
        "(Gaussians at s/3, s, 3s; the others at variance s²)",
    )
    noise_std: float = setting(
        0.1, help="yacht's fixed noise std in standardised units", bounds=(1e-12, None)
    )
    data_dir: str | None = setting(
        None, help="folder with MNIST (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    seed: int = setting(0, help="seed of the HMC runs", bounds=(0, 2**32 - 1))
    quick: bool = setting(False, help="4x fewer iterations: a smoke test")

    def __post_init__(self) -> None:
        from bnnkit.settings import check_numbers

        check_numbers(self)
        self.chosen_priors()

    def chosen_priors(self) -> list[str]:
        """The prior keys, in :data:`PRIOR_KEYS` order.

        Raises:
            ConfigError: none, or an unknown one.
        """
        names = _names(self.priors, "--priors", PRIOR_KEYS)
        return [k for k in PRIOR_KEYS if k in names]


def _names(text: str, flag: str, known: Any) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"{flag} {text!r} names none; allowed: {', '.join(known)}")
    for name in names:
        if name not in known:
            raise ConfigError(f"unknown {flag} {name!r}; allowed: {', '.join(known)}")
    return names


def settings(noise_std: float = 0.1, quick: bool = False) -> dict[str, Setting]:
    """The two datasets' settings (4x fewer iterations with ``quick``)."""
    shrink = 4 if quick else 1
    return {
        "yacht": Setting(
            "yacht",
            "UCI yacht, split 0 (mlp_regression_small, 50 ReLU units)",
            dict(dataset="yacht_0", model="mlp_regression_small", noise_std=noise_std),
            scale=1.0,
            hmc=dict(
                step_size=1e-3,
                trajectory_len=0.3,
                num_iterations=160 // shrink,
                num_burn_in=40 // shrink,
                num_chains=4,
                max_num_leapfrog_steps=1500,
            ),
            metric="rmse",
        ),
        "mnist160": Setting(
            "mnist160",
            "MNIST, first 160 training images (mlp_classification, 784-256-256-10)",
            dict(dataset="mnist", model="mlp_classification", subset_train_to=160),
            scale=0.1,
            hmc=dict(
                step_size=1e-3,
                trajectory_len=0.05,
                num_iterations=60 // shrink,
                num_burn_in=20 // shrink,
                num_chains=2,
                max_num_leapfrog_steps=60,
            ),
            metric="accuracy",
        ),
    }


def _num(x: float) -> str:
    return format_value(float(f"{x:.3g}"))


def prior_specs(s: float) -> list[tuple[str, str, str]]:
    """(key, label, spec): Gaussians at s/3, s, 3s; other shapes with variance s²."""
    sigma1 = s * math.sqrt(2 / 1.01)
    return [
        ("gaussian_small", f"Gaussian σ={_num(s / 3)}", f"gaussian:scale={_num(s / 3)}"),
        ("gaussian", f"Gaussian σ={_num(s)}", f"gaussian:scale={_num(s)}"),
        ("gaussian_large", f"Gaussian σ={_num(3 * s)}", f"gaussian:scale={_num(3 * s)}"),
        (
            "fanin_gaussian",
            "fan-in Gaussian σ²=2/fan_in",
            f"fanin_gaussian:scale={_num(FANIN_SCALE)}",
        ),
        # π σ₁² + (1-π) σ₂² = s² with π = ½ and σ₂ = σ₁/10: a spike and a slab.
        (
            "scale_mixture",
            "scale mixture",
            f"scale_mixture:pi=0.5,sigma1={_num(sigma1)},sigma2={_num(sigma1 / 10)}",
        ),
        ("logistic", "logistic", f"logistic:scale={_num(s * math.sqrt(3) / math.pi)}"),
        ("laplace", "Laplace", f"laplace:scale={_num(s / math.sqrt(2))}"),
        ("student_t", "Student-t ν=3", f"student_t:df=3,scale={_num(s / math.sqrt(3))}"),
    ]


@dataclasses.dataclass(frozen=True)
class PriorSweep:
    """One row per dataset and prior (``dataset``, ``prior``, ``spec``, ``key`` (of
    :data:`PRIOR_KEYS`), the test metrics,
    ``acceptance``, ``divergences``, ``rhat_function_max``, ``seconds``, ``num_test``,
    ``levels``, its verdict of :data:`bnnkit.metrics.levels.VERDICTS` or None) and the
    settings."""

    rows: list[dict[str, Any]]
    settings: dict[str, Setting]

    def markdown(self) -> str:
        return markdown(self.rows, self.settings)

    def write(self, out: str | os.PathLike) -> list[Path]:
        """``results.json``, ``prior_sweep.md`` and ``prior_sweep.png`` into ``out``."""
        from bnnkit.report.experiment_plots import prior_sweep_png

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        storage.write_json(out / RESULTS_FILE, self.rows)
        storage.atomic_write_bytes(out / TABLE_FILE, self.markdown().encode())
        metrics = {name: s.metric for name, s in self.settings.items()}
        storage.atomic_write_bytes(out / FIGURE_FILE, prior_sweep_png(self.rows, metrics))
        return [out / RESULTS_FILE, out / TABLE_FILE, out / FIGURE_FILE]


def run_one(
    setting: Setting,
    label: str,
    spec: str,
    out: Path,
    data_dir: str | None,
    seed: int,
    progress: bool = True,
    key: str | None = None,
) -> dict[str, Any]:
    """One prior's sampler run (or the finished one in ``out/runs``) and its table row."""
    from bnnkit.evaluation import evaluate

    # MCLMC's runs are named apart, so that a folder of the paper's HMC sweep stays readable.
    sampler = "" if setting.sampler == "hmc" else f"{setting.sampler}_"
    run_dir = out / "runs" / (f"{setting.name}_{sampler}{spec.replace(':', '_').replace(',', '_')}")
    problem = ProblemConfig(**setting.problem, prior=spec, data_dir=data_dir)
    ran = run_or_reuse(problem, setting.sampler_config(seed), run_dir, progress=progress)
    evaluation = evaluate(run_dir)
    row = {
        "dataset": setting.name,
        "prior": label,
        "spec": spec,
        "key": key,
        **{k: float(v) for k, v in evaluation["test"].items()},
        "acceptance": evaluation["sampler"]["acceptance_rate"],
        "divergences": evaluation["sampler"]["num_divergent"],
        "rhat_function_max": evaluation.get("diagnostics", {})
        .get("function", {})
        .get("rhat", {})
        .get("max", float("nan")),
        "seconds": run_seconds(run_dir),
        "num_test": evaluation["num_test"],
        "levels": (evaluation.get("levels") or {}).get("verdict"),
    }
    if progress:
        print(
            f"{setting.name:9s} {label:18s} nll {row['nll']:.3f}  {setting.metric} "
            f"{row[setting.metric]:.3f}  accept {row['acceptance']:.2f}  "
            f"R-hat(f) {row['rhat_function_max']:.3f}  {row['seconds']:.0f} s"
            f"{'' if ran else ' (finished earlier, reused)'}",
            flush=True,
        )
    return row


def _sampler_line(setting_: Setting) -> str:
    h = setting_.hmc
    if setting_.sampler == "mclmc":
        source = h.get("init_checkpoint")
        start = (
            f"chain k from member k of the ensemble `{'/'.join(Path(source).parts[-4:])}`"
            if source
            else "from the prior's initialisation"
        )
        return (
            f"MCLMC tuned per chain: {h['num_chains']} chains x {h['num_iterations']} "
            f"iterations ({h['num_burn_in']} tuning), {start}"
        )
    return (
        f"HMC: {h['num_chains']} chains x {h['num_iterations']} iterations "
        f"({h['num_burn_in']} burn-in), trajectory length {h['trajectory_len']}, "
        f"at most {h['max_num_leapfrog_steps']} leapfrog steps"
    )


def markdown(rows: list[dict[str, Any]], configs: Mapping[str, Setting]) -> str:
    """A table per dataset: test NLL and metric, acceptance and R-hat per prior."""
    lines = []
    for name, setting_ in configs.items():
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        metric = "RMSE" if setting_.metric == "rmse" else "accuracy"
        lines += [
            f"### {setting_.title}",
            "",
            f"{_sampler_line(setting_)}; base scale s = {setting_.scale}.",
            "",
            f"| prior | spec | test NLL | test {metric} | acceptance | R-hat f (max) | verdict "
            "| s |",
            "|---|---|---:|---:|---:|---:|---|---:|",
        ]
        for r in mine:
            lines.append(
                f"| {r['prior']} | `{r['spec']}` | {r['nll']:.3f} | {r[setting_.metric]:.3f} | "
                f"{r['acceptance']:.2f} | {r['rhat_function_max']:.3f} | "
                f"{r.get('levels') or r.get('level') or 'not recorded'} | {r['seconds']:.0f} |"
            )
        lines.append("")
    return "\n".join(lines)


def prior_sweep(
    config: Config,
    out: str | os.PathLike,
    *,
    settings_: Mapping[str, Setting] | None = None,
    progress: bool = True,
) -> PriorSweep:
    """HMC under every chosen prior on every chosen dataset; writes the report into ``out``.

    Args:
        config: datasets, priors, noise std, seed.
        out: the output folder: runs in ``out/runs/``, the report (:meth:`PriorSweep.write`)
            beside them, its ``results.json`` rewritten after every run.
        settings_: the datasets to choose from (default :func:`settings`).
        progress: each run's progress and a line per prior.

    Raises:
        ConfigError: an unknown dataset or prior, or a run of other settings in ``out``.
    """
    known = settings(config.noise_std, config.quick) if settings_ is None else dict(settings_)
    chosen = {n: known[n] for n in _names(config.datasets, "--datasets", known)}
    keys = config.chosen_priors()
    out = Path(out)
    rows: list[dict[str, Any]] = []
    for setting_ in chosen.values():
        for key, label, spec in prior_specs(setting_.scale):
            if key in keys:
                rows.append(
                    run_one(
                        setting_, label, spec, out, config.data_dir, config.seed, progress, key=key
                    )
                )
                storage.write_json(out / RESULTS_FILE, rows)
    result = PriorSweep(rows, chosen)
    result.write(out)
    return result
