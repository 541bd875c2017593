"""``bnnkit experiment temperature``: HMC and SGMCMC with and without augmentation against T,
runs reused on a second call, bad settings refused before anything is written."""

from __future__ import annotations

import math

import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.experiments import temperature
from experiment_checks import count_runs, png_ok, tiny_images

TINY = [
    "--model",
    "mlp_classification",
    "--subset-train-to",
    "20",
    "--temperatures",
    "1,0.1",
    "--hmc-num-iterations",
    "2",
    "--hmc-num-burn-in",
    "1",
    "--hmc-num-chains",
    "1",
    "--hmc-trajectory-len",
    "0.002",
    "--hmc-step-size",
    "1e-3",
    "--hmc-max-num-leapfrog-steps",
    "4",
    "--num-epochs",
    "2",
    "--num-burn-in",
    "1",
    "--cycle-length",
    "1",
    "--batch-size",
    "10",
    "--step-size",
    "1e-4",
    "--no-progress",
]


@pytest.mark.slow  # six runs, each compiled: about 45 s on 2 cores
def test_sweep_reports_every_line_and_temperature_and_reuses_its_runs(
    tmp_path, monkeypatch, capsys
):
    data = tiny_images(tmp_path)
    out = tmp_path / "out"
    calls = count_runs(monkeypatch)
    argv = ["experiment", "temperature", "--dataset", str(data), "--out", str(out), *TINY]
    assert main(argv) == 0
    assert len(calls) == 6  # HMC, SGHMC-CLR, SGHMC-CLR + augment at two temperatures
    results = storage.read_json(out / "results.json")
    assert results["task"] == "classification"
    rows = results["rows"]
    assert {(r["line"], r["temperature"]) for r in rows} == {
        (line, t) for line in ("HMC", "SGHMC-CLR", "SGHMC-CLR + augment") for t in (1.0, 0.1)
    }
    for r in rows:
        assert 0 <= r["accuracy"] <= 1 and math.isfinite(r["nll"]) and r["seconds"] > 0
        record = storage.read_json(out / r["run"] / "run.json")
        assert record["problem"]["temperature"] == r["temperature"]
        assert record["method_config"].get("augment", False) == r["augment"]
        # Every row carries its run's verdict (the findings read it).
        verdict = storage.read_json(out / r["run"] / "evaluation.json").get("levels")
        assert r["levels"] == (verdict or {}).get("verdict") and "level" not in r
    assert "SGHMC-CLR + augment: accuracy" in (out / "temperature.md").read_text()
    assert png_ok(out / "temperature.png")
    # Again: every run is finished, none is made again; the report is drawn again.
    (out / "temperature.png").unlink()
    assert main(argv) == 0
    assert len(calls) == 6
    assert png_ok(out / "temperature.png")
    assert storage.read_json(out / "results.json")["rows"] == rows
    capsys.readouterr()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--temperatures", "1,0"], "--temperatures"),
        (["--temperatures", "1,1"], "given twice"),
        (["--methods", "nuts"], "--methods"),
        (["--num-burn-in", "300", "--num-epochs", "300"], "--num-burn-in"),
        (
            [
                "--dataset",
                "yacht_0",
                "--model",
                "mlp_regression_small",
                "--noise-std",
                "0.1",
                "--augment",
                "with",
            ],
            "--augment with",
        ),
    ],
)
def test_bad_settings_are_refused_with_exit_2_and_nothing_written(flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(
            [
                "experiment",
                "temperature",
                "--out",
                str(out),
                "--dataset",
                "yacht_0",
                "--model",
                "mlp_regression_small",
                "--noise-std",
                "0.1",
                "--subset-train-to",
                "100",
                *flags,
            ]
        )
        == 2
    )
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_step_sizes_follow_the_temperature_unless_asked_not_to():
    config = temperature.Config(step_size=1e-6, hmc_step_size=1e-3, hmc_trajectory_len=0.1)
    assert temperature.sgmcmc_config(config, 0.01, True).init_step_size == pytest.approx(1e-8)
    assert temperature.hmc_config(config, 0.01).step_size == pytest.approx(1e-4)
    assert temperature.hmc_config(config, 0.01).trajectory_len == pytest.approx(0.01)
    fixed = temperature.Config(step_size=1e-6, scale_with_temperature=False)
    assert temperature.sgmcmc_config(fixed, 0.01, False).init_step_size == 1e-6
    with pytest.raises(ConfigError, match="--sgmcmc"):
        temperature.Config(sgmcmc="sghmc")
