"""Runs that stop at a time budget and runs that extend themselves until each chain mixes:
the samples are always those of one uninterrupted run of the same length, bit for bit."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from bnnkit import runs, storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from bnnkit.runs import extension as extension_lib
from bnnkit.runs.extension import next_length
from cli_checks import stored_files as stored


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A well-conditioned linear regression: 3 weights whose posterior HMC mixes in a few
    iterations (40 points, 2 standardised inputs, noise 0.5, a N(0, 1) prior)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -0.5]) + 0.5 * rng.normal(size=50)).astype(np.float32)
    path = tmp_path_factory.mktemp("data") / "line.npz"
    np.savez(path, x_train=x[:40], y_train=y[:40], x_test=x[40:], y_test=y[40:])
    return str(path)


def problem(data: str) -> ProblemConfig:
    return ProblemConfig(dataset=data, model="linear", noise_std=0.5, weight_decay=1.0)


def config(num_iterations: int, **changes) -> hmc.Config:
    # Jittered trajectories (--adapt mass): a fixed one near a multiple of the Gaussian
    # posterior's half period would return each chain close to where it started.
    return hmc.Config(
        step_size=0.05,
        trajectory_len=0.3,
        adapt="mass",
        num_iterations=num_iterations,
        num_burn_in=8,
        num_chains=2,
        seed=3,
        **changes,
    )


def assert_identical(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_blocks_grow_the_kept_iterations_by_half():
    assert next_length(20, 8) == 8 + 18  # 12 kept -> 18
    assert next_length(9, 8) == 10  # one kept iteration grows by at least one
    assert next_length(108, 8) == 158


def test_the_settings_are_resumable_and_checked():
    assert {"until", "max_time"} <= hmc.Config.resumable()
    assert config(10, max_time="1h30m").max_time == 5400.0
    with pytest.raises(ConfigError, match="--until needs --max-time"):
        config(10, until="reproducible")
    with pytest.raises(
        ConfigError, match="unknown --until 'mixed'; allowed: reproducible, certified"
    ):
        config(10, until="mixed", max_time=60)
    with pytest.raises(ConfigError, match="--max-time '30 minutes' is not a duration"):
        config(10, max_time="30 minutes")
    with pytest.raises(ConfigError, match="out of range"):
        config(10, max_time=0)


@pytest.mark.slow
def test_a_time_budget_stops_cleanly_and_the_resume_is_the_uninterrupted_run(tmp_path, data):
    whole = tmp_path / "whole"
    runs.run(problem(data), config(30), str(whole), progress=False)
    path = tmp_path / "run"
    # A budget of 1 ns has ended after the first iteration.
    result = runs.run(problem(data), config(30, max_time=1e-9), str(path), progress=False)
    assert result.stopped == "the time budget ended after 1 of 30 iterations"
    record = RunDir(path).read_record()
    assert record["status"] == "stopped" and record["stopped"]["units_done"] == 1
    assert storage.load_arrays(RunDir(path).state_file)["__unit__"] == 1
    runs.run(problem(data), config(30), str(path), resume=True, progress=False)
    record = RunDir(path).read_record()
    assert record["status"] == "finished" and "stopped" not in record
    assert_identical(stored(path), stored(whole))


@pytest.mark.slow
def test_until_extends_to_the_bits_of_one_longer_run(tmp_path, data, capsys):
    path = tmp_path / "run"
    # 12 kept iterations are fewer than the 16 level 1 needs to judge a chain, so the first
    # block cannot be certified; the draws of the 3-d Gaussian posterior are nearly independent
    # (300 kept iterations give a per-chain ESS of about 300), so a few blocks suffice, well
    # within the 10-minute budget.
    argv = [
        "hmc",
        "--dataset",
        data,
        "--model",
        "linear",
        "--noise-std",
        "0.5",
        "--weight-decay",
        "1",
        "--step-size",
        "0.05",
        "--trajectory-len",
        "0.3",
        "--adapt",
        "mass",
        "--num-iterations",
        "20",
        "--num-burn-in",
        "8",
        "--num-chains",
        "2",
        "--seed",
        "3",
        "--until",
        "certified",
        "--max-time",
        "10m",
        "--dir",
        str(path),
        "--log-every",
        "1000",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # Each block that did not end the run says so in a few short lines.
    starts = [i for i, line in enumerate(out.splitlines()) if line.startswith("block ")]
    assert starts and all(
        len(line) <= 80 for line in out.splitlines() if line.startswith(("block ", "  "))
    )
    assert re.search(
        r"^block 1: 20 iterations, 12 kept per chain\n(  .+\n)+  sampled in .+; "
        r"extending to 26 iterations$",
        out,
        re.MULTILINE,
    ), out
    assert re.search(r"^  verdict not a reference \(L0 pass, L1 FAIL", out, re.MULTILINE), out
    record = RunDir(path).read_record()
    extension = record["until_converged"]
    blocks = [block["iterations"] for block in extension["blocks"]]
    final = blocks[-1]
    assert extension["holds"] and len(blocks) >= 2
    assert blocks == [20, *(next_length(n, 8) for n in blocks[:-1])]
    assert f"verdict certified after {final} iterations" in out
    assert record["status"] == "finished" and record["method_config"]["num_iterations"] == final
    assert all(block["verdict"] != "certified" for block in extension["blocks"][:-1])
    assert extension["blocks"][-1]["verdict"] == extension["reached"] == "certified"
    # What evaluate then says agrees.
    assert evaluate(path, write=False)["levels"]["verdict"] == "certified"
    whole = tmp_path / "whole"
    runs.run(problem(data), config(final), str(whole), progress=False)
    assert_identical(stored(path), stored(whole))


@pytest.mark.slow
def test_until_resumes_past_the_stored_length(tmp_path, data):
    # A run already extended to 40 iterations, resumed with its first --num-iterations:
    # the first block is the stored 40, not 20 (which --resume alone would refuse).
    # With a budget that has ended at once, nothing runs after that first block's verdict.
    path = tmp_path / "run"
    runs.run(problem(data), config(40), str(path), progress=False)
    budget = dict(until="certified", max_time=1e-9)
    result = runs.run(problem(data), config(20, **budget), str(path), resume=True, progress=False)
    assert [b["iterations"] for b in result.until_converged["blocks"]] == [40]
    assert RunDir(path).read_record()["status"] == "finished"
    if not result.until_converged["holds"]:
        outcome = result.until_converged["outcome"]
        assert outcome.startswith("time budget of 0 s ended at 40 iterations, verdict "), outcome
        assert "certified):\n  L" in outcome, outcome  # each failing level, its problem
        assert all(len(line) <= 80 for line in outcome.splitlines()), outcome


def test_sample_refuses_the_driver_settings():
    start = {"x": np.zeros((2, 3))}
    with pytest.raises(ConfigError, match="max_time extend or stop runs of the run driver"):
        runs.sample(
            lambda p: -0.5 * (p["x"] ** 2).sum(),
            start,
            dataclasses.replace(config(20), max_time=60.0),
        )


def test_each_block_counts_the_divergences_after_burn_in_from_the_log(tmp_path):
    # Two chains: burn-in lines are left out, a sampler that logs no divergences counts none.
    log = [
        {"iteration": 0, "burn_in": True, "divergent": [True, True]},
        {"iteration": 1, "burn_in": False, "divergent": [True, False]},
        {"iteration": 2, "burn_in": False, "divergent": [True, True]},
        {"iteration": 3, "burn_in": False, "acceptance_rate": [0.9, 0.8]},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in log))
    assert extension_lib.divergences(RunDir(tmp_path)) == (3, 4)
    text = extension_lib.block_summary(
        3, 40, 30, None, sampled=2.0, judged=1.0, following=60, divergent=(3, 4, 1)
    )
    assert "divergences after burn-in: 3 of 4 transitions (75.0 %), 2 in this block" in " ".join(
        text.split()
    )
    assert all(len(line) <= extension_lib.WIDTH for line in text.splitlines())
    quiet = extension_lib.block_summary(
        3, 40, 30, None, sampled=2.0, judged=1.0, following=60, divergent=(0, 4, 0)
    )
    assert "divergences" not in quiet
