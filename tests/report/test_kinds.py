"""A classification run's section carries its reliability diagram, drawn from its evaluation's
calibration bins without writing into the run; a regression run's section has none; a
compare-methods folder lists each classification setting's reliability diagram."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.metrics.predictive import calibration_bins
from bnnkit.report import kinds, run_report
from bnnkit.report.sections import Table


def _files(folder):
    return sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_a_classification_run_gets_a_reliability_figure_and_its_folder_is_untouched(report_inputs):
    run = report_inputs[0]
    before = _files(run)
    section = kinds.section(run)
    [figure] = section.figures
    assert figure.path == run / run_report.RELIABILITY_FILE and not figure.path.exists()
    assert figure.png[1:4] == b"PNG" and figure.data() == figure.png
    assert "Reliability diagram" in figure.caption
    assert _files(run) == before


def test_an_evaluation_stored_without_bins_is_recomputed_for_the_figure(report_inputs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(report_inputs[0], run)
    stored = storage.read_json(run / "evaluation.json")
    del stored["calibration"]  # as bnnkit stored it before the bins were kept
    storage.write_json(run / "evaluation.json", stored)
    [figure] = kinds.section(run).figures
    assert figure.png[1:4] == b"PNG"


def test_a_regression_run_has_no_figure(tmp_path):
    run = tmp_path / "run"
    assert (
        main(
            [
                "sgd",
                "--dataset",
                "yacht_0",
                "--model",
                "mlp_regression_small",
                "--init-step-size",
                "1e-3",
                "--num-epochs",
                "2",
                "--batch-size",
                "64",
                "--no-progress",
                "--dir",
                str(run),
            ]
        )
        == 0
    )
    section = kinds.section(run)
    assert section.figures == ()
    tables = [block for block in section.blocks if isinstance(block, Table)]
    assert "test rmse" in [quantity for table in tables for quantity, *_ in table.rows]


def test_a_compare_methods_folder_lists_each_classification_settings_reliability_diagram(tmp_path):
    from bnnkit.experiments.compare_methods import Comparison

    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])
    row = {
        "accuracy": 2 / 3,
        "nll": 0.5,
        "ece": 0.1,
        "seconds": 1.0,
        "note": "",
        "calibration": calibration_bins(probs, np.array([0, 1, 1])),
    }
    rows = [{"method": "HMC (reference)", **row}, {"method": "SGD", **row}]
    Comparison({"mnist160": rows}, {"mnist160": {}}).write(tmp_path)
    section = kinds.section(tmp_path)
    assert [f.path.name for f in section.figures] == [
        "compare_methods.png",
        "reliability_mnist160.png",
    ]
    assert "mnist160" in section.figures[1].caption


def test_a_paper_study_shows_each_finding_s_figure_with_its_verdict_under_it(tmp_path):
    from bnnkit.experiments.paper.layout import FINDINGS_FILE, FINDINGS_JSON, SETTINGS_FILE
    from bnnkit.experiments.paper.results import finding_figures, findings
    from bnnkit.experiments.paper.verdicts import findings_markdown
    from bnnkit.report.kinds import FINDING_FIGURE

    # A study folder holding only what the findings' figures read: the methods' table and
    # the temperature sweep.
    rows = [
        {"method": "MCLMC (reference)", "accuracy": 0.7, "nll": 0.9, "level": "converged"},
        {"method": "SGD", "accuracy": 0.72, "nll": 1.1, "agreement": 0.8, "total_variation": 0.3},
        {
            "method": "Deep ensemble (K=5)",
            "accuracy": 0.74,
            "nll": 0.8,
            "agreement": 0.85,
            "total_variation": 0.2,
        },
        {"method": "SGLD", "accuracy": 0.6, "nll": 1.2, "agreement": 0.7, "total_variation": 0.4},
    ]
    (tmp_path / "compare_methods").mkdir()
    storage.write_json(
        tmp_path / "compare_methods" / "results.json", {"mnist": {"problem": {}, "rows": rows}}
    )
    (tmp_path / "temperature").mkdir()
    storage.write_json(
        tmp_path / "temperature" / "results.json",
        {
            "rows": [
                {"line": line, "method": method, "temperature": t, "nll": nll, "level": "converged"}
                for line, method, values in (
                    ("MCLMC", "hmc", (0.9, 1.0)),
                    ("SGHMC-CLR", "sgmcmc", (1.2, 1.1)),
                    ("SGHMC-CLR + augment", "sgmcmc", (1.3, 1.0)),
                )
                for t, nll in zip((1.0, 0.1), values, strict=True)
            ]
        },
    )
    items = findings(tmp_path)
    storage.write_json(tmp_path / FINDINGS_JSON, [dataclasses.asdict(f) for f in items])
    (tmp_path / FINDINGS_FILE).write_text(findings_markdown(items, "tiny"))
    storage.write_json(tmp_path / SETTINGS_FILE, {"scale": "tiny", "seed": 0})
    for number, png in finding_figures(tmp_path).items():
        file = tmp_path / FINDING_FIGURE.format(number)
        file.parent.mkdir(exist_ok=True)
        file.write_bytes(png)
    section = kinds.section(tmp_path)
    # Findings 1, 3 and 6 have their parts here; 2, 4 and 5 drew nothing and show nothing.
    assert [f.path.name for f in section.figures] == [
        "finding_1.png",
        "finding_3.png",
        "finding_6.png",
    ]
    by = {f.path.name: f.caption for f in section.figures}
    assert "Verdict: reproduced. Reference: converged." in by["finding_3.png"]
    assert by["finding_1.png"].startswith("Finding 1: BNNs (HMC) can outperform")
    assert "Verdict: not reproduced" in by["finding_1.png"]  # NLL 0.9 is above 0.8


def test_a_reference_folder_reads_as_its_chains(tmp_path):
    # bnnkit reference's folder: reference.json beside ensemble/ and chains/ (here as a reference
    # written before its record named its stages). The report reads it as its chains (here any
    # run stands for them), as evaluate, verify and samples do.
    folder = tmp_path / "ref"
    chains = folder / "chains"
    argv = ["sgd", "--dataset", "yacht_0", "--model", "mlp_regression_small", "--no-progress"]
    argv += ["--init-step-size", "1e-3", "--num-epochs", "2", "--batch-size", "64"]
    assert main([*argv, "--dir", str(chains)]) == 0
    storage.write_json(folder / "reference.json", {"kind": "reference", "status": "finished"})
    assert kinds.kind_of(folder) == "reference"
    section = kinds.section(folder)
    assert (section.kind, section.source) == ("reference", str(folder))
    assert "status finished" in section.blocks[0]
    tables = [block for block in section.blocks if isinstance(block, Table)]
    assert "test rmse" in [quantity for table in tables for quantity, *_ in table.rows]
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    assert "reference" in (tmp_path / "report" / "report.md").read_text()
    # A reference stopped before its chains ran says so in one line.
    shutil.rmtree(chains)
    with pytest.raises(ConfigError, match="has no chains yet"):
        kinds.section(folder)
