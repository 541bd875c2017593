"""Brier score, the competition's W1, temperature scaling, split conformal prediction and the
OOD scores, each against a definition computed another way or a known truth."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from bnnkit.metrics import conformal, ood, recalibration
from bnnkit.metrics.predictive import (
    brier,
    mixture_draws,
    predictive_wasserstein_1,
    wasserstein_1,
)
from bnnkit.predict import Prediction


def test_brier_is_the_squared_distance_to_the_one_hot_label():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=30)
    labels = rng.integers(0, 4, size=30)
    by_hand = np.mean(
        [sum((probs[i, k] - (labels[i] == k)) ** 2 for k in range(4)) for i in range(30)]
    )
    assert brier(probs, labels) == pytest.approx(by_hand, rel=1e-12)


def test_w1_is_scipys_wasserstein_distance():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(7, 200)), rng.gamma(2.0, size=(7, 200))
    mine = wasserstein_1(a, b)
    for i in range(7):
        assert mine[i] == pytest.approx(stats.wasserstein_distance(a[i], b[i]), rel=1e-12)


def test_predictive_w1_of_two_gaussians_is_the_distance_of_their_means():
    # For N(μ₁, σ²) and N(μ₂, σ²) on one point each, W₁ = |μ₁ − μ₂|. The estimate from M draws
    # each has error of order σ √(2/M); with M = 1000 and σ = 1, 0.2 is over 4 such errors.
    means = np.zeros((1, 5))
    p = Prediction("regression", means=means, stds=np.ones((1, 5)))
    q = Prediction("regression", means=means + 3.0, stds=np.ones((1, 5)))
    assert predictive_wasserstein_1(p, q) == pytest.approx(3.0, abs=0.2)
    # The mixture draws pick components uniformly: two far components, half the draws each.
    two = mixture_draws(
        np.array([[-10.0], [10.0]]), np.ones((2, 1)), 4000, np.random.default_rng(2)
    )
    share = np.mean(two > 0)
    assert abs(share - 0.5) < 4 * math.sqrt(0.25 / 4000)


def test_temperature_scaling_recovers_the_temperature_of_the_labels():
    # Labels drawn from softmax(z / τ*) while the predictive says softmax(z): the fitted τ is
    # the maximum-likelihood estimate, within 4 of its asymptotic standard errors
    # 1/√(n I(τ)), I the per-point Fisher information (the NLL's curvature at τ̂).
    rng = np.random.default_rng(3)
    n, k, tau_star = 20000, 5, 2.5
    logits = rng.normal(scale=3.0, size=(n, k))
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    truth = recalibration.tempered_probs(probs, tau_star)
    labels = np.array([rng.choice(k, p=row) for row in truth])
    prediction = Prediction("classification", probs=probs)
    tau = recalibration.fit(prediction, labels)

    def nll(t):
        p = recalibration.tempered_probs(probs, t)
        return -np.mean(np.log(p[np.arange(n), labels]))

    h = 1e-3 * tau
    curvature = (nll(tau + h) - 2 * nll(tau) + nll(tau - h)) / h**2
    assert abs(tau - tau_star) < 4 / math.sqrt(n * curvature)
    # Accuracy is unchanged: the argmax of every row stays.
    moved = recalibration.apply(prediction, tau)
    assert np.array_equal(moved.probs.argmax(1), probs.argmax(1))


def test_regression_stretch_recovers_the_scale_of_the_noise():
    # y ~ N(μ, (s* σ)²) under a predictive N(μ, σ²): the fitted stretch is the MLE of s*, whose
    # standard error is s*/√(2n).
    rng = np.random.default_rng(4)
    n, s_star = 5000, 1.7
    mu, sigma = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    y = mu + s_star * sigma * rng.normal(size=n)
    prediction = Prediction("regression", means=mu[None], stds=sigma[None])
    s = recalibration.fit(prediction, y)
    assert abs(s - s_star) < 4 * s_star / math.sqrt(2 * n)
    # A mixture is stretched about its mean: the mean (so the RMSE) stays.
    mix = Prediction("regression", means=np.stack([mu - 1, mu + 1]), stds=np.stack([sigma] * 2))
    moved = recalibration.apply(mix, 2.0)
    np.testing.assert_allclose(moved.mean, mix.mean)
    np.testing.assert_allclose(moved.means, np.stack([mu - 2, mu + 2]))


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_split_conformal_covers_at_least_one_minus_alpha(task):
    # Exchangeable calibration and test points: over R repetitions the mean test coverage is
    # between 1 − α and 1 − α + 1/(n + 1) (Vovk et al.); with R · m test points in all, the
    # estimate's standard error is at most √(α(1 − α)/(R m)) (coverage varies less between
    # repetitions than binomially only), and 4.5 of those are allowed either side.
    rng = np.random.default_rng(5)
    alpha, n, m, reps = 0.1, 99, 200, 200
    covered = []
    for _ in range(reps):
        if task == "classification":
            logits = rng.normal(scale=2.0, size=(n + m, 4))
            probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
            # Labels from a slightly different distribution: coverage must hold anyway.
            truth = recalibration.tempered_probs(probs, 1.5)
            y = np.array([rng.choice(4, p=row) for row in truth])
            cal = Prediction("classification", probs=probs[:n])
            test = Prediction("classification", probs=probs[n:])
        else:
            mu, sigma = rng.normal(size=n + m), rng.uniform(0.5, 2.0, size=n + m)
            y = mu + 1.3 * sigma * rng.standard_t(5, size=n + m)
            cal = Prediction("regression", means=mu[None, :n], stds=sigma[None, :n])
            test = Prediction("regression", means=mu[None, n:], stds=sigma[None, n:])
        result = conformal.evaluate(cal, y[:n], test, y[n:], alpha)
        covered.append(result["coverage"])
    mean = float(np.mean(covered))
    se = math.sqrt(alpha * (1 - alpha) / (reps * m))
    assert 1 - alpha - 4.5 * se <= mean <= 1 - alpha + 1 / (n + 1) + 4.5 * se


def test_conformal_sets_and_intervals_by_hand():
    probs = np.array([[0.7, 0.2, 0.1], [0.4, 0.35, 0.25], [0.1, 0.1, 0.8]])
    cal = Prediction("classification", probs=probs)
    labels = np.array([0, 1, 2])  # LAC scores 0.3, 0.65, 0.2
    result = conformal.evaluate(cal, labels, cal, labels, alpha=0.5)
    # ⌈4 · 0.5⌉ = 2nd smallest score: 0.3; sets {p ≥ 0.7}: {0}, {}, {2}.
    assert result["quantile"] == pytest.approx(0.3)
    assert result["mean_set_size"] == pytest.approx(2 / 3)
    assert result["coverage"] == pytest.approx(2 / 3)
    reg = Prediction("regression", means=np.array([[0.0, 0.0], [2.0, 2.0]]), stds=np.ones((2, 2)))
    mean, std = conformal.predictive_mean_std(reg.means, reg.stds)
    np.testing.assert_allclose(mean, [1.0, 1.0])
    np.testing.assert_allclose(std, [math.sqrt(2.0)] * 2)  # 1 + 1 (spread of the means)
    out = conformal.evaluate(reg, np.array([1.0, 3.0]), reg, np.array([1.0, 3.0]), alpha=0.4)
    assert out["mean_width"] == pytest.approx(2 * out["quantile"] * math.sqrt(2.0))


def test_auroc_and_fpr_against_brute_force():
    rng = np.random.default_rng(6)
    a = np.round(rng.normal(size=60), 1)  # ties on purpose
    b = np.round(rng.normal(0.7, size=45), 1)
    pairs = [1.0 if y > x else 0.5 if y == x else 0.0 for x, y in itertools.product(a, b)]
    assert ood.auroc(a, b) == pytest.approx(np.mean(pairs), rel=1e-12)
    thresholds = sorted(set(b), reverse=True)
    t = next(t for t in thresholds if np.mean(b >= t) >= 0.95)
    assert ood.fpr_at_tpr(a, b) == pytest.approx(np.mean(a >= t))


def test_mutual_information_is_zero_for_agreeing_draws_and_entropy_is_total():
    probs = np.array([[0.5, 0.5], [0.9, 0.1]])
    same = Prediction("classification", probs=probs, expected_entropy=ood.entropy(probs))
    scores = ood.scores(same)
    np.testing.assert_allclose(scores["mutual_information"], 0.0, atol=1e-12)
    np.testing.assert_allclose(scores["entropy"][0], math.log(2))
    # Two confident draws that disagree: the average is uncertain, and all of it is epistemic.
    draws = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    disagree = Prediction(
        "classification", probs=draws.mean(0), expected_entropy=ood.entropy(draws).mean(0)
    )
    np.testing.assert_allclose(ood.scores(disagree)["mutual_information"], [math.log(2)])
