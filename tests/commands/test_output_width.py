"""What bnnkit prints reads at 80 columns: the progress line keeps its most useful pieces in a
stated order, the blocks of a run extended until a level print short lines, every command's
description in ``bnnkit --help`` is a whole sentence and no ``--help`` runs past 80 columns."""

from __future__ import annotations

import io
import itertools
import re
from types import ModuleType

import pytest
from rich.console import Console

from bnnkit.cli import main
from bnnkit.commands import COMMANDS, GROUPS
from bnnkit.inference import METHODS
from bnnkit.runs import progress
from bnnkit.runs.extension import block_summary

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
#: A sampler's status with every field the tally can give (SamplerTally.status).
SAMPLING = (
    "sampling | accept 0.93 | step 2.00e-03 | L 250 | log post -1234.5 | "
    "div 7 (burn-in 21) | capped 3% | test rmse 0.4123"
)
BURN_IN = "burn-in | accept 0.81 | step 1.05e-03 | L 12 | log post -4321.9 | burn-in div 21"
#: What the README promises the bar shows (acceptance, the adapted step size, divergences).
PROMISED = {"accept", "step", "div"}


def drawn_lines(status: str, width: int, total: int, done: int = 3) -> list[str]:
    """The lines of the bar's last frame at ``width`` columns, without escapes."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    bar = progress.ProgressBar("HMC", total=total, console=console)
    for _ in range(done):
        bar.update(1, status)
    bar.close()
    frame = ESCAPES.sub("", out.getvalue().split("\r")[-1])
    return [line.rstrip() for line in frame.splitlines() if line.strip()]


def shown_fields(line: str) -> list[str]:
    """The status fields a line shows: what follows the time left, split at the separators."""
    parts = re.split(r"left (?:\d+:\d\d:\d\d|-:--:--) ?", line, maxsplit=1)
    return parts[1].split(" | ") if len(parts) == 2 and parts[1] else []


def kept_kinds(line: str) -> list[str]:
    """The names in KEEP_ORDER of what the line shows (status fields, bar, times)."""
    kinds = [progress.field_kind(f) for f in shown_fields(line)]
    if re.search(r"left (\d+:\d\d:\d\d|-:--:--)", line):
        kinds.append("left")
    if "━" in line:
        kinds.append("bar")
    if re.search(r"/\d+ \d+:\d\d:\d\d", line):
        kinds.append("elapsed")
    return kinds


@pytest.mark.parametrize("total", [800, 20_000])
@pytest.mark.parametrize("status", [SAMPLING, BURN_IN], ids=["sampling", "burn-in"])
@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_bar_keeps_its_most_useful_pieces_in_order(width, status, total):
    lines = drawn_lines(status, width, total, done=total // 2)
    assert len(lines) == 1 and len(lines[0]) <= width, lines
    line = lines[0]
    assert re.search(rf"HMC +[━ ]*{total // 2}/{total} ", line), line  # label and counter
    # Fields stay whole and in the status's own order.
    fields = status.split(" | ")
    shown = shown_fields(line)
    assert all(f in fields for f in shown) and shown == sorted(shown, key=fields.index), line
    kinds = kept_kinds(line)
    # What is kept is the head of the stated order (of the pieces this status has), so what
    # goes as the terminal narrows goes in that order.
    present = [
        k
        for k in progress.KEEP_ORDER
        if k in {"left", "bar", "elapsed"} | {progress.field_kind(f) for f in status.split(" | ")}
    ]
    assert sorted(kinds, key=present.index) == present[: len(kinds)], (kinds, line)
    if width >= 80:
        assert set(kinds) >= PROMISED, line
    if width >= 120:
        assert set(kinds) >= {"phase", "bar"}, line


def test_narrower_terminals_keep_fewer_pieces():
    kept = [
        set(kept_kinds(drawn_lines(SAMPLING, width, 800, 400)[0]))
        for width in (120, 100, 80, 60, 40)
    ]
    for wider, narrower in itertools.pairwise(kept):
        assert narrower <= wider
    assert kept[0] != kept[-1]


def failing_verdict(chains: int):
    """A verdict whose every level fails, with long problems."""
    from bnnkit.metrics.findings import Finding
    from bnnkit.metrics.levels import verdict

    names = ", ".join(map(str, range(chains)))
    long = f"R-hat within chains {names} is below 1.1 on only 30% of the test predictions"
    return verdict({name: Finding("fail", (long + " " + long,)) for name in ("L0", "L1", "L2")})


def test_a_block_prints_short_lines_with_each_failing_level():
    verdict = failing_verdict(8)
    text = block_summary(4, 10_003, 9_003, verdict, sampled=5401.3, judged=73.9, following=13_505)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert lines[0] == "block 4: 10,003 iterations, 9,003 kept per chain"
    assert lines[1] == "  verdict not a reference (L0 FAIL, L1 FAIL, L2 FAIL)"
    assert lines[2].startswith("  L0: R-hat within chains 0, 1")
    assert lines[-1] == (
        "  sampled in 1 h 30 min, judged in 1 min 14 s; extending to 13,505 iterations"
    )


def sentence_of(module: ModuleType) -> str:
    first = " ".join(module.__doc__.strip().split("\n\n")[0].split())
    return first if first.endswith(".") else first + "."


def listing(capsys, monkeypatch) -> dict[str, str]:
    """Each command's description in ``bnnkit --help`` at 80 columns, unwrapped."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    described: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line.endswith(":") and line[:-1] in GROUPS.values():
            current = None
        elif re.match(r"  [a-z][\w-]* {2,}\S", line) and line.split()[0] in COMMANDS():
            current = line.split()[0]
            described[current] = [line.split(maxsplit=1)[1]]
        elif current is not None and line.startswith(" " * 6) and line.strip():
            described[current].append(line.strip())
        else:
            current = None
    return {name: " ".join(parts) for name, parts in described.items()}


def test_every_command_is_described_in_a_whole_sentence(capsys, monkeypatch):
    described = listing(capsys, monkeypatch)
    assert sorted(described) == sorted(COMMANDS())
    for name, text in described.items():
        assert text[0].isupper() and text.endswith("."), (name, text)
        assert text.count("(") == text.count(")") and text.count('"') % 2 == 0, (name, text)
        assert text == COMMANDS()[name].sentence, name
    for name, module in METHODS.items():  # a method's: its docstring's whole first paragraph
        assert described[name] == sentence_of(module), name


@pytest.mark.parametrize("command", [None, *COMMANDS()])
def test_no_help_line_runs_past_80_columns(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_:
        main([*([command] if command else []), "--help"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 3
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, too_long
