"""``--config FILE``: flags from a TOML file or a run's run.json; the command line overrides."""

from __future__ import annotations

import json

import pytest

from bnnkit.cli import main
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

RUN_TOML = """
dataset_name = "yacht_0"          # the paper's name of --dataset
model = "mlp_regression_small"
noise_std = 0.35
layer_prior = ["Dense_0=laplace:scale=0.1"]
step_size = 1e-3
trajectory_len = 0.004
num_iterations = 3
num_burn_in = 1
num_chains = 2
no_adapt_step_size = true
progress = false
evaluate = false
"""


def settings(argv, capsys) -> dict:
    code = main([*argv, "--print-config"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return tomllib.loads(out.out)


def refused(argv, capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("bnnkit: error: ")
    return err


@pytest.mark.slow
def test_config_file_round_trips_through_run_json(tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text(RUN_TOML)
    run_dir = tmp_path / "run"
    assert main(["hmc", "--config", str(path), "--dir", str(run_dir)]) == 0
    capsys.readouterr()
    record = json.loads((run_dir / "run.json").read_text())
    from_file = settings(["hmc", "--config", str(path)], capsys)
    assert record["method_config"]["adapt_step_size"] is False
    assert hmc.Config.from_dict(record["method_config"]) == hmc.Config.from_dict(from_file)
    assert ProblemConfig.from_dict(record["problem"]) == ProblemConfig.from_dict(from_file)
    # The run's own record reproduces it: the same settings as the file it came from.
    assert settings(["hmc", "--config", str(run_dir / "run.json")], capsys) == from_file
    assert settings(["hmc", "--config", str(run_dir)], capsys) == from_file
    # And the printed settings are a config file themselves.
    printed = tmp_path / "printed.toml"
    main(["hmc", "--config", str(path), "--print-config"])
    printed.write_text(capsys.readouterr().out)
    assert settings(["hmc", "--config", str(printed)], capsys) == from_file


def test_command_line_overrides_the_file(tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text(RUN_TOML)
    base = settings(["hmc", "--config", str(path)], capsys)
    over = settings(
        [
            "hmc",
            "--config",
            str(path),
            "--step-size",
            "2e-3",
            "--model-name",
            "mlp_regression",
            "--float64",
        ],
        capsys,
    )
    assert (base["step_size"], over["step_size"]) == (1e-3, 2e-3)
    assert (base["model"], over["model"]) == ("mlp_regression_small", "mlp_regression")
    assert (base["float64"], over["float64"]) == (False, True)
    assert {k: v for k, v in over.items() if k not in ("step_size", "model", "float64")} == {
        k: v for k, v in base.items() if k not in ("step_size", "model", "float64")
    }


def test_unknown_key_or_bad_value_is_refused_naming_it(tmp_path, capsys):
    for line, named in (
        ("stepsize = 1e-3", "'stepsize'"),
        ('max_num_leapfrog_steps = "ten"', "max_num_leapfrog_steps"),
        ("float64 = 1", "float64"),
        ("[hmc]\nstep_size = 1e-3", "[hmc]"),
    ):
        path = tmp_path / "bad.toml"
        path.write_text(RUN_TOML + line + "\n")
        err = refused(["hmc", "--config", str(path), "--dir", str(tmp_path / "run")], capsys)
        assert named in err and str(path) in err
        assert not (tmp_path / "run").exists()


def test_run_json_of_another_method_is_refused(hmc_run, capsys):
    err = refused(["sgd", "--config", str(hmc_run / "run.json")], capsys)
    assert "'hmc' run" in err and "bnnkit hmc --config" in err


def test_every_command_takes_a_config_file(hmc_run, tmp_path, capsys):
    path = tmp_path / "evaluate.toml"
    path.write_text("json = true\n")
    assert main(["evaluate", str(hmc_run), "--config", str(path)]) == 0
    assert "test" in json.loads(capsys.readouterr().out)
