"""Bayes by Backprop on MNIST in Blundell et al.'s (2015) setting, with the pruning table.

Setting: MLP 784-400-400-10 (``mlp_bbb_400``), real MNIST (60,000 / 10,000) from
``$BNNKIT_DATA_DIR``, inputs divided by 126 (Blundell's normalisation), batch 128, one Monte Carlo
sample per step, Adam with a cosine schedule, mean-field Gaussian q with σ = softplus(ρ).
Two priors: the Gaussian N(0, 1) and the scale mixture π N(0, σ₁²) + (1−π) N(0, σ₂²) with
π = 1/2, σ₁ = 1, σ₂ = e⁻⁶. Published test errors (400 units): Gaussian 1.82 %, scale mixture
1.36 % (Blundell et al., Table 1, after hundreds of epochs); a later reproduction reached 1.69 %
with a Gaussian prior.

Each run logs the test error of the mean network after every epoch; at the end the predictive
of ``vi_ensemble_size`` weight samples is evaluated too, and the weights are pruned by |μ|/σ and
by |μ|. Runs (large) go to ``--runs``; only the figures and tables go to ``--out``::

    python experiments/bbb_mnist.py train --prior gaussian --epochs 40
    python experiments/bbb_mnist.py train --prior scale_mixture --epochs 40
    python experiments/bbb_mnist.py report

``train`` resumes an interrupted run of the same settings.
"""

from __future__ import annotations

import argparse
import io as _io
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

PRIORS = {
    "gaussian": None,  # the default N(0, 1/λ) with λ = 1
    "scale_mixture": f"scale_mixture:pi=0.5,sigma1=1,sigma2={math.exp(-6)!r}",
}
LABELS = {"gaussian": "Gaussian N(0, 1)", "scale_mixture": "scale mixture (π=½, σ₁=1, σ₂=e⁻⁶)"}
PUBLISHED = {"gaussian": 1.82, "scale_mixture": 1.36}
REPRODUCTION_GAUSSIAN = 1.69
DEFAULT_RUNS = "/tmp/bbb_runs"
DEFAULT_OUT = str(Path(__file__).resolve().parent / "results" / "bbb_mnist")


def blundell_npz(runs: Path, data_dir: str | None) -> Path:
    """MNIST as float32 pixels / 126, flattened, in an npz the ``npz`` loader reads as given."""
    from bnnkit import storage
    from bnnkit.data import mnist

    path = runs / "mnist_blundell.npz"
    if path.is_file():
        return path
    arrays, _ = mnist.read_arrays("mnist", data_dir)
    storage.save_arrays(path, {
        "x_train": arrays["x_train"].reshape(-1, 784).astype(np.float32) / 126.0,
        "y_train": arrays["y_train"].astype(np.int32),
        "x_test": arrays["x_test"].reshape(-1, 784).astype(np.float32) / 126.0,
        "y_test": arrays["y_test"].astype(np.int32),
    })
    return path


def train(args: argparse.Namespace) -> None:
    from bnnkit import runs as driver
    from bnnkit.inference import vi
    from bnnkit.problem import ProblemConfig

    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    data = blundell_npz(runs, args.data_dir)
    problem = ProblemConfig(dataset=str(data), model="mlp_bbb_400", prior=PRIORS[args.prior])
    config = vi.Config(init_step_size=args.lr, num_epochs=args.epochs, batch_size=128,
                       eval_freq=1, checkpoint_every=1, seed=args.seed, optimizer="adam",
                       vi_num_samples=1, vi_sigma_init=args.sigma_init,
                       kl_weighting=args.kl_weighting, vi_ensemble_size=args.ensemble_size)
    run_dir = runs / args.prior
    resume = (run_dir / "run.json").is_file()

    def report(epoch: int, log: dict) -> None:
        print(f"[{args.prior}] epoch {epoch + 1}/{args.epochs}: {log['seconds']:.1f} s, "
              f"ELBO {log['elbo'][0]:.4g}, E[log lik] {log['expected_log_likelihood'][0]:.4g}, "
              f"KL {log['kl'][0]:.4g}, test error (mean) "
              f"{100 * (1 - log['test']['accuracy']):.2f} %", flush=True)

    t0 = time.perf_counter()
    result = driver.run(problem, config, run_dir, resume=resume, progress=False,
                        on_unit=report)
    print(f"[{args.prior}] {args.epochs} epochs, {time.perf_counter() - t0:.0f} s wall "
          f"({result.seconds_per_unit:.2f} s/epoch)", flush=True)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = _io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()


def error_curve_png(curves: dict[str, tuple[list[int], list[float]]]) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for i, (prior, (epochs, errors)) in enumerate(curves.items()):
        color = f"C{i}"
        ax.plot(epochs, errors, "-", color=color, label=f"{LABELS[prior]} (this run)")
        ax.axhline(PUBLISHED[prior], color=color, ls=":", lw=1,
                   label=f"{LABELS[prior]}: published {PUBLISHED[prior]} %")
    ax.axhline(REPRODUCTION_GAUSSIAN, color="grey", ls="--", lw=1,
               label=f"Gaussian, later reproduction {REPRODUCTION_GAUSSIAN} %")
    ax.set_xlabel("epoch")
    ax.set_ylabel("test error of the mean network (%)")
    ax.set_ylim(1.0, 4.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Bayes by Backprop, MNIST, 784-400-400-10, batch 128")
    return _png(fig)


def report(args: argparse.Namespace) -> None:
    from bnnkit import storage
    from bnnkit.evaluate import evaluate
    from bnnkit.experiments.pruning import prune_run
    from bnnkit.runs import RunDir

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    curves, summary, lines = {}, {}, []
    for prior in PRIORS:
        run_dir = Path(args.runs) / prior
        if not (run_dir / "run.json").is_file():
            print(f"no run for {prior} in {run_dir}; skipped", file=sys.stderr)
            continue
        record = storage.read_json(run_dir / "run.json")
        log = RunDir(run_dir).read_log()
        epochs = [r["epoch"] for r in log if "test" in r]
        errors = [100 * (1 - r["test"]["accuracy"]) for r in log if "test" in r]
        curves[prior] = (epochs, errors)
        ensemble = evaluate(run_dir, write=True)["test"]
        rows = prune_run(str(run_dir), str(out / f"pruning_{prior}"))
        summary[prior] = {
            "status": record["status"], "epochs": len(log),
            "train_seconds": float(sum(r["seconds"] for r in log)),
            "seconds_per_epoch": float(np.mean([r["seconds"] for r in log])),
            "mean_network_test_error": errors[-1], "best_mean_network_test_error": min(errors),
            "ensemble_test_error": 100 * (1 - ensemble["accuracy"]),
            "ensemble_size": record["method_config"]["vi_ensemble_size"],
            "ensemble_nll": ensemble["nll"], "final_elbo": log[-1]["elbo"][0],
            "final_kl": log[-1]["kl"][0], "method_config": record["method_config"],
            "pruning": [{"fraction": r["fraction"],
                         "snr_error": 100 * r["snr"]["error"],
                         "magnitude_error": 100 * r["magnitude"]["error"]} for r in rows],
        }
        every = max(1, len(epochs) // 10)
        lines += [f"### {LABELS[prior]}", "",
                  f"{len(log)} epochs ({record['status']}), "
                  f"{summary[prior]['train_seconds'] / 60:.1f} min of training, "
                  f"{summary[prior]['seconds_per_epoch']:.1f} s/epoch; Adam, initial step "
                  f"{record['method_config']['init_step_size']:g} (cosine), σ_init "
                  f"{record['method_config']['sigma_init']:g}, KL weighting "
                  f"{record['method_config']['kl_weighting']}.", "",
                  "| epoch | test error of the mean network (%) |", "|---:|---:|"]
        lines += [f"| {e} | {err:.2f} |" for e, err in zip(epochs, errors, strict=True)
                  if e % every == 0 or e == epochs[-1]]
        lines += ["", f"Final: mean network {errors[-1]:.2f} %, predictive of "
                      f"{summary[prior]['ensemble_size']} weight samples "
                      f"{summary[prior]['ensemble_test_error']:.2f} % "
                      f"(published: {PUBLISHED[prior]} %).", "",
                  "Pruning (test error of the pruned mean network):", "",
                  (out / f"pruning_{prior}" / "pruning.md").read_text().strip(), ""]
    if not curves:
        raise SystemExit("no runs to report")
    storage.atomic_write_bytes(out / "error_curve.png", error_curve_png(curves))
    header = ["# Bayes by Backprop on MNIST (Blundell et al. 2015 setting)", "",
              "784-400-400-10 ReLU MLP, batch 128, inputs / 126, one weight sample per step, "
              "real MNIST (60,000 train / 10,000 test), 2-core CPU shared with other jobs. "
              "Test error of the mean network after every epoch (`error_curve.png`); the "
              "weight-sample predictive at the end. Published (400 units, hundreds of epochs): "
              f"Gaussian {PUBLISHED['gaussian']} %, scale mixture {PUBLISHED['scale_mixture']} %;"
              f" a reproduction with a Gaussian prior: {REPRODUCTION_GAUSSIAN} %.", ""]
    storage.atomic_write_bytes(out / "results.md", "\n".join(header + lines).encode())
    storage.write_json(out / "summary.json", summary)
    print(json.dumps({p: {k: v for k, v in s.items() if k not in ("pruning", "method_config")}
                      for p, s in summary.items()}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train (or resume) one prior's run")
    t.add_argument("--prior", choices=sorted(PRIORS), required=True)
    t.add_argument("--epochs", type=int, required=True)
    t.add_argument("--lr", type=float, default=1e-3, help="Adam's initial step size")
    t.add_argument("--sigma-init", type=float, default=1e-3)
    t.add_argument("--kl-weighting", default="uniform", choices=("uniform", "blundell"))
    t.add_argument("--ensemble-size", type=int, default=10)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--data-dir", default=os.environ.get("BNNKIT_DATA_DIR"))
    t.add_argument("--runs", default=DEFAULT_RUNS)
    r = sub.add_parser("report", help="figures and tables from the runs")
    r.add_argument("--runs", default=DEFAULT_RUNS)
    r.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    train(args) if args.command == "train" else report(args)


if __name__ == "__main__":
    main()
