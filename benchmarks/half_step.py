"""Is an unadjusted MCLMC reference's model average biased by its step? Measured, not counted.

Unadjusted MCLMC has no Metropolis step: its draws follow a distribution a distance O(ε²) from
the posterior (:mod:`bnnkit.inference.mclmc`), and level 0 of the verdict counts the steps
whose energy error spikes. This measures the bias instead, as BlackJAX's documentation
recommends checking an unadjusted sampler (level 0 of the verdict does it with a quarter of
the kept draws where it decides the verdict, :mod:`bnnkit.runs.step_check`; this measures it
at any length and seed): each finished reference's chains are continued
from their last state, every chain with its tuned L and preconditioner,

- ``half``: at ε/2, with twice the steps per iteration (the same integration time per kept
  draw), and
- ``same`` and ``again``: at ε, with two independent streams of randomness,

for ``--iterations`` kept draws each. The model averages of the segments (their predictive
mixtures at the test inputs) are compared by the mean Wasserstein-1 per test point
(:func:`bnnkit.metrics.halves.mixture_w1`): ``same`` against ``again`` is the floor, what
segments of this length differ by from Monte Carlo error alone; ``half`` against each of them
is the floor plus the step's bias. A ratio near 1 says the bias is below the Monte Carlo
error of such a segment. The reference's own halves (level 2's W₁ between chains 0-3 and 4-7,
whole runs) and its distance to its ensemble are printed beside them, with the gradients the
check costs against those of the reference's chains.

    BNNKIT_DATA_DIR=... python benchmarks/half_step.py REF [REF ...] [--iterations 100] \\
        [--seed 0] [--out benchmarks/results/half_step.json]

``REF`` is a ``bnnkit reference`` folder (or its ``chains/`` run) made with unadjusted MCLMC.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import cpu_devices, storage
from bnnkit.inference import mclmc
from bnnkit.metrics.halves import mixture_w1
from bnnkit.posterior.samples import Samples
from bnnkit.predict import predict
from bnnkit.problem import build
from bnnkit.runs.directory import RunDir
from bnnkit.runs.keys import UNIT_KEY
from bnnkit.runs.prepare import member_init
from bnnkit.runs.step_check import segment
from bnnkit.runs.stored import recorded_problem


def chains_dir(folder: Path) -> RunDir:
    """The chains' run of a reference folder (or the run itself)."""
    return RunDir(folder / "chains" if (folder / "chains" / "run.json").is_file() else folder)


def mean_w1(a, b) -> float:
    """Mean W₁ per test point between two model averages (means, stds of (draws, points))."""
    return float(np.mean(mixture_w1(*a, *b)))


def check(folder: Path, iterations: int, seed: int) -> dict:
    """The three continuations of one reference and their distances."""
    rundir = chains_dir(folder)
    record = rundir.read_record()
    if record.get("method") != "mclmc" or record["method_config"].get("adjusted"):
        raise SystemExit(f"{folder}: not a run of unadjusted MCLMC")
    problem = build(recorded_problem(record, str(rundir.path / "run.json")))
    fields = {f.name for f in dataclasses.fields(mclmc.Config)}
    given = {k: v for k, v in record["method_config"].items() if k in fields}
    config = mclmc.Config(**given)
    steps = config.steps_per_iteration
    batch = problem.train_batch()
    ran = mclmc.build(problem.log_posterior, config)
    halved = mclmc.build(
        problem.log_posterior, dataclasses.replace(config, steps_per_iteration=2 * steps)
    )
    keys = jax.random.split(jax.random.PRNGKey(0), config.num_chains)
    template = jax.eval_shape(member_init(ran, jax.vmap(problem.init_params)), keys, batch)
    stored = storage.load_arrays(rundir.state_file)
    stored.pop(UNIT_KEY, None)
    state = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, stored))
    start = time.perf_counter()
    key = jax.random.PRNGKey(seed)
    positions = {
        "same": segment(ran, state, batch, jax.random.fold_in(key, 0), iterations),
        "again": segment(ran, state, batch, jax.random.fold_in(key, 1), iterations),
        "half": segment(
            halved,
            state._replace(step_size=state.step_size / 2),
            batch,
            jax.random.fold_in(key, 2),
            iterations,
        ),
    }
    averages = {}
    for name, where in positions.items():
        p = predict(problem, Samples(where), problem.dataset.x_test)
        averages[name] = (np.asarray(p.means, np.float64), np.asarray(p.stds, np.float64))
    seconds = time.perf_counter() - start
    floor = mean_w1(averages["same"], averages["again"])
    half = [mean_w1(averages["half"], averages[n]) for n in ("same", "again")]
    chains = int(state.step_size.shape[0])
    evaluation = rundir.path / "evaluation.json"
    l2 = {}
    if evaluation.is_file():
        figures = storage.read_json(evaluation).get("levels", {}).get("L2", {}).get("figures", {})
        l2 = {
            "halves_w1": (figures.get("halves") or {}).get("wasserstein_1"),
            "ensemble_w1": (figures.get("ensemble") or {}).get("wasserstein_1"),
        }
    kept = record["method_config"]["num_iterations"]
    return {
        "reference": str(folder),
        "chains": chains,
        "iterations": iterations,
        "step_size": [float(s) for s in state.step_size],
        "floor_w1": floor,
        "half_w1": half,
        "ratio": float(np.mean(half) / floor) if floor else None,
        **l2,
        "gradients": {
            "half": chains * iterations * mclmc.GRADIENTS_PER_STEP * 2 * steps,
            "floor": 2 * chains * iterations * mclmc.GRADIENTS_PER_STEP * steps,
            "reference_chains": chains * kept * mclmc.GRADIENTS_PER_STEP * steps,
        },
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("references", nargs="+", type=Path)
    parser.add_argument("--iterations", type=int, default=100, help="kept draws per segment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    cpu_devices.enable_for_command_line()
    rows = []
    print(
        "| reference | floor W₁ | ε/2 W₁ (to each) | ratio | halves W₁ | to ensemble "
        "| ε/2 gradients ÷ the chains' |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for folder in args.references:
        row = check(folder, args.iterations, args.seed)
        rows.append(row)
        g = row["gradients"]
        print(
            f"| {folder} | {row['floor_w1']:.4f} | "
            + " / ".join(f"{w:.4f}" for w in row["half_w1"])
            + f" | {row['ratio']:.2f} | {row.get('halves_w1') or float('nan'):.4f} | "
            f"{row.get('ensemble_w1') or float('nan'):.4f} | "
            f"{g['half'] / g['reference_chains']:.2f} |",
            flush=True,
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "args": {
                        k: os.fspath(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                    },
                    "cpu": platform.processor() or platform.machine(),
                    "rows": rows,
                },
                indent=1,
                default=os.fspath,
            )
        )


if __name__ == "__main__":
    main()
