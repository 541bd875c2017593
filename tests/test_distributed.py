"""Several processes with jax.distributed: two local CPU processes over loopback.

What is guaranteed, and tested here:

- Two processes with one CPU device each compile the same per-device program as one process
  with two simulated devices (``--xla_force_host_platform_device_count=2``), on the same rows
  of each device, and the one cross-device reduction sums exactly two partial sums. Floating
  point addition of two numbers is commutative, so whichever device's term comes first the
  sum is the same: the runs are compared bit for bit (float32), with ``--shard data`` (one
  chain's gradient summed over the processes) and ``--shard chains`` (one chain per process).
- A resume over two processes reads the state on process 0 only and hands it to the other
  process bit for bit, so the resumed run is the uninterrupted one, bit for bit.
- A minibatch method (SGD), whose data ``--shard`` does not split yet, runs whole on every
  process and is the one-process run bit for bit.
- Only process 0 writes: the other process is given no directory of its own and must leave
  nothing; a refusal by process 0 (a run in the way) ends both processes with exit code 2.

The two-process runs take about a minute on a loaded 2-core machine, so they are marked slow;
the flag checks run in the default suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from bnnkit import distributed, storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from cli_checks import stored_units

CLUSTER_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_STEP_NODELIST",
    "SLURM_NTASKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_STEP_NUM_TASKS",
    "OMPI_MCA_orte_hnp_uri",
    "OMPI_COMM_WORLD_SIZE",
)
HMC = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--subset-train-to",
    "276",
    "--step-size",
    "2e-4",
    "--trajectory-len",
    "1e-3",
    "--num-burn-in",
    "1",
    "--num-chains",
    "2",
    "--seed",
    "3",
    "--no-progress",
    "--no-evaluate",
]
SGD = [
    "sgd",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--init-step-size",
    "1e-4",
    "--num-epochs",
    "2",
    "--batch-size",
    "32",
    "--no-progress",
    "--no-evaluate",
]
CLI = "import sys; from bnnkit.cli import main; sys.exit(main(sys.argv[1:]))"
TIMEOUT = 300  # seconds for one launch; a hang fails the test instead of the suite


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    for name in CLUSTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--process-id", "2", "--num-processes", "2", "--coordinator-address", "localhost:1"],
            "--process-id 2 must be < --num-processes 2",
        ),
        (["--num-processes", "2", "--process-id", "0"], "needs --coordinator-address as well"),
        (["--coordinator-address", "localhost"], "must be HOST:PORT"),
        (["--distributed", "off", "--process-id", "0"], "--distributed off contradicts"),
        (["--distributed", "sometimes"], "unknown --distributed 'sometimes'"),
    ],
)
def test_inconsistent_flags_are_one_line_errors(flags, message, capsys, tmp_path):
    code = main([*HMC, "--num-iterations", "2", "--dir", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("bnnkit: error: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_cluster_detection_reads_the_launchers_variables(monkeypatch):
    assert distributed.cluster_processes() is None
    assert not distributed.Hosts().wanted()
    with pytest.raises(ConfigError, match="needs --coordinator-address"):
        distributed.Hosts(num_processes=2)
    for name, value in [
        ("SLURM_JOB_ID", "7"),
        ("SLURM_STEP_NODELIST", "node[01-04]"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_PROCID", "1"),
        ("SLURM_LOCALID", "0"),
    ]:
        monkeypatch.setenv(name, value)
    assert distributed.cluster_processes() == 4
    assert distributed.Hosts().wanted()
    assert not distributed.Hosts(distributed="off").wanted()
    # Inside a job step JAX detects what is not given.
    assert distributed.Hosts(num_processes=4).wanted()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")  # one task: a run on one process
    assert not distributed.Hosts().wanted()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARIABLES}
    return {
        **env,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
    }


def _two_processes(flags: list[str], run_dir) -> list[subprocess.CompletedProcess]:
    """The same command on processes 0 and 1; process 1 gets no directory of its own."""
    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLI,
                *flags,
                "--dir",
                str(run_dir),
                "--coordinator-address",
                f"localhost:{port}",
                "--num-processes",
                "2",
                "--process-id",
                str(i),
                "--distributed-timeout",
                "60",
            ],
            env=_env(1),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def _one_process(flags: list[str], run_dir) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CLI, *flags, "--dir", str(run_dir)],
        env=_env(2),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _arrays(run_dir) -> dict[str, np.ndarray]:
    from bnnkit.runs import RunDir

    rundir = RunDir(run_dir)
    out = {f"state/{k}": v for k, v in storage.load_arrays(rundir.state_file).items()}
    for unit, arrays in stored_units(rundir).items():
        out.update({f"{unit}/{k}": v for k, v in arrays.items()})
    return out


def _assert_bit_identical(got, want):
    assert sorted(got) == sorted(want)
    assert len([k for k in want if not k.startswith("state/")]) >= 3 * 4  # 3 samples x 4 leaves
    for key, value in want.items():
        assert got[key].dtype == value.dtype and np.array_equal(got[key], value), key


@pytest.mark.slow
def test_two_processes_match_one_process_with_two_devices(tmp_path):
    for shard in ("data", "chains"):
        _one_process([*HMC, "--num-iterations", "4", "--shard", shard], tmp_path / f"one_{shard}")

    # --shard data: one chain's gradient summed over the two processes.
    runs = _two_processes([*HMC, "--num-iterations", "4", "--shard", "data"], tmp_path / "data")
    for proc in runs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    # Process 1 reports nothing (gloo's own connection line aside).
    assert "4 iterations in" in runs[0].stdout and "iterations in" not in runs[1].stdout
    _assert_bit_identical(_arrays(tmp_path / "data"), _arrays(tmp_path / "one_data"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "one_chains", "one_data"]

    # Process 0 refuses to replace the run; both processes stop with one line.
    refused = _two_processes([*HMC, "--num-iterations", "4", "--shard", "data"], tmp_path / "data")
    assert [p.returncode for p in refused] == [2, 2], [p.stderr[-2000:] for p in refused]
    assert "--overwrite" in refused[0].stderr and "process 0 refused" in refused[1].stderr

    # --shard chains, stopped after 2 iterations and resumed to 4 on both processes.
    first = _two_processes(
        [*HMC, "--num-iterations", "2", "--shard", "chains"], tmp_path / "chains"
    )
    assert [p.returncode for p in first] == [0, 0], [p.stderr[-2000:] for p in first]
    resumed = _two_processes(
        [*HMC, "--num-iterations", "4", "--shard", "chains", "--resume"], tmp_path / "chains"
    )
    assert [p.returncode for p in resumed] == [0, 0], [p.stderr[-2000:] for p in resumed]
    _assert_bit_identical(_arrays(tmp_path / "chains"), _arrays(tmp_path / "one_chains"))

    # A minibatch method: every process runs the whole of it, process 0 alone writes.
    _one_process(SGD, tmp_path / "one_sgd")
    sgd = _two_processes(SGD, tmp_path / "sgd")
    assert [p.returncode for p in sgd] == [0, 0], [p.stderr[-2000:] for p in sgd]
    got, want = _arrays(tmp_path / "sgd"), _arrays(tmp_path / "one_sgd")
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert np.array_equal(got[key], value), key


# sample() on two processes: both compute every chain; process 0 alone reads and writes the run
# directory, and hands a resumed run's state and earlier chunks to the other bit for bit.
SAMPLE = """
import sys
import numpy as np
import jax.numpy as jnp
from bnnkit import distributed, storage
port, pid, run_dir, out, iterations, resume = sys.argv[1:]
distributed.initialize(distributed.Hosts(coordinator_address=f"localhost:{port}",
                                         num_processes=2, process_id=int(pid), timeout=60))
from bnnkit.inference import hmc
from bnnkit.runs import sample
config = hmc.Config(step_size=0.3, trajectory_len=1.0, adapt="mass", num_chains=2,
                    num_iterations=int(iterations), num_burn_in=4, checkpoint_every=3)
chains = sample(lambda p: -0.5 * jnp.sum(p["x"] ** 2), {"x": jnp.zeros((2, 3))}, config,
                run_dir=run_dir, resume=resume == "resume")
np.savez(out, **storage.flatten_tree(chains[:3]))
"""


def _sample_on_two_processes(
    tmp_path, iterations: int, resume: bool, kill_at: str | None = None
) -> list[dict]:
    """The chains (positions, info, state) each process returned, flattened; process 1 is
    given a directory of its own, which it must leave alone. With ``kill_at``, process 0 is
    killed at that point of :mod:`bnnkit.runs.faults` instead (process 1 is killed there too,
    or aborted by JAX's coordination service when process 0 is gone first)."""
    from bnnkit.runs import faults

    env = {**_env(1), **({faults.ENV: kill_at} if kill_at else {})}
    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                SAMPLE,
                str(port),
                str(i),
                str(tmp_path / ("run" if i == 0 else "not_process_0s")),
                str(tmp_path / f"out{i}.npz"),
                str(iterations),
                "resume" if resume else "new",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        for i, proc in enumerate(procs):
            _, err = proc.communicate(timeout=TIMEOUT)
            expected = ((-9,) if i == 0 else (-9, -6)) if kill_at else (0,)
            assert proc.returncode in expected, err[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not (tmp_path / "not_process_0s").exists()
    return [] if kill_at else [dict(np.load(tmp_path / f"out{i}.npz")) for i in range(2)]


@pytest.mark.slow
def test_sample_on_two_processes_writes_on_process_0_and_resumes_bit_for_bit(tmp_path):
    import jax.numpy as jnp

    from bnnkit.inference import hmc
    from bnnkit.runs import load_chains, sample
    from bnnkit.runs.verification import verify

    config = hmc.Config(
        step_size=0.3,
        trajectory_len=1.0,
        adapt="mass",
        num_chains=2,
        num_iterations=9,
        num_burn_in=4,
        checkpoint_every=3,
    )
    want = storage.flatten_tree(
        sample(lambda p: -0.5 * jnp.sum(p["x"] ** 2), {"x": jnp.zeros((2, 3))}, config)[:3]
    )
    assert len(want) >= 10  # positions, every info field and the adapted state

    def assert_same(got):
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            assert got[key].dtype == value.dtype and np.array_equal(got[key], value), key

    # Killed after the first chunk, all burn-in; resumed (nothing kept before the restart:
    # empty arrays go across); resumed again when finished (nothing runs; the stored chunks
    # go across).
    _sample_on_two_processes(tmp_path, 9, resume=False, kill_at="unit-done:1")
    assert verify(tmp_path / "run") == ([], "running: the state covers 3 of 9 iterations")
    for _ in range(2):
        for got in _sample_on_two_processes(tmp_path, 9, resume=True):
            assert_same(got)
    assert verify(tmp_path / "run") == ([], "finished: the state covers 9 of 9 iterations")
    assert_same(storage.flatten_tree(load_chains(tmp_path / "run")[:3]))
