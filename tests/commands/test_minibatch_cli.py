"""`bnnkit sgd / ensemble / sgmcmc` through the CLI: runs, evaluation, resume, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnnkit import runs, storage
from bnnkit.cli import main
from bnnkit.inference import sgmcmc
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir
from cli_checks import rmse_between_predictions, run_ok

PROBLEM = ["--dataset", "yacht_0", "--model", "mlp_regression_small", "--noise-std", "0.35"]
COMMON = [*PROBLEM, "--batch-size", "32", "--no-progress"]


SGMCMC_VARIANTS = {
    "SGLD": ["--momentum-decay", "0"],
    "SGHMC": ["--momentum-decay", "0.9"],
    "SGHMC-CLR": [
        "--momentum-decay",
        "0.9",
        "--step-size-schedule",
        "cyclical",
        "--cycle-length",
        "2",
    ],
    "SGHMC-CLR-Prec": [
        "--momentum-decay",
        "0.9",
        "--step-size-schedule",
        "cyclical",
        "--cycle-length",
        "2",
        "--preconditioner",
        "RMSprop",
    ],
}


# The last variant combines the others' settings; the other three run with `make test-slow`.
@pytest.mark.parametrize(
    "variant",
    [
        *(pytest.param(v, marks=pytest.mark.slow) for v in ("SGHMC", "SGHMC-CLR", "SGLD")),
        "SGHMC-CLR-Prec",
    ],
)
def test_sgmcmc_variants_run_and_compare_with_hmc(variant, tmp_path, hmc_run, capsys):
    d = tmp_path / "run"
    out = run_ok(
        [
            "sgmcmc",
            *COMMON,
            "--init-step-size",
            "1e-5",
            "--num-epochs",
            "8",
            "--num-burnin-epochs",
            "2",
            *SGMCMC_VARIANTS[variant],
            "--dir",
            str(d),
            "--reference",
            str(hmc_run),
        ],
        capsys,
    )
    assert variant + " on yacht_0" in out
    result = json.loads((d / "evaluation.json").read_text())
    assert result["reference"]["rmse_to_reference_mean"] == pytest.approx(
        rmse_between_predictions(d, hmc_run), rel=1e-9
    )
    kept = RunDir(d).sample_units()
    # Constant schedule: every epoch after the burn-in; cyclical: the end of each cycle.
    assert kept == ([2, 3, 4, 5, 6, 7] if "CLR" not in variant else [3, 5, 7])


def test_sgd_and_ensemble_run(tmp_path, hmc_run, capsys):
    run_ok(
        [
            "sgd",
            *COMMON,
            "--init-step-size",
            "1e-4",
            "--num-epochs",
            "5",
            "--eval-freq",
            "2",
            "--dir",
            str(tmp_path / "sgd"),
        ],
        capsys,
    )
    log = RunDir(tmp_path / "sgd").read_log()
    assert [("test" in r) for r in log] == [False, True, False, True, True]
    out = run_ok(
        [
            "ensemble",
            *COMMON,
            "--init-step-size",
            "1e-4",
            "--num-epochs",
            "3",
            "--num-members",
            "3",
            "--dir",
            str(tmp_path / "ens"),
            "--reference",
            str(hmc_run),
        ],
        capsys,
    )
    assert "3 x 1" in out
    result = json.loads((tmp_path / "ens" / "evaluation.json").read_text())
    assert result["num_chains"] == 3 and result["training"]["epochs"] == 3


def test_resume_equals_uninterrupted(tmp_path, capsys):
    args = [
        "sgmcmc",
        *COMMON,
        "--init-step-size",
        "1e-5",
        "--num-epochs",
        "6",
        "--momentum-decay",
        "0.9",
        "--preconditioner",
        "rmsprop",
        "--num-chains",
        "2",
        "--no-evaluate",
    ]
    run_ok([*args, "--dir", str(tmp_path / "full")], capsys)
    stopped = []

    def interrupt(epoch, log):
        if epoch == 2:
            stopped.append(epoch)
            raise KeyboardInterrupt

    # Interrupt after epoch 3 of the same run through the Python API, then resume via the CLI.
    problem = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
    config = sgmcmc.Config(
        init_step_size=1e-5,
        num_epochs=6,
        batch_size=32,
        momentum_decay=0.9,
        preconditioner="rmsprop",
        num_chains=2,
    )
    with pytest.raises(KeyboardInterrupt):
        runs.run(problem, config, tmp_path / "part", progress=False, on_unit=interrupt)
    assert stopped == [2]
    run_ok([*args, "--dir", str(tmp_path / "part"), "--resume"], capsys)
    full, part = RunDir(tmp_path / "full"), RunDir(tmp_path / "part")
    assert full.sample_units() == part.sample_units() == list(range(6))
    for it in full.sample_units():
        a, b = storage.load_arrays(full.sample_file(it)), storage.load_arrays(part.sample_file(it))
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            [
                "sgd",
                *COMMON[:-3],
                "--batch-size",
                "5000",
                "--init-step-size",
                "1e-4",
                "--num-epochs",
                "2",
            ],
            "--batch-size 5000 is larger than the 277",
        ),
        (["sgd", *COMMON, "--init-step-size", "0", "--num-epochs", "2"], "--init-step-size 0.0"),
        (
            ["sgd", *COMMON, "--init-step-size=-1e-3", "--num-epochs", "2"],
            "--init-step-size -0.001",
        ),
        (
            [
                "sgmcmc",
                *COMMON,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "4",
                "--step-size-schedule",
                "cyclical",
                "--cycle-length",
                "9",
            ],
            "--cycle-length 9",
        ),
        (
            [
                "sgmcmc",
                *COMMON,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "4",
                "--preconditioner",
                "adam",
            ],
            "unknown --preconditioner 'adam'; allowed: none, rmsprop",
        ),
        (
            [
                "sgmcmc",
                *COMMON,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "4",
                "--final-step-size",
                "0",
            ],
            "--final-step-size 0",
        ),
        (
            [
                "ensemble",
                *COMMON,
                "--init-step-size",
                "1e-4",
                "--num-epochs",
                "2",
                "--num-members",
                "0",
            ],
            "--num-members 0 out of range; allowed: 1..65536",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, fragment, tmp_path, capsys):
    code = main([*argv, "--dir", str(tmp_path / "bad")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fragment in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "bad" / "run.json").exists()
