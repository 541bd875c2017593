"""A run never passes silently on numbers that left the reals: every method, driven by a step
size that cannot work, either stops in one line naming the epoch and what to try (optimisers
and SG samplers, whose parameters become NaN), or rejects every proposal and says so (exact
MCMC, whose accept/reject step keeps the chain finite); nothing non-finite is ever kept.

The methods come from ``METHODS``, so a new method is covered without editing this file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.inference import METHODS

PROBLEM = ["--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.35", "--no-progress"]


def fields(name: str) -> set[str]:
    return {f.name for f in dataclasses.fields(METHODS[name].Config)}


def required(name: str) -> set[str]:
    return {
        f.name
        for f in dataclasses.fields(METHODS[name].Config)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


def all_finite(run: Path) -> bool:
    files = [run / "state.npz", *sorted((run / "samples").glob("sample_*.npz"))]
    # A sampler's tuning statistics may hold ±inf as "none yet" (MCLMC: the log of a zero
    # weight, no step-size cap found); positions, samples and diagnostics must be finite.
    return all(
        np.all(np.isfinite(v))
        for f in files
        if f.exists()
        for k, v in storage.load_arrays(f).items()
        if v.dtype.kind == "f" and not k.startswith("tuning/")
    )


#: Methods whose run here costs several times the others' (a full-batch sampler's block
#: program, dropout's network): with the slow checks; every other method stays in make test.
SLOW_METHODS = {"mclmc", "nuts", "dropout"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_METHODS else []) for n in METHODS],
)
def test_a_step_size_that_diverges_is_never_silent(name, tmp_path, capsys):
    run = tmp_path / "run"
    have = fields(name)
    # MC dropout refuses a network without dropout; its MLP takes a smaller step than linear.
    problem, sane = (
        ([*PROBLEM[:3], "mlp_regression_small_dropout", *PROBLEM[4:]], "1e-5")
        if (name == "dropout")
        else (PROBLEM, "1e-3")
    )
    if "init_step_size" in have:  # optimisers and SG samplers: the parameters become NaN
        argv = [
            name,
            *problem,
            "--init-step-size",
            "1e30",
            "--num-epochs",
            "3",
            "--batch-size",
            "32",
            "--no-evaluate",
            "--dir",
            str(run),
        ]
        if "num_members" in have:
            argv += ["--num-members", "2"]
        if "num_burn_in" in required(name):  # SWAG: SGD epochs before it collects
            argv += ["--num-burn-in", "1"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
        assert "became NaN or infinite in epoch 1 of 3" in err, err
        assert "smaller --init-step-size" in err, err
        assert not run.exists()  # nothing finite was reached, so nothing is kept
        # ... so the same command, its value corrected, starts afresh.
        assert main([a if a != "1e30" else sane for a in argv]) == 0
    elif "step_size" in have:  # exact MCMC: every proposal is rejected, and it says so
        # No burn-in: a burn-in would search a first step size and leave 1e30 behind.
        argv = [
            name,
            *PROBLEM,
            "--step-size",
            "1e30",
            "--num-iterations",
            "3",
            "--num-burn-in",
            "0",
            "--dir",
            str(run),
        ]
        if "trajectory_len" in have:
            argv += ["--trajectory-len", "1e30"]
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert "divergences" in err and "smaller --step-size" in err, err
        assert all_finite(run)
        record = json.loads((run / "run.json").read_text())
        assert record["status"] == "finished"
    else:
        pytest.skip(
            f"{name} has no step size: it fits a finished run, and refuses a diverged "
            "one (test_a_run_that_diverges_later_keeps_its_last_finite_state)"
        )


def test_a_run_that_diverges_later_keeps_its_last_finite_state(tmp_path, capsys):
    """SGD with a weight decay of 30 on a small MLP goes NaN after some epochs: the run stops
    there, naming the epoch and what to try, and keeps only finite files that verify."""
    run = tmp_path / "run"
    argv = [
        "sgd",
        "--dataset",
        "yacht_0",
        "--model",
        "mlp_regression_small",
        "--weight-decay",
        "30",
        "--init-step-size",
        "1e-3",
        "--num-epochs",
        "20",
        "--batch-size",
        "32",
        "--checkpoint-every",
        "1",
        "--no-progress",
        "--dir",
        str(run),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "became NaN or infinite in epoch" in err, err
    assert "keeps the last finite state" in err and "--clip-grad-norm" in err, err
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "diverged" and record["diverged"]["unit"] >= 2, record
    assert all_finite(run)
    assert main(["verify", str(run)]) == 0
    capsys.readouterr()
    before = {str(p): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    # A resume would repeat the same steps and diverge again; reading it needs kept samples;
    # a method started from it needs a finished run. Each refuses in one line, writing nothing.
    for argv_ in (
        [*argv, "--resume"],
        ["evaluate", str(run)],
        ["laplace", "--map-run", str(run), "--dir", str(tmp_path / "laplace")],
    ):
        assert main(argv_) == 2, argv_
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "diverged" in err, (argv_, err)
        assert "complete it with --resume" not in err, err
        assert {str(p): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
    assert not (tmp_path / "laplace").exists()


def test_a_resumed_run_that_diverges_is_marked_so_and_keeps_its_state(tmp_path, capsys):
    """Killed after epoch 8, the weight-decay run above resumes and diverges in its first
    resumed epoch, before it writes anything new: its record says "diverged" (not "running"),
    its directory keeps the state it resumed from, and the message says so."""
    import os
    import subprocess
    import sys

    run = tmp_path / "run"
    argv = [
        "sgd",
        "--dataset",
        "yacht_0",
        "--model",
        "mlp_regression_small",
        "--weight-decay",
        "30",
        "--init-step-size",
        "1e-3",
        "--num-epochs",
        "20",
        "--batch-size",
        "32",
        "--checkpoint-every",
        "1",
        "--no-progress",
        "--no-evaluate",
        "--dir",
        str(run),
    ]
    killed = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *argv],
        env={**os.environ, "BNNKIT_KILL_AT": "unit-done:8"},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "keeps the last finite state" in err, err
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "diverged" and record["diverged"]["unit"] >= 8, record
    assert all_finite(run)
    assert main(["verify", str(run)]) == 0
