"""The UCI benchmark script: resume without recomputation, and the table's arithmetic."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import bnnkit.evaluation  # noqa: F401  (the module, for the patch below)

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "uci_benchmark.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("uci_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_split(bench, split: int, rng: np.random.Generator) -> dict:
    """A finished yacht split (277 training rows), each method stamped with scale 1's settings."""
    configs = bench.method_configs(277, 1.0, 4)

    def entry(method):
        return {"rmse": float(rng.uniform(0.5, 1.5)), "ll": float(rng.uniform(-2, 0)),
                "seconds": 1.0, "config": configs[method].to_dict()}

    return {"dataset": "yacht", "split": split, "num_train": 277,
            "hmc": {**entry("hmc"), "converged": split % 2 == 0, "chains": 4,
                    "samples_per_chain": 8},
            "ensemble": entry("ensemble"), "vi": entry("vi")}


def test_published_figures_cover_every_dataset(bench):
    assert set(bench.PUBLISHED) == set(bench.DATASETS)
    for figures in bench.PUBLISHED.values():
        assert set(figures) == {"PBP", "MC dropout", "Deep ensembles"}


def test_a_finished_split_is_read_back_not_recomputed(bench, tmp_path, monkeypatch):
    stored = fake_split(bench, 0, np.random.default_rng(0))
    path = tmp_path / "yacht" / "split_0" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(stored))

    def refuse(*args, **kwargs):
        raise AssertionError("a finished split was run again")

    monkeypatch.setattr("bnnkit.runs.run", refuse)
    assert bench.run_split("yacht", 0, str(tmp_path), 1.0, 4) == stored


def test_only_a_method_whose_settings_changed_runs_again(bench, tmp_path, monkeypatch):
    stored = fake_split(bench, 0, np.random.default_rng(0))
    stored["ensemble"]["config"]["clip_grad_norm"] = None  # scored before the clip existed
    path = tmp_path / "yacht" / "split_0" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(stored))
    ran = []
    monkeypatch.setattr("bnnkit.runs.run", lambda problem, config, run_dir, **kw: ran.append(
        (type(config).METHOD, config)))
    # The module the benchmark calls evaluate from, so patch the module itself.
    monkeypatch.setattr(sys.modules["bnnkit.evaluation"], "evaluate",
                        lambda run_dir: {"test": {"rmse": 0.25, "nll": 1.5}})
    result = bench.run_split("yacht", 0, str(tmp_path), 1.0, 4)
    assert [method for method, _ in ran] == ["ensemble"]
    assert ran[0][1].clip_grad_norm == 10.0
    assert result["ensemble"]["rmse"] == 0.25 and result["ensemble"]["ll"] == -1.5
    assert result["hmc"] == stored["hmc"] and result["vi"] == stored["vi"]
    assert json.loads(path.read_text()) == result  # stored, with the new settings


def test_table_gives_mean_and_standard_error_over_splits(bench):
    rng = np.random.default_rng(1)
    splits = [fake_split(bench, s, rng) for s in range(5)]
    text, summary = bench.table({"yacht": splits})
    hmc_rmse = np.array([s["hmc"]["rmse"] for s in splits])
    mean, se = summary["yacht"]["ours"]["HMC"]["rmse"]
    assert math.isclose(mean, hmc_rmse.mean(), rel_tol=1e-12)
    assert math.isclose(se, hmc_rmse.std(ddof=1) / math.sqrt(5), rel_tol=1e-12)
    assert summary["yacht"]["hmc_converged"] == 3  # splits 0, 2 and 4
    row = next(line for line in text.splitlines() if line.startswith("| yacht"))
    assert f"{mean:.3f} ± {se:.3f}" in row
    assert "1.020 ± 0.050" in row  # PBP's published RMSE sits beside ours


@pytest.mark.slow
def test_one_split_end_to_end_then_resumed(bench, tmp_path):
    first = bench.run_split("yacht", 0, str(tmp_path), 0.01, 2)
    for method in bench.METHODS:
        assert np.isfinite(first[method]["rmse"]) and np.isfinite(first[method]["ll"])
    assert isinstance(first["hmc"]["converged"], bool)
    done = tmp_path / "yacht" / "split_0" / "result.json"
    stamp = done.stat().st_mtime_ns
    assert bench.run_split("yacht", 0, str(tmp_path), 0.01, 2) == first
    assert done.stat().st_mtime_ns == stamp


def test_hmc_starts_from_the_splits_ensemble_where_listed(bench, tmp_path, monkeypatch):
    # yacht stands in for a larger dataset: the order and the link are what is checked.
    monkeypatch.setattr(bench, "FROM_ENSEMBLE", ("yacht",))
    ran = []
    monkeypatch.setattr("bnnkit.runs.run", lambda problem, config, run_dir, **kw: ran.append(
        (type(config).METHOD, config, Path(run_dir))))
    monkeypatch.setattr(sys.modules["bnnkit.evaluation"], "evaluate",
                        lambda run_dir: {"test": {"rmse": 0.25, "nll": 1.5}} if "hmc" not in
                        str(run_dir) else {"test": {"rmse": 0.2, "nll": 1.0}, "num_chains": 4,
                                           "num_samples_per_chain": 8,
                                           "sampler": {"acceptance_rate": 0.8},
                                           "convergence": {"converged": False}})
    result = bench.run_split("yacht", 0, str(tmp_path), 1.0, 4)
    methods = [method for method, _, _ in ran]
    assert methods.index("ensemble") < methods.index("hmc")
    ensemble_dir = next(d for m, _, d in ran if m == "ensemble")
    hmc_config = next(c for m, c, _ in ran if m == "hmc")
    assert Path(hmc_config.init_checkpoint) == ensemble_dir
    assert result["hmc"]["config"]["init_checkpoint"] == str(ensemble_dir)
    # Read back with the same start, the finished split is not run again.
    ran.clear()
    assert bench.run_split("yacht", 0, str(tmp_path), 1.0, 4) == result and not ran


def test_other_datasets_start_from_the_prior(bench, tmp_path):
    assert "yacht" not in bench.FROM_ENSEMBLE
    assert bench.hmc_start("yacht", 0, str(tmp_path)) is None
    assert bench.hmc_start("kin8nm", 3, str(tmp_path)) == str(
        tmp_path / "kin8nm" / "split_3" / "ensemble")


def test_an_ensemble_scored_but_deleted_runs_again_when_hmc_starts_from_it(bench, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(bench, "FROM_ENSEMBLE", ("yacht",))
    stored = fake_split(bench, 0, np.random.default_rng(0))
    del stored["hmc"]  # HMC to run; the ensemble was scored but its run directory is gone
    path = tmp_path / "yacht" / "split_0" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(stored))
    ran = []
    monkeypatch.setattr("bnnkit.runs.run", lambda problem, config, run_dir, **kw: ran.append(
        type(config).METHOD))
    monkeypatch.setattr(sys.modules["bnnkit.evaluation"], "evaluate",
                        lambda run_dir: {"test": {"rmse": 0.25, "nll": 1.5}})
    bench.run_split("yacht", 0, str(tmp_path), 1.0, 4)
    assert ran == ["ensemble", "hmc"]
