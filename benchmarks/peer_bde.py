"""bnnkit's reference posterior against the installable MILE package, split by split.

The peer is ``sklearn-contrib-bde`` (Sommer et al., "Microcanonical Langevin Ensembles",
ICLR 2025: a deep ensemble, then unadjusted MCLMC from each member on BlackJAX). It pins
``blackjax==1.2.2`` while bnnkit needs a newer BlackJAX, so it lives in its own virtual
environment and runs in a subprocess of that interpreter (``--peer-python``); the benchmark is
skipped for the peer when that interpreter cannot import ``bde``. It is never a dependency.

For every dataset and standard split, one after the other on the same machine:

- ``peer``: ``BdeRegressor`` with the settings of its README's regression example (two hidden
  layers of 16, 8 members, 200 epochs with early stopping on 15 % of the training data, 5,000
  warm-up and 2,000 sampling steps thinned by 2, its N(0, 1) prior, heteroscedastic
  Gaussian NLL), on inputs and targets standardised with training statistics;
- ``bnnkit (like for like)``: ``bnnkit reference`` with the peer's network
  (``mlp_regression_2x16``) and prior (N(0, 1): ``--weight-decay 1``), everything else at its
  defaults;
- ``bnnkit``: ``bnnkit reference`` at its defaults with bnnkit's UCI model
  (``mlp_regression_small``);
- ``n01``, ``precision3`` and ``n01_floor``: the same under N(0, 1) (``--weight-decay 1``),
  under a Gaussian of precision 3, and under N(0, 1) with the noise std floored at 1 % of the
  targets' sd (``--min-noise-std 0.01``), for the choice of the default prior, and
  ``chains16``: the default at the same gradients spent on 16 chains of 250 + 100 iterations,
  and ``members16``: twice the default's chains at its length, 16 x (500 + 200) (none run
  unless named).

Each runs in a fresh interpreter, timed from its start to its predictions (imports and
compilation included, as a user waits for them), on the same 2 threads and the same number of
JAX CPU devices (``--devices``, by default bnnkit's command-line default, one per core: the
peer gets them as its README says, ``XLA_FLAGS=--xla_force_host_platform_device_count=N``,
and spreads its members over them; bnnkit splits its chains over them). All are scored
by the same code: test log-likelihood per point of the equal-weight mixture of every draw's
Gaussian, and RMSE of the predictive mean, in the target's original units. Both are judged by
the same checks of each chain on its own too (the verdict's level 1,
:func:`bnnkit.metrics.stationarity.stationarity`: each chain's split R-hat over its quarters
and its own ESS of the predictive means on the test points, and the drift of its test LPD;
the peer's chain is a member's 1,000 thinned draws, bnnkit's its 200 kept draws): how many
chains are stationary on their own, and the median over chains of the ESS at a chain's 5 %
slowest test predictions.

    python benchmarks/peer_bde.py --peer-python /path/to/bde-venv/bin/python \\
        [--datasets yacht boston energy concrete wine-quality-red] [--splits 5] \\
        [--out benchmarks/results/peer_bde.json]
    python benchmarks/peer_bde.py --contenders default --compile-cache  # a user's later runs
    python benchmarks/peer_bde.py --combine A.json B.json  # one table of runs made apart

Where every test target is a whole number (wine-quality-red's scores of 3 to 8), each row also
gets ``ll_integer``: the log probability of the observed score, the predictive's mass on
``[y − ½, y + ½]`` (:func:`bnnkit.metrics.predictive.nll_gaussian_mixture_binned`). A
density on such targets rewards narrow spikes on the grid without bound; the mass does not.

Each bnnkit row also records its reference levels (:mod:`bnnkit.metrics.levels`: certified,
reproducible or not a reference), counted per dataset in the table.

Targets (means over splits 0-4): bnnkit's test log-likelihood at least the peer's on 4 of the 5
datasets and its RMSE at most the peer's on 3 of 5, at no more than half the peer's wall time
per split. Compare within one run; times depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bnnkit import cpu_devices

DATASETS = ("yacht", "boston", "energy", "concrete", "wine-quality-red")
#: The peer's README regression example.
PEER_SETTINGS = {
    "hidden_layers": [16, 16],
    "n_members": 8,
    "epochs": 200,
    "validation_split": 0.15,
    "lr": 1e-3,
    "weight_decay": 1e-4,
    "warmup_steps": 5000,
    "n_samples": 2000,
    "n_thinning": 2,
    "patience": 10,
}

PEER_SCRIPT = r"""
import json, sys
import numpy as np
import jax.numpy as jnp
from bde import BdeRegressor
from bde.loss import GaussianNLL
from scipy.special import softplus

data = np.load(sys.argv[1])
settings = json.loads(sys.argv[2])
x, y, xt = data["x_train"], data["y_train"], data["x_test"]
xm, xs = x.mean(0), x.std(0)
xs[xs == 0] = 1.0
ym, ys = y.mean(), y.std()
model = BdeRegressor(loss=GaussianNLL(), **settings)
model.fit(x=jnp.asarray((x - xm) / xs, jnp.float32),
          y=jnp.asarray(((y - ym) / ys)[:, None], jnp.float32))
raw = np.asarray(model.predict(jnp.asarray((xt - xm) / xs, jnp.float32), raw=True), np.float64)
mean = raw[..., 0].reshape(-1, len(xt)) * ys + ym
std = (softplus(raw[..., 1]) + 1e-6).reshape(-1, len(xt)) * ys  # the peer's own link
np.savez(sys.argv[3], mean=mean, std=std)
"""


#: The contenders by key: their name in the table, and (model, flags) for bnnkit's (``None``:
#: the peer). Like for like takes the peer's N(0, 1) prior, which is not bnnkit's default on a
#: network that outputs its noise std.
CONTENDERS = {
    "peer": ("peer (MILE, 2x16)", None),
    "like": ("bnnkit, like for like (2x16)", ("mlp_regression_2x16", ("--weight-decay", "1"))),
    "default": ("bnnkit (default model)", ("mlp_regression_small", ())),
    # The default model under other priors, for the choice of its default (precision 3).
    "n01": ("bnnkit, N(0, 1) (default model)", ("mlp_regression_small", ("--weight-decay", "1"))),
    "precision3": (
        "bnnkit, precision 3 (default model)",
        ("mlp_regression_small", ("--weight-decay", "3")),
    ),
    # The chains' budget spent on more, shorter chains: 16 x (250 + 100) iterations, the
    # gradients of the default's 8 x (500 + 200).
    "chains16": (
        "bnnkit, 16 x (250 + 100) (default model)",
        (
            "mlp_regression_small",
            ("--members", "16", "--num-tuning", "250", "--num-samples", "100"),
        ),
    ),
    # Twice the chains at the default's length: 16 x (500 + 200), twice its gradients.
    "members16": (
        "bnnkit, 16 x (500 + 200) (default model)",
        ("mlp_regression_small", ("--members", "16")),
    ),
    # N(0, 1) with the network's noise std floored at 1 % of the targets' sd: no prior mass
    # below the prior check's floor, so the posterior cannot sharpen without end.
    "n01_floor": (
        "bnnkit, N(0, 1), noise std ≥ 0.01 sd (default model)",
        ("mlp_regression_small", ("--weight-decay", "1", "--min-noise-std", "0.01")),
    ),
}


#: The contenders of a run that names none: the peer and bnnkit's two.
DEFAULT_CONTENDERS = ("peer", "like", "default")


def peer_available(python: str) -> bool:
    """Whether ``python`` can import the peer package."""
    try:
        return (
            subprocess.run(
                [python, "-c", "import bde"], capture_output=True, timeout=120
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


def split_arrays(dataset: str, split: int) -> dict[str, np.ndarray]:
    """A standard split in original units (bnnkit's bundled tables and splits)."""
    from bnnkit.data.uci import load

    raw = load(f"{dataset}_{split}", standardize_data=False)
    return {
        "x_train": raw.x_train,
        "y_train": raw.y_train,
        "x_test": raw.x_test,
        "y_test": raw.y_test,
    }


def run_peer(
    python: str, dataset: str, split: int, seed: int, workdir: Path, devices: int = 1
) -> dict:
    from bnnkit.metrics.predictive import nll_gaussian_mixture, rmse

    arrays = split_arrays(dataset, split)
    data, out = workdir / "split.npz", workdir / "peer.npz"
    np.savez(data, **arrays)
    settings = {**PEER_SETTINGS, "seed": seed}
    t0 = time.perf_counter()
    done = subprocess.run(
        [python, "-c", PEER_SCRIPT, str(data), json.dumps(settings), str(out)],
        capture_output=True,
        text=True,
        env=_threads(devices=devices, peer=True),
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"the peer failed on {dataset} split {split}: {done.stderr[-2000:]}")
    predicted = np.load(out)
    return {
        "ll": -nll_gaussian_mixture(predicted["mean"], predicted["std"], arrays["y_test"]),
        "rmse": rmse(predicted["mean"].mean(0), arrays["y_test"]),
        "seconds": seconds,
        **integer_score(predicted["mean"], predicted["std"], arrays["y_test"]),
        **peer_within(predicted["mean"], predicted["std"], arrays["y_test"]),
    }


def integer_score(mean: np.ndarray, std: np.ndarray, y: np.ndarray) -> dict:
    """``ll_integer`` when every target is a whole number (see the module's docstring)."""
    from bnnkit.metrics.predictive import nll_gaussian_mixture_binned

    if not np.array_equal(y, np.round(y)):
        return {}
    return {"ll_integer": -nll_gaussian_mixture_binned(mean, std, y)}


def peer_within(mean: np.ndarray, std: np.ndarray, y: np.ndarray) -> dict:
    """bnnkit's within-chain checks on the peer's draws (member-major: its raw predictions are
    (members, draws, points)): the predictive means and each chain's running log predictive
    density, as ``bnnkit evaluate`` judges its own chains (the peer logs no log posterior)."""
    from scipy import stats

    from bnnkit.metrics.levels import functionals
    from bnnkit.metrics.stationarity import stationarity

    members = PEER_SETTINGS["n_members"]
    means = mean.reshape(members, -1, mean.shape[-1])
    log_density = stats.norm.logpdf(y, means, std.reshape(means.shape))
    checks = stationarity(means, functionals=functionals(log_density)).figures["chains"]
    return within_summary([c["stationary"] for c in checks], [c["ess_p5"] for c in checks])


def within_summary(mixed: list[bool], ess_p5: list[float]) -> dict:
    """How many chains mixed on their own, and the median over chains of each chain's ESS on
    its 5 % slowest test predictions."""
    return {
        "chains_mixed": int(sum(mixed)),
        "chains": len(mixed),
        "ess_p5": float(np.median(ess_p5)),
    }


def reference_command(dataset: str, model: str, seed: int, folder: Path, *extra: str) -> list:
    """``bnnkit reference`` on a split (``yacht_0``) into a new ``folder``, in this
    interpreter, without a progress bar, with ``extra`` flags."""
    return [
        sys.executable,
        "-m",
        "bnnkit.cli",
        "reference",
        "--dataset",
        dataset,
        "--model",
        model,
        "--seed",
        str(seed),
        "--dir",
        str(folder),
        "--overwrite",
        "--no-progress",
        *extra,
    ]


def run_bnnkit(
    dataset: str,
    split: int,
    model: str,
    seed: int,
    workdir: Path,
    extra: tuple[str, ...] = (),
    cache: str = "off",
    devices: int = 1,
) -> dict:
    folder = workdir / f"ref_{model}"
    command = reference_command(f"{dataset}_{split}", model, seed, folder, "--json", *extra)
    t0 = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, env=_threads(cache, devices=devices)
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(
            f"bnnkit reference failed on {dataset} split {split}: {done.stderr[-2000:]}"
        )
    result = json.loads(done.stdout)
    predicted = np.load(folder / "chains" / "predictions" / "test.npz")
    levels = result.get("levels", {})
    within = ((levels.get("L1") or {}).get("figures") or {}).get("chains") or []
    return {
        "ll": -result["test"]["nll"],
        "rmse": result["test"]["rmse"],
        "seconds": seconds,
        **integer_score(
            predicted["means"], predicted["stds"], split_arrays(dataset, split)["y_test"]
        ),
        "levels": levels.get("verdict", "not recorded"),
        "levels_failed": levels.get("failed", []),
        **within_summary([c["stationary"] for c in within], [c["ess_p5"] for c in within]),
    }


def _threads(cache: str = "off", *, devices: int = 1, peer: bool = False) -> dict[str, str]:
    """The same CPU threads and JAX CPU devices for every contender, and bnnkit's compilation
    cache (``off``, or the folder of one made for this benchmark)."""
    # By default every contender compiles its programs in every run: bnnkit's command-line
    # compilation cache (on by default, a user's second run) is off, as the peer has none.
    # --compile-cache measures bnnkit as a user's runs after their first meet it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env.pop("XLA_FLAGS", None)
    if peer and devices > 1:  # as the peer's README asks, before JAX starts
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return {
        **env,
        cpu_devices.ENV: str(devices),
        "OMP_NUM_THREADS": "2",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "BNNKIT_COMPILE_CACHE": cache,
    }


def level_counts(rows: list[dict]) -> str:
    """How many of ``rows`` are certified, reproducible and not a reference
    (:mod:`bnnkit.metrics.levels`); "—" for the peer, which the levels do not judge."""
    if not all("levels" in r for r in rows):
        return "—"
    verdicts = [r["levels"] for r in rows]
    return " / ".join(
        str(verdicts.count(v)) for v in ("certified", "reproducible", "not a reference")
    )


def against_peer(results: dict) -> str:
    """Split by split against the peer, as markdown: per bnnkit contender and dataset, on how
    many splits its test LL (the integer score's where the targets are whole numbers) is at
    least the peer's and its RMSE at most the peer's, and whether its mean LL over those
    splits is. Empty without the peer's rows."""
    peer_name = CONTENDERS["peer"][0]
    lines = [
        "| contender | dataset | splits | LL ≥ peer | RMSE ≤ peer | mean LL ≥ peer |",
        "|---|---|---:|---:|---:|---|",
    ]
    names = sorted({n for c in results.values() for n in c if n != peer_name})
    for name in names:
        for dataset, contenders in results.items():
            peer = {r["split"]: r for r in contenders.get(peer_name, [])}
            ours = [r for r in contenders.get(name, []) if r["split"] in peer]
            if not ours:
                continue
            key = "ll_integer" if all("ll_integer" in r for r in ours) else "ll"
            wins = sum(r[key] >= peer[r["split"]][key] for r in ours)
            closer = sum(r["rmse"] <= peer[r["split"]]["rmse"] for r in ours)
            mean = np.mean([r[key] for r in ours]) >= np.mean([peer[r["split"]][key] for r in ours])
            score = " (integer score)" if key == "ll_integer" else ""
            lines.append(
                f"| {name} | {dataset} | {len(ours)} | {wins}{score} | {closer} | "
                f"{'yes' if mean else 'no'} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


def table(results: dict) -> str:
    """Mean over splits per dataset and contender, as markdown."""
    lines = [
        "| dataset | splits | contender | test LL | LL of the integer score | RMSE | "
        "s / split | chains mixed | chain ESS p5 | levels (C / R / N) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dataset, contenders in results.items():
        for name, rows in contenders.items():
            if not rows:
                continue
            ll = np.array([r["ll"] for r in rows])
            rm = np.array([r["rmse"] for r in rows])
            se = ll.std(ddof=1) / np.sqrt(len(ll)) if len(ll) > 1 else float("nan")
            mixed = (
                f"{sum(r['chains_mixed'] for r in rows)} / {sum(r['chains'] for r in rows)}"
                if all("chains" in r for r in rows)
                else "—"
            )
            ess = (
                f"{np.median([r['ess_p5'] for r in rows]):.1f}"
                if all("ess_p5" in r for r in rows)
                else "—"
            )
            integer = (
                [r["ll_integer"] for r in rows] if all("ll_integer" in r for r in rows) else []
            )
            score = (
                f"{np.mean(integer):.3f} ± {np.std(integer, ddof=1) / np.sqrt(len(rows)):.3f}"
                if len(integer) > 1
                else f"{integer[0]:.3f}"
                if integer
                else "—"
            )
            lines.append(
                f"| {dataset} | {len(rows)} | {name} | {ll.mean():.3f} ± {se:.3f} | "
                f"{score} | {rm.mean():.3f} | "
                f"{np.mean([r['seconds'] for r in rows]):.1f} | "
                f"{mixed} | {ess} | {level_counts(rows)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--peer-python",
        default=sys.executable,
        help="an interpreter with sklearn-contrib-bde installed",
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument(
        "--contenders",
        nargs="+",
        default=list(DEFAULT_CONTENDERS),
        choices=list(CONTENDERS),
        help="which contenders run (default: peer, like, default)",
    )
    parser.add_argument(
        "--compile-cache",
        action="store_true",
        help="bnnkit with its command-line compilation cache on, in a folder new to this "
        "benchmark: each dataset's first split compiles, the later ones reuse the programs "
        "(a user's runs after their first)",
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=cpu_devices.device_count({}),
        help="JAX CPU devices for every contender (default: bnnkit's command-line default, "
        "one per core, a power of two at most 8; 1: one device each)",
    )
    parser.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="keep bnnkit's references in DIR/<contender key>/<dataset>_<split> (for "
        "bnnkit evaluate, or a study judging them again); by default they are deleted",
    )
    parser.add_argument(
        "--combine",
        nargs="+",
        default=None,
        metavar="JSON",
        help="print the table of these result files (splits run apart) and exit",
    )
    args = parser.parse_args()
    if args.combine:
        merged: dict = {}
        for path in args.combine:
            for dataset, contenders in json.loads(Path(path).read_text()).items():
                for name, rows in contenders.items():
                    merged.setdefault(dataset, {}).setdefault(name, []).extend(rows)
        print(table(merged))
        print(against_peer(merged))
        return
    have_peer = peer_available(args.peer_python)
    if not have_peer:
        print(
            f"sklearn-contrib-bde is not importable by {args.peer_python}: the peer is "
            "skipped (install it in its own virtual environment and pass --peer-python)"
        )
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{args.devices} JAX CPU device(s) per contender"
    )
    contenders = {
        name + (", compile cache" if args.compile_cache and model else ""): (key, model)
        for key, (name, model) in CONTENDERS.items()
        if key in args.contenders
    }
    cache = tempfile.mkdtemp(prefix="bnnkit-peer-cache-") if args.compile_cache else "off"
    results: dict = {d: {name: [] for name in contenders} for d in args.datasets}
    for split in range(args.first_split, args.first_split + args.splits):
        for dataset in args.datasets:
            with tempfile.TemporaryDirectory() as tmp:
                for name, (key, model) in contenders.items():
                    if model is None:
                        if not have_peer:
                            continue
                        row = run_peer(
                            args.peer_python, dataset, split, split, Path(tmp), args.devices
                        )
                    else:
                        workdir = Path(tmp)
                        if args.keep:
                            workdir = Path(args.keep) / key / f"{dataset}_{split}"
                            workdir.mkdir(parents=True, exist_ok=True)
                        row = run_bnnkit(
                            dataset, split, model[0], split, workdir, model[1], cache, args.devices
                        )
                    results[dataset][name].append({"split": split, **row})
                    integer = (
                        f" (integer score {row['ll_integer']:.3f})" if "ll_integer" in row else ""
                    )
                    print(
                        f"{dataset} {split} {name}: LL {row['ll']:.3f}{integer} "
                        f"RMSE {row['rmse']:.3f} "
                        f"{row['seconds']:.1f} s {row.get('levels', '')} chains mixed "
                        f"{row['chains_mixed']}/{row['chains']}, ESS p5 {row['ess_p5']:.1f}",
                        flush=True,
                    )
            if args.out:
                Path(args.out).write_text(json.dumps(results, indent=2))
    if args.compile_cache:
        shutil.rmtree(cache, ignore_errors=True)
    print(table(results))
    print(against_peer(results))


if __name__ == "__main__":
    main()
