"""Runs used together (--reference, --init-checkpoint) with other posterior settings are
named; draws from an approximation get no Markov-chain diagnostics."""

from __future__ import annotations

import json

import pytest

from bnnkit.cli import main


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    i = argv.index(flag)
    return [*argv[: i + 1], value, *argv[i + 2 :]]


SGD = [
    "sgd",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--init-step-size",
    "1e-4",
    "--num-epochs",
    "2",
    "--batch-size",
    "64",
    "--no-progress",
]


def test_reference_with_another_noise_is_named(hmc_run, tmp_path, capsys):
    run_dir = tmp_path / "sgd"
    # Noise 0.1 makes the gradient 12x that of 0.35: a step of 1e-5 keeps SGD stable.
    assert (
        main(
            [
                *with_flag(SGD, "--init-step-size", "1e-5"),
                "--noise-std",
                "0.1",
                "--dir",
                str(run_dir),
                "--reference",
                str(hmc_run),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert f"--noise-std 0.1 (reference {hmc_run}: 0.35)" in err
    assert main(["evaluate", str(run_dir), "--reference", str(hmc_run), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["reference"]["settings_differ"] == [
        f"--noise-std 0.1 (reference {hmc_run}: 0.35)"
    ]
    # The same settings: nothing to say.
    assert main(["evaluate", str(hmc_run), "--reference", str(hmc_run), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["reference"]["settings_differ"] == [] and "warning" not in out.err


def test_start_from_a_run_with_another_posterior_is_named(hmc_run, tmp_path, capsys):
    assert (
        main(
            [
                *SGD,
                "--noise-std",
                "0.35",
                "--temperature",
                "0.5",
                "--weight-decay",
                "2",
                "--init-checkpoint",
                str(hmc_run),
                "--no-evaluate",
                "--dir",
                str(tmp_path / "sgd"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if "starts from" in line]
    assert len(warning) == 1
    assert f"--weight-decay 2.0 (--init-checkpoint {hmc_run}: 1.0)" in warning[0]
    assert f"--temperature 0.5 (--init-checkpoint {hmc_run}: 1.0)" in warning[0]


def test_other_data_is_refused(hmc_run, tmp_path, capsys):
    code = main(
        [
            *SGD,
            "--dataset",
            "concrete_0",
            "--noise-std",
            "0.35",
            "--init-checkpoint",
            str(hmc_run),
            "--dir",
            str(tmp_path / "sgd"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "dataset" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "sgd").exists()


@pytest.mark.slow
def test_independent_draws_get_no_rhat_or_ess(tmp_path, capsys):
    run_dir = tmp_path / "vi"
    assert (
        main(
            [
                "vi",
                "--dataset",
                "yacht_0",
                "--model",
                "mlp_regression_small",
                "--noise-std",
                "0.35",
                "--init-step-size",
                "1e-3",
                "--num-epochs",
                "1",
                "--batch-size",
                "64",
                "--vi-ensemble-size",
                "6",
                "--no-progress",
                "--dir",
                str(run_dir),
            ]
        )
        == 0
    )
    capsys.readouterr()  # the end of a run shows its test metrics; evaluate the detail
    assert main(["evaluate", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "independent draws" in out and "R-hat, weights" not in out
    assert main(["evaluate", str(run_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["independent_draws"] and "diagnostics" not in result


def test_an_unset_setting_is_named_in_words_not_none(hmc_run, tmp_path, capsys):
    # No --noise-std: the network outputs its own std, which the message says.
    run_dir = tmp_path / "sgd"
    assert main([*SGD, "--dir", str(run_dir), "--no-evaluate"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--reference", str(hmc_run)]) == 0
    err = capsys.readouterr().err
    assert f"--noise-std learned (the network outputs its std) (reference {hmc_run}: 0.35)" in err
    assert "None" not in err
