"""A run stopped by its time budget is not an error, the same for every command: one line
saying how far it got and the command that continues it, then exit code 3; that command
parses with the command's own parser, and following it ends in the bits of the run made
without a budget.

A budget of 1 ns has always ended after a run's first unit, so each call below runs exactly
one iteration or epoch of the chains it continues.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest

from bnnkit import runs
from bnnkit.cli import build_parser, main
from bnnkit.commands.budget import EXIT_BUDGET, resume_argv
from bnnkit.experiments.reference import REFERENCE_FILE
from bnnkit.inference import hmc, sgd
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from cli_checks import stored_files

PROBLEM = ["--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.5"]
HMC = [
    "hmc",
    *PROBLEM,
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "5e-3",
    "--num-iterations",
    "3",
    "--num-burn-in",
    "1",
    "--num-chains",
    "2",
    "--no-progress",
]
SGD = [
    "sgd",
    *PROBLEM,
    "--init-step-size",
    "1e-4",
    "--num-epochs",
    "3",
    "--batch-size",
    "64",
    "--no-progress",
]
NO_BUDGET = ["--max-time", "1e-9"]


def stopped(argv, capsys) -> tuple[str, list[str]]:
    """Run ``bnnkit ARGV``, which its budget must stop; returns what it printed on stdout and
    the argv of the command its last line says continues the run."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_BUDGET, err
    assert "error" not in err and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("bnnkit: stopped: the time budget of "), err
    line, _, command = last.partition("; continue with: ")
    suggested = shlex.split(command)
    assert suggested[0] == "bnnkit", last
    # The command the CLI builds parses with that command's own parser, unchanged.
    args = build_parser().parse_args(suggested[1:])
    assert args.command == argv[0] and args.resume and not args.overwrite
    return out + line, suggested[1:]


def follow(argv, capsys, *, units: int) -> list[str]:
    """Follow the suggested commands from ``argv`` until the run ends (exit 0); returns each
    stop's line. Every call goes one unit further."""
    lines = []
    for done in range(1, units):
        out, argv = stopped(argv, capsys)
        assert f"ended after {done} of {units}" in out, out
        lines.append(out)
    assert main(argv) == 0, capsys.readouterr().err
    return lines


def test_a_sampler_stopped_by_its_budget_exits_3_and_its_command_continues_it(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert main([*HMC, "--dir", str(whole), "--no-evaluate"]) == 0
    # --overwrite of the first call is not suggested: it would throw the stopped run away.
    argv = [*HMC, *NO_BUDGET, "--dir", str(tmp_path / "run"), "--overwrite"]
    lines = follow(argv, capsys, units=3)
    # In the burn-in nothing was kept: the evaluation is skipped in a sentence, no error.
    assert "(burn-in 1), no sample kept yet" in lines[0]
    assert "nothing to evaluate yet" in lines[0] and "test rmse" not in lines[0]
    assert "1 kept sample per chain" in lines[1] and "test rmse" in lines[1]
    assert RunDir(tmp_path / "run").read_record()["status"] == "finished"
    assert stored_files(tmp_path / "run").keys() == stored_files(whole).keys()
    for key, value in stored_files(whole).items():
        assert (stored_files(tmp_path / "run")[key] == value).all(), key


def test_an_optimiser_stopped_by_its_budget_exits_3_and_resumes_bit_for_bit(tmp_path, capsys):
    whole = tmp_path / "whole"
    assert main([*SGD, "--dir", str(whole), "--no-evaluate"]) == 0
    lines = follow([*SGD, *NO_BUDGET, "--dir", str(tmp_path / "run")], capsys, units=3)
    assert all("epochs, no sample kept yet" in line for line in lines), lines
    assert all("nothing to evaluate yet" in line for line in lines), lines
    after = stored_files(tmp_path / "run")
    assert after.keys() == stored_files(whole).keys()
    for key, value in stored_files(whole).items():
        assert (after[key] == value).all(), key


@pytest.mark.slow
def test_a_reference_stopped_in_its_chains_exits_3_and_its_command_continues_it(tmp_path, capsys):
    folder = tmp_path / "ref"
    argv = [
        "reference",
        *PROBLEM,
        "--sampler",
        "nuts",
        "--members",
        "2",
        "--num-tuning",
        "1",
        "--num-samples",
        "8",
        "--ensemble-steps",
        "20",
        *NO_BUDGET,
        "--dir",
        str(folder),
        "--no-progress",
        "--json",
    ]
    out, again = stopped(argv, capsys)
    assert "in the chains stage after 1 of 9 iterations (burn-in 1), no sample kept yet" in out
    # --json stays JSON: the stop is in it, and the line on stderr.
    assert json.loads(out.partition("bnnkit: stopped")[0]) == {
        "stopped": out.partition("bnnkit: stopped: ")[2]
    }
    record = json.loads((folder / REFERENCE_FILE).read_text())
    assert record["status"] == "stopped" and record["stopped"]["stage"] == "chains"
    out, _ = stopped(again, capsys)  # the suggested command goes on from there
    assert "after 2 of 9 iterations, 1 kept sample per chain" in out
    assert json.loads(out.partition("bnnkit: stopped")[0])["num_chains"] == 2


def test_the_python_api_returns_a_stopped_result_and_never_raises(tmp_path):
    problem = ProblemConfig("yacht_0", "linear", noise_std=0.5)
    config = sgd.Config(init_step_size=1e-4, num_epochs=3, batch_size=64, max_time=1e-9)
    result = runs.run(problem, config, tmp_path / "sgd", progress=False)
    assert result.status == "stopped" and result.stopped.startswith("the time budget ended")
    result = runs.run(
        problem,
        config.__class__(**{**config.to_dict(), "max_time": None}),
        tmp_path / "sgd",
        resume=True,
        progress=False,
    )
    assert result.status == "finished" and result.stopped is None
    # A run extended until a level whose budget ended before its verdict reached it is
    # "stopped" too: 2 kept iterations per chain are too few to judge.
    config = hmc.Config(
        step_size=1e-3, trajectory_len=5e-3, num_iterations=3, num_burn_in=1, num_chains=2
    )
    runs.run(problem, config, tmp_path / "hmc", progress=False)
    result = runs.run(
        problem,
        dataclasses.replace(config, until="reproducible", max_time=1e-9),
        tmp_path / "hmc",
        resume=True,
        progress=False,
    )
    assert not result.until_converged["holds"] and result.status == "stopped"


def test_until_out_of_time_is_a_budget_stop_on_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*HMC, "--dir", str(run), "--no-evaluate"]) == 0
    capsys.readouterr()
    until = ["--until", "reproducible", *NO_BUDGET]
    out, again = stopped([*HMC, *until, "--dir", str(run), "--resume", "--no-evaluate"], capsys)
    assert (
        "ended after 3 of 3 iterations, 2 kept samples per chain, before the verdict reached "
        "the level asked" in out
    )
    assert again.count("--resume") == 1


def test_the_exit_code_is_documented():
    assert f"{EXIT_BUDGET} stopped by its time budget (--max-time), resume to continue" in (
        build_parser().format_help()
    )
    cli_page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md").read_text()
    assert f"| {EXIT_BUDGET} | stopped by its time budget" in cli_page


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["hmc", "--overwrite", "--dir", "d"], ["hmc", "--dir", "d", "--resume"]),
        (["hmc", "--resume", "--dir", "d"], ["hmc", "--resume", "--dir", "d"]),
    ],
)
def test_resume_argv(argv, expected):
    assert resume_argv(argv) == expected
