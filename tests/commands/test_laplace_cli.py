"""``bnnkit laplace`` from the command line: store, resume, evaluate, and refuse bad input."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest

from bnnkit import runs
from bnnkit.cli import main
from bnnkit.inference import laplace
from bnnkit.posterior.laplace import KFACLaplace
from bnnkit.runs import load_run
from bnnkit.runs.provenance import settings_digest

SGD = [
    "sgd",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--noise-std",
    "0.35",
    "--init-step-size",
    "1e-4",
    "--num-epochs",
    "20",
    "--batch-size",
    "32",
    "--no-progress",
    "--no-evaluate",
]


@pytest.fixture(scope="module")
def map_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("laplace_cli") / "sgd"
    assert main([*SGD, "--dir", str(run_dir)]) == 0
    return run_dir


def laplace_args(map_run, out, *extra):
    return ["laplace", "--map-run", str(map_run), "--dir", str(out), "--no-progress", *extra]


@pytest.mark.slow  # three Laplace runs through the command line, and their evaluation
def test_laplace_runs_store_resume_and_evaluate(map_run, tmp_path, capsys):
    diag, last = tmp_path / "diag", tmp_path / "last"
    args = laplace_args(
        map_run,
        diag,
        "--structure",
        "diag",
        "--prior-precision",
        "auto",
        "--num-samples",
        "3",
        "--no-evaluate",
    )
    assert main(args) == 0
    record = json.loads((diag / "run.json").read_text())
    map_record = json.loads((map_run / "run.json").read_text())
    assert record["method"] == "laplace"
    assert record["status"] == "finished" and record["problem"] == map_record["problem"]
    info = record["posterior_info"]
    assert info["alpha"] > 0 and info["damping"]["num_lifted"] == 0
    assert np.isfinite(info["log_marginal_likelihood"])

    # Resume of a finished run changes nothing; other settings are refused.
    stored = diag / "samples" / "sample_0000000.npz"
    stamp = stored.stat().st_mtime_ns
    assert main([*args, "--resume"]) == 0
    assert stored.stat().st_mtime_ns == stamp
    assert main([*args[:-1], "--num-samples", "4", "--no-evaluate", "--resume"]) == 2
    assert "num_samples was 3 in the stored run but is 4 now" in capsys.readouterr().err

    # Last layer, linearised predictive, evaluated at the end against the diag run.
    assert (
        main(
            laplace_args(
                map_run,
                last,
                "--structure",
                "last_layer",
                "--predictive",
                "glm",
                "--num-samples",
                "3",
                "--reference",
                str(diag),
            )
        )
        == 0
    )
    assert "vs reference" in capsys.readouterr().out

    assert main(["evaluate", str(diag), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_chains"] == 1 and result["num_samples_per_chain"] == 3
    assert main(["evaluate", str(last), "--reference", str(diag), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert np.isfinite(result["test"]["rmse"]) and np.isfinite(result["test"]["nll"])
    assert np.isfinite(result["reference"]["rmse_to_reference_mean"])

    # From Python: the same driver, the problem taken from the MAP run.
    config = laplace.Config(map_run=str(map_run), structure="kfac", prior_precision=2.0)
    runs.run(None, config, tmp_path / "kfac", progress=False)
    posterior = load_run(tmp_path / "kfac")[2]
    assert isinstance(posterior, KFACLaplace) and posterior.info["alpha"] == 2.0
    draws = posterior.sample(jax.random.PRNGKey(0), 3)
    assert draws["params"]["Dense_0"]["kernel"].shape == (3, 6, 50)


def _unfinished(map_run, tmp_path):
    copy = tmp_path / "unfinished"
    shutil.copytree(map_run, copy)
    record = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**record, "status": "running"}))
    return copy


def _hmc(map_run, tmp_path):
    copy = tmp_path / "hmc"
    shutil.copytree(map_run, copy)
    record = {**json.loads((copy / "run.json").read_text()), "method": "hmc"}
    # Stands for a real hmc run: its record carries the digest of its own settings.
    record["settings_sha256"] = settings_digest(record)
    (copy / "run.json").write_text(json.dumps(record))
    return copy


@pytest.mark.parametrize(
    ("make_map", "extra", "message"),
    [
        (lambda m, t: t / "nope", [], "does not exist; allowed: a finished sgd or ensemble run"),
        (_unfinished, [], "is unfinished (status 'running')"),
        (_hmc, [], "is a 'hmc' run; allowed: a finished sgd or ensemble run"),
        (
            None,
            ["--dataset", "yacht_1"],
            "--dataset 'yacht_1' does not match the MAP run, which is for dataset 'yacht_0'",
        ),
        (None, ["--model", "mlp_regression"], "--model 'mlp_regression' does not match"),
        (None, ["--prior-precision", "-1"], "--prior-precision '-1' must be 'auto' or a finite"),
        (None, ["--num-samples", "0"], "--num-samples 0 out of range; allowed: 1..65536"),
        (
            None,
            ["--chunk-size", "0"],
            "--curvature-chunk-size 0 out of range; allowed: 1..2147483647",
        ),
        (None, ["--member", "3"], "--member 3 out of range: the MAP run has 1 member(s)"),
    ],
)
def test_bad_input_exits_2_with_one_line(map_run, tmp_path, capsys, make_map, extra, message):
    source = map_run if make_map is None else make_map(map_run, tmp_path)
    out = tmp_path / "out"
    assert main(laplace_args(source, out, "--no-evaluate", *extra)) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (out / "run.json").exists()
