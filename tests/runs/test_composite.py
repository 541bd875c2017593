"""A run made of runs (bnnkit reference): stopped by its budget it says so and resumes bit for
bit, every stage is checked before a file is written, a refusal changes nothing, a copied one
resumes from its copy, and the readers treat it as one run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bnnkit import ConfigError
from bnnkit.cli import main
from bnnkit.experiments.reference import REFERENCE_FILE, Config, reference
from bnnkit.problem import ProblemConfig
from cli_checks import stored_files

PROBLEM = ProblemConfig("yacht_0", "linear", noise_std=0.5)
SETTINGS = dict(sampler="nuts", members=2, num_tuning=6, num_samples=8, ensemble_steps=20)
CONFIG = Config(**SETTINGS)


def stages(folder) -> dict[str, np.ndarray]:
    """Every array the ensemble and the chains stored, keyed by stage."""
    return {
        f"{name}/{key}": value
        for name in ("ensemble", "chains")
        for key, value in stored_files(folder / name).items()
    }


def assert_same(got, want):
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


def snapshot(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("composite") / "ref"
    reference(PROBLEM, CONFIG, folder, progress=False)
    return folder


@pytest.mark.slow
def test_a_time_stopped_reference_says_stopped_and_resumes_bit_for_bit(made, tmp_path):
    folder = tmp_path / "ref"
    # A budget that ends the chains after their first iteration.
    result = reference(PROBLEM, Config(**SETTINGS, max_time=1e-6), folder, progress=False)
    record = json.loads((folder / REFERENCE_FILE).read_text())
    assert record["status"] == "stopped" and record["stopped"]["stage"] == "chains"
    assert record["outcomes"] == {"ensemble": "finished", "chains": "stopped"}
    assert result.stopped is not None and "chains" in result.stopped
    # A resume with another budget is allowed, as for a single run's --max-time.
    again = reference(
        PROBLEM, Config(**SETTINGS, max_time="1h"), folder, resume=True, progress=False
    )
    assert again.stopped is None
    record = json.loads((folder / REFERENCE_FILE).read_text())
    assert record["status"] == "finished"
    assert record["outcomes"] == {"ensemble": "reused", "chains": "finished"}
    assert_same(stages(folder), stages(made))


@pytest.mark.slow
def test_a_reference_budget_counts_the_ensemble_before_the_chains(tmp_path):
    folder = tmp_path / "ref"
    reference(PROBLEM, Config(**SETTINGS, max_time=3600), folder, progress=False)
    chains = json.loads((folder / "chains" / "run.json").read_text())
    # The chains ran with what the ensemble (its compilation included) left of the hour.
    assert chains["status"] == "finished"
    assert 0 < chains["method_config"]["max_time"] < 3600


def test_every_stage_is_checked_before_a_file_is_written(tmp_path):
    folder = tmp_path / "ref"
    # The chains' iterations (tuning + kept) past the largest count: named by the flags given.
    with pytest.raises(ConfigError, match="--num-tuning"):
        reference(PROBLEM, Config(**{**SETTINGS, "num_tuning": 2147483647}), folder)
    # A budget beyond float32 is the chains' to refuse, before the ensemble trains.
    with pytest.raises(ConfigError, match="--max-time 1e\\+39"):
        reference(PROBLEM, Config(**SETTINGS, max_time=1e39), folder, progress=False)
    assert not folder.exists()


@pytest.mark.slow
def test_a_refused_resume_changes_nothing(made, tmp_path):
    folder = tmp_path / "ref"
    shutil.copytree(made, folder)
    before = snapshot(folder)
    with pytest.raises(ConfigError, match="was made with --members 2; this call gives 3"):
        reference(PROBLEM, Config(**{**SETTINGS, "members": 3}), folder, resume=True)
    # A stage whose record was edited: refused by its own checks, the parent left as it was.
    run_file = folder / "chains" / "run.json"
    record = json.loads(run_file.read_text())
    record["method_config"]["num_burn_in"] = 5
    run_file.write_text(json.dumps(record))
    edited = snapshot(folder)
    with pytest.raises(ConfigError, match="stage 'chains'"):
        reference(PROBLEM, CONFIG, folder, resume=True, progress=False)
    assert snapshot(folder) == edited
    assert edited[REFERENCE_FILE] == before[REFERENCE_FILE]


@pytest.mark.slow
def test_a_copied_stopped_reference_resumes_from_its_copy(made, tmp_path):
    first = tmp_path / "first"
    reference(PROBLEM, Config(**SETTINGS, max_time=1e-6), first, progress=False)
    moved = tmp_path / "elsewhere" / "ref"
    shutil.copytree(first, moved)
    shutil.rmtree(first)  # the chains recorded the ensemble there
    reference(PROBLEM, CONFIG, moved, resume=True, progress=False)
    assert_same(stages(moved), stages(made))


@pytest.mark.slow
def test_verify_checks_every_stage(made, tmp_path, capsys):
    folder = tmp_path / "ref"
    shutil.copytree(made, folder)
    assert main(["verify", str(folder)]) == 0
    assert "ensemble" in capsys.readouterr().out
    sample = sorted((folder / "ensemble" / "samples").iterdir())[-1]
    sample.unlink()
    assert main(["verify", str(folder)]) == 2
    captured = capsys.readouterr()
    assert f"ensemble/samples/{sample.name}" in captured.out
    assert "bnnkit reference" in captured.err


@pytest.mark.slow
def test_a_resume_checks_a_finished_stage_before_reusing_it(made, tmp_path):
    folder = tmp_path / "ref"
    shutil.copytree(made, folder)
    # The ensemble's last kept draw is gone; its state is past it, so no resume recomputes it.
    sorted((folder / "ensemble" / "samples").iterdir())[-1].unlink()
    before = snapshot(folder)
    with pytest.raises(ConfigError, match=r"stage 'ensemble' .* is damaged: samples/sample_"):
        reference(PROBLEM, CONFIG, folder, resume=True, progress=False)
    assert snapshot(folder) == before


@pytest.mark.slow
def test_its_own_files_are_never_an_out(made, capsys):
    before = (made / REFERENCE_FILE).read_bytes()
    out = made / REFERENCE_FILE
    assert main(["samples", str(made), "--out", str(out)]) == 2
    assert "inside the run directory" in capsys.readouterr().err
    assert (made / REFERENCE_FILE).read_bytes() == before


@pytest.mark.slow  # a whole reference
def test_the_problem_is_built_once(tmp_path, monkeypatch):
    import bnnkit.problem as problem_lib

    calls = []
    real = problem_lib.build
    monkeypatch.setattr(problem_lib, "build", lambda *a, **k: calls.append(a) or real(*a, **k))
    reference(PROBLEM, CONFIG, tmp_path / "ref", progress=False)
    assert len(calls) == 1


@pytest.mark.slow
def test_a_stage_that_diverges_marks_the_reference_and_overwrite_starts_it_again(tmp_path):
    from bnnkit.runs.divergence import DivergenceError

    folder = tmp_path / "ref"
    wild = Config(**{**SETTINGS, "ensemble_step_size": 1e36})  # the ensemble's SGD overflows
    with pytest.raises(DivergenceError):
        reference(PROBLEM, wild, folder, progress=False)
    record = json.loads((folder / REFERENCE_FILE).read_text())
    assert record["status"] == "diverged" and record["diverged"]["stage"] == "ensemble"
    assert not (folder / "chains").exists()
    # The corrected command replaces it; a resume with the step changed is refused by name.
    with pytest.raises(ConfigError, match="--ensemble-step-size"):
        reference(PROBLEM, CONFIG, folder, resume=True, progress=False)
    reference(PROBLEM, CONFIG, folder, overwrite=True, progress=False)
    assert json.loads((folder / REFERENCE_FILE).read_text())["status"] == "finished"
