"""The command line's CPU devices: one per core (a power of two, at most 8), set before JAX
starts, left alone when the user set them, recorded by a run, and a resume on other devices
said to be a valid continuation rather than a bit-for-bit one."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from bnnkit import cpu_devices
from bnnkit.cli import main
from bnnkit.errors import ConfigError


@pytest.mark.parametrize(
    ("cores", "expected"), [(1, 1), (2, 2), (3, 2), (4, 4), (6, 4), (8, 8), (12, 8), (96, 8)]
)
def test_one_device_per_core_a_power_of_two_at_most_eight(cores, expected):
    assert cpu_devices.device_count({}, cores=cores) == expected


def test_the_environment_sets_the_count():
    assert cpu_devices.device_count({cpu_devices.ENV: "3"}, cores=1) == 3
    assert cpu_devices.device_count({cpu_devices.ENV: " "}, cores=2) == 2  # blank: unset


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_count_is_one_line_exit_2_and_nothing_written(value, tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match=f"{cpu_devices.ENV}='{value}'"):
        cpu_devices.device_count({cpu_devices.ENV: value})
    monkeypatch.setenv(cpu_devices.ENV, value)
    folder = tmp_path / "run"
    argv = ["hmc", "--dataset", "yacht_0", "--model", "linear", "--dir", str(folder)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and value in err[0] and "allowed" in err[0], err
    assert not folder.exists()


SCRIPT = r"""
import json
from bnnkit import cpu_devices
chosen = cpu_devices.enable_for_command_line()
import jax
print(json.dumps({"set": chosen, "devices": jax.device_count(),
                  "cores": cpu_devices.device_count({})}))
"""


def devices_in_a_new_process(**env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", cpu_devices.ENV)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**environ, "JAX_PLATFORMS": "cpu", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_new_process_gets_one_device_per_core_unless_xla_flags_name_a_count():
    default = devices_in_a_new_process()
    expected = cpu_devices.device_count({}, cores=cpu_devices.usable_cores())
    assert default == {"set": expected, "devices": expected, "cores": expected}
    given = devices_in_a_new_process(XLA_FLAGS="--xla_force_host_platform_device_count=3")
    assert given["set"] is None and given["devices"] == 3


# A tiny run of two chains, which two devices split.
ARGV = shlex.split(
    "hmc --dataset yacht_0 --model linear --noise-std 0.5 --num-chains 2 --num-burn-in 1 "
    "--step-size 1e-3 --trajectory-len 3e-3 --no-progress"
)


@pytest.mark.slow
def test_a_run_records_its_devices_and_a_resume_on_others_says_so(tmp_path, capsys):
    folder = tmp_path / "run"
    environ = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env = {**environ, cpu_devices.ENV: "2", "JAX_PLATFORMS": "cpu"}
    argv = [*ARGV, "--num-iterations", "3", "--dir", str(folder)]
    done = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bit for bit" not in done.stderr
    record = json.loads((folder / "run.json").read_text())
    assert record["devices"] == {"platform": "cpu", "devices": 2, "split": "chains"}
    # This process has one device: the resume goes on, and says it is not bit for bit.
    argv = [*ARGV, "--num-iterations", "4", "--dir", str(folder), "--resume"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "made on 2 cpu devices (chains split over them) and goes on on 1 cpu device" in err
    assert "BNNKIT_CPU_DEVICES=2" in err
