"""How close do the cheaper methods come to HMC? The paper's central comparison, on small data.

For each setting an HMC reference run is made first; then SGD, a deep ensemble and the four
SGMCMC variants of the paper (SGLD, SGHMC, SGHMC-CLR, SGHMC-CLR-Prec) run on the same posterior
and are evaluated against it with ``bnnkit.evaluate.evaluate(run, reference=hmc_run)``:
accuracy / NLL / agreement / total variation (classification) or RMSE / NLL / RMSE to the HMC
predictive mean (regression).

The SGLD step size comes from HMC's adapted leapfrog step ε: one leapfrog step of HMC without
the accept step is Langevin dynamics with η = ε²/2. RMSprop divides the step by ``M = √v``, the
root mean square of the minibatch gradient, so the preconditioned variant gets η · median(M),
with M measured at an HMC sample: the typical coordinate then moves as without preconditioning.

Usage::

    python experiments/compare_methods.py --out experiments/results/compare_methods \\
        --runs /tmp/compare_runs [--settings yacht mnist160]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from bnnkit import runs, storage
from bnnkit.evaluate import evaluate
from bnnkit.inference import ensemble, hmc, sgd, sgmcmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs.loop import minibatch_indices

SETTINGS = {
    "yacht": dict(
        problem=ProblemConfig(dataset="yacht_0", model="mlp_regression_small", noise_std=0.1),
        hmc=hmc.Config(step_size=5e-4, trajectory_len=0.15, num_iterations=300,
                       num_burn_in=100, num_chains=4),
        batch_size=32, epochs=1500, burn_in=500, cycle=100,
    ),
    "mnist160": dict(
        problem=ProblemConfig(dataset="mnist", model="mlp_classification", subset_train_to=160),
        hmc=hmc.Config(step_size=5e-4, trajectory_len=0.1, num_iterations=120,
                       num_burn_in=40, num_chains=4, max_num_leapfrog_steps=2000),
        batch_size=32, epochs=1500, burn_in=500, cycle=100,
    ),
}


def gradient_rms(problem_config: ProblemConfig, hmc_dir: Path, batch_size: int) -> float:
    """Median over coordinates of the RMS minibatch gradient at HMC's last sample of chain 0."""
    import jax
    import jax.numpy as jnp

    from bnnkit.evaluate import load_run
    from bnnkit.types import Batch

    _, problem, samples = load_run(hmc_dir)
    params = jax.tree.map(lambda a: jnp.asarray(a[0, -1]), samples.params)
    train = problem.train_batch()
    idx = minibatch_indices(jax.random.PRNGKey(0), problem.dataset.num_train, batch_size)
    grad = jax.jit(jax.grad(problem.log_posterior))
    sq = None
    for i in idx:
        g = jnp.concatenate([x.ravel() for x in jax.tree.leaves(
            grad(params, Batch(train.x[i], train.y[i])))])
        sq = g**2 if sq is None else sq + g**2
    return float(jnp.median(jnp.sqrt(sq / len(idx))))


def methods(setting: dict, eta: float, grad_rms: float) -> dict:
    """name -> the method's Config."""
    epochs, burn, cycle = setting["epochs"], setting["burn_in"], setting["cycle"]
    common = dict(num_epochs=epochs, batch_size=setting["batch_size"])
    sgd_eta = 10 * eta  # optimisation tolerates larger steps than sampling
    constant = dict(common, init_step_size=eta, final_step_size=eta, num_burn_in=burn,
                    ensemble_freq=max((epochs - burn) // 50, 1))
    clr = dict(common, init_step_size=2 * eta, step_size_schedule="cyclical", cycle_length=cycle,
               num_burn_in=burn, momentum_decay=0.9)
    return {
        "SGD": sgd.Config(**common, init_step_size=sgd_eta, momentum_decay=0.9),
        "Deep ensemble (K=5)": ensemble.Config(**common, init_step_size=sgd_eta,
                                               momentum_decay=0.9, num_members=5),
        "SGLD": sgmcmc.Config(**constant, momentum_decay=0.0),
        "SGHMC": sgmcmc.Config(**constant, momentum_decay=0.9),
        "SGHMC-CLR": sgmcmc.Config(**clr),
        "SGHMC-CLR-Prec": sgmcmc.Config(**{**clr, "init_step_size": 2 * eta * grad_rms},
                                        preconditioner="rmsprop"),
    }


def run_setting(name: str, setting: dict, root: Path) -> list[dict]:
    problem = setting["problem"]
    hmc_dir = root / name / "hmc"
    t0 = time.perf_counter()
    runs.run(problem, setting["hmc"], hmc_dir, overwrite=True, progress=False)
    hmc_seconds = time.perf_counter() - t0
    ref = evaluate(hmc_dir)
    sampler = ref["sampler"]
    eps = float(np.median(sampler["step_size"]))
    eta = eps**2 / 2
    rows = [{"method": "HMC (reference)", **ref["test"], "seconds": hmc_seconds,
             "note": f"acc. {sampler['acceptance_rate']:.2f}, eps {eps:.2g}, "
                     f"{sampler['num_divergent']} div."}]
    rms = gradient_rms(problem, hmc_dir, setting["batch_size"])
    for label, config in methods(setting, eta, rms).items():
        run_dir = root / name / label.split(" ")[0].lower()
        t0 = time.perf_counter()
        runs.run(problem, config, run_dir, overwrite=True, progress=False)
        seconds = time.perf_counter() - t0
        res = evaluate(run_dir, reference=hmc_dir)
        rows.append({"method": label, **res["test"], **{k: v for k, v in res["reference"].items()
                                                          if k != "run"},
                     "seconds": seconds, "note": f"η₀ {config.init_step_size:.2g}, "
                     f"{res['num_chains']}x{res['num_samples_per_chain']} samples"})
        print(name, rows[-1], flush=True)
    return rows


def markdown(name: str, rows: list[dict]) -> str:
    keys = [k for k in ("accuracy", "rmse", "nll", "ece", "agreement", "total_variation",
                        "rmse_to_reference_mean") if any(k in r for r in rows)]
    head = "| method | " + " | ".join(keys) + " | seconds | note |"
    lines = [f"### {name}", "", head, "|" + "---|" * (len(keys) + 3)]
    for r in rows:
        vals = [f"{r[k]:.4f}" if k in r else "—" for k in keys]
        lines.append(f"| {r['method']} | " + " | ".join(vals) + f" | {r['seconds']:.0f} | "
                     f"{r['note']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/results/compare_methods")
    parser.add_argument("--runs", default="/tmp/compare_runs")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    args = parser.parse_args()
    out, root = Path(args.out), Path(args.runs)
    out.mkdir(parents=True, exist_ok=True)
    text = ["# Cheaper methods against HMC", ""]
    results = {}
    for name in args.settings:
        setting = SETTINGS[name]
        rows = run_setting(name, setting, root)
        results[name] = {"problem": dataclasses.asdict(setting["problem"]), "rows": rows}
        text.append(markdown(name, rows))
        storage.atomic_write_bytes(out / "table.md", "\n".join(text).encode())
        storage.write_json(out / "results.json", results)
    print("\n".join(text))
    print(json.dumps({"written": str(out)}))


if __name__ == "__main__":
    main()
