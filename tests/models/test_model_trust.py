"""Reading a run runs no code it names: a model module outside bnnkit is imported only on the
user's word (``--model package.module:ClassName``, ``trust_model=``), and a user's import cannot
take the process over.

The run folder of these tests ships its own ``mymod.py``, as a run made with ``--model
mymod:Net`` and then shared would: the copy writes a marker file when it is imported, so a
reader that ran it leaves the marker behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pytest

import bnnkit
from bnnkit import storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.models.imported import load_class, trusting_model
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs import RunDir, load_run
from bnnkit.runs.provenance import settings_digest
from cli_checks import stored_units

MODULE = """\
import flax.linen as nn


class Net(nn.Module):
    width: int = 8
    num_outputs: int = 1

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.num_outputs)(nn.tanh(nn.Dense(self.width)(x)))
"""
MODEL = "mymod:Net"
SGD = ["--init-step-size", "1e-4", "--batch-size", "64", "--no-progress"]


class Shipped(NamedTuple):
    """The honest module's folder, the run folder carrying a marker-writing copy, the marker."""

    lib: Path
    run: Path
    marker: Path


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Shipped:
    """A two-chain HMC run of ``mymod:Net`` on yacht, made with its module on the path; then
    ``mymod.py`` copied into the run folder and changed to write a marker when imported."""
    root = tmp_path_factory.mktemp("trust")
    lib = root / "lib"
    lib.mkdir()
    (lib / "mymod.py").write_text(MODULE)
    run = root / "run"
    sys.path.insert(0, str(lib))
    try:
        assert (
            main(
                [
                    "hmc",
                    "--dataset",
                    "yacht_0",
                    "--model",
                    MODEL,
                    "--noise-std",
                    "0.35",
                    "--step-size",
                    "1e-3",
                    "--trajectory-len",
                    "0.05",
                    "--num-iterations",
                    "6",
                    "--num-burn-in",
                    "2",
                    "--num-chains",
                    "2",
                    "--dir",
                    str(run),
                    "--no-progress",
                    "--no-evaluate",
                ]
            )
            == 0
        )
    finally:
        sys.path.remove(str(lib))
        sys.modules.pop("mymod", None)
    marker = root / "MARKER"
    (run / "mymod.py").write_text(MODULE + f"open({str(marker)!r}, 'w').write('imported')\n")
    return Shipped(lib, run, marker)


@pytest.fixture(autouse=True)
def _forget_mymod():
    """Each test imports ``mymod`` afresh, if at all."""
    sys.modules.pop("mymod", None)
    yield
    sys.modules.pop("mymod", None)


def refused(argv: list[str], capsys) -> str:
    """``bnnkit ARGV`` must exit 2 with one line; returns it."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    return err


def copy_of(shipped: Shipped, where: Path) -> Path:
    """The shipped run copied, so that a reader that writes leaves the fixture's run as it was."""
    return Path(shutil.copytree(shipped.run, where / "run"))


# --- no code runs without the user's word --------------------------------------------------


READERS = {
    "evaluate": ["evaluate", "."],
    "report": ["report", ".", "--out", "{out}"],
    "convergence": ["convergence", ".", "--out", "{out}"],
    "shift": ["shift", ".", "--out", "{out}"],
    "surface": ["surface", ".:0", ".:1", ".:2", "--out", "{out}", "--grid-size", "3"],
    "prune": ["prune", ".", "--out", "{out}"],
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_reader_in_the_run_folder_imports_nothing_and_says_how_to_allow_it(
    reader, shipped, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(shipped.run)
    out = tmp_path / "out"
    argv = [a.format(out=out) for a in READERS[reader]]
    err = refused(argv, capsys)
    assert "module 'mymod'" in err and f"--model {MODEL} on this command" in err
    assert not shipped.marker.exists()
    assert not out.exists()
    assert not (shipped.run / "evaluation.json").exists()


def test_samples_exports_the_arrays_without_the_model(shipped, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(shipped.run)
    out = tmp_path / "samples.npz"
    assert main(["samples", ".", "--out", str(out)]) == 0, capsys.readouterr().err
    assert not shipped.marker.exists() and "mymod" not in sys.modules
    exported = storage.load_arrays(out)
    rundir = RunDir(shipped.run)
    units = list(stored_units(rundir).values())
    assert len(units) == 4  # 6 iterations, 2 of burn-in
    assert sorted(exported) == sorted(k for k in units[0] if not k.startswith("__"))
    for key, value in exported.items():
        np.testing.assert_array_equal(value, np.concatenate([u[key] for u in units], axis=1))


def test_verify_reads_files_only_and_checks_a_named_model(shipped, monkeypatch, capsys):
    monkeypatch.chdir(shipped.run)
    assert main(["verify", "."]) == 0
    assert main(["verify", ".", "--model", MODEL]) == 0
    capsys.readouterr()
    err = refused(["verify", ".", "--model", "othermod:Net"], capsys)
    assert "othermod:Net" in err and MODEL in err
    assert not shipped.marker.exists()


def test_the_module_on_pythonpath_is_not_imported_either(shipped, tmp_path):
    # Another process, with the run folder itself on its import path.
    env = {**os.environ, "PYTHONPATH": str(shipped.run)}
    code = "import sys; from bnnkit.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "report", str(shipped.run), "--out", str(tmp_path / "report")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--model {MODEL}" in lines[0] and "'mymod'" in lines[0]
    assert not shipped.marker.exists() and not (tmp_path / "report").exists()


def test_the_python_readers_need_trust_model(shipped):
    for read in (lambda: bnnkit.evaluate(shipped.run, write=False), lambda: load_run(shipped.run)):
        with pytest.raises(ConfigError, match=rf"trust_model='{MODEL}'") as err:
            read()
        assert "\n" not in str(err.value)
    with pytest.raises(
        ConfigError,
        match=r"^trust_model='othermod:Net' is not the model of .* records "
        rf"'{MODEL}'",
    ):
        load_run(shipped.run, trust_model="othermod:Net")
    for wrong in (["mymod:Net"], 3, b"mymod:Net"):
        with pytest.raises(ConfigError, match=r"trust_model .* allowed: the model's import path"):
            load_run(shipped.run, trust_model=wrong)
    stored = load_run(shipped.run, rebuild=False)
    assert stored.problem is None and stored.posterior.num_chains == 2
    assert not shipped.marker.exists()


# --- the user's word ------------------------------------------------------------------------


def test_named_model_reads_the_run_from_where_the_user_has_it(
    shipped, tmp_path, monkeypatch, capsys
):
    run = copy_of(shipped, tmp_path)
    monkeypatch.chdir(run)
    # Installed (here: on the path), the user's own module comes first: the copy in the run
    # folder is never looked at.
    monkeypatch.syspath_prepend(str(shipped.lib))
    assert main(["evaluate", ".", "--model", MODEL, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == MODEL and np.isfinite(result["test"]["rmse"])
    assert not shipped.marker.exists()
    sys.modules.pop("mymod", None)
    assert main(["report", ".", "--out", str(tmp_path / "report"), "--model", MODEL]) == 0
    assert (tmp_path / "report" / "report.md").is_file()
    direct = bnnkit.evaluate(run, write=False, trust_model=MODEL)
    assert direct["test"] == pytest.approx(result["test"])
    assert not shipped.marker.exists()


def test_a_named_model_is_looked_for_in_the_current_folder_as_python_m_would(
    shipped, tmp_path, monkeypatch, capsys
):
    run = copy_of(shipped, tmp_path)
    marker_before = shipped.marker.exists()
    monkeypatch.chdir(run)
    assert main(["evaluate", ".", "--model", MODEL]) == 0, capsys.readouterr().err
    # The user named mymod here: the module beside the command is the one imported.
    assert not marker_before and shipped.marker.exists()
    shipped.marker.unlink()
    assert os.getcwd() not in sys.path  # only while it imported


def test_a_named_model_that_is_not_the_runs_is_refused_naming_both(shipped, monkeypatch, capsys):
    monkeypatch.chdir(shipped.run)
    err = refused(["evaluate", ".", "--model", "othermod:Net"], capsys)
    assert "--model 'othermod:Net' is not the model of the run" in err and MODEL in err
    assert "trust_model" not in err
    with pytest.raises(ConfigError, match=r"^trust_model='othermod:Net' is not the model of"):
        bnnkit.evaluate(shipped.run, write=False, trust_model="othermod:Net")
    with (
        trusting_model("othermod:Net"),
        pytest.raises(ConfigError, match=rf"othermod:Net is not the model of .* records {MODEL}"),
    ):
        bnnkit.evaluate(shipped.run, write=False)
    assert not shipped.marker.exists()


@pytest.mark.slow
def test_the_author_resumes_and_evaluates_a_run_of_their_module(
    shipped, tmp_path, monkeypatch, capsys
):
    work = tmp_path / "work"
    shutil.copytree(shipped.lib, work)
    monkeypatch.chdir(work)  # mymod.py beside the command, as the author keeps it
    args = [
        "hmc",
        "--dataset",
        "yacht_0",
        "--model",
        MODEL,
        "--noise-std",
        "0.35",
        "--step-size",
        "1e-3",
        "--trajectory-len",
        "0.05",
        "--num-burn-in",
        "1",
        "--num-chains",
        "1",
        "--dir",
        "run",
        "--no-progress",
    ]
    assert main([*args, "--num-iterations", "2", "--no-evaluate"]) == 0
    before = storage.load_arrays(RunDir(work / "run").sample_file(1))
    assert main([*args, "--num-iterations", "3", "--resume"]) == 0, capsys.readouterr().err
    assert RunDir(work / "run").sample_units() == [1, 2]
    record = json.loads((work / "run" / "run.json").read_text())
    assert record["status"] == "finished" and record["problem"]["model"] == MODEL
    assert (work / "run" / "evaluation.json").is_file()  # read back after the resume
    after = storage.load_arrays(RunDir(work / "run").sample_file(1))
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])


@pytest.mark.slow
def test_laplace_imports_the_map_runs_model_when_it_is_named(
    shipped, tmp_path, monkeypatch, capsys
):
    work = tmp_path / "work"
    shutil.copytree(shipped.lib, work)
    monkeypatch.chdir(work)
    assert (
        main(
            [
                "sgd",
                "--dataset",
                "yacht_0",
                "--model",
                MODEL,
                "--noise-std",
                "0.35",
                *SGD,
                "--num-epochs",
                "1",
                "--dir",
                "map",
                "--no-evaluate",
            ]
        )
        == 0
    )
    sys.modules.pop("mymod", None)
    laplace = ["laplace", "--map-run", "map", "--no-progress", "--no-evaluate"]
    err = refused([*laplace, "--dir", "la"], capsys)
    assert f"--model {MODEL} on this command" in err and not (work / "la").exists()
    assert main([*laplace, "--dir", "la", "--model", MODEL]) == 0, capsys.readouterr().err
    assert json.loads((work / "la" / "run.json").read_text())["problem"]["model"] == MODEL


# --- an import cannot take the process over -------------------------------------------------


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """A folder of badly behaved model modules, the current folder."""
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "parses.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', required=True)\n"
        "args = p.parse_args()\n"
    )
    (tmp_path / "interrupts.py").write_text("raise KeyboardInterrupt\n")
    (tmp_path / "argv.py").write_text(
        MODULE.replace(
            "import flax.linen as nn", "import sys\nimport flax.linen as nn\nSEEN = list(sys.argv)"
        )
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("exits", "importing 'exits' exited (SystemExit 0)"),
        ("parses", "importing 'parses' exited (SystemExit 2); it printed 'usage: parses"),
        ("interrupts", "importing 'interrupts' was interrupted (KeyboardInterrupt)"),
    ],
)
def test_an_import_that_ends_the_process_is_one_config_error(module, says, modules):
    argv = list(sys.argv)
    with pytest.raises(ConfigError) as err:
        load_class(f"{module}:Net")
    assert says in str(err.value) and "\n" not in str(err.value)
    assert sys.argv == argv and module not in sys.modules
    assert str(modules) not in sys.path


def test_a_module_sees_only_its_name_in_sys_argv(modules):
    argv = list(sys.argv)
    cls = load_class("argv:Net")
    assert sys.modules["argv"].SEEN == ["argv"] and sys.argv == argv
    assert cls.__name__ == "Net"
    del sys.modules["argv"]


def test_a_module_parsing_flags_at_import_is_one_line_on_the_command_line(modules, capsys):
    err = refused(
        [
            "sgd",
            "--dataset",
            "yacht_0",
            "--model",
            "parses:Net",
            "--noise-std",
            "0.35",
            *SGD,
            "--num-epochs",
            "1",
            "--dir",
            "r",
        ],
        capsys,
    )
    assert err.startswith("bnnkit: error: --model 'parses:Net': importing 'parses' exited")
    assert not (modules / "r").exists()


# --- a record edited to another problem -----------------------------------------------------


def test_a_run_json_edited_to_another_dataset_is_refused_naming_the_mismatch(tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main(
            [
                "sgd",
                "--dataset",
                "yacht_0",
                "--model",
                "mlp_regression_small",
                "--noise-std",
                "0.35",
                *SGD,
                "--num-epochs",
                "1",
                "--dir",
                str(run),
                "--no-evaluate",
            ]
        )
        == 0
    )
    record = json.loads((run / "run.json").read_text())
    record["problem"]["dataset"] = "boston_0"  # more inputs than yacht
    record["settings_sha256"] = settings_digest(record)  # as anyone can
    (run / "run.json").write_text(json.dumps(record))
    stored = storage.load_arrays(RunDir(run).sample_file(0))["params/Dense_0/kernel"].shape[2:]
    boston = build(ProblemConfig("boston_0", "mlp_regression_small", noise_std=0.35))
    theirs = jax.eval_shape(boston.init_params, jax.random.PRNGKey(0))
    wanted = tuple(theirs["params"]["Dense_0"]["kernel"].shape)
    assert stored != wanted
    err = refused(["evaluate", str(run)], capsys)
    assert (
        f"stores params/Dense_0/kernel of shape {stored}, where model mlp_regression_small "
        f"on dataset 'boston_0'"
    ) in err and f"has {wanted}" in err
    assert not (run / "evaluation.json").exists()
