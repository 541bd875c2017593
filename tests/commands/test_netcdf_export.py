"""``bnnkit samples RUN --format netcdf``: ArviZ InferenceData of a run, or one error line
without ArviZ."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.report.arviz_export import MISSING_ARVIZ, kept_sample_stats

# `hmc_run` (tests/commands/conftest.py): 2 chains, 8 kept iterations after 4 of burn-in.


@pytest.mark.parametrize("missing", [["arviz"], ["h5netcdf", "netCDF4"]])
def test_without_arviz_one_line_exit_2_nothing_written(
    hmc_run, tmp_path, monkeypatch, capsys, missing
):
    for module in missing:
        monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError
    out = tmp_path / "run.nc"
    assert main(["samples", str(hmc_run), "--format", "netcdf", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"bnnkit: error: {MISSING_ARVIZ}\n"
    assert captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_sample_stats_leave_out_a_partly_logged_statistic():
    log = [
        {"iteration": 1, "acceptance_rate": [0.5, 0.6], "step_size": [0.1, 0.1]},
        {"iteration": 2, "acceptance_rate": [0.7, 0.8]},
        {"iteration": 2, "acceptance_rate": [0.9, 1.0]},
    ]  # a resumed unit: the last counts
    stats = kept_sample_stats(log, [1, 2], num_chains=2)
    assert set(stats) == {"acceptance_rate"}
    np.testing.assert_array_equal(stats["acceptance_rate"], [[0.5, 0.9], [0.6, 1.0]])


def test_netcdf_holds_the_run(hmc_run, tmp_path, capsys):
    az = pytest.importorskip("arviz")
    from bnnkit.runs import load_run

    out = tmp_path / "run.nc"
    assert main(["samples", str(hmc_run), "--format", "netcdf", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.nc"]  # no temporary file left
    idata = az.from_netcdf(str(out))

    # posterior: the stored samples, bit for bit, named by parameter path.
    record, problem, posterior, _ = load_run(hmc_run)
    stored = storage.flatten_tree(posterior.params)
    assert "Dense_0.kernel" in idata["posterior"]
    assert len(idata["posterior"].data_vars) == len(stored)
    for path, values in stored.items():
        exported = idata["posterior"][path.removeprefix("params/").replace("/", ".")]
        assert exported.dims[:2] == ("chain", "draw")
        assert exported.dtype == np.float32
        np.testing.assert_array_equal(exported.values, values)
    assert idata["posterior"].sizes["chain"] == 2 and idata["posterior"].sizes["draw"] == 8

    # sample_stats: the log's kept iterations (not burn-in), chain by chain.
    with open(hmc_run / "metrics.jsonl") as f:
        kept = [r for r in map(json.loads, f) if not r["burn_in"]]
    assert [r["iteration"] for r in kept] == list(range(4, 12))
    stats = idata["sample_stats"]
    for name, key in [
        ("acceptance_rate", "acceptance_rate"),
        ("diverging", "divergent"),
        ("step_size", "step_size"),
        ("n_steps", "num_leapfrog"),
        ("lp", "log_posterior"),
    ]:
        assert stats[name].dims == ("chain", "draw")
        np.testing.assert_array_equal(stats[name].values, np.asarray([r[key] for r in kept]).T)

    # posterior_predictive: each draw's Gaussian on the test set; observed_data: its targets.
    dataset = problem.dataset
    n_test = len(dataset.x_test)
    means = idata["posterior_predictive"]["y_mean"]
    assert means.dims == ("chain", "draw", "test_point") and means.shape == (2, 8, n_test)
    assert (idata["posterior_predictive"]["y_std"].values > 0).all()
    observed = idata["observed_data"]["y"].values
    # Original units, in float64 as the predictive means are.
    np.testing.assert_allclose(
        observed,
        np.asarray(dataset.y_test, np.float64) * dataset.target_scale + dataset.target_shift,
        rtol=1e-12,
    )
    # The draws' average is the model average `bnnkit evaluate` scores.
    from bnnkit.evaluation import run_prediction

    bma = run_prediction(record, problem, posterior, dataset.x_test).mean
    np.testing.assert_allclose(means.values.mean(axis=(0, 1)), bma, rtol=1e-6)

    # ArviZ reads it as it is: one summary row per scalar parameter.
    summary = az.summary(idata, group="posterior")
    assert len(summary) == sum(v[0, 0].size for v in stored.values())
    assert {"r_hat", "ess_bulk", "ess_tail"} <= set(summary.columns)
    assert np.isfinite(summary["r_hat"]).all()


def test_netcdf_out_checked_before_anything_is_written(hmc_run, tmp_path, capsys):
    pytest.importorskip("arviz")
    assert main(["samples", str(hmc_run), "--format", "netcdf", "--out", str(tmp_path)]) == 2
    assert "is a directory; allowed: a file path ending in .nc" in capsys.readouterr().err
    missing = tmp_path / "no" / "run.nc"
    assert main(["samples", str(hmc_run), "--format", "netcdf", "--out", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_arviz_1_gets_a_datatree(hmc_run, tmp_path, monkeypatch, capsys):
    """ArviZ >= 1.0 works on xarray DataTrees: the same groups, written by xarray."""
    az = pytest.importorskip("arviz")
    xr = pytest.importorskip("xarray")
    if not hasattr(xr, "DataTree"):
        pytest.skip("xarray without DataTree")
    monkeypatch.setattr(az, "__version__", "1.0.0")
    out = tmp_path / "run.nc"
    assert main(["samples", str(hmc_run), "--format", "netcdf", "--out", str(out)]) == 0
    assert "Dense_0.kernel (2, 8, 6, 50)" in capsys.readouterr().out
    tree = xr.open_datatree(out)
    assert set(tree.children) == {
        "posterior",
        "sample_stats",
        "posterior_predictive",
        "observed_data",
    }
    assert tree["sample_stats"]["acceptance_rate"].shape == (2, 8)
