"""A refusal on the command line names the flag the user typed, never the Python parameter the
command passed it to; from Python the same refusal names the parameter."""

from __future__ import annotations

import math

import pytest

import bnnkit
from bnnkit.cli import main
from cli_checks import small_hmc_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return small_hmc_run(tmp_path_factory.mktemp("flags") / "run")


#: A bad value for one flag: (the command line, RUN and TMP standing for the run and a fresh
#: folder; the flag its refusal must name; the Python parameter the command passes that flag's
#: value to, as a Python message spells it, which the refusal must not hold).
CASES = {
    "evaluate --conformal nan": (
        ["evaluate", "RUN", "--conformal", "nan"],
        "--conformal",
        "conformal=",
    ),
    "evaluate --conformal inf": (
        ["evaluate", "RUN", "--conformal=inf"],
        "--conformal",
        "conformal=",
    ),
    "evaluate --conformal 1.5": (
        ["evaluate", "RUN", "--conformal", "1.5"],
        "--conformal",
        "conformal=",
    ),
    "evaluate --severity 0": (["evaluate", "RUN", "--severity", "0"], "--severity", "severity="),
    "evaluate --severity -2": (["evaluate", "RUN", "--severity=-2"], "--severity", "severity="),
    "evaluate --model": (["evaluate", "RUN", "--model", "mymod:Net"], "--model", "trust_model"),
    "samples --out ''": (["samples", "RUN", "--out", ""], "--out", "out="),
    "samples --out a folder": (["samples", "RUN", "--out", "TMP"], "--out", "out="),
    "samples --model": (
        ["samples", "RUN", "--out", "TMP/x.npz", "--model", "mymod:Net"],
        "--model",
        "trust_model",
    ),
    "report --out ''": (["report", "RUN", "--out", ""], "--out", "out="),
    "report --out a file": (["report", "RUN", "--out", "TMP/file"], "--out", "out="),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_value_on_the_command_line_names_the_flag(case, run, tmp_path, capsys):
    argv, flag, parameter = CASES[case]
    (tmp_path / "file").write_text("x")
    argv = [a.replace("RUN", str(run)).replace("TMP", str(tmp_path)) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("bnnkit: error: "), err
    assert flag in err, err
    assert parameter not in err and "bnnkit.evaluate" not in err, err


@pytest.mark.parametrize(
    ("value", "what"), [(math.nan, "nan is not finite"), (1.5, "1.5 is outside (0, 1)")]
)
def test_the_same_refusal_from_python_names_the_parameter(run, value, what):
    with pytest.raises(bnnkit.ConfigError) as err:
        bnnkit.evaluate(run, conformal=value, write=False)
    assert str(err.value).startswith(f"bnnkit.evaluate: conformal={what}; allowed: ")
    assert "--conformal" not in str(err.value)
