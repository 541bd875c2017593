"""A sampler's iterations in blocks (bnnkit.runs.blocks): the draws are those of one iteration
per dispatch, one file per block; an interrupt keeps every complete block, and the resumed run
is the uninterrupted one bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit import runs, storage
from bnnkit.inference import mclmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir, blocks
from bnnkit.runs.keys import UNIT_KEY
from cli_checks import stored_files

PROBLEM = ProblemConfig("yacht_0", "linear", noise_std=0.35)
CONFIG = mclmc.Config(num_iterations=200, num_burn_in=20, num_chains=2, seed=5)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    path = tmp_path_factory.mktemp("blocks") / "whole"
    runs.run(PROBLEM, CONFIG, path, progress=False)
    return path


@pytest.mark.slow
def test_a_block_is_one_file_and_the_units_are_every_kept_iteration(whole):
    rundir = RunDir(whole)
    assert rundir.sample_units() == list(range(20, 200))
    files = rundir.sample_files()
    # The first block compiles (one iteration), burn-in ends a block: kept blocks start at 20.
    assert min(files) == 20 and len(files) >= (180 + blocks.MAX_BLOCK - 1) // blocks.MAX_BLOCK
    lines = rundir.read_log()
    assert [line["iteration"] for line in lines] == list(range(200))
    assert all(line["write_seconds"] >= 0 for line in lines)


def test_an_interrupt_keeps_the_complete_blocks_and_resumes_bit_for_bit(whole, tmp_path):
    path = tmp_path / "run"

    def interrupt(unit, log):
        if unit == 150:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.run(PROBLEM, CONFIG, path, progress=False, on_unit=interrupt)
    saved = int(storage.load_arrays(RunDir(path).state_file)[UNIT_KEY])
    # The state on disk is the last complete block's (written on the interrupt, or by a
    # checkpoint at that block's end): past burn-in, and not past the interrupted unit.
    assert 20 < saved <= 150
    runs.run(PROBLEM, CONFIG, path, progress=False, resume=True)
    got, want = stored_files(path), stored_files(whole)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_a_program_compiled_ahead_is_the_one_the_run_takes(whole, tmp_path):
    from bnnkit.problem import build
    from bnnkit.runs.loop import compile_ahead

    built = build(PROBLEM)
    compile_ahead(built, CONFIG)
    assert len(blocks._STARTED) == 1
    runs.run(built, CONFIG, tmp_path / "run", progress=False)
    assert not blocks._STARTED  # taken by the run, not compiled again beside it
    got, want = stored_files(tmp_path / "run"), stored_files(whole)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
