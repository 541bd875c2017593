"""The manifest's lines are chained to the run's record: a sample taken with its manifest line
from another run, a line edited, added or removed is named in one line by ``verify`` and by the
readers; a run made before the chain still reads and verifies, with a note."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.runs import manifest_lines
from bnnkit.runs.directory import RunDir
from bnnkit.runs.provenance import settings_digest
from cli_checks import SMALL_HMC, small_hmc_run

HMC = SMALL_HMC
SAMPLE = "samples/sample_0000003.npz"


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return small_hmc_run(tmp_path_factory.mktemp("chain") / "run")


@pytest.fixture(scope="module")
def other_seed(tmp_path_factory) -> Path:
    return small_hmc_run(tmp_path_factory.mktemp("chain") / "other", "--seed", "1")


def lines_of(run: Path) -> list[str]:
    return (run / manifest_lines.MANIFEST_FILE).read_text().splitlines()


def write_lines(run: Path, lines: list[str]) -> None:
    (run / manifest_lines.MANIFEST_FILE).write_text("\n".join(lines) + "\n")


def swap(copy: Path, other: Path, name: str) -> None:
    """``name`` and its manifest line replaced by the other run's (its sha256 matches)."""
    shutil.copyfile(other / name, copy / name)
    theirs = next(line for line in lines_of(other) if json.loads(line)["file"] == name)
    write_lines(
        copy, [theirs if json.loads(line)["file"] == name else line for line in lines_of(copy)]
    )


def refused(argv: list[str], names: str, capsys) -> str:
    """``argv`` exits 2 with one line on stderr naming ``names``; returns stdout and stderr."""
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("bnnkit: error: ") and err.count("\n") == 1, err
    assert names in out + err, out + err
    return out + err


def test_a_new_run_is_chained_from_its_record(finished):
    record = json.loads((finished / "run.json").read_text())
    lines = lines_of(finished)
    assert json.loads(lines[0])[manifest_lines.CHAIN_KEY] == record[manifest_lines.IDENTITY_KEY]
    for before, line in itertools.pairwise(lines):
        assert json.loads(line)[manifest_lines.CHAIN_KEY] == manifest_lines.line_digest(
            before.encode()
        )
    assert record[manifest_lines.HEAD_KEY] == manifest_lines.line_digest(lines[-1].encode())
    assert record[manifest_lines.IDENTITY_KEY] == manifest_lines.identity(
        settings_digest(
            {
                k: v
                for k, v in record.items()
                if k not in (manifest_lines.IDENTITY_KEY, manifest_lines.HEAD_KEY)
            }
        ),
        record["method_config"]["seed"],
    )


def test_a_sample_swapped_in_with_its_line_from_another_seed_is_named(
    finished, other_seed, tmp_path, capsys
):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    swap(copy, other_seed, SAMPLE)
    # Each of the two files agrees with the other: only the chain tells.
    line = next(json.loads(x) for x in lines_of(copy) if json.loads(x)["file"] == SAMPLE)
    assert storage.file_sha256(copy / SAMPLE) == line["sha256"]
    said = refused(["verify", str(copy)], f"{SAMPLE} is recorded by line", capsys)
    assert "does not follow from the line before it" in said and "--resume" not in said
    refused(["evaluate", str(copy)], f"{SAMPLE}' is recorded by line", capsys)
    refused(
        ["samples", str(copy), "--out", str(tmp_path / "out.npz")],
        f"{SAMPLE}' is recorded by line",
        capsys,
    )
    assert not (tmp_path / "out.npz").exists()


def test_a_first_line_from_another_run_is_not_chained_to_the_record(
    finished, other_seed, tmp_path, capsys
):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    first = json.loads(lines_of(copy)[0])["file"]
    assert first == "state.npz"  # the state is saved after the first iteration
    swap(copy, other_seed, first)
    # Readers of the samples do not need the state, but nothing after a broken line can be
    # trusted: the manifest itself is named.
    for command in (["verify", str(copy)], ["evaluate", str(copy)]):
        refused(
            command,
            "has line 1 (recording state.npz), which is not chained to this run's run.json",
            capsys,
        )


def test_a_line_removed_from_the_middle_with_its_file_is_named(finished, tmp_path, capsys):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    lines = lines_of(copy)
    gone = next(i for i, line in enumerate(lines[:-1]) if json.loads(line)["file"] == SAMPLE)
    (copy / SAMPLE).unlink()
    write_lines(copy, lines[:gone] + lines[gone + 1 :])
    after = json.loads(lines[gone + 1])["file"]
    refused(
        ["verify", str(copy)],
        f"{after} is recorded by line {gone + 1} of manifest.jsonl, "
        "which does not follow from the line before it",
        capsys,
    )


def test_the_last_line_of_a_finished_run_edited_or_one_added_is_named(finished, tmp_path, capsys):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    lines = lines_of(copy)
    last = json.loads(lines[-1])
    write_lines(copy, [*lines[:-1], json.dumps({**last, "unit": last["unit"] + 1}, sort_keys=True)])
    refused(["verify", str(copy)], f"{last['file']} is recorded by the last line", capsys)

    # A line added at the end, chained as a run would chain it: the finished record's head.
    added = {
        **json.loads(lines[1]),
        manifest_lines.CHAIN_KEY: manifest_lines.line_digest(lines[-1].encode()),
    }
    write_lines(copy, [*lines, json.dumps(added, sort_keys=True)])
    refused(["evaluate", str(copy)], "is recorded by the last line", capsys)


def test_the_records_identity_removed_is_an_edit(finished, tmp_path, capsys):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    record = json.loads((copy / "run.json").read_text())
    del record[manifest_lines.IDENTITY_KEY]
    (copy / "run.json").write_text(json.dumps(record))
    refused(["verify", str(copy)], "run.json was edited", capsys)
    RunDir(copy).write_record(record)  # its digest written anew: the chain has no root
    refused(["evaluate", str(copy)], "records no identity to chain it to", capsys)


def as_before_the_chain(run: Path) -> None:
    """The run as a bnnkit before the chain wrote it: no chain fields, the record's digest of
    its settings alone."""
    write_lines(
        run,
        [
            json.dumps(
                {k: v for k, v in json.loads(line).items() if k != manifest_lines.CHAIN_KEY},
                sort_keys=True,
            )
            for line in lines_of(run)
        ],
    )
    record = json.loads((run / "run.json").read_text())
    for key in (manifest_lines.IDENTITY_KEY, manifest_lines.HEAD_KEY):
        del record[key]
    RunDir(run).write_record(record)


def test_a_run_made_before_the_chain_reads_verifies_and_resumes(finished, tmp_path, capsys):
    copy = Path(shutil.copytree(finished, tmp_path / "run"))
    as_before_the_chain(copy)
    capsys.readouterr()
    assert main(["verify", str(copy)]) == 0
    out = capsys.readouterr().out
    assert "note: no chain: written by an older bnnkit" in out, out
    assert main(["evaluate", str(copy)]) == 0
    assert (
        main(
            [
                *HMC[: HMC.index("--num-iterations")],
                "--num-iterations",
                "8",
                *HMC[HMC.index("--num-iterations") + 2 :],
                "--dir",
                str(copy),
                "--resume",
            ]
        )
        == 0
    )
    assert all(manifest_lines.CHAIN_KEY not in json.loads(line) for line in lines_of(copy))
    capsys.readouterr()
    assert main(["verify", str(copy)]) == 0
    assert "no chain" in capsys.readouterr().out
    # Unchained, a sample and its line from another run are not told apart: what the note says.


def test_the_chain_goes_on_across_appends_and_skips_a_torn_last_line(tmp_path):
    root = manifest_lines.identity("0" * 64, seed=0)
    files = manifest_lines.Manifest(tmp_path / manifest_lines.MANIFEST_FILE, anchor=root)
    files.rewrite([{"file": "a", "sha256": "1"}])
    files.append({"file": "b", "sha256": "2"})
    # Another object on the same file carries the chain on from it.
    manifest_lines.Manifest(tmp_path / manifest_lines.MANIFEST_FILE).append(
        {"file": "c", "sha256": "3"}
    )
    assert files.chain_break(root) is None
    with open(files.path, "ab") as f:
        f.write(b'{"file": "d", "sha')  # a write a crash cut off
    assert files.chain_break(root) is None
    assert files.head() == (None, None)
    broken = files.chain_break(manifest_lines.identity("0" * 64, seed=1))
    assert broken is not None and broken.line == 1 and broken.file == "a"
