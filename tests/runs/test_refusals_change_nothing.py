"""A refused command changes nothing: every way a ``--resume`` (or a run into a folder that
already holds one) is refused is checked before the first write.

Each case copies one small finished run, plants a stale lock and the temporary file of a write
a crash cut off (which a run that took the lock would tidy away), damages the copy, snapshots
every entry's type and bytes, runs the refused command through the command line and compares:
exit code 2, one line on stderr naming the problem, and the folder exactly as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bnnkit.cli import main
from bnnkit.runs.directory import RunDir
from cli_checks import SMALL_HMC, SMALL_PROBLEM, small_hmc_run

PROBLEM = SMALL_PROBLEM
HMC = SMALL_HMC


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag``'s value replaced (or added)."""
    if flag in argv:
        out = list(argv)
        out[out.index(flag) + 1] = value
        return out
    return [*argv, flag, value]


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (links not followed): its type and, for a file, its bytes."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            key = str(path.relative_to(folder))
            if path.is_symlink():
                out[key] = ("link", os.readlink(path))
            elif path.is_dir():
                out[key] = ("folder",)
            else:
                out[key] = ("file", path.read_bytes())
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return small_hmc_run(tmp_path_factory.mktemp("refusals") / "run")


@pytest.fixture(scope="module")
def other_seed(tmp_path_factory) -> Path:
    """The same run with another seed: a source of samples and lines that are not the run's."""
    return small_hmc_run(tmp_path_factory.mktemp("refusals") / "other", "--seed", "1")


# --- Damage -----------------------------------------------------------------------------------


def edit_record(change: Callable[[dict], None], *, digest: bool) -> Callable[[Path], None]:
    """Change ``run.json``; ``digest``: with its settings digest written anew (as anyone can)."""

    def damage(copy: Path) -> None:
        record = json.loads((copy / "run.json").read_text())
        change(record)
        if digest:
            RunDir(copy).write_record(record)
        else:
            (copy / "run.json").write_text(json.dumps(record, indent=2))

    return damage


def folder_instead(name: str) -> Callable[[Path], None]:
    def damage(copy: Path) -> None:
        path = copy / name
        if path.is_file():
            path.unlink()
        path.mkdir()
        (path / "x").write_text("something of the user's")

    return damage


def file_instead(name: str) -> Callable[[Path], None]:
    def damage(copy: Path) -> None:
        shutil.rmtree(copy / name)
        (copy / name).write_text("not a folder")

    return damage


def flip_byte(name: str) -> Callable[[Path], None]:
    def damage(copy: Path) -> None:
        data = bytearray((copy / name).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (copy / name).write_bytes(bytes(data))

    return damage


def swap_from(other: Path, name: str) -> Callable[[Path], None]:
    """``name`` and its manifest line replaced by another run's."""

    def damage(copy: Path) -> None:
        shutil.copyfile(other / name, copy / name)
        theirs = [
            line
            for line in (other / "manifest.jsonl").read_text().splitlines()
            if json.loads(line)["file"] == name
        ]
        ours = (copy / "manifest.jsonl").read_text().splitlines()
        (copy / "manifest.jsonl").write_text(
            "\n".join(theirs[0] if json.loads(line)["file"] == name else line for line in ours)
            + "\n"
        )

    return damage


def diverged(record: dict) -> None:
    record.update(
        status="diverged", diverged={"unit": 3, "what": ["log_posterior"], "members": [0]}
    )


def nothing(copy: Path) -> None:
    pass


def resume(*more: str) -> list[str]:
    return [*HMC, *more, "--resume"]


SAMPLE = "samples/sample_0000003.npz"
# name: (damage, argv before --dir, what the one line says)
CASES: dict[str, tuple[Callable[[Path], None], list[str], str]] = {
    "settings differ": (
        nothing,
        resume("--step-size", "2e-3"),
        "--resume with a different config: step_size",
    ),
    "another method": (
        nothing,
        [
            "nuts",
            *PROBLEM,
            "--num-iterations",
            "6",
            "--num-burn-in",
            "2",
            "--num-chains",
            "1",
            "--no-progress",
            "--no-evaluate",
            "--resume",
        ],
        "cannot resume a 'hmc' run as 'nuts'",
    ),
    "fewer iterations than done": (
        nothing,
        with_flag(resume(), "--num-iterations", "4"),
        "--resume may only extend a run",
    ),
    "run.json edited": (
        edit_record(lambda r: r["method_config"].update(num_burn_in=3), digest=False),
        resume(),
        "run.json' was edited",
    ),
    "run.json damaged": (
        lambda copy: (copy / "run.json").write_text('{"method": '),
        resume(),
        "run.json",
    ),
    "run.json removed": (lambda copy: (copy / "run.json").unlink(), resume(), "nothing to resume"),
    "run.json edited to another model, digest anew": (
        edit_record(lambda r: r["problem"].update(model="linear"), digest=True),
        with_flag(resume(), "--model", "linear"),
        "or run.json was edited",
    ),
    "run diverged": (edit_record(diverged, digest=True), resume(), "the run diverged"),
    "manifest damaged": (
        lambda copy: (copy / "manifest.jsonl").write_text(
            "garbage\n" + (copy / "manifest.jsonl").read_text()
        ),
        resume(),
        "manifest.jsonl' is damaged",
    ),
    "manifest removed": (
        lambda copy: (copy / "manifest.jsonl").unlink(),
        resume(),
        "manifest.jsonl' is missing",
    ),
    "state damaged": (flip_byte("state.npz"), resume(), "state.npz' is damaged"),
    "sample removed": (lambda copy: (copy / SAMPLE).unlink(), resume(), "is missing"),
    "sample damaged": (flip_byte(SAMPLE), resume(), "sha256 differs"),
    "unrecorded sample before the state": (
        lambda copy: shutil.copyfile(copy / SAMPLE, copy / "samples/sample_0000001.npz"),
        resume(),
        "sample_0000001.npz' is not in the manifest",
    ),
    "metrics.jsonl a folder": (
        folder_instead("metrics.jsonl"),
        with_flag(resume(), "--num-iterations", "8"),
        "metrics.jsonl' is a folder",
    ),
    "a folder named like a sample after the state": (
        folder_instead("samples/sample_0000007.npz"),
        with_flag(resume(), "--num-iterations", "8"),
        "is a folder",
    ),
    "a folder where a sample was": (folder_instead(SAMPLE), resume(), "is a folder"),
    "state.npz a folder": (folder_instead("state.npz"), resume(), "state.npz' is a folder"),
    "manifest a folder": (folder_instead("manifest.jsonl"), resume(), "is a folder"),
    "samples/ a file": (file_instead("samples"), resume(), "is a file where bnnkit keeps a folder"),
    "a link where a sample goes": (
        lambda copy: (copy / "samples/sample_0000007.npz").symlink_to(copy / SAMPLE),
        with_flag(resume(), "--num-iterations", "8"),
        "is a symbolic link",
    ),
    "a folder where evaluation.json goes, --overwrite": (
        folder_instead("evaluation.json"),
        [*HMC, "--overwrite"],
        "evaluation.json' is a folder",
    ),
    "metrics.jsonl a folder, --overwrite": (
        folder_instead("metrics.jsonl"),
        [*HMC, "--overwrite"],
        "is a folder",
    ),
    "a new run into the finished one": (nothing, HMC, "is not empty; pass --resume"),
    "--resume and --overwrite": (nothing, [*HMC, "--resume", "--overwrite"], "exclude each other"),
}


def plant_leftovers(copy: Path) -> None:
    """A stale lock and a crash's temporary file, which a run that took the lock removes."""
    (copy / ".lock").write_text(json.dumps({"pid": 999_999_999, "token": "stale"}))
    (copy / ".state.npz.0123456789ab.tmp").write_bytes(b"cut off")


def refused_without_a_trace(copy: Path, argv: list[str], says: str, capsys) -> None:
    before = snapshot(copy)
    capsys.readouterr()
    assert main([*argv, "--dir", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
    assert says in err, err
    after = snapshot(copy)
    assert sorted(after) == sorted(before), "entries added or removed"
    for name, value in before.items():
        assert after[name] == value, f"{name} changed"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_resume_changes_nothing(case, finished, tmp_path, capsys):
    damage, argv, says = CASES[case]
    copy = Path(shutil.copytree(finished, tmp_path / "run", symlinks=True))
    plant_leftovers(copy)
    damage(copy)
    refused_without_a_trace(copy, argv, says, capsys)


def test_a_sample_swapped_in_from_another_run_refuses_a_resume(
    finished, other_seed, tmp_path, capsys
):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    plant_leftovers(copy)
    swap_from(other_seed, SAMPLE)(copy)
    refused_without_a_trace(
        copy,
        with_flag(resume(), "--num-iterations", "8"),
        "sample_0000003.npz' is recorded by line",
        capsys,
    )


HOLD = """
import sys
from bnnkit.runs.lock import hold
with hold(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_resume_of_a_run_in_use_changes_nothing(finished, tmp_path, capsys):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    (copy / ".state.npz.0123456789ab.tmp").write_bytes(b"the holder's write in flight")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(copy)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        refused_without_a_trace(
            copy, with_flag(resume(), "--num-iterations", "8"), "is in use by process", capsys
        )
    finally:
        holder.communicate("")
    assert holder.returncode == 0


def test_a_resume_on_changed_data_changes_nothing(tmp_path, capsys):
    """A run on a user ``.npz`` whose file was replaced by other values of the same shapes."""
    rng = np.random.default_rng(0)
    data = tmp_path / "d.npz"

    def write_data(seed: int) -> None:
        rng = np.random.default_rng(seed)
        np.savez(
            data,
            x_train=rng.normal(size=(20, 3)),
            y_train=rng.normal(size=20),
            x_test=rng.normal(size=(6, 3)),
            y_test=rng.normal(size=6),
        )

    del rng
    write_data(0)
    argv = [
        "hmc",
        "--dataset",
        str(data),
        "--model",
        "linear",
        "--noise-std",
        "0.35",
        "--step-size",
        "1e-3",
        "--trajectory-len",
        "2e-3",
        "--num-iterations",
        "3",
        "--num-burn-in",
        "1",
        "--num-chains",
        "1",
        "--no-progress",
        "--no-evaluate",
    ]
    run = tmp_path / "run"
    assert main([*argv, "--dir", str(run)]) == 0
    write_data(1)
    plant_leftovers(run)
    refused_without_a_trace(
        run,
        [*with_flag(argv, "--num-iterations", "5"), "--resume"],
        "is not the data the run was made on",
        capsys,
    )


def test_the_data_file_name_is_the_problems():
    from bnnkit import problem
    from bnnkit.runs import directory

    assert directory.DATA_FILE == problem.DATA_FILE
