"""``bnnkit evaluate`` on 2 chains x 20 yacht draws: wall time / the predictions it needs.

A short HMC run (2 chains, 20 kept iterations, ``mlp_regression_small``) is written to a
temporary folder, then each of these is timed in a fresh process (first call: XLA
compilation included, as a user's ``bnnkit evaluate`` pays it) and again in that process:

- ``evaluate``: ``bnnkit.evaluation.evaluate(run)`` (reading the run, every test prediction,
  metrics, R-hat and ESS in weight and function space, the convergence verdict, writing
  ``evaluation.json``), first call (compilations included) and a second call;
- ``predictions``: the floor, ``run_prediction`` alone on the same run (the forward passes
  every evaluation must make), first and second call.

The ratio evaluate / predictions says what the diagnostics and I/O add.

    python benchmarks/evaluate_speed.py

Compare ratios within one run; absolute times depend on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bnnkit.evaluation import evaluate, run_prediction
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import load_run, run


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(what: str, run_dir: Path) -> tuple[float, float]:
    """First and second call of ``what`` on ``run_dir``, in this process."""

    def predictions():
        record, problem, posterior, _ = load_run(run_dir)
        run_prediction(record, problem, posterior, problem.dataset.x_test).mean.sum()

    fn = predictions if what == "predictions" else lambda: evaluate(run_dir)
    return timed(fn), timed(fn)


def main() -> None:
    if len(sys.argv) == 3:  # the child: one measurement in a fresh process
        print(json.dumps(measure(sys.argv[1], Path(sys.argv[2]))))
        return
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "yacht"
        run(
            ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35),
            hmc.Config(
                step_size=1e-3, trajectory_len=0.02, num_iterations=24, num_burn_in=4, num_chains=2
            ),
            run_dir,
            progress=False,
        )
        times = {
            what: json.loads(
                subprocess.run(
                    [sys.executable, __file__, what, str(run_dir)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.splitlines()[-1]
            )
            for what in ("predictions", "evaluate")
        }
    (floor_first, floor_second), (first, second) = times["predictions"], times["evaluate"]
    print("bnnkit evaluate, 2 chains x 20 draws, yacht_0 mlp_regression_small")
    print(f"{'':<12} {'first call s':>12} {'second s':>9}")
    print(f"{'predictions':<12} {floor_first:12.2f} {floor_second:9.2f}")
    print(f"{'evaluate':<12} {first:12.2f} {second:9.2f}")
    print(
        f"evaluate / predictions: first call {first / floor_first:.2f}, "
        f"second {second / floor_second:.2f}"
    )


if __name__ == "__main__":
    main()
