"""``bnnkit experiment bbb-mnist``: Bayes by Backprop with both priors on tiny images, the
pruning tables, runs reused on a second call, bad settings refused."""

from __future__ import annotations

import math

import pytest

from bnnkit import storage
from bnnkit.cli import main
from experiment_checks import count_runs, png_ok, tiny_images


@pytest.mark.slow  # two VI runs, their evaluations and pruning tables: about 30 s on 2 cores
def test_both_priors_trained_summarised_pruned_and_reused(tmp_path, monkeypatch, capsys):
    data = tiny_images(tmp_path, num_train=256)
    out = tmp_path / "out"
    calls = count_runs(monkeypatch)
    argv = [
        "experiment",
        "bbb-mnist",
        "--dataset",
        str(data),
        "--model",
        "mlp_classification",
        "--epochs",
        "2",
        "--ensemble-size",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    assert len(calls) == 2
    summary = storage.read_json(out / "summary.json")
    assert set(summary) == {"gaussian", "scale_mixture"}
    for prior, row in summary.items():
        assert row["status"] == "finished" and row["epochs"] == 2
        for key in (
            "mean_network_test_error",
            "ensemble_test_error",
            "ensemble_nll",
            "final_elbo",
            "final_kl",
        ):
            assert math.isfinite(row[key]), key
        assert [p["fraction"] for p in row["pruning"]][:2] == [0.0, 0.25]
        assert png_ok(out / f"pruning_{prior}" / "pruning.png")
    assert "### scale mixture" in (out / "results.md").read_text()
    assert png_ok(out / "error_curve.png")
    assert main(argv) == 0
    assert len(calls) == 2
    capsys.readouterr()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--priors", "laplace"], "unknown --priors 'laplace'; allowed: gaussian, scale_mixture"),
        (["--epochs", "0"], "--epochs 0 out of range"),
        (["--dataset", "missing.npz"], "--dataset 'missing.npz' is not a file"),
    ],
)
def test_bad_settings_refused_with_exit_2_and_nothing_written(flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["experiment", "bbb-mnist", "--out", str(out), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
