"""The run directory's lock: a live holder is never overridden, a dead one is taken over, and
a process removes only its own lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from bnnkit import runs
from bnnkit.errors import ConfigError
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import lock

PROBLEM = ProblemConfig(dataset="yacht_0", model="linear", noise_std=0.35)
CONFIG = hmc.Config(step_size=1e-3, trajectory_len=2e-3, num_iterations=3, num_burn_in=1)

HOLDER = """
import sys, time
from bnnkit.runs import lock
with lock.hold(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    """A live process holding the lock of ``tmp_path / 'run'`` (a finished run)."""
    path = tmp_path / "run"
    runs.run(PROBLEM, CONFIG, path, progress=False)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout.readline().strip() == "held"
    yield path, proc
    proc.kill()
    proc.wait()


def snapshot(path):
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def test_a_live_holder_refuses_resume_and_overwrite(holder):
    path, proc = holder
    before = snapshot(path)
    for flags in ({"resume": True}, {"overwrite": True}):
        with pytest.raises(ConfigError, match=f"in use by process {proc.pid}"):
            runs.run(PROBLEM, CONFIG, path, progress=False, **flags)
    assert snapshot(path) == before  # the holder's lock and the run's files are untouched
    assert lock.holder(path)["pid"] == proc.pid


def test_a_killed_holders_lock_is_taken_over(holder):
    path, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (path / lock.LOCK_FILE).exists() and lock.holder(path) is None
    result = runs.run(PROBLEM, CONFIG, path, overwrite=True, progress=False)
    assert result.record["status"] == "finished"
    assert not (path / lock.LOCK_FILE).exists()


def test_a_process_never_removes_a_lock_it_does_not_own(tmp_path):
    with lock.hold(tmp_path):
        # Someone else's lock in its place (e.g. written by hand): not ours to delete.
        (tmp_path / lock.LOCK_FILE).write_text(json.dumps({"pid": 1, "token": "other"}))
    assert json.loads((tmp_path / lock.LOCK_FILE).read_text())["token"] == "other"
    with lock.hold(tmp_path):
        assert lock.holder(tmp_path)["pid"] == os.getpid()
    assert not (tmp_path / lock.LOCK_FILE).exists()


def test_a_second_holder_in_the_same_process_is_refused(tmp_path):
    with (
        lock.hold(tmp_path),
        pytest.raises(ConfigError, match="in use by process"),
        lock.hold(tmp_path),
    ):
        pass
