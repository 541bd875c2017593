"""Run directories: damaged files are detected; older layouts evaluate or get one line."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from bnnkit import runs, storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs.provenance import settings_digest

PROBLEM = ProblemConfig(dataset="yacht_0", model="mlp_regression_small", noise_std=0.35)
CONFIG = hmc.Config(
    step_size=2e-4, trajectory_len=1e-3, num_iterations=4, num_burn_in=1, num_chains=2
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = tmp_path_factory.mktemp("dir") / "run"
    runs.run(PROBLEM, CONFIG, path, progress=False)
    return path


def copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def one_line_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bnnkit: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_a_damaged_state_file_is_detected_on_resume(finished, tmp_path, capsys):
    run = copy(finished, tmp_path / "run")
    truncate(run / "state.npz")
    with pytest.raises(ConfigError, match=r"state\.npz' is damaged"):
        runs.run(PROBLEM, CONFIG, run, resume=True, progress=False)


def test_a_damaged_sample_is_detected_by_evaluate(finished, tmp_path, capsys):
    run = copy(finished, tmp_path / "run")
    truncate(run / "samples" / "sample_0000002.npz")
    err = one_line_error(["evaluate", str(run)], capsys)
    assert "sample_0000002.npz' is damaged" in err


def test_a_damaged_record_is_detected(finished, tmp_path, capsys):
    run = copy(finished, tmp_path / "run")
    (run / "run.json").write_text('{"method": "hmc", "problem": ')
    err = one_line_error(["evaluate", str(run)], capsys)
    assert "run.json' is damaged: not valid JSON" in err
    err = one_line_error(
        [
            "hmc",
            "--dataset",
            "yacht_0",
            "--model",
            "mlp_regression_small",
            "--step-size",
            "1e-3",
            "--trajectory-len",
            "0.01",
            "--num-iterations",
            "2",
            "--dir",
            str(run),
            "--resume",
            "--no-progress",
        ],
        capsys,
    )
    assert "is damaged" in err


def legacy_hmc_run(path):
    """A run as written before the one driver: no layout, (chains, ...) sample files."""
    problem = build(PROBLEM)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    positions = jax.vmap(problem.init_params)(keys)
    (path / "samples").mkdir(parents=True)
    for it in (1, 2, 3):
        storage.save_arrays(
            path / "samples" / f"sample_{it:07d}.npz", storage.flatten_tree(positions)
        )
    storage.write_json(
        path / "run.json",
        {
            "method": "hmc",
            "problem": {"dataset": "yacht_0", "model": "mlp_regression_small", "noise_std": 0.35},
            "method_config": {"step_size": 1e-3, "num_iterations": 4, "num_burn_in": 1, "seed": 0},
            "status": "finished",
        },
    )
    return positions


def test_an_older_sampling_run_still_evaluates(tmp_path):
    positions = legacy_hmc_run(tmp_path / "old")
    result = evaluate(tmp_path / "old")
    assert result["num_chains"] == 2 and result["num_samples_per_chain"] == 3
    assert np.isfinite(result["test"]["rmse"])
    out = tmp_path / "samples.npz"
    assert main(["samples", str(tmp_path / "old"), "--out", str(out)]) == 0
    with np.load(out, allow_pickle=False) as f:
        np.testing.assert_array_equal(
            f["params/Dense_0/kernel"][:, 1], positions["params"]["Dense_0"]["kernel"]
        )


def test_older_layouts_that_cannot_be_read_are_refused_in_one_line(tmp_path, capsys):
    legacy_hmc_run(tmp_path / "old")
    err = one_line_error(
        [
            "hmc",
            "--dataset",
            "yacht_0",
            "--model",
            "mlp_regression_small",
            "--noise-std",
            "0.35",
            "--step-size",
            "1e-3",
            "--trajectory-len",
            "0.01",
            "--num-iterations",
            "6",
            "--num-burn-in",
            "1",
            "--dir",
            str(tmp_path / "old"),
            "--resume",
            "--no-progress",
        ],
        capsys,
    )
    assert "older bnnkit layout and cannot be resumed" in err
    record = json.loads((tmp_path / "old" / "run.json").read_text())
    (tmp_path / "old" / "run.json").write_text(
        json.dumps({**record, "method": "vi", "posterior": "diag_gaussian"})
    )
    err = one_line_error(["evaluate", str(tmp_path / "old")], capsys)
    assert "older bnnkit layout whose 'diag_gaussian' posterior" in err


def test_a_run_older_than_a_setting_is_refused_on_resume(tmp_path, capsys):
    # A run whose stored Config predates a setting (here HMC's --adapt) has a state without
    # what that setting keeps: resuming it is refused in one line naming the setting.
    args = [
        "hmc",
        "--dataset",
        "yacht_0",
        "--model",
        "linear",
        "--noise-std",
        "0.35",
        "--step-size",
        "1e-3",
        "--trajectory-len",
        "0.01",
        "--num-iterations",
        "2",
        "--num-burn-in",
        "1",
        "--dir",
        str(tmp_path / "run"),
        "--no-progress",
        "--no-evaluate",
    ]
    assert main(args) == 0
    path = tmp_path / "run" / "run.json"
    record = json.loads(path.read_text())
    del record["method_config"]["adapt"]
    # As that older bnnkit would have written it: with the digest of its own settings.
    record["settings_sha256"] = settings_digest(record)
    path.write_text(json.dumps(record))
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    err = one_line_error([*args, "--resume"], capsys)
    assert "older bnnkit without the setting(s) adapt" in err
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before


def test_load_run_reads_both_kinds_and_each_reader_refuses_the_other(finished, tmp_path):
    import jax.numpy as jnp

    def log_density(p):
        return -0.5 * jnp.sum(p["x"] ** 2)

    config = hmc.Config(
        step_size=0.1,
        trajectory_len=0.5,
        num_chains=2,
        num_iterations=6,
        num_burn_in=2,
        checkpoint_every=3,
    )
    start = {"x": jnp.zeros((2, 3))}
    density = tmp_path / "density"
    chains = runs.sample(log_density, start, config, run_dir=density)
    stored = runs.load_run(density)
    assert stored.problem is None and stored.record["chunks"]
    np.testing.assert_array_equal(stored.chains.positions["x"], chains.positions["x"])
    np.testing.assert_array_equal(stored.posterior.params["x"], chains.positions["x"])
    with pytest.raises(ConfigError, match=r"run of bnnkit\.runs\.sample: .*bnnkit\.load_chains"):
        evaluate(density)
    with pytest.raises(ConfigError, match=r"is a run of bnnkit\.runs\.sample, not of the "):
        runs.run(PROBLEM, CONFIG, density, resume=True, progress=False)

    network = runs.load_run(finished)
    assert network.chains is None and network.problem.dataset.name == "yacht_0"
    assert (network.posterior.num_chains, network.posterior.num_samples) == (2, 3)
    with pytest.raises(ConfigError, match=r"is not a run of bnnkit\.runs\.sample"):
        runs.load_chains(finished)
    driver = copy(finished, tmp_path / "driver")
    before = {p: p.read_bytes() for p in driver.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match=r"is a run of the driver \(bnnkit\.runs\.run\)"):
        runs.sample(log_density, start, config, run_dir=driver, resume=True)
    assert {p: p.read_bytes() for p in driver.rglob("*") if p.is_file()} == before


def test_the_recorded_version_is_the_installed_distributions(monkeypatch):
    import importlib.metadata

    from bnnkit.runs import provenance

    assert provenance.versions()["bnnkit"] == importlib.metadata.version("bnnkit")

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert provenance.package_version() == "unknown"
