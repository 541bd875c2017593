"""Progress a user can trust: plain lines in logs, burn-in apart, an estimate, a stuck warning."""

from __future__ import annotations

import io
import re

from rich.console import Console

from bnnkit.cli import main
from bnnkit.runs import progress

HMC = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--noise-std",
    "0.35",
    "--no-evaluate",
]


def test_plain_lines_when_output_is_not_a_terminal(tmp_path, capsys, monkeypatch):
    # capsys's stdout is not a terminal, as in a log file, CI or nohup.
    monkeypatch.setattr(progress, "ESTIMATE_MIN_SECONDS", 0.0)
    assert (
        main(
            [
                *HMC,
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.004",
                "--num-iterations",
                "6",
                "--num-burn-in",
                "2",
                "--num-chains",
                "2",
                "--tabulate-freq",
                "2",
                "--dir",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith("HMC ")]
    assert [line.split(" (")[0] for line in lines] == ["HMC 2/6", "HMC 4/6", "HMC 6/6"]
    assert "| burn-in |" in lines[0] and "burn-in div" in lines[0]
    assert "| sampling |" in lines[-1] and re.search(r"div \d+ \(burn-in \d+\)", lines[-1])
    # After the second iteration: how long the rest takes at the current speed.
    assert re.search(r"HMC: about .+ for the 4 iterations left at the current speed", out)
    assert "warning" not in out + err  # a healthy chain is not warned about


def test_default_plain_lines_every_tenth_of_the_run(tmp_path, capsys):
    assert (
        main(
            [
                *HMC,
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.004",
                "--num-iterations",
                "20",
                "--dir",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    counts = re.findall(r"^HMC (\d+)/20", capsys.readouterr().out, re.MULTILINE)
    assert counts == [str(n) for n in range(2, 21, 2)]


def test_stuck_chain_is_warned_about_with_its_numbers(tmp_path, capsys):
    assert (
        main(
            [
                *HMC,
                "--step-size",
                "0.5",
                "--trajectory-len",
                "0.5",
                "--adapt",
                "none",
                "--num-iterations",
                "12",
                "--num-burn-in",
                "1",
                "--num-chains",
                "2",
                "--no-progress",
                "--dir",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if line.startswith("bnnkit: warning:")]
    assert len(warning) == 1, err
    match = re.search(
        r"acceptance (\d\.\d\d) after burn-in .* (\d+) divergences in 22 "
        r"transitions",
        warning[0],
    )
    assert match and float(match[1]) < 0.05 and int(match[2]) > 2.2, warning[0]
    assert "--adapt mass" in warning[0] and "--step-size" in warning[0]


def bar_line(status: str, width: int, done: int = 5) -> str:
    """The last line a bar of 400 HMC iterations drew at ``width`` columns, without escapes."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    bar = progress.ProgressBar("HMC", total=400, console=console)
    for _ in range(done):
        bar.update(1, status)
    bar.close()
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue().split("\r")[-1]).strip("\n")


def test_bar_keeps_counter_and_time_left_at_80_columns():
    last = bar_line(
        "sampling | accept 0.93 | step 2.00e-03 | L 250 | log post -1234.5 | div 0 (burn-in 21)", 80
    )
    assert re.search(r"HMC +5/400 left \d:\d\d:\d\d ", last), last
    assert max(len(line) for line in last.splitlines()) <= 80


def test_bar_drops_whole_fields_never_half_a_number():
    status = (
        "sampling | accept 0.93 | step 1.11e-03 | L 2274 | log post -804.8 | div 0 (burn-in 17)"
    )
    fields = status.split(" | ")
    for width in (50, 60, 70, 80, 100):
        last = bar_line(status, width).strip()
        shown = re.split(r"left \d:\d\d:\d\d", last, maxsplit=1)[1].strip()
        # What is shown is whole fields, in their own order: no ellipsis, no cut value.
        assert shown and "…" not in shown, (width, last)
        kept = shown.split(" | ")
        assert all(field in fields for field in kept), (width, shown)
        assert kept == sorted(kept, key=fields.index), (width, shown)


def test_time_estimate_during_burn_in_says_it_is_provisional(monkeypatch):
    monkeypatch.setattr(progress, "ESTIMATE_MIN_SECONDS", 0.0)
    out = io.StringIO()
    bar = progress.ProgressBar(
        "HMC", total=10, stream=out, log_every=100, settle_after=4, unit_name="iterations"
    )
    for _ in range(10):
        bar.update(1)
    estimates = [line for line in out.getvalue().splitlines() if "left at" in line]
    # One after the second iteration (burn-in still tunes the step size), one from the speed
    # of the first iteration after burn-in ended.
    assert len(estimates) == 2, estimates
    assert "for the 8 iterations left" in estimates[0] and "provisional" in estimates[0]
    assert "for the 5 iterations left" in estimates[1] and "provisional" not in estimates[1]


def test_time_left_says_estimating_until_units_after_the_first_are_measured():
    out = io.StringIO()
    bar = progress.ProgressBar("MCLMC", total=100, stream=out, log_every=1)
    bar.update(1)  # the first block compiles: no speed yet
    bar.update(40)  # a block of 40
    lines = out.getvalue().splitlines()
    assert "left estimating" in lines[0], lines
    assert re.search(r"left \d+ s", lines[1]), lines


def test_resume_summary_counts_the_iterations_this_call_ran(tmp_path, capsys):
    args = [
        *HMC,
        "--step-size",
        "1e-3",
        "--trajectory-len",
        "0.004",
        "--num-burn-in",
        "2",
        "--num-chains",
        "2",
        "--no-progress",
        "--dir",
        str(tmp_path / "run"),
    ]
    assert main([*args, "--num-iterations", "6"]) == 0
    assert "6 iterations in " in capsys.readouterr().out
    assert main([*args, "--num-iterations", "8", "--resume"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^2 more iterations in [\d.]+ s, [\d.]+ s each with compilation "
        r"\(8 of 8 done\); run in ",
        out,
        re.MULTILINE,
    ), out


def test_warnings_during_and_after_a_run_have_one_prefix(tmp_path, capsys):
    # A stuck sampler with progress on: the line during the run and the one at its end.
    assert (
        main(
            [
                *HMC,
                "--step-size",
                "0.5",
                "--trajectory-len",
                "0.5",
                "--adapt",
                "none",
                "--num-iterations",
                "12",
                "--num-burn-in",
                "1",
                "--num-chains",
                "2",
                "--dir",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    lines = [line for line in (out + err).splitlines() if "warning:" in line]
    assert len(lines) == 2 and all(line.startswith("bnnkit: warning: ") for line in lines), lines
