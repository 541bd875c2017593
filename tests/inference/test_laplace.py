"""Laplace approximations: exact on conjugate linear regression, GGN pieces against brute force,
chunking, marginal likelihood, damping."""

from __future__ import annotations

import functools
import math
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from scipy.optimize import minimize_scalar

from bnnkit import likelihoods, models, priors
from bnnkit.inference import laplace
from bnnkit.inference.laplace import ggn as curvature
from bnnkit.inference.laplace import output_covariance, prior_curvature
from bnnkit.inference.laplace.evidence import damp
from bnnkit.log_posterior import LogPosterior
from bnnkit.param_blocks import get_block
from bnnkit.predict import glm_predict, output_covariance_fn
from bnnkit.problem import ProblemConfig, build
from bnnkit.types import Batch
from mcmc_checks import z_threshold

NOISE, N, D = 0.5, 40, 3


@pytest.fixture(autouse=True)
def _float64():
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def regression_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D))
    y = x @ np.array([1.0, -0.5, 0.25]) + 0.3 + NOISE * rng.normal(size=N)
    return x, y


def exact_posterior(x, y, alpha):
    """Bayesian linear regression on z = (w, b): precision Λ = αI + XᵀX/σ², mean Λ⁻¹Xᵀy/σ²."""
    xa = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    precision = alpha * np.eye(D + 1) + xa.T @ xa / NOISE**2
    return np.linalg.solve(precision, xa.T @ y / NOISE**2), precision


def linear_params(z):
    return {"params": {"Dense_0": {"kernel": jnp.asarray(z[:D, None]), "bias": jnp.asarray(z[D:])}}}


def fit(lp, params, batch, structure, prior_precision=None, chunk=None):
    method = laplace.build(lp, laplace.Config(structure=structure, prior_precision=prior_precision))
    state = method.init(None, params, batch)
    step = jax.jit(method.step)
    chunk = chunk or batch.x.shape[0]
    for start in range(0, batch.x.shape[0], chunk):
        state, _ = step(
            None, state, Batch(batch.x[start : start + chunk], batch.y[start : start + chunk])
        )
    return method.posterior(jax.tree.map(lambda a: a[None], state))


def conjugate(alpha=2.0, temperature=1.0):
    x, y = regression_data()
    mean, precision = exact_posterior(x, y, alpha)
    lp = LogPosterior(
        models.get("linear", 1).apply,
        likelihoods.Gaussian(noise_std=NOISE),
        priors.Gaussian(alpha),
        N,
        temperature=temperature,
    )
    return lp, linear_params(mean), Batch(jnp.asarray(x), jnp.asarray(y)), precision


def to_wb(cov):
    """ravel_pytree orders a Dense block (bias, kernel); the exact posterior uses (w, b)."""
    perm = [*range(1, D + 1), 0]
    return cov[np.ix_(perm, perm)]


def to_wb_inverse(cov):
    """The (w, b)-ordered ``cov`` in ravel_pytree's (bias, kernel) order."""
    perm = [D, *range(D)]
    return cov[np.ix_(perm, perm)]


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_last_layer_and_kfac_laplace_equal_the_exact_posterior(temperature):
    lp, params, batch, precision = conjugate(temperature=temperature)
    exact_cov = temperature * np.linalg.inv(precision)

    post = fit(lp, params, batch, "last_layer")
    np.testing.assert_allclose(
        to_wb(np.asarray(post.covariance())), exact_cov, rtol=1e-5, atol=1e-12
    )

    post = fit(lp, params, batch, "kfac")
    ua, ub, e = (np.asarray(a) for a in post.layers["Dense_0"])
    kfac_precision = np.kron(ua @ np.diag(e[:, 0]) @ ua.T, ub @ ub.T)  # rows of [kernel; bias]
    np.testing.assert_allclose(kfac_precision, precision / temperature, rtol=1e-5)


def test_diag_laplace_has_the_diagonal_of_the_exact_precision():
    lp, params, batch, precision = conjugate()
    post = fit(lp, params, batch, "diag")
    dense = post.precision["params"]["Dense_0"]
    diag = np.concatenate([np.ravel(dense["kernel"]), np.ravel(dense["bias"])])
    np.testing.assert_allclose(diag, np.diag(precision), rtol=1e-10)


def test_marginal_likelihood_prior_precision_matches_the_closed_form_evidence():
    from scipy.stats import multivariate_normal

    x, y = regression_data()
    xa = np.concatenate([x, np.ones((N, 1))], axis=1)

    def evidence(alpha):  # y ~ N(0, σ²I + X Xᵀ/α)
        return multivariate_normal(np.zeros(N), NOISE**2 * np.eye(N) + xa @ xa.T / alpha).logpdf(y)

    best = minimize_scalar(
        lambda la: -evidence(math.exp(la)),
        bounds=(-10, 10),
        method="bounded",
        options={"xatol": 1e-10},
    )
    alpha = math.exp(best.x)
    # θ* is the MAP at the evidence maximiser; the Laplace evidence is exact there and its
    # maximiser over α (θ* fixed) must be the same α.
    lp, params, batch, _ = conjugate(alpha=alpha)
    for structure in ("last_layer", "kfac"):
        post = fit(lp, params, batch, structure, prior_precision="auto")
        assert post.info["alpha"] == pytest.approx(alpha, rel=1e-5)
        assert post.info["log_marginal_likelihood"] == pytest.approx(evidence(alpha), rel=1e-9)
    # A fixed precision gives the closed-form evidence at that precision, and so does the
    # run's own prior when the structure covers the whole position.
    post = fit(lp, params, batch, "last_layer", prior_precision=alpha)
    assert post.info["log_marginal_likelihood"] == pytest.approx(evidence(alpha), rel=1e-9)
    post = fit(lp, params, batch, "kfac")
    assert post.info["log_marginal_likelihood"] == pytest.approx(evidence(alpha), rel=1e-9)
    # One layer's conditional prior is not available for every prior: no value is made up.
    assert fit(lp, params, batch, "last_layer").info["log_marginal_likelihood"] is None


@pytest.mark.slow
def test_laplace_samples_have_the_posterior_covariance():
    # n iid Gaussian draws: the sample mean of coordinate i has sd √(Σ_ii/n), the sample
    # covariance entry (i, j) has sd √((Σ_ii Σ_jj + Σ_ij²)/n) (Anderson 2003, Thm 3.4.4). Every
    # mean and covariance entry of the three structures is checked at a Bonferroni z for a
    # family-wise error of 1e-3.
    lp, params, batch, precision = conjugate()
    mean = np.asarray(ravel_pytree(params)[0])
    n, d = 40_000, mean.size
    z = z_threshold(3 * (d + d * (d + 1) // 2))
    for structure in ("diag", "last_layer", "kfac"):
        post = fit(lp, params, batch, structure)
        draws = post.sample(jax.random.PRNGKey(0), n)
        flat = np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(draws))
        expected = (
            np.diag(1 / np.diag(precision)) if structure == "diag" else np.linalg.inv(precision)
        )
        expected_ravel = to_wb_inverse(expected)
        mean_sd = np.sqrt(np.diag(expected_ravel) / n)
        np.testing.assert_array_less(np.abs(flat.mean(0) - mean), z * mean_sd)
        cov = np.cov(flat, rowvar=False)
        var = np.diag(expected_ravel)
        cov_sd = np.sqrt((np.outer(var, var) + expected_ravel**2) / n)
        np.testing.assert_array_less(np.abs(cov - expected_ravel), z * cov_sd)


# --- GGN pieces against brute force ---------------------------------------------------------


class TinyConvNet(nn.Module):
    """A network outside the Dense fast path (per-example gradients are used)."""

    num_outputs: int

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(2, kernel_size=(2,))(x[..., None]))
        return nn.Dense(self.num_outputs)(x.reshape((x.shape[0], -1)))


def init64(module, x):
    return jax.tree.map(lambda a: a.astype(jnp.float64), module.init(jax.random.PRNGKey(0), x[:1]))


def small_problem(kind):
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(23, 4)))
    if kind == "categorical":
        lik = likelihoods.Categorical(num_classes=3)
        y = jnp.asarray(rng.integers(0, 3, size=23), jnp.int32)
    else:
        lik = likelihoods.Gaussian(noise_std=0.3 if kind == "fixed" else None)
        y = jnp.asarray(rng.normal(size=23))
    return lik, x, y


def unravel_index(params):
    """``params`` with each entry replaced by its index in ``ravel_pytree(params)``."""
    flat, unravel = ravel_pytree(params)
    return unravel(jnp.arange(flat.size))


def brute_force_ggn(apply, lik, params, x, y):
    flat, unravel = ravel_pytree(params)
    outputs = apply(params, x)
    jac = jax.jit(jax.jacrev(lambda f: apply(unravel(f), x)))(flat)  # (N, O, P)
    if lik.name == "categorical":
        p = jax.nn.softmax(outputs)
        H = jax.vmap(jnp.diag)(p) - p[:, :, None] * p[:, None, :]
    elif lik.noise_std is not None:
        H = jnp.full((x.shape[0], 1, 1), 1 / lik.noise_std**2)
    else:
        _, std = lik.mean_std(outputs)
        H = jax.vmap(jnp.diag)(
            jnp.stack([1 / std**2, 2 * jax.nn.sigmoid(outputs[:, 1]) ** 2 / std**2], -1)
        )
    return np.asarray(jnp.einsum("nop,noq,nqr->pr", jac, H, jac)), unravel


@pytest.mark.parametrize(
    ("kind", "net"),
    [
        ("categorical", "mlp"),
        ("categorical", "conv"),
        pytest.param("fixed", "mlp", marks=pytest.mark.slow),
        pytest.param("heteroscedastic", "mlp", marks=pytest.mark.slow),
    ],
)
def test_ggn_pieces_equal_brute_force(kind, net):
    lik, x, y = small_problem(kind)
    module = (
        models.MODELS["mlp_regression_small"].make(lik.num_outputs)
        if net == "mlp"
        else TinyConvNet(lik.num_outputs)
    )
    params = init64(module, x)
    G, _ = brute_force_ggn(module.apply, lik, params, x, y)
    batch = Batch(x, y)
    # max_elements small enough to force micro-batches with padding.
    diag = jax.jit(functools.partial(curvature.ggn_diag, module.apply, lik, max_elements=700))(
        params, batch
    )
    np.testing.assert_allclose(ravel_pytree(diag)[0], np.diag(G), rtol=1e-9, atol=1e-12)

    # The last Dense layer (Kronecker path) and, for the conv net, the convolution (generic).
    paths = (
        [("params", "Dense_1")] if net == "mlp" else [("params", "Dense_0"), ("params", "Conv_0")]
    )
    for path in paths:
        block = jax.jit(
            functools.partial(curvature.ggn_block, module.apply, lik, path=path, max_elements=300)
        )(params, batch)
        index = np.asarray(ravel_pytree(get_block(unravel_index(params), path))[0])
        np.testing.assert_allclose(block, G[np.ix_(index, index)], rtol=1e-9, atol=1e-12)

    if net == "mlp":
        factors = jax.jit(
            functools.partial(curvature.kfac_factors, module.apply, lik, max_elements=700)
        )(params, batch)
        assert set(factors) == {"Dense_0", "Dense_1"}
        A, B = factors["Dense_1"]
        assert A.shape == (51, 51) and B.shape == (lik.num_outputs,) * 2
    else:
        with pytest.raises(ValueError, match="kfac needs a network of Dense layers"):
            curvature.kfac_factors(module.apply, lik, params, batch)


def posterior_covariance(post, params) -> np.ndarray:
    """The posterior covariance as a dense matrix, ordered as ``ravel_pytree(params)``."""
    flat = ravel_pytree(params)[0]
    if post.structure == "diag":
        return np.diag(1 / np.asarray(ravel_pytree(post.precision)[0]))
    index = unravel_index(params)
    sigma = np.zeros((flat.size, flat.size))
    if post.structure == "last_layer":
        block = np.asarray(ravel_pytree(get_block(index, post.path))[0])
        sigma[np.ix_(block, block)] = post.covariance()
        return sigma
    for name, (ua, ub, e) in post.layers.items():
        layer = index["params"][name]
        rows = np.concatenate([layer["kernel"], layer["bias"][None]]).ravel()
        u = np.kron(np.asarray(ua), np.asarray(ub))
        sigma[np.ix_(rows, rows)] = u @ np.diag(1 / np.asarray(e).ravel()) @ u.T
    return sigma


@pytest.mark.slow
@pytest.mark.parametrize("net", ["mlp", "conv"])
def test_output_covariances_equal_brute_force(net):
    lik, x, y = small_problem("categorical")
    module = models.MODELS["mlp_regression_small"].make(3) if net == "mlp" else TinyConvNet(3)
    params = init64(module, x)
    lp = LogPosterior(module.apply, lik, priors.Gaussian(1.0), 23)
    flat, unravel = ravel_pytree(params)
    jac = np.asarray(jax.jit(jax.jacrev(lambda f: module.apply(unravel(f), x)))(flat))
    for structure in ("diag", "last_layer", "kfac") if net == "mlp" else ("diag",):
        post = fit(lp, params, Batch(x, y), structure)
        sigma = posterior_covariance(post, params)
        out, got = output_covariance_fn(post, module.apply)(x)
        np.testing.assert_allclose(out, module.apply(params, x), rtol=1e-12)
        np.testing.assert_allclose(
            got, np.einsum("nop,pq,nrq->nor", jac, sigma, jac), rtol=1e-8, atol=1e-12
        )
        if net == "conv":  # a block that is not a Dense layer: per-example Jacobians
            path = ("params", "Conv_0")
            index = np.asarray(ravel_pytree(get_block(unravel_index(params), path))[0])
            sqrt_cov = np.random.default_rng(1).normal(size=(index.size, index.size))
            _, got = output_covariance.block_output_covariance(
                module.apply, params, x, path, sqrt_cov, max_elements=200
            )
            jb = jac[:, :, index]
            np.testing.assert_allclose(
                got, np.einsum("nop,pq,nrq->nor", jb, sqrt_cov @ sqrt_cov.T, jb), rtol=1e-8
            )
        if structure == "kfac":  # the sampler draws from that covariance: check projections
            # The sample variance of n iid Gaussian draws has relative sd √(2/(n−1)); 20
            # projections at a Bonferroni z for a family-wise error of 1e-3.
            n = 10_000
            draws = post.sample(jax.random.PRNGKey(0), n)
            flat_draws = np.asarray(jax.vmap(lambda p: ravel_pytree(p)[0])(draws))
            v = np.random.default_rng(0).normal(size=(flat.size, 20))
            np.testing.assert_allclose(
                np.var(flat_draws @ v, axis=0, ddof=1),
                np.einsum("pk,pq,qk->k", v, sigma, v),
                rtol=z_threshold(20) * np.sqrt(2 / (n - 1)),
            )


@pytest.mark.slow
def test_chunked_curvature_equals_unchunked():
    lik, x, y = small_problem("categorical")
    module = models.MODELS["mlp_regression_small"].make(3)
    params = init64(module, x)
    lp = LogPosterior(module.apply, lik, priors.Gaussian(1.0), 23)
    batch = Batch(x, y)
    for structure in ("diag", "last_layer", "kfac"):
        whole = fit(lp, params, batch, structure, prior_precision="auto")
        chunked = fit(lp, params, batch, structure, prior_precision="auto", chunk=5)
        np.testing.assert_allclose(
            posterior_covariance(chunked, params),
            posterior_covariance(whole, params),
            rtol=1e-8,
            atol=1e-12,
        )
        assert whole.info["alpha"] == pytest.approx(chunked.info["alpha"], rel=1e-6)
        assert whole.info["log_marginal_likelihood"] == pytest.approx(
            chunked.info["log_marginal_likelihood"], rel=1e-9
        )


# --- priors ---------------------------------------------------------------------------------


class StudentT:
    """Elementwise Student-t prior: curvature (ν+1)(νs² − w²)/(νs² + w²)², negative in the tails."""

    name = "student_t"

    def __init__(self, df=3.0, scale=0.1):
        self.df, self.scale = df, scale

    def log_prob(self, params):
        return sum(
            jnp.sum(-(self.df + 1) / 2 * jnp.log1p(jnp.square(w / self.scale) / self.df))
            for w in jax.tree.leaves(params)
        )


class MultivariateT:
    """A hierarchical prior: one scale shared by all weights, integrated out (not separable)."""

    name = "multivariate_t"

    def log_prob(self, params):
        flat = ravel_pytree(params)[0]
        return -(3.0 + flat.size) / 2 * jnp.log1p(flat @ flat / 3.0)


@pytest.mark.slow
def test_prior_curvature_of_separable_and_hierarchical_priors():
    params = {"a": jnp.linspace(-1.0, 1.0, 7), "b": jnp.array([[0.3, -2.0]])}
    flat, unravel = ravel_pytree(params)
    for prior, separable in ((StudentT(), True), (MultivariateT(), False)):
        exact = -np.diag(jax.hessian(lambda f, p=prior: p.log_prob(unravel(f)))(flat))
        got, is_separable = prior_curvature.diag_curvature(prior.log_prob, params)
        assert is_separable == separable
        np.testing.assert_allclose(ravel_pytree(got)[0], exact, rtol=1e-10, atol=1e-12)
        block = prior_curvature.block_curvature(prior.log_prob, params, ("b",))
        full = -jax.hessian(lambda f, p=prior: p.log_prob(unravel(f)))(flat)
        np.testing.assert_allclose(block, full[-2:, -2:], rtol=1e-10, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("structure", ["diag", "last_layer", "kfac"])
def test_non_positive_definite_precision_is_damped_never_nan(structure):
    x, y = regression_data()
    # Dead hidden units (zero GGN on the output weights) and output weights far in the
    # Student-t tails (negative prior curvature): the precision has negative entries.
    model = models.get("mlp_regression_small", 1)
    params = init64(model, jnp.asarray(x))
    params["params"]["Dense_0"]["bias"] = params["params"]["Dense_0"]["bias"] - 5.0
    params["params"]["Dense_1"] = {"kernel": jnp.full((50, 1), 3.0), "bias": jnp.full((1,), 5.0)}
    lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=NOISE), StudentT(), N)
    with pytest.warns(RuntimeWarning, match="not positive definite"):
        post = fit(lp, params, Batch(jnp.asarray(x), jnp.asarray(y)), structure)
    damping = post.info["damping"]
    assert damping["num_lifted"] > 0 and damping["min_before"] <= 0 < damping["floor"]
    for leaf in jax.tree.leaves(post.arrays()):
        assert np.all(np.isfinite(leaf))
    draws = post.sample(jax.random.PRNGKey(0), 3)
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(draws))
    _, cov = output_covariance_fn(post, model.apply)(jnp.asarray(x))
    assert np.all(np.isfinite(cov)) and np.all(np.diagonal(cov, axis1=1, axis2=2) >= 0)


def test_damping_refuses_nan_curvature():
    e, d = damp(np.array([1.0, 0.0, -3.0]))
    assert d.num_lifted == 2 and np.all(e > 0)
    with pytest.raises(ValueError, match="non-finite"):
        damp(np.array([1.0, np.nan]))


# --- the linearised predictive on a Problem ---------------------------------------------------


def test_glm_predictive_is_the_exact_linear_gaussian_predictive(tmp_path):
    x, y = regression_data()
    np.savez(tmp_path / "lin.npz", x_train=x, y_train=y, x_test=x[:7] + 0.1, y_test=y[:7])
    problem = build(
        ProblemConfig(
            dataset=str(tmp_path / "lin.npz"),
            model="linear",
            noise_std=NOISE,
            weight_decay=2.0,
            float64=True,
            standardize=False,
        )
    )
    data = problem.dataset  # as stored (float32), so the exact answer uses the same numbers
    x, y = np.asarray(data.x_train, np.float64), np.asarray(data.y_train, np.float64)
    mean, precision = exact_posterior(x, y, 2.0)
    xt = np.concatenate([np.asarray(data.x_test, np.float64), np.ones((7, 1))], axis=1)
    exact_var = np.einsum("ni,ij,nj->n", xt, np.linalg.inv(precision), xt) + NOISE**2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for structure in ("last_layer", "kfac"):
            post = fit(problem.log_posterior, linear_params(mean), problem.train_batch(), structure)
            pred = glm_predict(problem, post, data.x_test, num_samples=5)
            np.testing.assert_allclose(pred.means[0], xt @ mean, rtol=1e-10)
            np.testing.assert_allclose(pred.stds[0] ** 2, exact_var, rtol=1e-8)
            assert pred.per_sample.shape == (1, 5, 7)


@pytest.mark.slow
def test_positions_with_hierarchical_latents_and_an_inferred_noise_std():
    problem = build(
        ProblemConfig(
            dataset="yacht_0",
            model="mlp_regression_small",
            prior="hierarchical:concentration=2,scale=2",
            noise_prior="gamma:concentration=0.5,rate=1",
            float64=True,
        )
    )
    position = problem.init_params(jax.random.PRNGKey(0))
    assert {"params", "prior", "noise"} <= set(position)
    batch = problem.train_batch()
    post = fit(problem.log_posterior, position, batch, "diag")
    assert jax.tree.structure(post.precision) == jax.tree.structure(position)
    # The noise std's precision: its Fisher information 2N plus its prior's curvature.
    prior_c, _ = prior_curvature.diag_curvature(problem.prior.log_prob, position)
    np.testing.assert_allclose(
        post.precision["noise"]["log_std"],
        2 * problem.dataset.num_train + prior_c["noise"]["log_std"],
    )
    assert post.info["log_marginal_likelihood"] is not None
    for structure in ("last_layer", "kfac"):
        other = fit(problem.log_posterior, position, batch, structure)
        draws = other.sample(jax.random.PRNGKey(0), 2)
        # Only the network's weights vary; latents and noise stay at θ*.
        np.testing.assert_array_equal(draws["noise"]["log_std"][0], position["noise"]["log_std"])
        pred = glm_predict(problem, other, problem.dataset.x_test[:5], num_samples=2)
        assert np.all(np.isfinite(pred.stds)) and np.all(pred.stds > 0)
