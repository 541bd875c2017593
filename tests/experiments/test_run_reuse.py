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
        run_or_reuse(
            ProblemConfig("yacht_0", "linear", noise_std=0.5, temperature=0.1),
            config(3),
            run_dir,
            progress=False,
        )
    assert len(calls) == 2


@pytest.mark.slow
def test_a_derived_step_that_diverges_is_divided_by_ten_and_then_reused(tmp_path):
    # SGD at 1e-2 on yacht's unscaled linear model goes NaN in its first epoch (the driver
    # stops it); 1e-3 and below do not. The run is made at the first step that holds, and a
    # second call reuses it at that step without running anything.
    from bnnkit.experiments.run_reuse import run_or_reuse_stable
    from bnnkit.inference import sgd

    problem = ProblemConfig("yacht_0", "linear")
    config = sgd.Config(init_step_size=1e-2, num_epochs=3, batch_size=16)
    made, ran = run_or_reuse_stable(problem, config, tmp_path / "run", progress=False)
    assert ran and made.init_step_size < config.init_step_size
    assert run_status(tmp_path / "run") == "finished"
    again, ran = run_or_reuse_stable(problem, config, tmp_path / "run", progress=False)
    assert not ran and again == made
    # A step that never holds is still refused, in the driver's words.
    with pytest.raises(ConfigError, match="became NaN or infinite"):
        run_or_reuse_stable(
            problem,
            sgd.Config(init_step_size=1e30, num_epochs=2, batch_size=32),
            tmp_path / "never",
            progress=False,
        )
