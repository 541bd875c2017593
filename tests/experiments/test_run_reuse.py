"""An experiment's runs are made once: finished ones reused, cut-off ones resumed, runs of other
settings refused."""

from __future__ import annotations

import pytest

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import run_or_reuse, run_seconds, run_status
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig
from experiment_checks import count_runs

PROBLEM = ProblemConfig("yacht_0", "linear", noise_std=0.5)


def config(iterations):
    return hmc.Config(step_size=1e-3, trajectory_len=0.003, num_iterations=iterations)


def test_finished_run_reused_longer_one_extended_other_settings_refused(tmp_path, monkeypatch):
    calls = count_runs(monkeypatch)
    run_dir = tmp_path / "run"
    assert run_or_reuse(PROBLEM, config(2), run_dir, progress=False)
    assert run_status(run_dir) == "finished" and run_seconds(run_dir) > 0
    mtime = (run_dir / "run.json").stat().st_mtime_ns
    assert not run_or_reuse(PROBLEM, config(2), run_dir, progress=False)
    assert len(calls) == 1 and (run_dir / "run.json").stat().st_mtime_ns == mtime
    # A run cut off (status "running") is resumed, not started again.
    record = storage.read_json(run_dir / "run.json")
    storage.write_json(run_dir / "run.json", {**record, "status": "running"})
    assert run_or_reuse(PROBLEM, config(3), run_dir, progress=False)
    assert len(calls) == 2 and len(storage.read_json(run_dir / "run.json")) > 0
    assert run_status(run_dir) == "finished"
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 3
    with pytest.raises(ConfigError, match="temperature"):
        run_or_reuse(ProblemConfig("yacht_0", "linear", noise_std=0.5, temperature=0.1),
                     config(3), run_dir, progress=False)
    assert len(calls) == 2
