"""Convergence: the R-hat histograms count what split R-hat of the stored samples gives, the
chain comparison averages what it says, and runs it cannot analyse are refused with nothing
written."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.experiments import convergence
from bnnkit.metrics.diagnostics import split_rhat
from bnnkit.runs import RunDir
from cli_checks import run_ok, stored_units


def stored_weights(run_dir) -> np.ndarray:
    """(chains, samples, parameters) read straight from the sample files, one per iteration."""
    rundir = RunDir(run_dir)
    units = list(stored_units(rundir).values())
    keys = sorted(k for k in units[0] if k.startswith("params/"))
    per_key = [np.concatenate([u[k] for u in units], axis=1) for k in keys]
    return np.concatenate([a.reshape((*a.shape[:2], -1)) for a in per_key], axis=-1)


@pytest.fixture(scope="module")
def report(image_hmc_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("convergence") / "out"
    assert main(["convergence", str(image_hmc_run), "--out", str(out), "--bins", "7"]) == 0
    return out


def test_histogram_counts_are_split_rhat_of_the_stored_samples(image_hmc_run, report):
    stored = storage.read_json(report / convergence.SETTINGS_FILE)
    weights = stored["histograms"]["weights"]
    rhat = split_rhat(stored_weights(image_hmc_run))
    assert rhat.shape == (64 * 2 + 2,) and np.isfinite(rhat).all()
    counts, _ = np.histogram(rhat, np.asarray(weights["edges"]))
    assert weights["counts"] == counts.tolist() and sum(weights["counts"]) == rhat.size
    assert len(weights["counts"]) == 7 and weights["undefined"] == 0
    assert weights["edges"][0] <= rhat.min() and weights["edges"][-1] >= rhat.max()
    # Function space: 8 test points x 2 classes, as evaluate summarises them.
    function = stored["histograms"]["function"]
    assert sum(function["counts"]) == 8 * 2 and function["undefined"] == 0
    expected = evaluate(image_hmc_run, write=False)["diagnostics"]["function"]["rhat"]
    assert function["summary"] == pytest.approx(expected, rel=1e-12)


def test_the_report_holds_what_is_read_and_drawn(report):
    stored = storage.read_json(report / convergence.SETTINGS_FILE)
    one, several = stored["chains"]
    # 2 chains of 8: one chain's 8 samples against 2 chains' first 4.
    assert (one["num_chains"], one["samples_per_chain"]) == (1, 8)
    assert (several["num_chains"], several["samples_per_chain"]) == (2, 4)
    for key in ("agreement", "total_variation"):
        assert one[key] == pytest.approx(np.mean([c[key] for c in one["per_chain"]]), rel=1e-12)
        assert 0 <= several[key] <= 1
    assert stored["reference"] == "the run's own model average"
    assert "| 2 chains x 4 samples |" in (report / convergence.TABLE_FILE).read_text()
    for name in (convergence.HISTOGRAM_FILE, convergence.CHAINS_FILE):
        png = (report / name).read_bytes()
        assert png[1:4] == b"PNG" and len(png) > 5_000


def test_chain_comparison_against_a_known_predictive():
    from bnnkit.predict import Prediction

    # Chain 0 always says class 0, chain 1 class 1; four samples each.
    per_sample = np.zeros((2, 4, 3, 2))
    per_sample[0, :, :, 0] = per_sample[1, :, :, 1] = 1.0
    reference = Prediction("classification", probs=np.tile([0.75, 0.25], (3, 1)))
    one, several = convergence.compare_chains(
        Prediction("classification", probs=per_sample.mean((0, 1)), per_sample=per_sample),
        reference,
    )
    # Each chain alone: total variation 0.25 (chain 0) and 0.75 (chain 1); agreement 1 and 0.
    assert one["total_variation"] == pytest.approx(0.5) and one["agreement"] == 0.5
    # Both chains' first two samples: the 50/50 average, total variation 0.25.
    assert several["total_variation"] == pytest.approx(0.25)


def test_runs_it_cannot_analyse_are_refused(image_hmc_run, image_sgd_run, tmp_path, capsys):
    for argv, message in [
        ([str(image_sgd_run)], "has 1 chain: R-hat compares chains"),
        ([str(image_hmc_run), "--reference", str(tmp_path / "missing")], "does not exist"),
        ([str(image_hmc_run), "--bins", "0"], "--bins 0 must be"),
    ]:
        out = tmp_path / "out"
        code = main(["convergence", *argv, "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


def test_a_reference_run_is_scored_against(image_hmc_run, tmp_path, capsys):
    printed = run_ok(
        [
            "convergence",
            str(image_hmc_run),
            "--out",
            str(tmp_path / "out"),
            "--reference",
            str(image_hmc_run),
        ],
        capsys,
    )
    assert "split R-hat, function: median" in printed and "2 chains x 4 samples" in printed
    stored = storage.read_json(tmp_path / "out" / convergence.SETTINGS_FILE)
    assert stored["reference"] == str(image_hmc_run)
