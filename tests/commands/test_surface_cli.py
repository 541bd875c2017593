"""``bnnkit surface``: three points of short HMC runs (run directories and sample files), runs
of another posterior refused, bad grids refused with nothing written."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.experiments import surface
from bnnkit.runs import RunDir
from cli_checks import run_ok
from conjugate import conjugate_problem


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory):
    """Two chains of three HMC iterations on the conjugate linear regression."""
    _, _, batch, _, _ = conjugate_problem()
    folder = tmp_path_factory.mktemp("surface")
    x, y = np.asarray(batch.x), np.asarray(batch.y)
    np.savez(folder / "data.npz", x_train=x, y_train=y, x_test=x[:5], y_test=y[:5])
    run_dir = folder / "run"
    assert (
        main(
            [
                "hmc",
                "--dataset",
                str(folder / "data.npz"),
                "--model",
                "linear",
                "--noise-std",
                "0.5",
                "--weight-decay",
                "2",
                "--step-size",
                "0.01",
                "--trajectory-len",
                "0.05",
                "--num-iterations",
                "3",
                "--num-burn-in",
                "0",
                "--num-chains",
                "2",
                "--dir",
                str(run_dir),
                "--no-progress",
                "--no-evaluate",
            ]
        )
        == 0
    )
    return run_dir


@pytest.mark.slow
def test_surface_of_run_directories_and_sample_files(linear_run, tmp_path, capsys):
    out = tmp_path / "out"
    printed = run_ok(
        [
            "surface",
            str(linear_run),
            f"{linear_run}:1:-1",
            f"{linear_run}:0:0",
            "--out",
            str(out),
            "--grid_size",
            "3",
            "--no-progress",
        ],
        capsys,
    )
    assert "3 x 3 grid" in printed
    by_runs = storage.load_arrays(out / "surface.npz")
    assert by_runs["log_posterior"].shape == (3, 3)
    assert all(
        (out / f"{name}.png").is_file() for name in ("log_posterior", "log_likelihood", "log_prior")
    )
    # The same points exported by `bnnkit samples`, with the problem taken from the run.
    samples = tmp_path / "samples.npz"
    run_ok(["samples", str(linear_run), "--out", str(samples)], capsys)
    by_files = surface.posterior_surface(
        [samples, f"{samples}:1:-1", f"{samples}:0:0"],
        tmp_path / "files",
        surface.Config(grid_size=3),
        problem=linear_run,
        progress=False,
        plots=False,
    )
    for key in ("log_posterior", "log_likelihood", "log_prior", "points"):
        np.testing.assert_array_equal(getattr(by_files, key), by_runs[key], err_msg=key)
    # Sample files alone carry no problem.
    code = main(
        [
            "surface",
            str(samples),
            f"{samples}:1:-1",
            f"{samples}:0:0",
            "--out",
            str(tmp_path / "none"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--problem RUN_DIR" in err and len(err.strip().splitlines()) == 1
    # A non-empty output folder needs --resume or --overwrite.
    code = main(
        [
            "surface",
            str(linear_run),
            f"{linear_run}:1:-1",
            f"{linear_run}:0:0",
            "--out",
            str(out),
            "--grid-size",
            "3",
            "--no-progress",
        ]
    )
    assert code == 2 and "--overwrite" in capsys.readouterr().err


def test_runs_of_another_posterior_are_refused(linear_run, tmp_path, capsys):
    # The same samples under a record that says T = 0.5 (its settings digest rewritten).
    cold = tmp_path / "cold"
    shutil.copytree(linear_run, cold)
    record = RunDir(cold).read_record()
    record["problem"]["temperature"] = 0.5
    RunDir(cold).write_record(record)
    out = tmp_path / "out"
    code = main(["surface", str(linear_run), str(cold), f"{linear_run}:1:-1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{cold} targets another posterior: --temperature 0.5 ({linear_run}: 1.0)" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--grid-size", "0"], "--grid-size 0 out of range; allowed: 2..1024"),
        (["--limit-left", "1", "--limit-right", "0"], "--limit-left 1.0 must be below"),
        (["--limit_bottom", "2", "--limit_top", "1"], "--limit-bottom 2.0 must be below"),
        (["--chunk-size", "0"], "--chunk-size 0 out of range; allowed: 1..1048576"),
        (["--resume"], "nothing to resume"),
        (["--resume", "--overwrite"], "exclude each other"),
    ],
)
def test_bad_flags_are_refused_before_anything_is_written(flags, message, tmp_path, capsys):
    points = [str(tmp_path / name) for name in "abc"]  # never read: the flags fail first
    out = tmp_path / "out"
    code = main(["surface", *points, "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_bnn_hmc_surface_command_runs_as_it_is_after_the_script_name(linear_run, tmp_path, capsys):
    # make_posterior_surface_plot.py's flags, underscores and all: the checkpoints are the
    # points, --dir is --out, the problem flags are checks that the runs' problem passes.
    data = RunDir(linear_run).read_record()["problem"]["dataset"]
    command = [
        "surface",
        "--seed=0",
        "--weight_decay=2",
        "--temperature=1",
        f"--dir={tmp_path / 'out'}",
        f"--dataset_name={data}",
        "--model_name=linear",
        f"--checkpoint1={linear_run}",
        f"--checkpoint2={linear_run}:1:-1",
        f"--checkpoint3={linear_run}:0:0",
        "--limit_bottom=-0.5",
        "--limit_top=1.5",
        "--grid_size=3",
        "--plot",
        "--no-progress",
    ]
    assert "3 x 3 grid" in run_ok(command, capsys)
    assert (tmp_path / "out" / "surface.npz").is_file()
    # A problem flag that is not the runs' is refused, naming the run that supplies it.
    other = [a if not a.startswith("--weight_decay") else "--weight_decay=40" for a in command]
    other = [a if not a.startswith("--dir=") else f"--dir={tmp_path / 'other'}" for a in other]
    assert main(other) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert (
        f"--weight-decay 40.0 is not the problem of the points: {linear_run} supplies "
        "weight_decay 2.0"
    ) in err
    assert not (tmp_path / "other").exists()
    # Points given both ways, or --out missing: one line each.
    assert (
        main(
            [
                "surface",
                str(linear_run),
                f"--checkpoint1={linear_run}",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "all three one way" in capsys.readouterr().err
    assert main(["surface", str(linear_run), str(linear_run), str(linear_run)]) == 2
    assert "--out (bnn_hmc's --dir) is required" in capsys.readouterr().err
