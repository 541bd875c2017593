"""Predictive metrics against hand-computed values; BMA of identical samples."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest
from scipy import stats

from bnnkit import problem as problem_lib
from bnnkit.metrics import diagnostics, mcmc, predictive
from bnnkit.posterior import Samples
from bnnkit.predict import predict


def test_classification_metrics_by_hand():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.05, 0.9, 0.05]])
    labels = np.array([0, 2, 2, 1])
    assert predictive.accuracy(probs, labels) == 0.75
    expected_nll = -(math.log(0.7) + math.log(0.3) + math.log(0.4) + math.log(0.9)) / 4
    assert predictive.nll_categorical(probs, labels) == pytest.approx(expected_nll, rel=1e-12)
    # 10 bins: confidences 0.7 (correct), 0.6 (wrong), 0.4 (correct), 0.9 (correct) each fall in
    # their own bin, so ECE = mean |acc - conf| = (0.3 + 0.6 + 0.6 + 0.1) / 4.
    assert predictive.ece(probs, labels, num_bins=10) == pytest.approx(0.4, rel=1e-12)


def test_ece_groups_points_in_a_bin():
    probs = np.array([[0.72, 0.28], [0.78, 0.22], [0.2, 0.8]])
    labels = np.array([0, 1, 1])
    # Bins are (lo, hi], so 0.72, 0.78 and 0.8 all fall in (0.7, 0.8]: accuracy 2/3 against a
    # mean confidence of (0.72 + 0.78 + 0.8) / 3.
    conf = (0.72 + 0.78 + 0.8) / 3
    assert predictive.ece(probs, labels, num_bins=10) == pytest.approx(abs(2 / 3 - conf))


def test_calibration_bins_by_hand_and_ece_from_them():
    # Top-1 confidences 0.72 (correct), 0.78 (wrong), 0.8 (correct), 0.95 (correct), 0.55
    # (wrong) in 4 bins (0, .25], (.25, .5], (.5, .75], (.75, 1]: counts 0, 0, 2, 3.
    probs = np.array([[0.72, 0.28], [0.78, 0.22], [0.2, 0.8], [0.05, 0.95], [0.55, 0.45]])
    labels = np.array([0, 1, 1, 1, 1])
    bins = predictive.calibration_bins(probs, labels, num_bins=4)
    assert bins["edges"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert bins["counts"] == [0, 0, 2, 3] and sum(bins["counts"]) == len(labels)
    assert bins["accuracy"][:2] == [None, None] and bins["confidence"][:2] == [None, None]
    assert bins["accuracy"][2:] == pytest.approx([0.5, 2 / 3], rel=1e-12)
    assert bins["confidence"][2:] == pytest.approx(
        [(0.72 + 0.55) / 2, (0.78 + 0.8 + 0.95) / 3], rel=1e-12
    )
    direct = (2 * abs(0.5 - (0.72 + 0.55) / 2) + 3 * abs(2 / 3 - (0.78 + 0.8 + 0.95) / 3)) / 5
    assert predictive.ece(probs, labels, num_bins=4) == pytest.approx(direct, rel=1e-12)
    assert predictive.ece_from_bins(bins) == predictive.ece(probs, labels, num_bins=4)
    json.dumps(bins, allow_nan=False)  # no NaN: empty bins are null


def test_calibration_bins_hold_every_point():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.full(10, 0.3), size=500)
    bins = predictive.calibration_bins(probs, rng.integers(0, 10, 500))
    assert len(bins["edges"]) == 16 and len(bins["counts"]) == 15
    assert sum(bins["counts"]) == 500
    # A confidence is at least 1/K = 0.1, so the first bin (0, 1/15] stays empty.
    assert bins["counts"][0] == 0 and bins["accuracy"][0] is None


def test_regression_metrics_by_hand():
    targets = np.array([1.0, 2.0, 4.0])
    means = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 5.0]])  # 2 samples
    stds = np.array([[1.0, 0.5, 2.0], [1.0, 0.5, 1.0]])
    assert predictive.rmse(means.mean(0), targets) == pytest.approx(math.sqrt(1 / 3))
    dens = 0.5 * (
        stats.norm.pdf(targets, means[0], stds[0]) + stats.norm.pdf(targets, means[1], stds[1])
    )
    expected = -np.mean(np.log(dens))
    assert predictive.nll_gaussian_mixture(means, stds, targets) == pytest.approx(expected)


def test_binned_nll_is_the_mixture_mass_of_each_targets_bin():
    targets = np.array([3.0, 5.0, 6.0, 8.0])
    means = np.array([[3.2, 5.0, 4.0, 30.0], [2.0, 5.1, 6.4, -20.0]])
    stds = np.array([[0.3, 1e-3, 0.5, 1.0], [1.0, 0.2, 2.0, 1.0]])
    mass = 0.5 * sum(
        stats.norm.cdf(targets + 0.5, m, s) - stats.norm.cdf(targets - 0.5, m, s)
        for m, s in zip(means, stds, strict=True)
    )
    # The last point lies 22 and 28 sds from both components: scipy's difference of cdfs is 0
    # there, the log-space formula keeps ~1e-106; both floor at 1e-300 only below it.
    stable = (
        stats.norm.logsf(21.5)
        + np.log1p(-np.exp(stats.norm.logsf(22.5) - stats.norm.logsf(21.5)))
        - np.log(2)
    )
    expected = -np.mean(np.append(np.log(mass[:3]), stable))
    assert predictive.nll_gaussian_mixture_binned(means, stds, targets) == pytest.approx(
        expected, rel=1e-9
    )
    # A mass cannot exceed 1, so the NLL is never negative, however narrow the spike.
    assert (
        predictive.nll_gaussian_mixture_binned(means[:, 1:2], stds[:, 1:2] * 1e-6, targets[1:2])
        >= 0.0
    )


def test_agreement_and_total_variation_by_hand():
    p = np.array([[0.6, 0.4], [0.2, 0.8], [0.5, 0.5]])
    q = np.array([[0.4, 0.6], [0.1, 0.9], [0.5, 0.5]])
    assert predictive.agreement(p, q) == pytest.approx(2 / 3)
    assert predictive.total_variation(p, q) == pytest.approx((0.2 + 0.1 + 0.0) / 3)
    assert predictive.total_variation(p, p) == 0.0


def iid_rhat_bound(num_chains: int, num_samples: int, error: float = 1e-3) -> float:
    """The (1 − error) quantile of split R-hat for iid Gaussian draws.

    Split R-hat over m = 2 × chains halves of n draws is √((n − 1 + F)/n) with
    F = n·var(half means)/W, which for iid Gaussian draws is exactly F(m − 1, m(n − 1))
    distributed (independent χ² numerator and denominator).
    """
    m, n = 2 * num_chains, num_samples // 2
    return math.sqrt((n - 1 + stats.f.ppf(1 - error, m - 1, m * (n - 1))) / n)


def test_split_rhat_flags_disagreeing_chains():
    rng = np.random.default_rng(0)
    bound = iid_rhat_bound(4, 500)
    good = rng.normal(size=(4, 500))
    assert float(diagnostics.split_rhat(good)) < bound
    # One chain 3 sd away, or a single chain drifting (a random walk, caught by the split):
    # both above the level that iid draws exceed with probability 1e-3.
    bad = good + np.array([0.0, 0.0, 0.0, 3.0])[:, None]
    assert float(diagnostics.split_rhat(bad)) > bound
    drifting = np.cumsum(rng.normal(size=(1, 500)), axis=1)
    assert float(diagnostics.split_rhat(drifting)) > iid_rhat_bound(1, 500)


@pytest.mark.parametrize("ess", [diagnostics.ess, mcmc.ess_mean], ids=["bulk", "mean"])
def test_ess_is_the_variance_ratio_of_the_mean(ess):
    # ESS means Var(mean of the draws) = σ²/ESS. Over R independent replicates of 4 AR(1)
    # chains (ρ = 0.6, σ² = 1 stationary), the empirical variance of the replicate means must
    # match the average σ²/ESS: their ratio has relative sd √(2/(R−1)) from the replicates'
    # spread (chi-square), checked at z = 3.29 (two-sided 1e-3) plus 5 % for the ESS
    # estimator's own bias at n = 500. Ignoring the autocorrelation (ESS = N) would give a
    # ratio of (1+ρ)/(1−ρ) = 4. The bulk ESS (of the rank-normalised draws) estimates the
    # same for Gaussian chains: rank-normalising Gaussian draws gives back (nearly) the draws
    # standardised.
    rng = np.random.default_rng(1)
    reps, chains, n, rho = 400, 4, 500, 0.6
    x = np.empty((chains, n, reps))
    x[:, 0] = rng.normal(size=(chains, reps))
    noise = rng.normal(scale=math.sqrt(1 - rho**2), size=(chains, n, reps))
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    values = np.asarray(ess(x))
    assert values.shape == (reps,)
    ratio = np.var(x.mean(axis=(0, 1)), ddof=1) / np.mean(1.0 / values)
    assert abs(ratio - 1) < 3.29 * math.sqrt(2 / (reps - 1)) + 0.05, ratio


@pytest.mark.parametrize("dataset", ["yacht_0", "classification"])
def test_bma_of_identical_samples_equals_single_prediction(dataset, tmp_path):
    if dataset == "classification":
        rng = np.random.default_rng(0)
        path = tmp_path / "toy.npz"
        np.savez(
            path,
            x_train=rng.normal(size=(20, 3)),
            y_train=rng.integers(0, 3, 20),
            x_test=rng.normal(size=(7, 3)),
            y_test=rng.integers(0, 3, 7),
        )
        config = problem_lib.ProblemConfig(dataset=str(path), model="linear")
    else:
        config = problem_lib.ProblemConfig(dataset=dataset, model="mlp_regression_small")
    problem = problem_lib.build(config)
    params = problem.init_params(jax.random.PRNGKey(0))
    stacked = jax.tree.map(lambda a: np.broadcast_to(a, (2, 3, *a.shape)), params)
    pred = predict(problem, Samples(stacked), problem.dataset.x_test)
    single = predict(
        problem,
        Samples.from_single_chain(jax.tree.map(lambda a: a[None], params)),
        problem.dataset.x_test,
    )
    out = np.asarray(problem.apply(params, problem.to_device(problem.dataset.x_test)))
    if problem.dataset.task == "classification":
        np.testing.assert_allclose(pred.probs, jax.nn.softmax(out, -1), rtol=1e-5)
        np.testing.assert_allclose(pred.probs, single.probs, rtol=1e-6)
    else:
        mean, _ = problem.likelihood.mean_std(out)
        expected = np.asarray(mean) * problem.dataset.target_scale + problem.dataset.target_shift
        np.testing.assert_allclose(pred.mean, expected, rtol=1e-5)
        targets = problem.dataset.y_test_original
        assert predictive.nll_gaussian_mixture(pred.means, pred.stds, targets) == pytest.approx(
            predictive.nll_gaussian_mixture(single.means, single.stds, targets), rel=1e-6
        )
