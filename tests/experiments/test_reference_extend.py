"""Extending a finished run is ``--resume`` with a larger budget, for the reference as for a
single run; a resume that changes anything else is refused naming the setting and both
values."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from bnnkit import ConfigError
from bnnkit.experiments.reference import Config, reference
from bnnkit.inference import hmc, sgd
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from bnnkit.runs.loop import run

PROBLEM = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.5)
CONFIG = Config(sampler="nuts", members=2, num_tuning=6, num_samples=8, ensemble_steps=20)


def _digests(run_dir) -> dict[str, str]:
    samples = RunDir(run_dir).samples_dir
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(samples.glob("sample_*.npz"))
    }


@pytest.mark.slow
def test_a_finished_reference_extends_with_a_larger_num_samples(tmp_path):
    folder = tmp_path / "ref"
    reference(PROBLEM, CONFIG, folder, progress=False)
    before = _digests(folder / "chains")
    # A changed step-changing setting is refused, naming it and both values; nothing runs.
    with pytest.raises(ConfigError, match="was made with --num-tuning 6; this call gives 7"):
        reference(
            PROBLEM,
            Config(sampler="nuts", members=2, num_tuning=7, num_samples=16, ensemble_steps=20),
            folder,
            resume=True,
            progress=False,
        )
    with pytest.raises(ConfigError, match=r"was made with --noise-std 0\.5; this call gives 0\.4"):
        reference(
            ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.4),
            CONFIG,
            folder,
            resume=True,
            progress=False,
        )
    assert _digests(folder / "chains") == before
    longer = Config(
        sampler="nuts", members=2, num_tuning=6, num_samples=16, ensemble_steps=20, max_time="1h"
    )  # a new time budget is a resume's to give
    extended = reference(PROBLEM, longer, folder, resume=True, progress=False)
    after = _digests(folder / "chains")
    assert extended.stopped is None
    assert extended.evaluation["num_samples_per_chain"] == 16
    assert len(after) > len(before)
    assert {name: after[name] for name in before} == before  # the first draws, bit for bit


@pytest.mark.slow
def test_a_single_run_extends_with_a_larger_budget_or_is_refused_by_name(tmp_path):
    config = hmc.Config(
        step_size=1e-3, trajectory_len=0.01, num_iterations=4, num_burn_in=1, num_chains=2
    )
    run(PROBLEM, config, tmp_path / "hmc", progress=False)
    before = _digests(tmp_path / "hmc")
    run(
        PROBLEM,
        hmc.Config(
            step_size=1e-3,
            trajectory_len=0.01,
            num_iterations=7,
            num_burn_in=1,
            num_chains=2,
            max_time=3600,
        ),
        tmp_path / "hmc",
        resume=True,
        progress=False,
    )
    after = _digests(tmp_path / "hmc")
    assert len(after) == 6 and {name: after[name] for name in before} == before
    with pytest.raises(ConfigError, match="num_burn_in was 1 in the stored run but is 2"):
        run(
            PROBLEM,
            hmc.Config(
                step_size=1e-3, trajectory_len=0.01, num_iterations=9, num_burn_in=2, num_chains=2
            ),
            tmp_path / "hmc",
            resume=True,
            progress=False,
        )
    config = sgd.Config(init_step_size=1e-4, num_epochs=2, batch_size=64)
    run(PROBLEM, config, tmp_path / "sgd", progress=False)
    copy = tmp_path / "sgd_copy"
    shutil.copytree(tmp_path / "sgd", copy)
    try:
        run(
            PROBLEM,
            sgd.Config(init_step_size=1e-4, num_epochs=4, batch_size=64),
            copy,
            resume=True,
            progress=False,
        )
    except ConfigError as err:  # refused: then by the setting's name and both values
        assert "num_epochs was 2 in the stored run but is 4" in str(err)
    else:
        assert RunDir(copy).read_record()["status"] == "finished"
