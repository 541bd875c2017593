"""Per-quantity MCMC diagnostics: equal to ArviZ's to float rounding, and flagging what they
should (disagreeing, drifting or differently spread chains; slowly explored heavy tails)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from bnnkit.errors import ConfigError
from bnnkit.metrics import diagnostics, mcmc
from bnnkit.metrics.mcmc_summary import Summary, summary

# Every quantity is a smooth function of float64 sums of at most S = chains × samples ≤ 2000
# terms (means, variances, autocovariances from the FFT, the sum of at most N/2 pair sums).
# Summed in a different order, such a sum differs by at most S·ε ≈ 2000 × 1.1e-16 ≈ 2e-13 of
# its magnitude (the worst case of naive summation; pairwise summation errs far less), and the
# ratios and square roots on top add a few ε. rtol 1e-10 leaves a factor of ~500 over that,
# while any real difference (a bias correction, the split, the cap, where the Geyer sequence is
# cut) moves the results by 1e-4 or more. Ranks, quantiles and where the sequence is cut are
# decided by comparisons of the same float64 values, so they agree exactly.
RTOL = 1e-10


def ar1(chains: int, samples: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """AR(1) chains started from their stationary N(0, 1) distribution."""
    x = np.empty((chains, samples))
    x[:, 0] = rng.normal(size=chains)
    noise = rng.normal(scale=math.sqrt(1 - rho**2), size=(chains, samples))
    for t in range(1, samples):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return x


def cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "iid normal": rng.normal(size=(4, 500)),
        "AR(1) rho 0.95": ar1(4, 400, 0.95, rng),
        "AR(1) rho -0.7 (antithetic)": ar1(4, 300, -0.7, rng),
        "shifted means": rng.normal(size=(4, 300)) + np.array([0.0, 0.0, 0.0, 2.0])[:, None],
        "cauchy": rng.standard_cauchy(size=(4, 300)),
        "odd samples": rng.normal(size=(3, 201)),
        "few samples": rng.normal(size=(2, 7)),
        "ties": rng.integers(0, 3, size=(4, 100)).astype(np.float64),
    }


def arviz_values(az, x: np.ndarray) -> dict[str, float]:
    """ArviZ's diagnostics of one quantity's (chains, samples) draws."""
    return {
        "rhat": az.rhat(x, method="rank"),
        "ess_bulk": az.ess(x, method="bulk"),
        "ess_tail": az.ess(x, method="tail"),
        "ess_mean": az.ess(x, method="mean"),
        "ess_unsplit": az.ess(x, method="identity"),
        "ess_sd": az.ess(x, method="sd"),
        "ess_quantile": az.ess(x, method="quantile", prob=0.3),
        "mcse_mean": az.mcse(x, method="mean"),
        "mcse_sd": az.mcse(x, method="sd"),
        **{f"mcse_quantile_{p}": az.mcse(x, method="quantile", prob=p) for p in (0.05, 0.5, 0.95)},
    }


def our_values(x: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "rhat": mcmc.rhat(x),
        "ess_bulk": mcmc.ess_bulk(x),
        "ess_tail": mcmc.ess_tail(x),
        "ess_mean": mcmc.ess_mean(x),
        "ess_unsplit": mcmc.ess_mean(x, split=False),
        "ess_sd": mcmc.ess_sd(x),
        "ess_quantile": mcmc.ess_quantile(x, 0.3),
        "mcse_mean": mcmc.mcse_mean(x),
        "mcse_sd": mcmc.mcse_sd(x),
        **{f"mcse_quantile_{p}": mcmc.mcse_quantile(x, p) for p in (0.05, 0.5, 0.95)},
    }


@pytest.fixture(scope="module")
def az():
    with warnings.catch_warnings():  # ArviZ 0.23 announces its refactor on import
        warnings.simplefilter("ignore", FutureWarning)
        return pytest.importorskip("arviz")


@pytest.mark.parametrize("case", list(cases()))
def test_every_diagnostic_equals_arviz(az, case):
    x = cases()[case]
    expected = arviz_values(az, x)
    ours = our_values(x)
    for name, value in expected.items():
        assert ours[name].shape == ()
        np.testing.assert_allclose(ours[name], value, rtol=RTOL, atol=0, err_msg=name)
    # The ESS that evaluate and the convergence verdict report is the bulk ESS.
    np.testing.assert_allclose(diagnostics.ess(x), expected["ess_bulk"], rtol=RTOL, atol=0)


def test_many_quantities_at_once_equal_arviz_one_at_a_time(az):
    # One call over (chains, samples, 2, 4): each of the 8 quantities (different kinds of
    # chains side by side) gets what ArviZ gives it alone.
    rng = np.random.default_rng(1)
    columns = [
        rng.normal(size=(4, 120)),
        ar1(4, 120, 0.9, rng),
        ar1(4, 120, -0.5, rng),
        rng.standard_cauchy(size=(4, 120)),
        np.cumsum(rng.normal(size=(4, 120)), 1),
        rng.exponential(size=(4, 120)),
        rng.integers(0, 2, (4, 120)).astype(float),
        rng.normal(size=(4, 120)) * np.arange(1, 5)[:, None],
    ]
    draws = np.stack(columns, axis=-1).reshape(4, 120, 2, 4)
    ours = our_values(draws)
    for j, column in enumerate(columns):
        expected = arviz_values(az, column)
        for name, value in expected.items():
            assert ours[name].shape == (2, 4)
            np.testing.assert_allclose(
                ours[name].reshape(-1)[j],
                value,
                rtol=RTOL,
                atol=0,
                err_msg=f"{name} of quantity {j}",
            )


def test_summary_equals_arviz_summary(az):
    rng = np.random.default_rng(2)
    positions = {
        "mu": ar1(4, 200, 0.8, rng),
        "z": np.stack([ar1(4, 200, 0.3, rng), rng.standard_t(3, size=(4, 200))], -1),
    }
    expected = az.summary(az.from_dict(posterior=positions), round_to="none")
    table = summary(positions)
    assert [row.name for row in table] == list(expected.index)  # ArviZ's names: "z[1]"
    for row in table:
        for column in ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"):
            np.testing.assert_allclose(
                getattr(row, column),
                expected.loc[row.name, column],
                rtol=RTOL,
                atol=0,
                err_msg=f"{column} of {row.name}",
            )


def test_constant_quantities_are_nan_where_arviz_reports_the_sample_size(az):
    # A deliberate difference: a constant has no R-hat (NaN in both), and no ESS or Monte Carlo
    # error either (ArviZ reports ESS = S and MCSE 0, which a summary would show as perfect).
    x = np.full((4, 100), 3.0)
    with np.errstate(invalid="ignore"):  # ArviZ divides 0 by 0 for the R-hat
        assert np.isnan(az.rhat(x)) and az.ess(x) == 400 and az.mcse(x) == 0
    for name, value in our_values(x).items():
        assert np.isnan(value), name


# Without ArviZ: shapes, input checks and what the diagnostics flag.


def test_shapes_nan_and_bad_input():
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(4, 50, 3, 2))
    draws[:, :, 0, 1] = 7.0  # constant
    draws[0, 5, 2, 0] = np.nan  # broken draws
    draws[1, 7, 1, 1] = -np.inf
    for name, value in our_values(draws).items():
        assert value.shape == (3, 2), name
        assert np.isnan(value[[0, 2, 1], [1, 0, 1]]).all(), name
        assert np.isfinite(np.delete(value.ravel(), [1, 4, 3])).all(), name
    assert mcmc.rhat(rng.normal(size=(4, 50))).shape == ()
    for name, value in our_values(np.zeros((4, 50, 0))).items():  # no quantities at all
        assert value.shape == (0,), name
    assert all(column.shape == (0,) for column in mcmc.diagnose(np.zeros((4, 50, 0))).values())
    with pytest.raises(ConfigError, match=r"at least 4 samples per chain, got shape \(4, 3\)"):
        mcmc.rhat(rng.normal(size=(4, 3)))
    with pytest.raises(ValueError, match="at least 4 samples"):  # ConfigError is a ValueError
        mcmc.ess_bulk(rng.normal(size=(10,)))
    with pytest.raises(ConfigError, match=r"probabilities in \(0, 1\), got 1.5"):
        mcmc.mcse_quantile(rng.normal(size=(4, 50)), 1.5)
    with pytest.raises(ConfigError, match=r"got 0.0"):
        mcmc.ess_tail(rng.normal(size=(4, 50)), prob=(0.0, 0.95))


def test_blocks_of_quantities_give_what_one_block_gives(monkeypatch):
    # The quantities go through in blocks to bound memory; the split must not change a value.
    draws = np.random.default_rng(4).normal(size=(2, 40, 7))
    whole = mcmc.diagnose(draws)
    monkeypatch.setattr(mcmc, "_BLOCK", 2 * 40 * 3)  # blocks of 3, 3 and 1 quantities
    for name, column in mcmc.diagnose(draws).items():
        np.testing.assert_array_equal(column, whole[name], err_msg=name)


def test_diagnose_equals_the_single_functions():
    rng = np.random.default_rng(5)
    draws = np.stack([ar1(3, 101, 0.6, rng), rng.standard_cauchy(size=(3, 101))], -1)
    table = mcmc.diagnose(draws)
    assert list(table) == list(mcmc.COLUMNS)
    single = {
        "mcse_mean": mcmc.mcse_mean,
        "mcse_sd": mcmc.mcse_sd,
        "ess_bulk": mcmc.ess_bulk,
        "ess_tail": mcmc.ess_tail,
        "r_hat": mcmc.rhat,
    }
    for name, function in single.items():
        np.testing.assert_allclose(table[name], function(draws), rtol=RTOL, atol=0, err_msg=name)
    flat = draws.reshape(-1, 2)
    np.testing.assert_allclose(table["mean"], flat.mean(0), rtol=RTOL)
    np.testing.assert_allclose(table["sd"], flat.std(0, ddof=1), rtol=RTOL)
    np.testing.assert_allclose(table["q5"], np.quantile(flat, 0.05, axis=0), rtol=RTOL)
    np.testing.assert_allclose(table["q95"], np.quantile(flat, 0.95, axis=0), rtol=RTOL)


def rank_rhat_bound(num_chains: int, num_samples: int, error: float = 1e-3) -> float:
    """A level that rank-normalised R-hat of iid draws exceeds with probability about ``error``.

    For iid draws the rank-normalised split draws are (up to the ranks' weak dependence) iid
    N(0, 1), so bulk R-hat over m = 2 × chains halves of n draws is √((n − 1 + F)/n) with
    F ~ F(m − 1, m(n − 1)), and so is the folded (tail) one; R-hat is their maximum, bounded
    by a Bonferroni split of ``error`` between the two.
    """
    m, n = 2 * num_chains, num_samples // 2
    return math.sqrt((n - 1 + stats.f.ppf(1 - error / 2, m - 1, m * (n - 1))) / n)


def test_rhat_flags_disagreeing_drifting_and_differently_spread_chains():
    rng = np.random.default_rng(6)
    bound = rank_rhat_bound(4, 500)
    iid = rng.normal(size=(4, 500))
    assert float(mcmc.rhat(iid)) < bound
    # One chain a posterior sd away from the others: the half-chain means vary by ~0.21
    # (variance of [0]*6 + [1]*2), so R-hat ≈ √1.2 ≈ 1.1 against a bound of ~1.01.
    shifted = iid + np.array([0.0, 0.0, 0.0, 1.0])[:, None]
    assert float(mcmc.rhat(shifted)) > bound
    # A chain that drifts from −1 to +1 keeps its mean at 0, so only the split sees it.
    drifting = iid + np.array([0.0, 0.0, 0.0, 1.0])[:, None] * np.linspace(-1, 1, 500)
    assert float(mcmc.rhat(drifting)) > bound
    # A single chain rising by 2 sds: its two halves are the chains compared (means 1 apart).
    rising = iid[:1] + np.linspace(0.0, 2.0, 500)
    assert float(mcmc.rhat(rising)) > rank_rhat_bound(1, 500)
    # Same location, one chain three times as wide: the chains' means agree, and the R-hat of
    # the folded draws |θ − median| sees the different spread.
    wide = iid * np.array([1.0, 1.0, 1.0, 3.0])[:, None]
    assert float(mcmc.rhat(wide)) > bound


def test_tail_ess_flags_slowly_explored_heavy_tails():
    # θ_t = exp(1.5 h_t) ε_t: ε iid N(0, 1), log scale h an AR(1) with ρ = 0.995, so θ is
    # heavy-tailed (a scale mixture of normals) and its tails are visited in long excursions.
    # The signs are independent, so the rank-normalised draws (odd in θ, the marginal being
    # symmetric) are uncorrelated and the bulk ESS is about S = 8000 (±5 %; S/2 is the bound).
    # Whether θ_t ≤ q_5% depends on the persistent scale, whose autocorrelation time is
    # (1 + ρ)/(1 − ρ) ≈ 400, so the tail ESS is a small share of S (100-400 over 40 seeds);
    # S/10 = 800 leaves a factor of 2 over the largest.
    rng = np.random.default_rng(7)
    scale = ar1(4, 2000, 0.995, rng)
    draws = np.exp(1.5 * scale) * rng.normal(size=(4, 2000))
    size = draws.size
    assert float(mcmc.ess_bulk(draws)) > size / 2
    assert float(mcmc.ess_tail(draws)) < size / 10
    # Independent Cauchy draws have heavy tails too, but explored at once: both ESS near S.
    cauchy = rng.standard_cauchy(size=(4, 2000))
    assert float(mcmc.ess_bulk(cauchy)) > size / 2 and float(mcmc.ess_tail(cauchy)) > size / 2


def test_mcse_of_the_mean_of_iid_normal_draws_is_one_over_root_s():
    # 400 independent replicates of 4 chains × 500 iid N(0, 1) draws: the MCSE of the mean is
    # 1/√S exactly (S = 2000). The estimate √(s²/ESS) scatters around it (about 3.5 % here);
    # the mean of √S·MCSE over the replicates has standard error sd/√400, checked at z = 3.29
    # (two-sided 1e-3), plus the estimator's own upward bias: Geyer's sequence keeps a pair of
    # autocorrelations only while it is positive, and the first such pair, ≈ N(0, 2/S) for iid
    # draws, adds 2·E[max(P, 0)] = 2√(2/S)/√(2π) ≈ 2.5 % to τ̂, so ~1.3 % to the MCSE; later
    # pairs add less than the first, so 2.5 % is allowed. A missed split, cap or factor 2 in
    # τ̂ would move the mean by 30 % or more.
    rng = np.random.default_rng(8)
    reps, chains, samples = 400, 4, 500
    ratio = mcmc.mcse_mean(rng.normal(size=(chains, samples, reps))) * math.sqrt(chains * samples)
    tolerance = 3.29 * ratio.std(ddof=1) / math.sqrt(reps) + 0.025
    assert abs(ratio.mean() - 1.0) < tolerance, (ratio.mean(), tolerance)


def test_summary_names_values_and_markdown():
    rng = np.random.default_rng(9)
    positions = {
        "mu": rng.normal(size=(2, 50)),
        "layer": {"w": rng.normal(size=(2, 50, 2, 3))},
        "fixed": np.full((2, 50), 1.5),
    }
    table = summary(positions)
    assert isinstance(table, Summary) and len(table) == 1 + 1 + 6
    names = [row.name for row in table]
    assert names == [
        "fixed",
        "layer/w[0, 0]",
        "layer/w[0, 1]",
        "layer/w[0, 2]",
        "layer/w[1, 0]",
        "layer/w[1, 1]",
        "layer/w[1, 2]",
        "mu",
    ]
    w = positions["layer"]["w"]
    row = table["layer/w[1, 2]"]
    assert row.mean == pytest.approx(w[:, :, 1, 2].mean(), rel=RTOL)
    assert row.r_hat == pytest.approx(float(mcmc.rhat(w[:, :, 1, 2])), rel=RTOL)
    assert row.ess_tail == pytest.approx(float(mcmc.ess_tail(w[:, :, 1, 2])), rel=RTOL)
    fixed = table["fixed"]  # described, but without diagnostics
    assert (fixed.mean, fixed.sd, fixed.q5, fixed.q95) == (1.5, 0.0, 1.5, 1.5)
    assert all(math.isnan(getattr(fixed, c)) for c in ("mcse_mean", "ess_bulk", "r_hat"))
    records = json.loads(json.dumps(table.to_dicts()))
    assert records[-1]["name"] == "mu" and set(records[-1]) == {"name", *mcmc.COLUMNS}
    lines = table.to_markdown().splitlines()
    assert len(lines) == 2 + len(table)
    assert lines[2].startswith("| fixed | 1.5 | 0 | 1.5 | 1.5 | nan |")
    assert summary(rng.normal(size=(2, 8)))["x"].name == "x"  # a bare array
    with pytest.raises(KeyError):
        table["nope"]


def test_summary_refuses_leaves_that_do_not_line_up():
    with pytest.raises(ConfigError, match="same chains and samples"):
        summary({"a": np.zeros((2, 50)), "b": np.zeros((3, 50))})
    with pytest.raises(ConfigError, match="no arrays"):
        summary({})
    with pytest.raises(ConfigError, match="at least 4 samples"):
        summary({"a": np.zeros((2, 3))})
