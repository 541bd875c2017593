"""Shared fixtures: the real-data folder and small problems."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

# The command line caches compiled programs in the user's cache folder; the tests call it in
# this process and must not write there (make test gives JAX a cache of its own instead).
os.environ.setdefault("BNNKIT_COMPILE_CACHE", "off")
# The command line asks JAX for one CPU device per core; the tests compare runs made by
# commands in other processes with runs made in this one (one device), bit for bit.
os.environ.setdefault("BNNKIT_CPU_DEVICES", "1")


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``BNNKIT_DATA_DIR`` when it points at the real datasets; otherwise the test is skipped."""
    value = os.environ.get("BNNKIT_DATA_DIR")
    if not value or not Path(value).is_dir():
        pytest.skip("BNNKIT_DATA_DIR is not set to a folder with the real datasets")
    return Path(value)


@pytest.fixture(scope="session")
def benchmark_script() -> Callable[[str], ModuleType]:
    """Imports a script of ``benchmarks/`` by name, its folder on the path as when it runs
    (a script imports its neighbours)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
        yield importlib.import_module


@pytest.fixture(autouse=True)
def _restore_float64_setting():
    """A test that turns on float64 (a --float64 run) leaves the rest in their own precision."""
    import jax

    before = jax.config.read("jax_enable_x64")
    yield
    jax.config.update("jax_enable_x64", before)
