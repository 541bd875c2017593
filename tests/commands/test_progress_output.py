"""Progress a user can trust: plain lines in logs, burn-in apart, an estimate, a stuck warning."""

from __future__ import annotations

import io
import re

from rich.console import Console

from bnnkit.cli import main
from bnnkit.runs import progress

HMC = ["hmc", "--dataset", "yacht_0", "--model", "mlp_regression_small", "--noise-std", "0.35",
       "--no-evaluate"]


def test_plain_lines_when_output_is_not_a_terminal(tmp_path, capsys, monkeypatch):
    # capsys's stdout is not a terminal, as in a log file, CI or nohup.
    monkeypatch.setattr(progress, "ESTIMATE_MIN_SECONDS", 0.0)
    assert main([*HMC, "--step-size", "1e-3", "--trajectory-len", "0.004",
                 "--num-iterations", "6", "--num-burn-in", "2", "--num-chains", "2",
                 "--tabulate-freq", "2", "--dir", str(tmp_path / "run")]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith("HMC ")]
    assert [line.split(" (")[0] for line in lines] == ["HMC 2/6", "HMC 4/6", "HMC 6/6"]
    assert "| burn-in |" in lines[0] and "burn-in div" in lines[0]
    assert "| sampling |" in lines[-1] and re.search(r"div \d+ \(burn-in \d+\)", lines[-1])
    # After the second iteration: how long the rest takes at the current speed.
    assert re.search(r"HMC: about .+ for the 4 iterations left at the current speed", out)
    assert "warning" not in out + err  # a healthy chain is not warned about


def test_default_plain_lines_every_tenth_of_the_run(tmp_path, capsys):
    assert main([*HMC, "--step-size", "1e-3", "--trajectory-len", "0.004",
                 "--num-iterations", "20", "--dir", str(tmp_path / "run")]) == 0
    counts = re.findall(r"^HMC (\d+)/20", capsys.readouterr().out, re.MULTILINE)
    assert counts == [str(n) for n in range(2, 21, 2)]


def test_stuck_chain_is_warned_about_with_its_numbers(tmp_path, capsys):
    assert main([*HMC, "--step-size", "0.5", "--trajectory-len", "0.5", "--adapt", "none",
                 "--num-iterations", "12", "--num-burn-in", "1", "--num-chains", "2",
                 "--no-progress", "--dir", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if line.startswith("bnnkit: warning:")]
    assert len(warning) == 1, err
    match = re.search(r"acceptance (\d\.\d\d) after burn-in .* (\d+) divergences in 22 "
                      r"transitions", warning[0])
    assert match and float(match[1]) < 0.05 and int(match[2]) > 2.2, warning[0]
    assert "--adapt mass" in warning[0] and "--step-size" in warning[0]


def test_bar_keeps_counter_and_time_left_at_80_columns():
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    bar = progress.ProgressBar("HMC", total=400, console=console)
    for _ in range(5):
        bar.update(1, "sampling | accept 0.93 | step 2.00e-03 | L 250 | log post -1234.5 | "
                      "div 0 (burn-in 21)")
    bar.close()
    last = out.getvalue().split("\r")[-1]
    assert "5/400" in last and re.search(r"5/400 \d:\d\d:\d\d \d:\d\d:\d\d", last)
    assert max(len(line) for line in re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "",
                                            last).splitlines()) <= 80
