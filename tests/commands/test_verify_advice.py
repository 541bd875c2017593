"""``bnnkit verify`` advises only what works: for each kind of damage, the advice it gives is
followed, step by step, until verify passes, and the run is then the undamaged one bit for bit."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bnnkit.cli import main
from bnnkit.runs.directory import RunDir
from cli_checks import SMALL_HMC, small_hmc_run, stored_files

HMC = SMALL_HMC
SAMPLE = "samples/sample_0000003.npz"


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return small_hmc_run(tmp_path_factory.mktemp("advice") / "run")


@pytest.fixture(scope="module")
def other_seed(tmp_path_factory) -> Path:
    return small_hmc_run(tmp_path_factory.mktemp("advice") / "other", "--seed", "1")


def folder_instead(name: str) -> Callable[[Path, Path], None]:
    def damage(copy: Path, other: Path) -> None:
        if (copy / name).is_file():
            (copy / name).unlink()
        (copy / name).mkdir()
        (copy / name / "x").write_text("something of the user's")

    return damage


def flip_byte(name: str) -> Callable[[Path, Path], None]:
    def damage(copy: Path, other: Path) -> None:
        data = bytearray((copy / name).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (copy / name).write_bytes(bytes(data))

    return damage


def extra_sample(copy: Path, other: Path) -> None:
    """A sample file after the state that the manifest does not record (a resume's to redo)."""
    shutil.copyfile(copy / SAMPLE, copy / "samples/sample_0000007.npz")


def swapped(copy: Path, other: Path) -> None:
    """A sample and its manifest line taken from the run with another seed."""
    shutil.copyfile(other / SAMPLE, copy / SAMPLE)
    theirs = next(
        line
        for line in (other / "manifest.jsonl").read_text().splitlines()
        if json.loads(line)["file"] == SAMPLE
    )
    ours = (copy / "manifest.jsonl").read_text().splitlines()
    (copy / "manifest.jsonl").write_text(
        "\n".join(theirs if json.loads(line)["file"] == SAMPLE else line for line in ours) + "\n"
    )


def diverged_with_extra_sample(copy: Path, other: Path) -> None:
    """A run marked diverged (a resume repeats it, so it is refused) and a file a resume
    would otherwise recompute."""
    record = json.loads((copy / "run.json").read_text())
    record.update(
        status="diverged", diverged={"unit": 3, "what": ["log_posterior"], "members": [0]}
    )
    RunDir(copy).write_record(record)
    extra_sample(copy, other)


def edited_record(copy: Path, other: Path) -> None:
    record = json.loads((copy / "run.json").read_text())
    record["method_config"]["num_burn_in"] = 3
    (copy / "run.json").write_text(json.dumps(record))


DAMAGE = {
    "unrecorded sample after the state": extra_sample,
    "sample before the state damaged": flip_byte(SAMPLE),
    "sample before the state removed": lambda copy, other: (copy / SAMPLE).unlink(),
    "state damaged": flip_byte("state.npz"),
    "manifest damaged": lambda copy, other: (copy / "manifest.jsonl").write_text(
        "garbage\n" + (copy / "manifest.jsonl").read_text()
    ),
    "run.json edited": edited_record,
    "sample swapped in from another run": swapped,
    "metrics.jsonl a folder": folder_instead("metrics.jsonl"),
    "a folder named like a sample after the state": folder_instead("samples/sample_0000007.npz"),
    "a folder where a sample was": folder_instead(SAMPLE),
    "state.npz a folder": folder_instead("state.npz"),
    "samples/ a file": lambda copy, other: (
        shutil.rmtree(copy / "samples"),
        (copy / "samples").write_text("x"),
    ),
    "a link where a sample goes": lambda copy, other: (
        copy / "samples/sample_0000007.npz"
    ).symlink_to(copy / SAMPLE),
    "diverged, with a file a resume would redo": diverged_with_extra_sample,
}


def follow(copy: Path, err: str, capsys) -> str:
    """Do what verify's one-line advice says; returns which advice it was."""
    argv = [*HMC, "--dir", str(copy)]
    removal = re.search(r"remove (.+?) first", err)
    if removal:
        for name in re.findall(r"'([^']+)'", removal.group(1)):
            path = copy / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        return "remove"
    if "--resume repairs" in err:
        assert main([*argv, "--resume"]) == 0, capsys.readouterr().err
        return "resume"
    if "--overwrite" in err:
        assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
        return "overwrite"
    raise AssertionError(f"no advice to follow: {err}")


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_following_verifys_advice_repairs_the_run(kind, finished, other_seed, tmp_path, capsys):
    copy = Path(shutil.copytree(finished, tmp_path / "run", symlinks=True))
    DAMAGE[kind](copy, other_seed)
    steps = []
    for _ in range(3):
        capsys.readouterr()
        code = main(["verify", str(copy)])
        out, err = capsys.readouterr()
        if code == 0:
            break
        assert code == 2 and err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
        steps.append(follow(copy, err, capsys))
    else:
        raise AssertionError(f"still not verified after {steps}")
    assert steps, "the damage went unnoticed"
    want = {
        "unrecorded sample after the state": ["resume"],
        "metrics.jsonl a folder": ["remove"],
        "a folder named like a sample after the state": ["remove"],
        "a link where a sample goes": ["remove"],
        "a folder where a sample was": ["remove", "overwrite"],
        "state.npz a folder": ["remove", "overwrite"],
        "samples/ a file": ["remove", "overwrite"],
    }.get(kind, ["overwrite"])
    assert steps == want, out
    got, wanted = stored_files(copy), stored_files(finished)
    assert sorted(got) == sorted(wanted)
    for key, value in wanted.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
