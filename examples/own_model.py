"""Your own model and data: a Flax CNN on NumPy arrays, through HMC, a deep ensemble and VI.

Nothing here is registered with bnnkit: the network is a plain Flax module (``my_models.py``
beside this script) and the data are arrays in memory. ``bnnkit.Problem.from_arrays`` turns
them into a problem that every method, ``bnnkit.evaluate``, the report and the run directory
take as they take a named dataset and model.

    python examples/own_model.py            # about 7 minutes on 2 CPU cores
    python examples/own_model.py --small    # tiny runs: a check that the script runs

It checks what the tutorial states and exits with an error naming what differs: each run
records the model as the tutorial says (``my_models:SmallCNN`` with its arguments, or in
memory for an ``apply`` function), another process reading the HMC run back computes the same
test metrics, and at the full budget the HMC chains each pass their own checks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from my_models import SmallCNN

import bnnkit


def bar_images(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Your data: ``n`` noisy 8x8 grey images of a row (class 0), a column (1) or the
    diagonal (2), as float32 ``(n, 8, 8, 1)`` images and int32 labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n).astype(np.int32)
    images = rng.normal(0.0, 0.5, size=(n, 8, 8, 1)).astype(np.float32)
    for i, label in enumerate(labels):
        k = rng.integers(1, 7)
        if label == 0:
            images[i, k, :, 0] += 1.0
        elif label == 1:
            images[i, :, k, 0] += 1.0
        else:
            images[i, np.arange(8), np.arange(8), 0] += 1.0
    return images, labels


def check(holds: bool, what: str) -> None:
    """Stop with ``what`` when a statement of the tutorial does not hold."""
    if not holds:
        sys.exit(f"own_model.py: {what}")


def main(out: Path, small: bool = False) -> dict[str, dict]:
    x_train, y_train = bar_images(0, 48 if small else 300)
    x_test, y_test = bar_images(1, 16 if small else 200)

    # Integer labels make a classification problem (categorical likelihood, 3 classes); the
    # prior is N(0, 1/weight_decay) on every weight. The module's outputs must be the classes.
    problem = bnnkit.Problem.from_arrays(
        x_train,
        y_train,
        x_test,
        y_test,
        model=SmallCNN(features=4, num_outputs=3),
        weight_decay=1.0,
    )
    print(
        f"dataset {problem.dataset.name}, model {problem.config.model} {problem.config.model_args}"
    )

    iterations, burn_in, epochs = (6, 2, 3) if small else (600, 200, 200)
    configs = {
        # The reference: 4 HMC chains, each tuning its own step size, mass matrix and
        # trajectory length during burn-in (HMC's default: no knobs).
        "hmc": bnnkit.HMC(
            num_chains=4 if not small else 2, num_iterations=iterations, num_burn_in=burn_in
        ),
        "ensemble": bnnkit.Ensemble(
            init_step_size=1e-3, num_epochs=epochs, batch_size=16, num_members=5 if not small else 2
        ),
        "vi": bnnkit.VI(init_step_size=1e-2, num_epochs=epochs, batch_size=16),
    }
    results = {}
    for name, config in configs.items():
        bnnkit.run(problem, config, out / name, overwrite=True, progress=not small)
        reference = None if name == "hmc" else out / "hmc"
        # Reading a run imports a model outside bnnkit only when the reader names it.
        results[name] = bnnkit.evaluate(
            out / name, reference=reference, trust_model="my_models:SmallCNN"
        )
        check(
            json.loads((out / name / "run.json").read_text())["problem"]["model"]
            == "my_models:SmallCNN",
            f"the {name} run does not record my_models:SmallCNN",
        )
    verdict = results["hmc"]["levels"]
    print(f"\nHMC verdict: {verdict['verdict']} ({verdict['summary']})")
    # 600 iterations are enough for each chain to settle on its own (L1, stationary chains).
    if not small:
        chains = verdict["L1"]["figures"].get("chains") or []
        unsettled = [i for i, chain in enumerate(chains) if not chain["stationary"]]
        check(
            bool(chains) and not unsettled,
            f"the tutorial states that each HMC chain is stationary at this budget; chains "
            f"{unsettled} are not ({verdict['summary']})",
        )
    for name, result in results.items():
        against = result.get("reference", {})
        print(
            f"{name:<9} accuracy {result['test']['accuracy']:.3f}  "
            f"NLL {result['test']['nll']:.3f}  "
            f"agreement with HMC {against.get('agreement', 1.0):.3f}  "
            f"TV to HMC {against.get('total_variation', 0.0):.3f}"
        )

    # Another process reads the run back from its directory alone: the run stored the arrays
    # (data.npz) and recorded the model as my_models:SmallCNN with its arguments. Here, the
    # command line's `bnnkit evaluate`, with this folder on the Python path.
    here = str(Path(__file__).resolve().parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    # Naming the model on the command is what allows it to be imported.
    (out / "hmc" / "evaluation.json").unlink()  # written again by the other process
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bnnkit.cli",
            "evaluate",
            str(out / "hmc"),
            "--model",
            "my_models:SmallCNN",
        ],
        env=env,
        check=True,
    )
    again = json.loads((out / "hmc" / "evaluation.json").read_text())["test"]
    check(
        all(
            np.isclose(again[k], v, rtol=1e-6)
            for k, v in results["hmc"]["test"].items()
            if isinstance(v, float)
        ),
        f"another process read the HMC run back with other test metrics: {again} against "
        f"{results['hmc']['test']}",
    )

    # A model as an apply(params, x) function and its starting parameters works too. It
    # cannot be imported by another process, so evaluating such a run later takes the
    # problem back: bnnkit.evaluate(run_dir, problem=...).
    def linear(params, x):
        return x.reshape((x.shape[0], -1)) @ params["w"] + params["b"]

    start = {"w": jnp.zeros((64, 3)), "b": jnp.zeros(3)}
    logistic = bnnkit.Problem.from_arrays(
        x_train, y_train, x_test, y_test, model=linear, params=start, weight_decay=1.0
    )
    bnnkit.run(
        logistic,
        bnnkit.SGD(init_step_size=1e-3, num_epochs=epochs, batch_size=16),
        out / "linear",
        overwrite=True,
        progress=False,
    )
    results["linear"] = bnnkit.evaluate(out / "linear", problem=logistic)
    recorded = json.loads((out / "linear" / "run.json").read_text())["problem"]["model"]
    check(recorded.startswith("<in memory"), f"the apply function is recorded as {recorded!r}")
    print(f"linear    accuracy {results['linear']['test']['accuracy']:.3f}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny runs (a quick check)")
    parser.add_argument(
        "--out", type=Path, default=Path("runs/own_model"), help="folder for the runs"
    )
    args = parser.parse_args()
    main(args.out, small=args.small)
