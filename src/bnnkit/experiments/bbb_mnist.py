"""Bayes by Backprop on MNIST in Blundell et al.'s (2015) setting, with the pruning table.

Setting: MLP 784-400-400-10 (``mlp_bbb_400``), real MNIST (60,000 / 10,000), inputs divided by
126 (Blundell's normalisation), batch 128, one Monte Carlo sample per step, Adam with a cosine
schedule, mean-field Gaussian q with σ = softplus(ρ). Two priors: the Gaussian N(0, 1) and the
scale mixture

    p(w) = π N(w; 0, σ₁²) + (1 − π) N(w; 0, σ₂²),   π = 1/2, σ₁ = 1, σ₂ = e⁻⁶.

Published test errors (400 units): Gaussian 1.82 %, scale mixture 1.36 % (Blundell et al.,
Table 1, after hundreds of epochs); a later reproduction reached 1.69 % with a Gaussian prior.

Each run logs the test error of the mean network after every epoch; at the end the predictive
of ``ensemble_size`` weight samples is evaluated too, and the weights are pruned by |μ|/σ and
by |μ| (:mod:`bnnkit.experiments.pruning`). Runs go to ``OUT/runs/<prior>`` (a finished one
is reused, a cut-off one resumed, one of fewer epochs extended); ``bnnkit experiment bbb-mnist
--out OUT`` is the command line.

Example:
    >>> Config(priors="scale_mixture").chosen_priors()
    ['scale_mixture']
    >>> PRIORS["scale_mixture"]
    'scale_mixture:pi=0.5,sigma1=1,sigma2=0.0024787521766663585'
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import run_or_reuse
from bnnkit.settings import check_numbers, setting

PRIORS = {
    "gaussian": None,  # the default N(0, 1/λ) with λ = 1
    "scale_mixture": f"scale_mixture:pi=0.5,sigma1=1,sigma2={math.exp(-6)!r}",
}
LABELS = {"gaussian": "Gaussian N(0, 1)", "scale_mixture": "scale mixture (π=½, σ₁=1, σ₂=e⁻⁶)"}
PUBLISHED = {"gaussian": 1.82, "scale_mixture": 1.36}
REPRODUCTION_GAUSSIAN = 1.69
SUMMARY_FILE = "summary.json"
TABLE_FILE = "results.md"
FIGURE_FILE = "error_curve.png"
DATA_FILE = "mnist_blundell.npz"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The priors to train and the VI settings (Blundell et al.'s by default)."""

    priors: str = setting(
        ",".join(PRIORS), metavar="NAME,...", help=f"comma-separated subset of: {', '.join(PRIORS)}"
    )
    epochs: int = setting(
        40, help="epochs per prior (a finished run of fewer is extended)", bounds=(1, None)
    )
    lr: float = setting(
        1e-3, help="Adam's initial step size (cosine schedule)", bounds=(1e-300, None)
    )
    sigma_init: float = setting(
        1e-3, help="initial posterior std σ of every weight", bounds=(1e-300, None)
    )
    kl_weighting: str = setting(
        "uniform",
        choices=("uniform", "blundell"),
        help="KL share per minibatch: uniform 1/M, or Blundell's 2^(M−i)/(2^M − 1)",
    )
    ensemble_size: int = setting(
        10, help="weight samples in the final predictive", bounds=(1, None)
    )
    seed: int = setting(0, help="seed of the runs", bounds=(0, 2**32 - 1))
    data_dir: str | None = setting(
        None, help="folder with MNIST (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    dataset: str | None = setting(
        None,
        metavar="FILE.npz",
        help="train on this .npz (x_train, y_train, x_test, y_test) "
        "as given instead of MNIST / 126",
    )
    model: str = setting("mlp_bbb_400", help="the network (Blundell's 784-400-400-10)")

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.kl_weighting not in ("uniform", "blundell"):
            raise ConfigError(
                f"unknown --kl-weighting {self.kl_weighting!r}; allowed: uniform, blundell"
            )
        self.chosen_priors()
        if self.dataset is not None and not Path(self.dataset).is_file():
            raise ConfigError(
                f"--dataset {self.dataset!r} is not a file; allowed: an .npz "
                "with x_train, y_train, x_test, y_test"
            )

    def chosen_priors(self) -> list[str]:
        """The prior keys of :data:`PRIORS` asked for, in order.

        Raises:
            ConfigError: none, or an unknown one.
        """
        names = [n.strip() for n in self.priors.split(",") if n.strip()]
        bad = [n for n in names if n not in PRIORS] or ([] if names else [self.priors])
        if bad:
            raise ConfigError(f"unknown --priors {bad[0]!r}; allowed: {', '.join(PRIORS)}")
        return [p for p in PRIORS if p in names]


def blundell_npz(folder: Path, data_dir: str | None) -> Path:
    """MNIST as float32 pixels / 126, flattened, in an npz the ``npz`` loader reads as given."""
    from bnnkit.data import mnist

    path = folder / DATA_FILE
    if path.is_file():
        return path
    arrays, _ = mnist.read_arrays("mnist", data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    storage.save_arrays(
        path,
        {
            "x_train": arrays["x_train"].reshape(-1, 784).astype(np.float32) / 126.0,
            "y_train": arrays["y_train"].astype(np.int32),
            "x_test": arrays["x_test"].reshape(-1, 784).astype(np.float32) / 126.0,
            "y_test": arrays["y_test"].astype(np.int32),
        },
    )
    return path


def vi_config(config: Config):
    """The :class:`bnnkit.inference.vi.Config` of every prior's run."""
    from bnnkit.inference import vi

    return vi.Config(
        init_step_size=config.lr,
        num_epochs=config.epochs,
        batch_size=128,
        eval_freq=1,
        checkpoint_every=1,
        seed=config.seed,
        optimizer="adam",
        vi_num_samples=1,
        vi_sigma_init=config.sigma_init,
        kl_weighting=config.kl_weighting,
        vi_ensemble_size=config.ensemble_size,
    )


def train(config: Config, out: Path, prior: str, progress: bool = True) -> bool:
    """Train (or resume, or reuse) one prior's run in ``out/runs/<prior>``; whether it ran."""
    from bnnkit.problem import ProblemConfig

    runs_dir = out / "runs"
    data = config.dataset or str(blundell_npz(runs_dir, config.data_dir))
    problem = ProblemConfig(dataset=data, model=config.model, prior=PRIORS[prior])

    def report(epoch: int, log: dict) -> None:
        if progress:
            print(
                f"[{prior}] epoch {epoch + 1}/{config.epochs}: {log['seconds']:.1f} s, "
                f"ELBO {log['elbo'][0]:.4g}, E[log lik] "
                f"{log['expected_log_likelihood'][0]:.4g}, KL {log['kl'][0]:.4g}, test error "
                f"(mean) {100 * (1 - log['test']['accuracy']):.2f} %",
                flush=True,
            )

    ran = run_or_reuse(problem, vi_config(config), runs_dir / prior, progress=False, on_unit=report)
    if progress and not ran:
        print(f"[{prior}] {config.epochs} epochs finished earlier, reused", flush=True)
    return ran


@dataclasses.dataclass(frozen=True)
class BBBMnist:
    """Per prior: the test error of the mean network per epoch and the summary row
    (``summary[prior]``: final and best errors, the weight-sample predictive's error and NLL,
    timings, ELBO, KL and the pruning table), and the pruning tables as markdown."""

    curves: dict[str, tuple[list[int], list[float]]]
    summary: dict[str, dict[str, Any]]
    pruning_markdown: dict[str, str]

    def markdown(self) -> str:
        return markdown(self)

    def write(self, out: str | os.PathLike) -> list[Path]:
        """``summary.json``, ``results.md`` and ``error_curve.png`` into ``out`` (the pruning
        folders ``pruning_<prior>/`` are written by :func:`bbb_mnist` itself)."""
        from bnnkit.report.experiment_plots import error_curve_png

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        png = error_curve_png(
            {LABELS[p]: c for p, c in self.curves.items()},
            {LABELS[p]: PUBLISHED[p] for p in self.curves},
            (f"Gaussian, later reproduction {REPRODUCTION_GAUSSIAN} %", REPRODUCTION_GAUSSIAN),
            title="Bayes by Backprop, MNIST, 784-400-400-10, batch 128",
        )
        storage.atomic_write_bytes(out / FIGURE_FILE, png)
        storage.atomic_write_bytes(out / TABLE_FILE, self.markdown().encode())
        storage.write_json(out / SUMMARY_FILE, self.summary)
        return [out / SUMMARY_FILE, out / TABLE_FILE, out / FIGURE_FILE]


def summarise(
    run_dir: Path, out: Path, prior: str
) -> tuple[tuple[list[int], list[float]], dict[str, Any], str]:
    """One run's error curve, summary row and pruning table (written to
    ``out/pruning_<prior>``)."""
    from bnnkit.evaluation import evaluate
    from bnnkit.experiments.pruning import prune_run
    from bnnkit.runs import RunDir

    rundir = RunDir(run_dir)
    record = rundir.read_record()
    log = rundir.read_log()
    epochs = [r["epoch"] for r in log if "test" in r]
    errors = [100 * (1 - r["test"]["accuracy"]) for r in log if "test" in r]
    ensemble = evaluate(run_dir, write=True)["test"]
    rows = prune_run(str(run_dir), str(out / f"pruning_{prior}"))
    summary = {
        "status": record["status"],
        "epochs": len(log),
        "train_seconds": float(sum(r["seconds"] for r in log)),
        "seconds_per_epoch": float(np.mean([r["seconds"] for r in log])),
        "mean_network_test_error": errors[-1],
        "best_mean_network_test_error": min(errors),
        "ensemble_test_error": 100 * (1 - ensemble["accuracy"]),
        "ensemble_size": record["method_config"]["vi_ensemble_size"],
        "ensemble_nll": ensemble["nll"],
        "final_elbo": log[-1]["elbo"][0],
        "final_kl": log[-1]["kl"][0],
        "method_config": record["method_config"],
        "pruning": [
            {
                "fraction": r["fraction"],
                "snr_error": 100 * r["snr"]["error"],
                "magnitude_error": 100 * r["magnitude"]["error"],
            }
            for r in rows
        ],
    }
    table = (out / f"pruning_{prior}" / "pruning.md").read_text().strip()
    return (epochs, errors), summary, table


def markdown(result: BBBMnist) -> str:
    """Per prior: the error curve (every tenth epoch), the final errors and the pruning."""
    lines = [
        "# Bayes by Backprop on MNIST (Blundell et al. 2015 setting)",
        "",
        "784-400-400-10 ReLU MLP, batch 128, inputs / 126, one weight sample per step, "
        "real MNIST (60,000 train / 10,000 test), 2-core CPU shared with other jobs. "
        "Test error of the mean network after every epoch (`error_curve.png`); the "
        "weight-sample predictive at the end. Published (400 units, hundreds of epochs): "
        f"Gaussian {PUBLISHED['gaussian']} %, scale mixture {PUBLISHED['scale_mixture']} %;"
        f" a reproduction with a Gaussian prior: {REPRODUCTION_GAUSSIAN} %.",
        "",
    ]
    for prior, (epochs, errors) in result.curves.items():
        s = result.summary[prior]
        mc = s["method_config"]
        every = max(1, len(epochs) // 10)
        lines += [
            f"### {LABELS[prior]}",
            "",
            f"{s['epochs']} epochs ({s['status']}), {s['train_seconds'] / 60:.1f} min of "
            f"training, {s['seconds_per_epoch']:.1f} s/epoch; Adam, initial step "
            f"{mc['init_step_size']:g} (cosine), σ_init {mc['vi_sigma_init']:g}, KL "
            f"weighting {mc['kl_weighting']}.",
            "",
            "| epoch | test error of the mean network (%) |",
            "|---:|---:|",
        ]
        lines += [
            f"| {e} | {err:.2f} |"
            for e, err in zip(epochs, errors, strict=True)
            if e % every == 0 or e == epochs[-1]
        ]
        lines += [
            "",
            f"Final: mean network {errors[-1]:.2f} %, predictive of "
            f"{s['ensemble_size']} weight samples {s['ensemble_test_error']:.2f} % "
            f"(published: {PUBLISHED[prior]} %).",
            "",
            "Pruning (test error of the pruned mean network):",
            "",
            result.pruning_markdown[prior],
            "",
        ]
    return "\n".join(lines)


def bbb_mnist(config: Config, out: str | os.PathLike, *, progress: bool = True) -> BBBMnist:
    """Train (or reuse) every chosen prior's run, then write the report into ``out``.

    Args:
        config: priors and VI settings.
        out: the output folder: runs (and the normalised MNIST) in ``out/runs/``, the report
            (:meth:`BBBMnist.write`) and ``pruning_<prior>/`` beside them.
        progress: a line per epoch.

    Raises:
        ConfigError: bad settings, missing MNIST, or a run of other settings in ``out``.
    """
    out = Path(out)
    curves, summary, tables = {}, {}, {}
    for prior in config.chosen_priors():
        train(config, out, prior, progress)
        curves[prior], summary[prior], tables[prior] = summarise(out / "runs" / prior, out, prior)
    result = BBBMnist(curves, summary, tables)
    result.write(out)
    return result
