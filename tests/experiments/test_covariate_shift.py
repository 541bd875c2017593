"""Covariate shift: the table's cells are `bnnkit evaluate --corruption`'s numbers, a table cut
off part-way resumes without recomputing finished cells, bad inputs are refused with nothing
written."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.data.npz import fingerprint
from bnnkit.errors import ConfigError
from bnnkit.evaluation import evaluate
from bnnkit.experiments import covariate_shift
from bnnkit.runs import RunDir
from cli_checks import run_ok

CORRUPTIONS = ["gaussian_noise", "contrast"]
SEVERITIES = [1, 3]


@pytest.fixture(scope="module")
def image_runs(image_hmc_run, image_sgd_run, make_image_data, tmp_path_factory):
    """An HMC and an SGD run on one image dataset, and the HMC run's samples under a record
    that names another image dataset."""
    folder = tmp_path_factory.mktemp("shift")
    elsewhere = folder / "elsewhere"
    shutil.copytree(image_hmc_run, elsewhere)
    record = RunDir(elsewhere).read_record()
    record["problem"]["dataset"] = make_image_data(folder, 1)
    RunDir(elsewhere).write_record(record)
    return str(image_hmc_run), str(image_sgd_run), str(elsewhere)


def test_table_rows_are_evaluates_numbers_and_the_figure_is_drawn(image_runs, tmp_path, capsys):
    hmc_run, sgd_run, _ = image_runs
    out = tmp_path / "out"
    printed = run_ok(
        [
            "shift",
            hmc_run,
            sgd_run,
            "--out",
            str(out),
            "--corruptions",
            *CORRUPTIONS,
            "--severities",
            *map(str, SEVERITIES),
            "--no-progress",
        ],
        capsys,
    )
    assert "hmc accuracy  clean:" in printed
    table = storage.read_json(out / covariate_shift.TABLE_FILE)
    rows = table["rows"]
    # Per run: the clean test set, then each corruption at each severity.
    assert [(r["label"], r["corruption"], r["severity"]) for r in rows] == [
        (label, c, s)
        for label in ("hmc", "sgd")
        for c, s in [("clean", 0)] + [(c, s) for c in CORRUPTIONS for s in SEVERITIES]
    ]
    assert {r["method"] for r in rows} == {"hmc", "sgd"}
    for r in rows:
        assert set(covariate_shift.COLUMNS) <= set(r)
        assert 0 <= r["accuracy"] <= 1 and r["nll"] > 0 and 0 <= r["ece"] <= 1
    # The same images and predictive as `bnnkit evaluate`: equal to the last bit.
    for r in (rows[0], rows[9]):
        path = hmc_run if r["label"] == "hmc" else sgd_run
        expected = (
            evaluate(path, write=False)
            if r["severity"] == 0
            else evaluate(path, corruption=r["corruption"], severity=r["severity"], write=False)
        )["test"]
        assert {m: r[m] for m in covariate_shift.METRICS} == expected, r
    with open(out / covariate_shift.CSV_FILE, newline="") as f:
        parsed = list(csv.DictReader(f))
    assert len(parsed) == len(rows) and float(parsed[3]["nll"]) == rows[3]["nll"]
    assert (out / covariate_shift.MARKDOWN_FILE).read_text().count("\n") == len(rows) + 2
    figure = (out / covariate_shift.FIGURE_FILE).read_bytes()
    assert figure[1:4] == b"PNG" and len(figure) > 10_000


def test_resume_skips_finished_cells(image_runs, tmp_path, monkeypatch):
    hmc_run, sgd_run, _ = image_runs
    calls = []
    score = covariate_shift.cell_metrics

    def counted(run, corruption, severity, config):
        if len(calls) == stop_after:
            raise KeyboardInterrupt  # killed in the middle of a cell
        calls.append((run.label, corruption, severity))
        return score(run, corruption, severity, config)

    monkeypatch.setattr(covariate_shift, "cell_metrics", counted)
    args = dict(corruptions=CORRUPTIONS, severities=SEVERITIES, progress=False, plots=False)
    # Cells per run: clean (1 evaluation), then each corruption (2 severities).
    stop_after = 4  # hmc's clean and gaussian_noise finished, contrast half-done
    with pytest.raises(KeyboardInterrupt):
        covariate_shift.covariate_shift([hmc_run, sgd_run], tmp_path / "out", **args)
    assert len(list((tmp_path / "out" / covariate_shift.CELLS_DIR).glob("*.json"))) == 2
    calls.clear()
    stop_after = None
    resumed = covariate_shift.covariate_shift(
        [hmc_run, sgd_run], tmp_path / "out", resume=True, **args
    )
    assert calls == [
        ("hmc", "contrast", 1),
        ("hmc", "contrast", 3),
        ("sgd", "clean", 0),
        *[("sgd", c, s) for c in CORRUPTIONS for s in SEVERITIES],
    ]
    # Every cell once: the finished ones as they were written.
    assert [(r["label"], r["corruption"], r["severity"]) for r in resumed.rows] == [
        (label, c, s)
        for label in ("hmc", "sgd")
        for c, s in [("clean", 0)] + [(c, s) for c in CORRUPTIONS for s in SEVERITIES]
    ]
    # A resume with other settings is refused before anything is scored.
    calls.clear()
    with pytest.raises(ConfigError, match="the severities differ"):
        covariate_shift.covariate_shift(
            [hmc_run, sgd_run], tmp_path / "out", resume=True, **{**args, "severities": [1]}
        )
    assert calls == []


def test_max_test_scores_the_first_images(image_runs, tmp_path):
    hmc_run, _, _ = image_runs
    result = covariate_shift.covariate_shift(
        [hmc_run],
        tmp_path / "out",
        covariate_shift.Config(max_test=3),
        corruptions=["contrast"],
        severities=[5],
        progress=False,
        plots=False,
    )
    # Three test images: accuracy is a multiple of 1/3.
    assert all(abs(3 * r["accuracy"] - round(3 * r["accuracy"])) < 1e-9 for r in result.rows)
    assert set(result.files) == {"table", "csv", "markdown"}


def test_non_image_runs_and_runs_on_other_data_are_refused(image_runs, tmp_path, capsys):
    hmc_image, _, elsewhere = image_runs
    # The same samples under a record whose dataset is 64 features, not images.
    flat = tmp_path / "flat"
    shutil.copytree(hmc_image, flat)
    record = RunDir(flat).read_record()
    with np.load(record["problem"]["dataset"]) as images:
        np.savez(
            tmp_path / "flat.npz",
            **{k: (v.reshape(len(v), -1) / 255.0 if k[0] == "x" else v) for k, v in images.items()},
        )
    record["problem"]["dataset"] = str(tmp_path / "flat.npz")
    # The run reads the file its data fingerprint names: name the flat file there too.
    record["dataset"].update(fingerprint(tmp_path / "flat.npz"))
    RunDir(flat).write_record(record)
    for argv, message in [
        ([str(flat)], "allowed: a run on an image dataset"),
        ([hmc_image, elsewhere], f"{elsewhere} is a run on other data: --dataset"),
        ([hmc_image, "--corruptions", "frost"], "unknown corruption 'frost'"),
        ([hmc_image, "--severities", "0"], "severity 0 out of range"),
        ([hmc_image, "--max-test", "0"], "--max-test 0 out of range"),
    ]:
        out = tmp_path / "out"
        code = main(["shift", *argv, "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()
