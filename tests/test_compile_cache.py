"""The command line's persistent compilation cache: on by default in the user's cache folder,
a second run loads what the first compiled and stores the same bits, and it is off when asked
or when JAX already has a cache of its own."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from cli_checks import stored_files

# Each case starts fresh processes that compile from nothing: end-to-end checks, run with the
# slow ones.
pytestmark = pytest.mark.slow

ARGV = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "linear",
    "--noise-std",
    "0.5",
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "2e-3",
    "--num-iterations",
    "4",
    "--num-burn-in",
    "1",
    "--no-progress",
    "--no-evaluate",
]


def bnnkit(run_dir, cache_dir, **env):
    """``bnnkit hmc`` in a fresh process whose only JAX cache is the command line's."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_") and k not in ("BNNKIT_COMPILE_CACHE", "BNNKIT_CACHE_DIR")
    }
    environ.update(BNNKIT_CACHE_DIR=str(cache_dir), PYTHONPATH=os.pathsep.join(sys.path), **env)
    done = subprocess.run(
        [sys.executable, "-m", "bnnkit.cli", *ARGV, "--dir", str(run_dir)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_a_second_run_loads_the_first_ones_programs_and_stores_the_same_bits(tmp_path):
    bnnkit(tmp_path / "first", tmp_path / "cache")
    entries = sorted(p.name for p in (tmp_path / "cache" / "jax").iterdir())
    assert entries, "the first run cached nothing"
    bnnkit(tmp_path / "second", tmp_path / "cache")
    # Nothing new to compile: the second run found every program of the first.
    assert sorted(p.name for p in (tmp_path / "cache" / "jax").iterdir()) == entries
    first, second = stored_files(tmp_path / "first"), stored_files(tmp_path / "second")
    assert sorted(first) == sorted(second)
    for key, value in first.items():
        np.testing.assert_array_equal(second[key], value, err_msg=key)


def test_off_when_asked_or_when_jax_has_its_own(tmp_path):
    bnnkit(tmp_path / "off", tmp_path / "cache", BNNKIT_COMPILE_CACHE="off")
    assert not (tmp_path / "cache" / "jax").exists()
    bnnkit(
        tmp_path / "own", tmp_path / "cache", JAX_COMPILATION_CACHE_DIR=str(tmp_path / "own_jax")
    )
    assert not (tmp_path / "cache" / "jax").exists()
    assert any((tmp_path / "own_jax").iterdir())
