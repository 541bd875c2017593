"""Within-chain ESS per gradient of ``bnnkit reference`` before and after a change of MCLMC's tuner.

MCLMC's step size tuner (:mod:`bnnkit.inference.mclmc_tuning`) sets ε from the energy errors of
its steps; a rule that rare energy spikes drive tunes a smaller ε than the bulk of the steps
calls for, and the chains move less per gradient. This script measures what a reference (a deep
ensemble, then one MCLMC chain per member, each sampler at its defaults) gets per gradient:

- each chain's within-chain ESS of its test predictions (``bnnkit evaluate DIR --json``,
  ``levels.L1.figures.chains[k]``: ``ess_min`` and ``ess_p5`` over the test points; and their
  median, which that json does not give, from the stored predictions with the same estimator,
  :func:`bnnkit.metrics.mcmc.ess_bulk` of each chain alone), and
- each chain's gradients, from the chains' log (``chains/metrics.jsonl``: ``num_leapfrog``
  integrator steps per iteration, tuning included, times ``mclmc.GRADIENTS_PER_STEP``),

per dataset, as ESS per 1,000 gradients (median and range over the chains), with the tuned step
sizes and the divergent steps. The code under test is the bnnkit this interpreter imports:
``--stage before`` on the old tuning and ``--stage after`` on the new one, each from a worktree
of its own named by ``PYTHONPATH`` (so that nothing else differs, and edits in the checkout
do not reach the runs); both stages go into one json, and the second prints the ratios
after/before of the same datasets and seeds::

    git worktree add --detach /tmp/mclmc_before OLD
    git worktree add --detach /tmp/mclmc_after OLD
    cp src/bnnkit/inference/mclmc_tuning.py /tmp/mclmc_after/src/bnnkit/inference/
    PYTHONPATH=/tmp/mclmc_before/src python benchmarks/mclmc_spikes.py --stage before --seeds 0 1 2
    PYTHONPATH=/tmp/mclmc_after/src python benchmarks/mclmc_spikes.py --stage after --seeds 0 1 2

Each reference runs at ``bnnkit reference``'s defaults unless ``--num-tuning``,
``--num-samples`` or ``--members`` are given (both stages must use the same). Wall time is not
compared: other processes may share the processor.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import bnnkit
from bnnkit.inference import mclmc
from bnnkit.metrics import mcmc

RESULTS = Path(__file__).resolve().parent / "results" / "mclmc_spikes.json"
#: The command line next to this interpreter (the one whose bnnkit is measured).
BNNKIT = str(Path(sys.executable).with_name("bnnkit"))


def processor_name() -> str:
    """``lscpu``'s model name (the platform's processor string where lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or platform.machine()
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def commit() -> str:
    """The commit of the checkout bnnkit is imported from (``PYTHONPATH`` may name another
    worktree), with ``+dirty`` when its tuning module differs from that commit."""
    root = Path(bnnkit.__file__).resolve().parents[2]
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "diff", "--quiet", "HEAD", "--", "src/bnnkit/inference/mclmc_tuning.py"], cwd=root
    ).returncode
    return head + ("+dirty" if dirty else "")


def reference_command(dataset: str, args: argparse.Namespace, folder: Path, seed: int) -> list:
    """The ``bnnkit reference`` command of one measurement."""
    command = [BNNKIT, "reference", "--dataset", dataset, "--model", args.model]
    for flag in ("num_tuning", "num_samples", "members"):
        value = getattr(args, flag)
        if value is not None:
            command += [f"--{flag.replace('_', '-')}", str(value)]
    return [*command, "--seed", str(seed), "--dir", str(folder), "--no-progress", "--overwrite"]


def chain_gradients(folder: Path) -> tuple[list[int], list[int], int]:
    """Per chain: the gradients of the whole chain and of its tuning, from the chains' log;
    and the number of logged iterations."""
    lines = [json.loads(s) for s in (folder / "chains" / "metrics.jsonl").read_text().splitlines()]
    lines = [line for line in lines if "num_leapfrog" in line]
    per = mclmc.GRADIENTS_PER_STEP
    chains = len(lines[0]["num_leapfrog"])
    total = [per * sum(line["num_leapfrog"][k] for line in lines) for k in range(chains)]
    tuning = [
        per * sum(line["num_leapfrog"][k] for line in lines if line.get("burn_in"))
        for k in range(chains)
    ]
    return total, tuning, len(lines)


def chain_ess_median(folder: Path, chains: int) -> list[float]:
    """Per chain: the median over test points of the chain's own ESS of its predicted means
    (the quantity and estimator of the verdict's level 1)."""
    means = np.load(folder / "chains" / "predictions" / "test.npz")["means"]
    draws = means.reshape(chains, means.shape[0] // chains, -1)
    return [float(np.nanmedian(mcmc.ess_bulk(draws[c][None]))) for c in range(chains)]


def divergent_steps(folder: Path) -> list[int]:
    """Per chain: the divergent steps over the whole run (tuning included)."""
    lines = [json.loads(s) for s in (folder / "chains" / "metrics.jsonl").read_text().splitlines()]
    lines = [line for line in lines if "num_divergent" in line]
    chains = len(lines[0]["num_divergent"])
    return [sum(line["num_divergent"][k] for line in lines) for k in range(chains)]


def measure(dataset: str, seed: int, args: argparse.Namespace) -> dict:
    """One reference, run, and its figures (:func:`score`)."""
    folder = Path(args.work) / args.stage / f"{dataset}_seed{seed}"
    command = reference_command(dataset, args, folder, seed)
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    return {"command": " ".join(command), "seconds": seconds, **score(folder, dataset, seed)}


def score(folder: Path, dataset: str, seed: int) -> dict:
    """The figures of the reference in ``folder``."""
    evaluation = json.loads(
        subprocess.run(
            [BNNKIT, "evaluate", str(folder), "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    within = evaluation["levels"]["L1"]["figures"]["chains"]
    total, tuning, iterations = chain_gradients(folder)
    ess = {
        "ess_min": [float(c["ess_min"]) for c in within],
        "ess_p5": [float(c["ess_p5"]) for c in within],
        "ess_median": chain_ess_median(folder, len(within)),
    }
    per_gradient = {
        f"{name}_per_1000_gradients": [1000 * e / g for e, g in zip(values, total, strict=True)]
        for name, values in ess.items()
    }
    return {
        "dataset": dataset,
        "seed": seed,
        "folder": str(folder),
        "iterations": iterations,
        "gradients": total,
        "tuning_gradients": tuning,
        **ess,
        **per_gradient,
        "step_size": evaluation["sampler"]["step_size"],
        "divergent_steps": divergent_steps(folder),
        "pooled_function_ess_median": evaluation["diagnostics"]["function"]["ess"]["median"],
        "test_rmse": evaluation["test"]["rmse"],
        "test_nll": evaluation["test"]["nll"],
        "verdict": evaluation["levels"]["verdict"],
    }


def summary(row: dict) -> str:
    """One line: the median (and range) over chains of each figure."""

    def med(key):
        values = row[key]
        return f"{np.nanmedian(values):.3g} [{np.nanmin(values):.3g}, {np.nanmax(values):.3g}]"

    return (
        f"{row['dataset']} seed {row['seed']}: per 1k gradients ESS_min "
        f"{med('ess_min_per_1000_gradients')}, ESS_p5 {med('ess_p5_per_1000_gradients')}, "
        f"ESS_median {med('ess_median_per_1000_gradients')}; ε {med('step_size')}; "
        f"divergent steps {sum(row['divergent_steps'])}; gradients/chain {row['gradients'][0]}; "
        f"test rmse {row['test_rmse']:.3g} nll {row['test_nll']:.3g}; {row['converged']}"
    )


FIGURES = (
    "ess_min_per_1000_gradients",
    "ess_p5_per_1000_gradients",
    "ess_median_per_1000_gradients",
    "step_size",
)


def ratios(before: list[dict], after: list[dict]) -> list[dict]:
    """After/before of the chains' median of each of :data:`FIGURES`, per dataset and seed (a
    chain that never moved has no ESS, NaN, and is left out)."""
    out = []
    for b in before:
        match = [a for a in after if (a["dataset"], a["seed"]) == (b["dataset"], b["seed"])]
        if match:
            row = {"dataset": b["dataset"], "seed": b["seed"]}
            for key in FIGURES:
                row[key] = float(np.nanmedian(match[0][key]) / np.nanmedian(b[key]))
            out.append(row)
    return out


def per_dataset(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per dataset: the geometric mean over seeds of each ratio of :func:`ratios`."""
    out = {}
    for dataset in dict.fromkeys(row["dataset"] for row in rows):
        mine = [row for row in rows if row["dataset"] == dataset]
        out[dataset] = {
            key: float(np.exp(np.mean([np.log(row[key]) for row in mine]))) for key in FIGURES
        }
        out[dataset]["seeds"] = len(mine)
    return out


def report(stored: dict) -> None:
    """The ratios after/before, per seed and per dataset, into ``stored`` and printed."""
    both = ratios(stored["before"]["rows"], stored["after"]["rows"])
    stored["ratios_after_over_before"] = both
    stored["ratios_per_dataset"] = per_dataset(both)
    lines = [(f"{row['dataset']} seed {row['seed']}", row) for row in both]
    lines += [
        (f"{name} (geometric mean of {row['seeds']} seeds)", row)
        for name, row in stored["ratios_per_dataset"].items()
    ]
    for name, row in lines:
        print(
            f"after/before {name}: per gradient ESS_min "
            f"{row['ess_min_per_1000_gradients']:.2f}x, ESS_p5 "
            f"{row['ess_p5_per_1000_gradients']:.2f}x, ESS_median "
            f"{row['ess_median_per_1000_gradients']:.2f}x; tuned ε {row['step_size']:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("before", "after"), required=True)
    parser.add_argument("--datasets", nargs="+", default=["yacht_0", "concrete_0"])
    parser.add_argument("--model", default="mlp_regression_small")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--num-tuning", type=int, default=None)
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--members", type=int, default=None)
    parser.add_argument("--work", default="/tmp/mclmc_spikes")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="recompute the stage's figures from its stored folders, without running",
    )
    args = parser.parse_args()

    out = Path(args.out)
    stored = json.loads(out.read_text()) if out.is_file() else {}
    print(f"stage {args.stage}, commit {commit()}, {processor_name()}", flush=True)
    if args.rescore:
        rows = [
            {**row, **score(Path(row["folder"]), row["dataset"], row["seed"])}
            for row in stored[args.stage]["rows"]
        ]
        stored[args.stage]["rows"] = rows
        for row in rows:
            print(summary(row), flush=True)
    else:
        rows = []
        for dataset in args.datasets:
            for seed in args.seeds:
                rows.append(measure(dataset, seed, args))
                print(summary(rows[-1]), flush=True)
        stored[args.stage] = {
            "commit": commit(),
            "source": str(Path(bnnkit.__file__).resolve().parent),
            "processor": processor_name(),
            "python": sys.version.split()[0],
            "rows": rows,
        }
    if "before" in stored and "after" in stored:
        report(stored)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
