"""What a run directory guarantees whatever happens around it: a run made on a user ``.npz``
is never read on other data, ``verify`` never judges a run another process is writing, run
files honour the umask, and SIGTERM or SIGHUP stop a run in one line with exit 128 + signal,
its lock released and its last state kept.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bnnkit.cli import main

LINEAR = ["--model", "linear", "--noise-std", "0.35"]
HMC = [
    "hmc",
    *LINEAR,
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "2e-3",
    "--num-iterations",
    "3",
    "--num-burn-in",
    "1",
    "--num-chains",
    "1",
    "--no-progress",
    "--no-evaluate",
]


def user_data(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    np.savez(
        path,
        x_train=rng.normal(size=(20, 3)),
        y_train=rng.normal(size=20),
        x_test=rng.normal(size=(6, 3)),
        y_test=rng.normal(size=6),
    )
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_replaced_data_is_refused_and_a_relative_dataset_evaluates_anywhere(
    tmp_path, monkeypatch, capsys
):
    """A run made on ``--dataset data/d.npz`` (relative) evaluates from another folder; once
    the file is replaced by another of the same shapes, evaluate, --resume and verify refuse
    in one line saying it changed, and write nothing."""
    (tmp_path / "made" / "data").mkdir(parents=True)
    user_data(tmp_path / "made" / "data" / "d.npz", seed=0)
    run = tmp_path / "run"
    monkeypatch.chdir(tmp_path / "made")
    argv = [*HMC, "--dataset", "data/d.npz", "--dir", str(run)]
    assert main(argv) == 0
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["evaluate", str(run)]) == 0
    assert main(["verify", str(run)]) == 0

    user_data(tmp_path / "made" / "data" / "d.npz", seed=1)  # same shapes, other values
    monkeypatch.chdir(tmp_path / "made")
    before = files_of(run)
    capsys.readouterr()
    for command in (
        ["evaluate", str(run)],
        [*argv, "--num-iterations", "5", "--resume"],
        ["verify", str(run)],
    ):
        assert main(command) == 2, command
        out, err = capsys.readouterr()
        assert err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
        said = {
            "evaluate": "changed since the run was made on it",
            "hmc": "is not the data the run was made on",
            "verify": "changed or is gone; restore that file",
        }[command[0]]
        assert said in out + err, (command, out, err)
        assert "--overwrite" not in out + err, err  # the run is good; the data changed
        assert files_of(run) == before, command


@pytest.mark.parametrize("umask", [0o022, 0o077], ids=["022", "077"])
def test_run_files_honour_the_umask(umask, tmp_path):
    """Files a run writes get ``0o666 & ~umask`` (others may read a shared run when the umask
    lets them), folders ``0o777 & ~umask``."""
    old = os.umask(umask)
    try:
        assert main([*HMC, "--dataset", "yacht_0", "--dir", str(tmp_path / "run")]) == 0
        assert main(["evaluate", str(tmp_path / "run")]) == 0
    finally:
        os.umask(old)
    paths = sorted((tmp_path / "run").rglob("*"))
    assert any(p.name == "state.npz" for p in paths)
    for p in paths:
        mode = stat.S_IMODE(p.lstat().st_mode)
        wanted = (0o777 if p.is_dir() else 0o666) & ~umask
        assert mode == wanted, (p, oct(mode), oct(wanted))


HOLD = """
import sys
from bnnkit.runs.lock import hold
with hold(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_verify_says_in_progress_while_another_process_holds_the_run(tmp_path, capsys):
    """A healthy run whose lock another live process holds is not judged damaged (no advice to
    --overwrite): verify says it is in progress, exit 2, and changes nothing."""
    run = tmp_path / "run"
    assert main([*HMC, "--dataset", "yacht_0", "--dir", str(run)]) == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        before = files_of(run)
        capsys.readouterr()
        assert main(["verify", str(run)]) == 2
        err = capsys.readouterr().err
        assert "is in progress" in err and "--overwrite" not in err, err
        assert err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
        assert files_of(run) == before
    finally:
        holder.communicate("")
    assert holder.returncode == 0
    assert main(["verify", str(run)]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_a_run_in_one_line_and_it_resumes(signum, tmp_path):
    """SIGTERM or SIGHUP while a run writes: exit 128 + signal, one line naming the signal and
    --resume, the lock released; the run then resumes to its end and verifies."""
    if signal.getsignal(signum) is signal.SIG_IGN:
        # Under nohup the run inherits an ignored SIGHUP and, by design, keeps it ignored.
        pytest.skip(f"{signal.Signals(signum).name} is ignored in this process (nohup)")
    run = tmp_path / "run"
    argv = [
        *HMC,
        "--dataset",
        "yacht_0",
        "--num-iterations",
        "100000",
        "--checkpoint-every",
        "1",
        "--dir",
        str(run),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bnnkit.cli", *argv], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "samples").is_dir() or not any((run / "samples").iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        proc.send_signal(signum)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, err
    assert err.count("\n") == 1 and signal.Signals(signum).name in err and "--resume" in err, err
    assert not (run / ".lock").exists()
    done = len(list((run / "samples").glob("sample_*.npz"))) + 1  # the kept samples and the burn-in
    finished = [a if a != "100000" else str(done + 2) for a in argv]
    assert main([*finished, "--resume"]) == 0
    assert main(["verify", str(run)]) == 0
