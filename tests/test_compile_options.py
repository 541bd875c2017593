"""The pure parts of ``benchmarks/compile_options.py``: how a configuration is read and how a
run's stored draws are put together for the bit-for-bit comparison. Nothing here is timed."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("compile_options")


def test_a_configuration_names_programs_and_typed_options(bench):
    label, names, options = bench.parse_config(
        "block,epoch_fn:xla_backend_optimization_level=0;xla_llvm_disable_expensive_passes=true"
    )
    assert names == ["block", "epoch_fn"]
    assert options == {
        "xla_backend_optimization_level": 0,
        "xla_llvm_disable_expensive_passes": True,
    }
    assert label.startswith("block,epoch_fn:")
    assert bench.parse_config("base") == ("base", [], {})


def test_draws_join_the_blocks_in_iteration_order(bench, tmp_path):
    samples = tmp_path / "chains" / "samples"
    samples.mkdir(parents=True)
    draws = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)  # chains, iterations, leaf
    # Written out of order: the files' names, not their writing, give the order.
    np.savez(samples / "sample_0000012-0000014.npz", w=draws[:, 2:], __kind__=np.array("x"))
    np.savez(samples / "sample_0000010-0000011.npz", w=draws[:, :2], __kind__=np.array("x"))
    found = bench.draws(tmp_path)
    assert list(found) == ["w"]  # scalars beside the draws are no draws
    assert np.array_equal(found["w"], draws)
