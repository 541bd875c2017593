"""Predictive metrics against hand-computed values; BMA of identical samples."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy import stats

from bnnkit import problem as problem_lib
from bnnkit.metrics import diagnostics, predictive
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


def test_regression_metrics_by_hand():
    targets = np.array([1.0, 2.0, 4.0])
    means = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 5.0]])  # 2 samples
    stds = np.array([[1.0, 0.5, 2.0], [1.0, 0.5, 1.0]])
    assert predictive.rmse(means.mean(0), targets) == pytest.approx(math.sqrt(1 / 3))
    dens = 0.5 * (stats.norm.pdf(targets, means[0], stds[0]) +
                  stats.norm.pdf(targets, means[1], stds[1]))
    expected = -np.mean(np.log(dens))
    assert predictive.nll_gaussian_mixture(means, stds, targets) == pytest.approx(expected)


def test_agreement_and_total_variation_by_hand():
    p = np.array([[0.6, 0.4], [0.2, 0.8], [0.5, 0.5]])
    q = np.array([[0.4, 0.6], [0.1, 0.9], [0.5, 0.5]])
    assert predictive.agreement(p, q) == pytest.approx(2 / 3)
    assert predictive.total_variation(p, q) == pytest.approx((0.2 + 0.1 + 0.0) / 3)
    assert predictive.total_variation(p, p) == 0.0


def test_split_rhat_flags_disagreeing_chains():
    rng = np.random.default_rng(0)
    good = rng.normal(size=(4, 500))
    bad = good + np.array([0.0, 0.0, 0.0, 3.0])[:, None]
    assert float(diagnostics.split_rhat(good)) < 1.02
    assert float(diagnostics.split_rhat(bad)) > 1.5
    drifting = np.cumsum(rng.normal(size=(1, 500)), axis=1)  # one chain, a random walk
    assert float(diagnostics.split_rhat(drifting)) > 1.2
    assert 1500 < float(diagnostics.ess(good)) < 2600


@pytest.mark.parametrize("dataset", ["yacht_0", "classification"])
def test_bma_of_identical_samples_equals_single_prediction(dataset, tmp_path):
    if dataset == "classification":
        rng = np.random.default_rng(0)
        path = tmp_path / "toy.npz"
        np.savez(path, x_train=rng.normal(size=(20, 3)), y_train=rng.integers(0, 3, 20),
                 x_test=rng.normal(size=(7, 3)), y_test=rng.integers(0, 3, 7))
        config = problem_lib.ProblemConfig(dataset=str(path), model="linear")
    else:
        config = problem_lib.ProblemConfig(dataset=dataset, model="mlp_regression_small")
    problem = problem_lib.build(config)
    params = problem.init_params(jax.random.PRNGKey(0))
    stacked = jax.tree.map(lambda a: np.broadcast_to(a, (2, 3, *a.shape)), params)
    pred = predict(problem, Samples(stacked), problem.dataset.x_test)
    single = predict(problem, Samples.from_single_chain(jax.tree.map(lambda a: a[None], params)),
                     problem.dataset.x_test)
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
            predictive.nll_gaussian_mixture(single.means, single.stds, targets), rel=1e-6)
