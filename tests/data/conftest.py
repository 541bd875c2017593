"""Shared fixtures of the dataset tests: the real data folder (skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def real_data_dir() -> Path:
    """``$BNNKIT_DATA_DIR`` (CI points it at the shared data folder); skip when unset."""
    value = os.environ.get("BNNKIT_DATA_DIR")
    if not value or not Path(value).is_dir():
        pytest.skip("BNNKIT_DATA_DIR not set: real-data checks need the dataset files")
    return Path(value)


@pytest.fixture
def offline_env(tmp_path, monkeypatch) -> Path:
    """No data directory and an empty, private download cache."""
    monkeypatch.delenv("BNNKIT_DATA_DIR", raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("BNNKIT_CACHE_DIR", str(cache))
    return cache
