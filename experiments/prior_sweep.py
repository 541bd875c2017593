"""Which prior? HMC Bayesian model averages under different priors on two small problems.

The question of Izmailov et al. (2021, §7): does the shape of the prior matter, or only its
scale? For each dataset the script runs full-batch HMC (``bnnkit.runs.run``) and evaluates
the BMA on the test set (``bnnkit.evaluate.evaluate``) under

- an isotropic Gaussian at three scales, s/3, s and 3s;
- a scale mixture and logistic, Laplace and Student-t (ν = 3) priors, each scaled to the
  variance s² of the middle Gaussian, so that only their shape differs;

with s = 1 on UCI yacht (split 0, ``mlp_regression_small``, fixed noise std in standardised
units) and s = 0.1 on the first 160 MNIST training images (``mlp_classification``, 784-256-256-10,
where s = 1 would make the prior logits enormous). It writes a markdown table, a PNG and the raw
results into ``--out``.

The default settings fit in about 15 minutes on 2 CPU cores, so the chains are short: read the
function-space R-hat column before reading much into small differences.

Usage::

    BNNKIT_DATA_DIR=../shared/data python experiments/prior_sweep.py --out runs/prior_sweep
    python experiments/prior_sweep.py --out /tmp/sweep --quick      # a smoke test, ~2 minutes
"""

from __future__ import annotations

import argparse
import dataclasses
import io as _bytes_io
import math
import os
import time
from pathlib import Path
from typing import Any

from bnnkit import runs, storage
from bnnkit.evaluate import evaluate
from bnnkit.inference import hmc
from bnnkit.priors.constraints import format_value
from bnnkit.problem import ProblemConfig


@dataclasses.dataclass(frozen=True)
class Setting:
    """One dataset's problem, base prior scale s and HMC settings."""

    name: str
    title: str
    problem: dict[str, Any]
    scale: float
    hmc: dict[str, Any]
    metric: str  # "rmse" or "accuracy"


def settings(noise_std: float, quick: bool) -> dict[str, Setting]:
    shrink = 4 if quick else 1
    return {
        "yacht": Setting(
            "yacht", "UCI yacht, split 0 (mlp_regression_small, 50 ReLU units)",
            dict(dataset="yacht_0", model="mlp_regression_small", noise_std=noise_std),
            scale=1.0,
            hmc=dict(step_size=1e-3, trajectory_len=0.3, num_iterations=160 // shrink,
                     num_burn_in=40 // shrink, num_chains=4, max_num_leapfrog_steps=1500),
            metric="rmse",
        ),
        "mnist160": Setting(
            "mnist160", "MNIST, first 160 training images (mlp_classification, 784-256-256-10)",
            dict(dataset="mnist", model="mlp_classification", subset_train_to=160),
            scale=0.1,
            hmc=dict(step_size=1e-3, trajectory_len=0.05, num_iterations=60 // shrink,
                     num_burn_in=20 // shrink, num_chains=2, max_num_leapfrog_steps=60),
            metric="accuracy",
        ),
    }


def _num(x: float) -> str:
    return format_value(float(f"{x:.3g}"))


def prior_specs(s: float) -> list[tuple[str, str]]:
    """(label, spec): Gaussians at s/3, s, 3s; other shapes with variance s²."""
    return [
        (f"Gaussian σ={_num(s / 3)}", f"gaussian:scale={_num(s / 3)}"),
        (f"Gaussian σ={_num(s)}", f"gaussian:scale={_num(s)}"),
        (f"Gaussian σ={_num(3 * s)}", f"gaussian:scale={_num(3 * s)}"),
        # π σ₁² + (1-π) σ₂² = s² with π = ½ and σ₂ = σ₁/10: a spike and a slab.
        ("scale mixture", f"scale_mixture:pi=0.5,sigma1={_num(s * math.sqrt(2 / 1.01))},"
                          f"sigma2={_num(s * math.sqrt(2 / 1.01) / 10)}"),
        ("logistic", f"logistic:scale={_num(s * math.sqrt(3) / math.pi)}"),  # π²b²/3 = s²
        ("Laplace", f"laplace:scale={_num(s / math.sqrt(2))}"),  # 2b² = s²
        ("Student-t ν=3", f"student_t:df=3,scale={_num(s / math.sqrt(3))}"),  # 3b² = s²
    ]


def run_one(setting: Setting, label: str, spec: str, out: Path, data_dir: str | None,
            seed: int) -> dict[str, Any]:
    run_dir = out / "runs" / f"{setting.name}_{spec.replace(':', '_').replace(',', '_')}"
    problem = ProblemConfig(**setting.problem, prior=spec, data_dir=data_dir)
    t0 = time.perf_counter()
    runs.run(problem, hmc.Config(**setting.hmc, seed=seed), run_dir, overwrite=True,
             progress=False)
    evaluation = evaluate(run_dir)
    row = {
        "dataset": setting.name, "prior": label, "spec": spec,
        **{k: float(v) for k, v in evaluation["test"].items()},
        "acceptance": evaluation["sampler"]["acceptance_rate"],
        "divergences": evaluation["sampler"]["num_divergent"],
        "rhat_function_max": evaluation.get("diagnostics", {}).get("function", {})
        .get("rhat", {}).get("max", float("nan")),
        "seconds": time.perf_counter() - t0,
    }
    print(f"{setting.name:9s} {label:18s} nll {row['nll']:.3f}  {setting.metric} "
          f"{row[setting.metric]:.3f}  accept {row['acceptance']:.2f}  "
          f"R-hat(f) {row['rhat_function_max']:.3f}  {row['seconds']:.0f} s", flush=True)
    return row


def markdown(rows: list[dict], configs: dict[str, Setting]) -> str:
    lines = []
    for name, setting in configs.items():
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        metric = "RMSE" if setting.metric == "rmse" else "accuracy"
        hmc = setting.hmc
        lines += [
            f"### {setting.title}", "",
            f"HMC: {hmc['num_chains']} chains x {hmc['num_iterations']} iterations "
            f"({hmc['num_burn_in']} burn-in), trajectory length {hmc['trajectory_len']}, "
            f"at most {hmc['max_num_leapfrog_steps']} leapfrog steps; base scale s = "
            f"{setting.scale}.", "",
            f"| prior | spec | test NLL | test {metric} | acceptance | R-hat f (max) | s |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for r in mine:
            lines.append(
                f"| {r['prior']} | `{r['spec']}` | {r['nll']:.3f} | {r[setting.metric]:.3f} | "
                f"{r['acceptance']:.2f} | {r['rhat_function_max']:.3f} | {r['seconds']:.0f} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot(rows: list[dict], configs: dict[str, Setting], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in configs if any(r["dataset"] == n for r in rows)]
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 3.6 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        mine = [r for r in rows if r["dataset"] == name]
        labels = [r["prior"] for r in mine]
        colors = ["C0"] * 3 + ["C1"] * (len(mine) - 3)
        metric = configs[name].metric
        for j, (key, title) in enumerate((("nll", "test NLL (lower is better)"),
                                          (metric, f"test {metric}"))):
            ax = axes[i, j]
            ax.barh(range(len(mine)), [r[key] for r in mine], color=colors)
            ax.set_yticks(range(len(mine)), labels)
            ax.invert_yaxis()
            ax.set_title(f"{name}: {title}", fontsize=10)
            values = [r[key] for r in mine]
            lo, hi = min(values), max(values)
            ax.set_xlim(max(0.0, lo - 0.15 * (hi - lo + 1e-9)), hi + 0.1 * (hi - lo + 1e-9))
    fig.suptitle("HMC BMA under different priors (blue: Gaussian scales; orange: other shapes "
                 "at the middle Gaussian's variance)", fontsize=10)
    fig.tight_layout()
    buffer = _bytes_io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    storage.atomic_write_bytes(path, buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the table, plot, results and runs")
    p.add_argument("--datasets", default="yacht,mnist160",
                   help="comma-separated subset of: yacht, mnist160")
    p.add_argument("--noise-std", type=float, default=0.1,
                   help="yacht's fixed noise std in standardised units")
    p.add_argument("--data-dir", default=None,
                   help="folder with MNIST (default: $BNNKIT_DATA_DIR or the cache)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="4x fewer iterations: a smoke test")
    args = p.parse_args(argv)
    configs = settings(args.noise_std, args.quick)
    chosen = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = [d for d in chosen if d not in configs]
    if unknown:
        p.error(f"unknown dataset {unknown[0]!r}; allowed: {', '.join(configs)}")
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = []
    for name in chosen:
        setting = configs[name]
        for label, spec in prior_specs(setting.scale):
            rows.append(run_one(setting, label, spec, out, args.data_dir, args.seed))
            storage.write_json(out / "results.json", rows)
    table = markdown(rows, {n: configs[n] for n in chosen})
    storage.atomic_write_bytes(out / "prior_sweep.md", table.encode())
    plot(rows, configs, out / "prior_sweep.png")
    print()
    print(table)
    print(f"wrote {os.fspath(out / 'prior_sweep.md')}, {os.fspath(out / 'prior_sweep.png')} "
          f"in {(time.perf_counter() - t0) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
