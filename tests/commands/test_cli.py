"""The command line: bad values give one line and exit code 2; a real run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bnnkit.cli import main

BASE = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "0.002",
    "--num-iterations",
    "4",
    "--num-burn-in",
    "1",
    "--no-progress",
    "--no-evaluate",
]


def with_args(**changes) -> list[str]:
    argv = list(BASE)
    for flag, value in changes.items():
        flag = "--" + flag.replace("_", "-")
        if flag in argv:
            del argv[argv.index(flag) : argv.index(flag) + 2]
        argv.append(f"{flag}={value}")  # '=' so that negative numbers are values, not flags
    return argv


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(step_size="0"), "--step-size 0.0 out of range; allowed: > 0"),
        (dict(step_size="-1e-3"), "--step-size -0.001 out of range"),
        (dict(dataset="imagenet"), "unknown dataset 'imagenet'"),
        (dict(dataset="yacht_25"), "split index 25 out of range for 'yacht': allowed 0..19"),
        (dict(model="transformer"), "unknown model 'transformer'"),
        (dict(model="mlp_classification"), "is for classification but dataset 'yacht_0'"),
        (dict(num_burn_in="4"), "burn-in 4 must be >= 0 and smaller than the number of it"),
        (
            dict(trajectory_len="10", max_num_leapfrog_steps="100"),
            "needs 10000 leapfrog steps, more than --max-num-leapfrog-steps 100",
        ),
        (dict(temperature="0"), "temperature 0.0 must be > 0"),
        (dict(weight_decay="-1"), "weight decay -1.0 must be"),
        (dict(noise_std="0"), "noise std 0.0 must be > 0"),
    ],
)
def test_bad_values_exit_2_with_one_line(changes, message, tmp_path, capsys):
    code = main([*with_args(**changes), "--dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run" / "run.json").exists()


def test_nan_in_data(tmp_path, capsys):
    x = np.ones((5, 2))
    x[2, 0] = np.nan
    np.savez(tmp_path / "d.npz", x_train=x, y_train=np.ones(5), x_test=x[:2], y_test=np.ones(2))
    code = main([*with_args(dataset=str(tmp_path / "d.npz")), "--dir", str(tmp_path / "r")])
    assert code == 2
    assert "x_train holds 1 NaN" in capsys.readouterr().err


def test_argparse_errors_are_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["hmc", "--dataset", "yacht_0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("bnnkit: error:") and err.count("\n") == 1


def test_resume_with_different_config(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    assert main([*BASE, "--dir", run_dir]) == 0
    code = main([*with_args(weight_decay="1"), "--dir", run_dir, "--resume"])
    assert code == 2
    assert "weight_decay was 3.0 in the stored run but is 1.0 now" in capsys.readouterr().err
    code = main([*BASE, "--dir", run_dir])
    assert code == 2
    assert "is not empty; pass --resume" in capsys.readouterr().err


@pytest.mark.slow  # a fresh process from start to evaluation
def test_end_to_end_as_a_subprocess(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run_dir = str(tmp_path / "run")
    cli = [sys.executable, "-m", "bnnkit.cli"]
    argv = with_args(num_chains="2", num_iterations="10", num_burn_in="2")
    argv.remove("--no-evaluate")
    done = subprocess.run(
        [*cli, *argv, "--dir", run_dir], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    # The end of the run: its test metrics, then its one verdict (the detail is evaluate's).
    assert "test rmse" in done.stdout and "\nverdict: " in done.stdout
    done = subprocess.run(
        [*cli, "evaluate", run_dir, "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    result = json.loads(done.stdout)
    assert result["num_chains"] == 2 and result["num_samples_per_chain"] == 8
    assert np.isfinite(result["test"]["rmse"]) and np.isfinite(result["test"]["nll"])
    out = str(tmp_path / "samples.npz")
    done = subprocess.run(
        [*cli, "samples", run_dir, "--out", out],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with np.load(out, allow_pickle=False) as f:
        assert f["params/Dense_0/kernel"].shape == (2, 8, 6, 50)
    done = subprocess.run(
        [*cli, "evaluate", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2 and "not a bnnkit run directory" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_evaluate_under_covariate_shift(tmp_path, capsys):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 8, 8, 1), dtype=np.uint8)
    labels = (images.reshape(40, -1).mean(1) > 127).astype(np.int64)
    np.savez(
        tmp_path / "img.npz",
        x_train=images[:30],
        y_train=labels[:30],
        x_test=images[30:],
        y_test=labels[30:],
    )
    run_dir = str(tmp_path / "run")
    argv = [
        "hmc",
        "--dataset",
        str(tmp_path / "img.npz"),
        "--model",
        "linear",
        "--step-size",
        "1e-4",
        "--trajectory-len",
        "1e-3",
        "--num-iterations",
        "6",
        "--num-burn-in",
        "1",
        "--no-progress",
        "--no-evaluate",
        "--dir",
        run_dir,
    ]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["evaluate", run_dir, "--corruption", "contrast", "--severity", "5", "--json"]) == 0
    shifted = json.loads(capsys.readouterr().out)
    assert shifted["corruption"] == {"name": "contrast", "severity": 5}
    assert (tmp_path / "run" / "evaluation_contrast_5.json").is_file()
    clean = (
        json.loads((tmp_path / "run" / "evaluation.json").read_text())
        if (tmp_path / "run" / "evaluation.json").is_file()
        else None
    )
    assert clean is None  # the clean evaluation is not overwritten by a shifted one
    assert main(["evaluate", run_dir, "--corruption", "contrast", "--severity", "7"]) == 2
    assert "severity 7 out of range: allowed 1..5" in capsys.readouterr().err
    assert main(["evaluate", run_dir, "--corruption", "contrast"]) == 2
    assert (
        "--severity is not given; allowed: a severity from 1 to 5 whenever a corruption is given"
        in capsys.readouterr().err
    )
