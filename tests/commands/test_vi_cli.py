"""`bnnkit vi` and `bnnkit prune` on the CLI: runs, evaluation, mean init, resume, bad input."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest

from bnnkit import runs, storage
from bnnkit.cli import main
from bnnkit.inference import vi
from bnnkit.posterior import DiagGaussian
from bnnkit.problem import ProblemConfig
from bnnkit.runs import RunDir, load_run
from bnnkit.runs.provenance import settings_digest
from cli_checks import rmse_between_predictions, run_ok

PROBLEM = ["--dataset", "yacht_0", "--model", "mlp_regression_small", "--noise-std", "0.35"]
COMMON = [*PROBLEM, "--batch-size", "32", "--no-progress"]
VI = ["vi", *COMMON, "--init-step-size", "1e-2", "--vi-sigma-init", "0.01"]


@pytest.fixture(scope="module")
def sgd_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("sgd") / "run"
    assert (
        main(
            [
                "sgd",
                *COMMON,
                "--init-step-size",
                "1e-4",
                "--num-epochs",
                "3",
                "--dir",
                str(d),
                "--no-evaluate",
            ]
        )
        == 0
    )
    return d


@pytest.fixture(scope="module")
def vi_run(tmp_path_factory, hmc_run):
    d = tmp_path_factory.mktemp("vi") / "run"
    assert (
        main(
            [
                *VI,
                "--num-epochs",
                "4",
                "--eval-freq",
                "2",
                "--kl-weighting",
                "blundell",
                "--vi-num-samples",
                "2",
                "--vi-ensemble-size",
                "8",
                "--dir",
                str(d),
                "--reference",
                str(hmc_run),
            ]
        )
        == 0
    )
    return d


def test_vi_run_logs_the_elbo_and_evaluates_against_a_reference(vi_run, hmc_run, capsys):
    record = json.loads((vi_run / "run.json").read_text())
    assert record["method"] == "vi" and record["status"] == "finished"
    posterior = load_run(vi_run)[2]
    assert isinstance(posterior, DiagGaussian) and posterior.num_draws == 8
    log = RunDir(vi_run).read_log()
    assert len(log) == 4 and [("test" in r) for r in log] == [False, True, False, True]
    for r in log:
        assert {"elbo", "expected_log_likelihood", "kl", "step_size"} <= set(r)
        assert r["kl"][0] > 0
    stored = json.loads((vi_run / "evaluation.json").read_text())
    assert stored["num_chains"] == 1 and stored["num_samples_per_chain"] == 8
    assert stored["reference"]["rmse_to_reference_mean"] == pytest.approx(
        rmse_between_predictions(vi_run, hmc_run), rel=1e-9
    )
    # `bnnkit evaluate` draws the same samples again (fixed key): identical metrics.
    out = run_ok(["evaluate", str(vi_run), "--reference", str(hmc_run), "--json"], capsys)
    again = json.loads(out)
    assert again["test"] == stored["test"] and again["reference"] == stored["reference"]


def test_mean_init_run_starts_the_means_at_the_sgd_solution(sgd_run, tmp_path, capsys):
    from bnnkit.problem import build
    from bnnkit.runs.initial import positions_from_run

    problem = build(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35))
    start = jax.tree.map(lambda a: a[0], positions_from_run(str(sgd_run), problem, 1))
    sgd_final = jax.tree.map(lambda a: a[0, -1], load_run(sgd_run)[2].params)
    for a, b in zip(jax.tree.leaves(start), jax.tree.leaves(sgd_final), strict=True):
        np.testing.assert_array_equal(a, b)
    # Through the CLI: with a negligible step size the means stay at the SGD solution.
    d = tmp_path / "vi"
    run_ok(
        [
            "vi",
            *COMMON,
            "--init-step-size",
            "1e-12",
            "--num-epochs",
            "1",
            "--mean-init-run",
            str(sgd_run),
            "--dir",
            str(d),
            "--no-evaluate",
        ],
        capsys,
    )
    arrays = storage.load_arrays(d / "state.npz")
    final = storage.unflatten_tree(
        sgd_final, {k[len("mean/") :]: v[0] for k, v in arrays.items() if k.startswith("mean/")}
    )
    for a, b in zip(jax.tree.leaves(final), jax.tree.leaves(sgd_final), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_prune_writes_table_figures_and_keeps_the_mean_at_zero(vi_run, tmp_path, capsys):
    out_dir = tmp_path / "pruned"
    out = run_ok(
        ["prune", str(vi_run), "--out", str(out_dir), "--fractions", "0", "0.5", "0.98"], capsys
    )
    assert "test RMSE, by |μ|/σ" in out and "\\|" not in out  # a table, not raw markdown
    for name in ("pruning.json", "pruning.md", "pruning.png", "snr_histogram.png"):
        assert (out_dir / name).is_file()
    for name in ("pruning.png", "snr_histogram.png"):
        assert (out_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads((out_dir / "pruning.json").read_text())["rows"]
    assert [r["fraction"] for r in rows] == [0.0, 0.5, 0.98]
    assert rows[1]["num_pruned"] == round(0.5 * (6 * 50 + 50 * 1))
    # Nothing pruned: both criteria give the mean network, whose test RMSE training logged.
    final_log = RunDir(vi_run).read_log()[-1]["test"]
    assert rows[0]["snr"]["rmse"] == rows[0]["magnitude"]["rmse"]
    assert rows[0]["snr"]["rmse"] == pytest.approx(final_log["rmse"], rel=1e-5)


@pytest.mark.slow
def test_resume_equals_uninterrupted(tmp_path, capsys):
    args = [
        *VI,
        "--num-epochs",
        "5",
        "--kl-weighting",
        "blundell",
        "--optimizer",
        "sgd",
        "--init-step-size",
        "1e-6",
        "--no-evaluate",
    ]
    run_ok([*args, "--dir", str(tmp_path / "full")], capsys)

    def interrupt(epoch, log):
        if epoch == 2:
            raise KeyboardInterrupt

    problem = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
    config = vi.Config(
        init_step_size=1e-6,
        num_epochs=5,
        batch_size=32,
        vi_sigma_init=0.01,
        kl_weighting="blundell",
        optimizer="sgd",
    )
    with pytest.raises(KeyboardInterrupt):
        runs.run(problem, config, tmp_path / "part", progress=False, on_unit=interrupt)
    run_ok([*args, "--dir", str(tmp_path / "part"), "--resume"], capsys)
    full = storage.load_arrays(tmp_path / "full" / "state.npz")
    part = storage.load_arrays(tmp_path / "part" / "state.npz")
    assert sorted(full) == sorted(part) and any(k.startswith("rho/") for k in full)
    for k in full:
        np.testing.assert_array_equal(full[k], part[k])
    logs = [RunDir(tmp_path / d).read_log() for d in ("full", "part")]
    assert [r["elbo"] for r in logs[0]] == [r["elbo"] for r in logs[1]]


def _edited_copy(src, dst, **changes):
    shutil.copytree(src, dst)
    record = json.loads((dst / "run.json").read_text())
    for key, value in changes.items():
        if key in ("model", "dataset"):
            record["problem"][key] = value
        else:
            record[key] = value
    # Stands for a real run of that kind: its record carries the digest of its own settings.
    record["settings_sha256"] = settings_digest(record)
    (dst / "run.json").write_text(json.dumps(record))
    return dst


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("sigma0", "--vi-sigma-init 0.0 out of range; allowed: > 0"),
        ("sigma_neg", "--vi-sigma-init -0.1 out of range; allowed: > 0"),
        ("samples0", "--vi-num-samples 0 out of range; allowed: 1..65536"),
        ("weighting", "unknown --kl-weighting 'linear'; allowed: uniform, blundell"),
        ("ensemble0", "--vi-ensemble-size 0 out of range; allowed: 1..65536"),
        ("missing", "does not exist; allowed: a finished run directory"),
        ("unfinished", "is unfinished (status 'running')"),
        ("model", "is for model 'mlp_regression', not 'mlp_regression_small'"),
        ("dataset", "is for dataset 'boston_0', not 'yacht_0'"),
        ("index", "sample 9 out of range: the run kept 1 sample(s) per chain; allowed: -1..0"),
    ],
)
def test_bad_vi_input_is_one_line_exit_2(case, fragment, tmp_path, capsys, sgd_run, hmc_run):
    extra = {
        "sigma0": ["--vi-sigma-init", "0"],
        "sigma_neg": ["--vi-sigma-init=-0.1"],
        "samples0": ["--vi-num-samples", "0"],
        "weighting": ["--kl-weighting", "linear"],
        "ensemble0": ["--vi-ensemble-size", "0"],
        "missing": ["--mean-init-run", str(tmp_path / "nowhere")],
        "unfinished": [
            "--mean-init-run",
            str(_edited_copy(sgd_run, tmp_path / "u", status="running")),
        ],
        "model": [
            "--mean-init-run",
            str(_edited_copy(sgd_run, tmp_path / "m", model="mlp_regression")),
        ],
        "dataset": [
            "--mean-init-run",
            str(_edited_copy(sgd_run, tmp_path / "d", dataset="boston_0")),
        ],
        "index": ["--mean-init-run", f"{sgd_run}:9"],
    }[case]
    code = main([*VI, "--num-epochs", "2", *extra, "--dir", str(tmp_path / "bad")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fragment in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "bad" / "run.json").exists()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["--fractions", "0", "1"],
            "pruning fraction 1.0 out of range; allowed: 0 <= fraction < 1",
        ),
        (["--fractions=-0.25"], "pruning fraction -0.25 out of range"),
    ],
)
def test_bad_prune_input_is_one_line_exit_2(argv, fragment, vi_run, tmp_path, capsys):
    code = main(["prune", str(vi_run), "--out", str(tmp_path / "p"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and fragment in err and "\n" not in err
    assert not (tmp_path / "p").exists()


def test_mean_init_from_an_hmc_sample(hmc_run, tmp_path, capsys):
    # Any finished run of the same model and data can start the means, here HMC's first kept
    # sample of chain 0.
    d = tmp_path / "vi"
    run_ok(
        [
            *VI,
            "--num-epochs",
            "1",
            "--init-step-size",
            "1e-12",
            "--init-checkpoint",
            f"{hmc_run}:0",
            "--dir",
            str(d),
            "--no-evaluate",
        ],
        capsys,
    )
    hmc_first = jax.tree.map(lambda a: a[0, 0], load_run(hmc_run)[2].params)
    means = load_run(d)[2].mean
    for a, b in zip(jax.tree.leaves(means), jax.tree.leaves(hmc_first), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_prune_refuses_a_run_without_a_variational_posterior(sgd_run, tmp_path, capsys):
    code = main(["prune", str(sgd_run), "--out", str(tmp_path / "p")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "is a 'sgd' run; allowed: a `bnnkit vi` run" in err
