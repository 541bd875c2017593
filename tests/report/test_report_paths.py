"""A report names no path of the machine that wrote it: absolute paths (a folder given as one, a
run's dataset file, the ensemble a reference's chains started from) are written relative to the
report's folder, where they still lead to the same files."""

from __future__ import annotations

import os
from pathlib import Path

from bnnkit.cli import main
from bnnkit.report import document
from bnnkit.report.sections import Figure, Heading, Section, Table


def test_a_report_of_folders_given_as_absolute_paths_holds_none(report_inputs, tmp_path):
    run = report_inputs[0]
    root = run.parent
    assert run.is_absolute()
    out = tmp_path / "reports" / "out"
    assert main(["report", *map(str, report_inputs), "--out", str(out)]) == 0
    md = (out / document.MARKDOWN_FILE).read_text()
    page = (out / document.HTML_FILE).read_text()
    for text in (md, page):
        assert str(root) not in text and os.path.realpath(root) not in text
        assert str(tmp_path) not in text
    # The dataset file the run was given and the run's folder, from the report's folder.
    data = os.path.relpath(os.path.realpath(root / "images.npz"), os.path.realpath(out))
    assert data.startswith("..") and (out / data).is_file()
    assert f"| dataset | {data} |" in md
    shown = os.path.relpath(os.path.realpath(run), os.path.realpath(out))
    assert f"*run: `{shown}`*" in md and (out / shown / "run.json").is_file()


def test_every_part_of_a_section_is_made_relative(tmp_path):
    out = tmp_path / "report"
    chains = str(tmp_path / "ref" / "chains")
    section = Section(
        f"run {chains}",
        "run",
        chains,
        (
            Heading(f"from {chains}"),
            f"chains of {chains}:3",
            Table(
                ("setting", "value"),
                (
                    ("init_checkpoint", str(tmp_path / "ref" / "ensemble")),
                    ("ratio", "accuracy/NLL"),
                ),
            ),
        ),
        (Figure(Path(chains) / "a.png", f"drawn from {chains}", png=b"\x89PNG"),),
    )
    shown = document._portable_section(section, out)
    figure = Path(chains) / "a.png"
    text = document.markdown_text([shown], {figure: "figures/01_run_a.png"}) + document.html_text(
        [shown], {figure: b"\x89PNG"}
    )
    assert str(tmp_path) not in text
    assert shown.source == os.path.join("..", "ref", "chains")
    assert shown.blocks[1] == f"chains of {os.path.join('..', 'ref', 'chains')}:3"
    assert shown.blocks[2].rows == (
        ("init_checkpoint", os.path.join("..", "ref", "ensemble")),
        ("ratio", "accuracy/NLL"),
    )
    assert shown.figures[0].path == section.figures[0].path  # the file it is read from
