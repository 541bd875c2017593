"""Run directories: exact resume, crash recovery, and no silent overwrite."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from bnnkit import runs, storage
from bnnkit.errors import ConfigError
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from cli_checks import stored_files as stored

PROBLEM = ProblemConfig(dataset="yacht_0", model="mlp_regression_small")


def config(num_iterations: int, **changes) -> hmc.Config:
    return hmc.Config(
        step_size=2e-4,
        trajectory_len=1e-3,
        num_iterations=num_iterations,
        num_burn_in=2,
        num_chains=2,
        seed=7,
        **changes,
    )


def assert_identical(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    path = tmp_path_factory.mktemp("runs") / "full"
    runs.run(PROBLEM, config(7), str(path), progress=False)
    return stored(path)


def test_resume_continues_bit_for_bit(tmp_path, uninterrupted):
    path = str(tmp_path / "run")
    runs.run(PROBLEM, config(4), path, progress=False)
    runs.run(PROBLEM, config(7), path, resume=True, progress=False)
    assert_identical(stored(path), uninterrupted)
    log = RunDir(path).read_log()
    assert [r["iteration"] for r in log] == list(range(7))


def test_resume_after_a_crash_between_checkpoints(tmp_path, uninterrupted):
    path = str(tmp_path / "run")

    def crash(iteration, record):
        if iteration == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.run(PROBLEM, config(7, checkpoint_every=3), path, progress=False, on_unit=crash)
    record = storage.read_json(RunDir(path).run_file)
    assert record["status"] == "running"
    # Samples of iterations 3 and 4 exist but the state is from iteration 3: resume redoes them.
    assert RunDir(path).sample_units() == [2, 3, 4]
    # The checkpoint interval does not change the samples, so it may differ on resume.
    runs.run(PROBLEM, config(7), path, resume=True, progress=False)
    assert_identical(stored(path), uninterrupted)
    assert storage.read_json(RunDir(path).run_file)["status"] == "finished"


def test_existing_run_is_never_overwritten_silently(tmp_path):
    path = str(tmp_path / "run")
    runs.run(PROBLEM, config(3), path, progress=False)
    before = stored(path)
    with pytest.raises(ConfigError, match="not empty; pass --resume"):
        runs.run(PROBLEM, config(3), path, progress=False)
    assert_identical(stored(path), before)
    with pytest.raises(ConfigError, match=r"step_size was 0\.0002"):
        runs.run(
            PROBLEM,
            dataclasses.replace(config(5), step_size=1e-4),
            path,
            resume=True,
            progress=False,
        )
    runs.run(PROBLEM, config(3), path, overwrite=True, progress=False)
    assert_identical(stored(path), before)  # same seed, same run


def test_not_a_run_directory_is_not_overwritten(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a bnnkit run"):
        runs.run(PROBLEM, config(3), str(tmp_path), overwrite=True, progress=False)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_storage_is_pickle_free_and_atomic(tmp_path):
    storage.save_arrays(tmp_path / "a.npz", {"x": np.arange(3)})
    assert [p.name for p in tmp_path.iterdir()] == ["a.npz"]  # no temporary file left behind
    np.testing.assert_array_equal(storage.load_arrays(tmp_path / "a.npz")["x"], np.arange(3))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError):
        np.load(tmp_path / "obj.npy", allow_pickle=False)
    storage.write_json(tmp_path / "r.json", {"a": 1})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}


def test_a_run_killed_before_its_first_write_can_be_overwritten(tmp_path):
    path = tmp_path / "run"
    (path / "samples").mkdir(parents=True)
    (path / ".lock").write_text("999999999")  # a pid that is not running
    runs.run(PROBLEM, config(3), str(path), overwrite=True, progress=False)
    assert storage.read_json(path / "run.json")["status"] == "finished"
    assert not (path / ".lock").exists()


@pytest.mark.slow
def test_host_integrator_resumes_into_the_in_loop_run(tmp_path, uninterrupted):
    # The host-driven leapfrog loop through the run driver, then a resume with the in-loop one
    # (auto picks it for this MLP), gives the in-loop run's files bit for bit; the record
    # loses its integrator as a run made before that setting existed, which still resumes.
    path = str(tmp_path / "run")
    runs.run(PROBLEM, config(4, integrator="host"), path, progress=False)
    record = RunDir(path).read_record()
    del record["method_config"]["integrator"]
    RunDir(path).write_record(record)
    runs.run(PROBLEM, config(7), path, resume=True, progress=False)
    assert_identical(stored(path), uninterrupted)
