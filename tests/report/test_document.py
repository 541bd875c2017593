"""The report of a run, a convergence folder and a shift folder holds every table row and every
figure, the markdown links resolve and the HTML stands alone; an unknown folder is refused with
nothing written."""

from __future__ import annotations

import re

import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.report import document, kinds, run_report
from bnnkit.report.tables import rows
from cli_checks import run_ok


@pytest.fixture(scope="module")
def report(report_inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "out"
    assert main(["report", *map(str, report_inputs), "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_every_folder_is_recognised_by_its_kind(report_inputs, tmp_path):
    assert [kinds.kind_of(f) for f in report_inputs] == ["run", "convergence", "shift"]
    (tmp_path / "run.json").write_text('{"status": "finished"}')  # no method: not a run
    assert kinds.kind_of(tmp_path) is None


def test_every_table_row_is_in_the_markdown_and_the_html(report_inputs, report):
    run, conv, shift = report_inputs
    md = (report / document.MARKDOWN_FILE).read_text()
    page = (report / document.HTML_FILE).read_text()
    evaluation = storage.read_json(run / "evaluation.json")
    # Paths as the report writes them: relative to its folder.
    expected = [
        document.portable(f"| {name} | {value} |", report) for name, value in rows(evaluation)
    ]
    assert any(line.startswith("| verdict | ") for line in expected)
    for line in expected:
        assert line in md
    shift_rows = storage.read_json(shift / "shift_table.json")["rows"]
    assert len(shift_rows) == 3  # clean, and one corruption at severities 1 and 3
    for r in shift_rows:
        assert (
            f"| {r['label']} | {r['method']} | {r['corruption']} | {r['severity']} | "
            f"{r['accuracy']:.4f} | {r['nll']:.4f} | {r['ece']:.4f} |"
        ) in md
        assert f"<td>{r['nll']:.4f}</td>" in page
    for chain in storage.read_json(conv / "convergence.json")["chains"]:
        assert f"| {chain['scheme']} |" in md
    # A header or body row starts "| " in the markdown; the alignment rows start "|---".
    assert page.count("<tr>") == md.count("\n| ")


def test_every_figure_is_linked_and_embedded_once(report_inputs, report):
    run, conv, shift = report_inputs
    assert list(run.glob("*.png")) == []  # the run's reliability diagram is drawn in the report
    pngs = sorted(
        [run_report.RELIABILITY_FILE, *(p.name for f in (conv, shift) for p in f.glob("*.png"))]
    )
    assert pngs == ["chains.png", "degradation.png", "reliability.png", "rhat_histograms.png"]
    md = (report / document.MARKDOWN_FILE).read_text()
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    assert sorted(link.split("_", 2)[-1] for link in links) == pngs
    for link in links:
        assert (report / link).read_bytes()[1:4] == b"PNG"
    page = (report / document.HTML_FILE).read_text()
    assert page.count('src="data:image/png;base64,') == len(pngs)
    # Nothing outside the page: every src is a data URI and there is no href at all.
    assert re.findall(r'src="(?!data:)', page) == []
    assert "href=" not in page


def test_unknown_folders_and_a_full_out_are_refused_with_nothing_written(
    report_inputs, report, tmp_path, capsys
):
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    out = tmp_path / "out"
    assert main(["report", str(report_inputs[0]), str(stranger), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(stranger) in err and "convergence" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert main(["report", str(report_inputs[1]), "--out", str(report)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert len(list((report / document.FIGURES_DIR).iterdir())) == 4


def test_overwrite_replaces_an_earlier_report(report_inputs, tmp_path, capsys):
    out = tmp_path / "out"
    run_ok(["report", *map(str, report_inputs), "--out", str(out)], capsys)
    printed = run_ok(["report", str(report_inputs[1]), "--out", str(out), "--overwrite"], capsys)
    assert "convergence" in printed
    assert len(list((out / document.FIGURES_DIR).iterdir())) == 2  # the shift figure went
    assert "Covariate shift" not in (out / document.MARKDOWN_FILE).read_text()


def test_experiment_folders_written_by_their_own_write_are_reported(tmp_path):
    from bnnkit.experiments.compare_methods import Comparison
    from bnnkit.experiments.temperature import TemperatureSweep

    compare = [
        {"method": "HMC (reference)", "nll": 0.5, "rmse": 0.3, "seconds": 9.0, "note": "reference"},
        {
            "method": "SGD",
            "nll": 0.9,
            "rmse": 0.4,
            "rmse_to_reference_mean": 0.2,
            "seconds": 1.0,
            "note": "",
        },
    ]
    Comparison({"yacht": compare}, {"yacht": {}}).write(tmp_path / "compare")
    temps = [{"line": "HMC", "temperature": t, "accuracy": 0.9, "nll": 0.3 + t} for t in (1.0, 0.1)]
    TemperatureSweep(temps, "classification").write(tmp_path / "temperature")
    assert [kinds.kind_of(tmp_path / n) for n in ("compare", "temperature")] == [
        "compare-methods",
        "temperature",
    ]
    built = document.document([tmp_path / "compare", tmp_path / "temperature"], tmp_path / "out")
    md = built.markdown.read_text()
    assert "| SGD | 0.4000 | 0.9000 | 0.2000 | 1 |  |" in md
    assert "| 0.1 | 0.9000 | 0.4000 |" in md and "| 1 | 0.9000 | 1.3000 |" in md
    assert [p.name for p in built.figures] == [
        "01_compare-methods_compare_methods.png",
        "02_temperature_temperature.png",
    ]
