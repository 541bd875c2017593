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


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    path = tmp_path_factory.mktemp("kill") / "full"
    assert main([*ARGV, "--dir", str(path)]) == 0
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
    assert point.split(":")[0] in faults.POINTS
    path = tmp_path / "run"
    env = {**os.environ, faults.ENV: point, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *ARGV, "--dir", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr  # killed at the point, not finished
    argv = [*ARGV, "--dir", str(path), *(["--resume"] if then == "resume" else [])]
    assert main(argv) == 0, capsys.readouterr().err
    got = stored(path)
    assert sorted(got) == sorted(uninterrupted)
    for key, value in uninterrupted.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    assert not [p for p in path.rglob("*.tmp")]
    assert not (path / ".lock").exists()
    capsys.readouterr()
    assert main(["verify", str(path)]) == 0, capsys.readouterr()
