"""bnnkit reference: a deep ensemble, then one chain per member, read back as one run."""

from __future__ import annotations

import json

import pytest

from bnnkit import ConfigError
from bnnkit.evaluation import evaluate
from bnnkit.experiments.reference import REFERENCE_FILE, Config, reference
from bnnkit.problem import ProblemConfig
from bnnkit.runs.stored import load_run

PROBLEM = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.5)
# A tiny recipe: NUTS's per-iteration cost is bounded by its tree depth.
CONFIG = Config(sampler="nuts", members=3, num_tuning=10, num_samples=8, ensemble_steps=40)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ref") / "ref"
    return reference(PROBLEM, CONFIG, folder, progress=False)


@pytest.mark.slow
def test_layout_and_one_chain_per_member(made):
    folder = made.folder
    assert sorted(p.name for p in folder.iterdir()) == ["chains", "ensemble", REFERENCE_FILE]
    record = json.loads((folder / REFERENCE_FILE).read_text())
    assert record["status"] == "finished" and record["config"]["members"] == 3
    chains = load_run(folder / "chains")
    assert chains.record["method"] == "nuts"
    assert chains.record["method_config"]["num_chains"] == 3
    assert chains.posterior.num_chains == 3 and chains.posterior.num_samples == 8
    assert set(made.seconds) == {"ensemble", "chains", "evaluate"}


@pytest.mark.slow
def test_the_folder_reads_as_its_chains(made):
    # bnnkit evaluate REF is the pooled model average of the chains' run.
    assert evaluate(made.folder)["test"] == evaluate(made.folder / "chains")["test"]
    assert made.evaluation["test"] == evaluate(made.folder)["test"]
    assert made.evaluation["num_chains"] == 3


@pytest.mark.slow
def test_a_finished_reference_resumes_without_running(made):
    again = reference(PROBLEM, CONFIG, made.folder, resume=True, progress=False)
    assert again.evaluation["test"] == made.evaluation["test"]


@pytest.mark.slow
def test_refusals_write_nothing(made, tmp_path):
    with pytest.raises(ConfigError, match="not empty"):
        reference(PROBLEM, CONFIG, made.folder, progress=False)
    with pytest.raises(ConfigError, match="holds no reference"):
        reference(PROBLEM, CONFIG, tmp_path, resume=True, progress=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="which no reference writes"):
        reference(PROBLEM, CONFIG, other, overwrite=True, progress=False)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    with pytest.raises(ConfigError, match="was made with --members 3; this call gives 2"):
        reference(
            PROBLEM,
            Config(sampler="nuts", members=2, num_tuning=10, num_samples=8, ensemble_steps=40),
            made.folder,
            resume=True,
            progress=False,
        )
    with pytest.raises(ConfigError, match="unknown --sampler"):
        Config(sampler="sgd")


def test_budget_defaults_per_sampler():
    assert Config(sampler="mclmc").budget() == (500, 200)
    assert Config(sampler="hmc", num_samples=50).budget() == (200, 50)


@pytest.mark.slow
def test_command_line(made, tmp_path, capsys):
    from bnnkit.cli import main

    argv = [
        "reference",
        "--dataset",
        "yacht_0",
        "--model",
        "mlp_regression_small",
        "--noise-std",
        "0.5",
        "--sampler",
        "nuts",
        "--members",
        "3",
        "--num-tuning",
        "10",
        "--num-samples",
        "8",
        "--ensemble-steps",
        "40",
        "--no-progress",
    ]
    assert main([*argv, "--dir", str(tmp_path / "ref"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["test"] == made.evaluation["test"]  # the same recipe, the same bits
    assert main([*argv, "--dir", str(tmp_path / "ref")]) == 2  # not empty: refused
    assert "not empty" in capsys.readouterr().err


@pytest.mark.slow
def test_reference_or_reuse_reuses_a_finished_one_and_refuses_other_settings(made):
    from bnnkit.experiments.reference import reference_or_reuse, reference_seconds

    before = (made.folder / "chains" / "metrics.jsonl").read_text()
    assert reference_or_reuse(PROBLEM, CONFIG, made.folder, progress=False) is False
    assert (made.folder / "chains" / "metrics.jsonl").read_text() == before
    with pytest.raises(ConfigError, match="was made with --members 3; this call gives 2"):
        reference_or_reuse(
            PROBLEM,
            Config(sampler="nuts", members=2, num_tuning=10, num_samples=8, ensemble_steps=40),
            made.folder,
            progress=False,
        )
    # The ensemble's and the chains' own seconds, from their logs.
    assert reference_seconds(made.folder) > 0


def test_until_reaches_the_chains_and_needs_a_time_budget(tmp_path):
    with pytest.raises(ConfigError, match="needs --max-time"):
        Config(until="certified")
    config = Config(sampler="nuts", members=2, until="certified", max_time="90s")
    chains = config.sampler_config(tmp_path)
    assert (chains.until, chains.max_time) == ("certified", 90.0)
    assert Config().sampler_config(tmp_path).until is None
