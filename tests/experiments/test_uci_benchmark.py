"""The UCI benchmark script: resume without recomputation, and the table's arithmetic."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "uci_benchmark.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("uci_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_split(split: int, rng: np.random.Generator) -> dict:
    entry = {"rmse": float(rng.uniform(0.5, 1.5)), "ll": float(rng.uniform(-2, 0)),
             "seconds": 1.0}
    return {"dataset": "yacht", "split": split, "num_train": 277,
            "hmc": {**entry, "converged": split % 2 == 0, "chains": 4, "samples_per_chain": 8},
            "ensemble": dict(entry), "vi": dict(entry)}


def test_published_figures_cover_every_dataset(bench):
    assert set(bench.PUBLISHED) == set(bench.DATASETS)
    for figures in bench.PUBLISHED.values():
        assert set(figures) == {"PBP", "MC dropout", "Deep ensembles"}


def test_a_finished_split_is_read_back_not_recomputed(bench, tmp_path, monkeypatch):
    stored = fake_split(0, np.random.default_rng(0))
    path = tmp_path / "yacht" / "split_0" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(stored))

    def refuse(*args, **kwargs):
        raise AssertionError("a finished split was run again")

    monkeypatch.setattr("bnnkit.runs.run", refuse)
    assert bench.run_split("yacht", 0, str(tmp_path), 1.0, 4) == stored


def test_table_gives_mean_and_standard_error_over_splits(bench):
    rng = np.random.default_rng(1)
    splits = [fake_split(s, rng) for s in range(5)]
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
