"""A classification run's section carries its reliability diagram, drawn from its evaluation's
calibration bins without writing into the run; a regression run's section has none; a
compare-methods folder lists each classification setting's reliability diagram."""

from __future__ import annotations

import shutil

import numpy as np

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.metrics.predictive import calibration_bins
from bnnkit.report import kinds
from bnnkit.report.sections import Table


def _files(folder):
    return sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_a_classification_run_gets_a_reliability_figure_and_its_folder_is_untouched(
        report_inputs):
    run = report_inputs[0]
    before = _files(run)
    section = kinds.section(run)
    [figure] = section.figures
    assert figure.path == run / kinds.RELIABILITY_FILE and not figure.path.exists()
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
    assert main(["sgd", "--dataset", "yacht_0", "--model", "mlp_regression_small",
                 "--init-step-size", "1e-3", "--num-epochs", "2", "--batch-size", "64",
                 "--no-progress", "--dir", str(run)]) == 0
    section = kinds.section(run)
    assert section.figures == ()
    tables = [block for block in section.blocks if isinstance(block, Table)]
    assert "test rmse" in [quantity for table in tables for quantity, *_ in table.rows]


def test_a_compare_methods_folder_lists_each_classification_settings_reliability_diagram(
        tmp_path):
    from bnnkit.experiments.compare_methods import Comparison

    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])
    row = {"accuracy": 2 / 3, "nll": 0.5, "ece": 0.1, "seconds": 1.0, "note": "",
           "calibration": calibration_bins(probs, np.array([0, 1, 1]))}
    rows = [{"method": "HMC (reference)", **row}, {"method": "SGD", **row}]
    Comparison({"mnist160": rows}, {"mnist160": {}}).write(tmp_path)
    section = kinds.section(tmp_path)
    assert [f.path.name for f in section.figures] == ["compare_methods.png",
                                                      "reliability_mnist160.png"]
    assert "mnist160" in section.figures[1].caption
