"""SIGKILL at every named point of a run's life, then resume: the result equals the
uninterrupted run bit for bit, no temporary file is left and the directory verifies."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from bnnkit.cli import main
from bnnkit.runs import faults
from cli_checks import stored_files as stored

ARGV = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "linear",
    "--noise-std",
    "0.35",
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "2e-3",
    "--num-iterations",
    "5",
    "--num-burn-in",
    "1",
    "--num-chains",
    "2",
    "--checkpoint-every",
    "2",
    "--seed",
    "3",
    "--no-progress",
    "--no-evaluate",
]


# MCLMC runs its iterations in blocks of up to 64 (bnnkit.runs.blocks), one file of draws per
# block: 180 kept iterations make at least three kept blocks, so a kill at the second block's
# manifest line falls between blocks' files.
BLOCKS_ARGV = [
    "mclmc",
    *ARGV[1:7],  # the data, the model and its noise
    *["--num-iterations", "200", "--num-burn-in", "20", "--num-chains", "2", "--seed", "3"],
    *("--no-progress", "--no-evaluate"),
]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    path = tmp_path_factory.mktemp("kill") / "full"
    assert main([*ARGV, "--dir", str(path)]) == 0
    return stored(path)


@pytest.fixture(scope="module")
def uninterrupted_blocks(tmp_path_factory):
    path = tmp_path_factory.mktemp("kill") / "blocks"
    assert main([*BLOCKS_ARGV, "--dir", str(path)]) == 0
    assert len(list((path / "samples").glob("sample_*-*.npz"))) >= 3
    return stored(path)


# (point[:count], how the run is continued): a run killed before its run.json said more than
# "starting" is started again; every other one is resumed. Each kill costs a process start
# (~5 s on 2 cores), so the quick suite keeps one per kind of moment: start-up, between a
# sample's manifest line and the sample, and before the first state.
SLOW = pytest.mark.slow
KILLS = [
    ("locked", "again"),
    pytest.param("started", "again", marks=SLOW),
    ("started", "resume"),
    ("sample-recorded:2", "resume"),
    pytest.param("sample-written:2", "resume", marks=SLOW),
    ("state-recorded:1", "resume"),
    pytest.param("unit-done:3", "resume", marks=SLOW),
]


@pytest.mark.parametrize(("point", "then"), KILLS)
def test_killed_anywhere_then_resumed_bit_for_bit(point, then, tmp_path, uninterrupted, capsys):
    killed_then_resumed(ARGV, point, then, tmp_path, uninterrupted, capsys)


# The sampler's run in blocks compiles a block program: with the slow checks.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "then"), [("sample-recorded:2", "resume"), ("unit-done:3", "resume")]
)
def test_a_sampler_run_in_blocks_killed_then_resumed_bit_for_bit(
    point, then, tmp_path, uninterrupted_blocks, capsys
):
    killed_then_resumed(BLOCKS_ARGV, point, then, tmp_path, uninterrupted_blocks, capsys)


def killed_then_resumed(argv, point, then, tmp_path, uninterrupted, capsys):
    """Kill the run ``argv`` makes at ``point``, continue it (``then``), and compare."""
    assert point.split(":")[0] in faults.POINTS
    path = tmp_path / "run"
    env = {**os.environ, faults.ENV: point, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *argv, "--dir", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr  # killed at the point, not finished
    again = [*argv, "--dir", str(path), *(["--resume"] if then == "resume" else [])]
    assert main(again) == 0, capsys.readouterr().err
    got = stored(path)
    assert sorted(got) == sorted(uninterrupted)
    for key, value in uninterrupted.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    assert not [p for p in path.rglob("*.tmp")]
    assert not (path / ".lock").exists()
    capsys.readouterr()
    assert main(["verify", str(path)]) == 0, capsys.readouterr()
