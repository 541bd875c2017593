"""SIGKILL at a named point of every stage of a reference (and between stages), then
``--resume``: both stages equal the uninterrupted reference's bit for bit, the parent record
says "finished", no temporary file or lock is left and ``bnnkit verify`` passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bnnkit.cli import main
from bnnkit.runs import faults
from cli_checks import stored_files

ARGV = [
    "reference",
    "--dataset",
    "yacht_0",
    "--model",
    "linear",
    "--noise-std",
    "0.5",
    "--sampler",
    "nuts",
    "--members",
    "2",
    "--num-tuning",
    "4",
    "--num-samples",
    "8",
    "--ensemble-steps",
    "20",
    "--no-progress",
]
STAGES = ("ensemble", "chains")


def stages(folder) -> dict[str, np.ndarray]:
    return {
        f"{name}/{key}": value
        for name in STAGES
        for key, value in stored_files(folder / name).items()
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kill") / "full"
    assert main([*ARGV, "--dir", str(folder), "--json"]) == 0
    return stages(folder)


# Each kill costs two process starts and their compilations: they run with the slow checks (the
# quick suite kills single runs, tests/runs/test_kill.py, at the points a stage is made of).
pytestmark = pytest.mark.slow
KILLS = [
    "composite-started",
    "ensemble/started",
    "ensemble/state-recorded:1",
    "stage-done:1",
    "chains/locked",
    "chains/sample-recorded:1",
    "chains/state-recorded:1",
    "stage-done:2",
]


@pytest.mark.parametrize("point", KILLS)
def test_killed_in_any_stage_then_resumed_bit_for_bit(point, tmp_path, uninterrupted, capsys):
    name = point.split(":")[0].split("/")[-1]
    assert name in (*faults.POINTS, *faults.COMPOSITE_POINTS)
    folder = tmp_path / "ref"
    env = {**os.environ, faults.ENV: point, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *ARGV, "--dir", str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == -9, done.stderr  # killed at the point, not finished
    assert main([*ARGV, "--dir", str(folder), "--resume", "--json"]) == 0
    capsys.readouterr()
    got = stages(folder)
    assert sorted(got) == sorted(uninterrupted)
    for key, value in uninterrupted.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    assert json.loads((folder / "reference.json").read_text())["status"] == "finished"
    assert not list(folder.rglob("*.tmp")) and not list(folder.rglob(".lock"))
    assert main(["verify", str(folder)]) == 0, capsys.readouterr()
