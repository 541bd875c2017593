"""The UCI benchmark script: resume without recomputation, and the table's arithmetic."""

from __future__ import annotations

import dataclasses
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


def fake_split(bench, split: int, rng: np.random.Generator, level="converged") -> dict:
    """A finished yacht split stamped with today's recipe."""

    def row():
        return {
            "rmse": float(rng.uniform(0.5, 1.5)),
            "ll": float(rng.uniform(-2, 0)),
            "seconds": 10.0,
        }

    return {
        "dataset": "yacht",
        "split": split,
        "num_train": 277,
        "config": json.loads(json.dumps(dataclasses.asdict(bench.recipe()))),
        "reference": {
            **row(),
            "level": level,
            "converged": level == "converged",
            "within_chain": level != "not-mixed",
            "modes": 1 + split % 3,
            "chains": 8,
            "samples_per_chain": 200,
        },
        "ensemble": row(),
    }


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

    monkeypatch.setattr("bnnkit.experiments.reference.reference", refuse)
    assert bench.run_split("yacht", 0, str(tmp_path)) == stored


def test_a_split_made_with_other_settings_runs_again(bench, tmp_path):
    stored = fake_split(bench, 0, np.random.default_rng(0))
    stored["config"]["members"] = 3
    path = tmp_path / "result.json"
    path.write_text(json.dumps(stored))
    assert bench.split_result(path) is None
    stored["config"]["members"] = bench.recipe().members
    path.write_text(json.dumps(stored))
    assert bench.split_result(path) == stored


def test_table_gives_mean_and_standard_error_over_splits(bench):
    rng = np.random.default_rng(1)
    splits = [
        fake_split(bench, s, rng, level=("converged", "mixed-multimodal", "not-mixed")[s % 3])
        for s in range(5)
    ]
    text, summary = bench.table({"yacht": splits})
    rmse = np.array([s["reference"]["rmse"] for s in splits])
    mean, se = summary["yacht"]["ours"]["Reference"]["rmse"]
    assert math.isclose(mean, rmse.mean(), rel_tol=1e-12)
    assert math.isclose(se, rmse.std(ddof=1) / math.sqrt(5), rel_tol=1e-12)
    ll = np.array([s["ensemble"]["ll"] for s in splits])
    assert math.isclose(summary["yacht"]["ours"]["Ensemble"]["ll"][0], ll.mean(), rel_tol=1e-12)
    assert summary["yacht"]["within_chain"] == 4  # splits 0, 1, 3 and 4: not-mixed is split 2
    assert summary["yacht"]["levels"] == {"converged": 2, "mixed-multimodal": 2, "not-mixed": 1}
    row = next(line for line in text.splitlines() if line.startswith("| yacht"))
    assert f"{mean:.3f} ± {se:.3f}" in row and "| 4/5 |" in row
    assert "1.020 ± 0.050" in row  # PBP's published RMSE sits beside ours
    assert "| — |" in row  # splits made before the reference levels were recorded


def test_table_counts_the_reference_levels(bench):
    rng = np.random.default_rng(2)
    verdicts = ("reproducible", "not a reference", "reproducible", "certified")
    splits = [fake_split(bench, s, rng) for s in range(4)]
    for split, verdict in zip(splits, verdicts, strict=True):
        split["reference"]["reference_level"] = verdict
    text, summary = bench.table({"yacht": splits})
    assert summary["yacht"]["reference_levels"] == {
        "certified": 1,
        "reproducible": 2,
        "not a reference": 1,
    }
    row = next(line for line in text.splitlines() if line.startswith("| yacht"))
    assert "| 1 / 2 / 1 |" in row
