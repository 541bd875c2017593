"""Mean-field VI: KL estimators, KL weighting, the diagonal Gaussian, the conjugate optimum."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from bnnkit import likelihoods, models, priors
from bnnkit.errors import ConfigError
from bnnkit.inference import vi
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior.diag_gaussian import DiagGaussian
from bnnkit.types import Batch

# Two-sided tail of a t-distribution with 15 dof beyond 5 is 1.6e-4: a bound that a correct
# estimator exceeds by chance about once in 6000 comparisons.
Z = 5.0


def small_q(seed=0, dtype=jnp.float64) -> DiagGaussian:
    rng = np.random.default_rng(seed)
    shapes = {"Dense_0": {"kernel": (3, 4), "bias": (4,)}, "Dense_1": {"kernel": (4, 1)}}
    mean = jax.tree.map(
        lambda s: jnp.asarray(rng.normal(0, 0.8, s), dtype),
        shapes,
        is_leaf=lambda s: isinstance(s, tuple),
    )
    std = jax.tree.map(
        lambda s: jnp.asarray(rng.uniform(0.05, 1.5, s), dtype),
        shapes,
        is_leaf=lambda s: isinstance(s, tuple),
    )
    return DiagGaussian({"params": mean}, {"params": std})


def mc_kl(q, prior, n, seed=1):
    draws = q.sample(jax.random.PRNGKey(seed), n)
    terms = np.asarray(vi.monte_carlo_kl_terms(q, prior, draws))
    return terms.mean(), terms.std(ddof=1) / np.sqrt(n)


@pytest.mark.parametrize(
    "prior",
    [priors.Gaussian(2.0), priors.make("fanin_gaussian:scale=1.5")],
    ids=["gaussian", "fanin_gaussian"],
)
def test_closed_form_kl_equals_monte_carlo_kl(prior):
    with jax.enable_x64(True):
        q = small_q()
        assert vi.has_closed_form_kl(prior)
        exact = float(prior.kl_closed_form(q.mean, q.std))
        estimate, mcse = mc_kl(q, prior, 20_000)
        assert abs(estimate - exact) < Z * mcse, (estimate, exact, mcse)
        assert mcse < 0.02 * exact  # the comparison has power


def test_monte_carlo_kl_of_the_scale_mixture_equals_quadrature():
    # No closed form: compare with a per-weight 1-d quadrature of ∫ q log(q / p).
    prior = priors.make("scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025")
    assert not vi.has_closed_form_kl(prior)
    with jax.enable_x64(True):
        q = small_q(seed=3)
        mix = lambda w: 0.5 * stats.norm.pdf(w, 0, 1) + 0.5 * stats.norm.pdf(w, 0, 0.0025)  # noqa: E731
        exact = 0.0
        for m, s in zip(jax.tree.leaves(q.mean), jax.tree.leaves(q.std), strict=True):
            for mj, sj in zip(np.ravel(m), np.ravel(s), strict=True):

                def integrand(w, mj=mj, sj=sj):
                    qw = stats.norm.pdf(w, mj, sj)
                    return qw * (stats.norm.logpdf(w, mj, sj) - np.log(mix(w)))

                # The spike at 0 is narrow: split the range there so quad sees it.
                lo, hi = mj - 12 * sj, mj + 12 * sj
                pts = [p for p in (-0.05, 0.0, 0.05) if lo < p < hi]
                exact += integrate.quad(integrand, lo, hi, points=pts or None, limit=200)[0]
        estimate, mcse = mc_kl(q, prior, 20_000)
        assert abs(estimate - exact) < Z * mcse, (estimate, exact, mcse)


@pytest.mark.parametrize("m", [1, 3, 7, 468, 5000])
def test_blundell_weights_sum_to_one_over_an_epoch(m):
    pi = vi.blundell_weights(m)
    np.testing.assert_allclose(pi.sum(), 1.0, rtol=1e-12)
    head = pi[:60]  # beyond, the weights underflow to 0 (they are below 2^-60 of the first)
    np.testing.assert_allclose(head[:-1], 2 * head[1:], rtol=1e-12)  # π_i = 2^{M-i}/(2^M-1)
    # The in-step weight M π_i, over two epochs of update counts: each epoch sums to M.
    for dtype in (jnp.float32, jnp.float64):
        with jax.enable_x64(dtype == jnp.float64):
            weight = jax.vmap(lambda c, d=dtype: vi.kl_weight(c, "blundell", m, d))
            w = np.asarray(weight(jnp.arange(2 * m)), np.float64)
            tol = 1e-5 if dtype == jnp.float32 else 1e-12
            np.testing.assert_allclose(w[:m].sum() / m, 1.0, rtol=tol)
            np.testing.assert_allclose(w[m:], w[:m], rtol=tol)
            assert w[0] == pytest.approx(m * pi[0], rel=tol)
    uniform = vi.kl_weight(jnp.arange(m), "uniform", m)
    assert float(uniform) == 1.0  # π_i = 1/M for every i


def test_diag_gaussian_sampling_and_signal_to_noise():
    with jax.enable_x64(True):
        q = small_q(seed=2)
        n = 20_000
        draws = q.sample(jax.random.PRNGKey(0), n)
        for d, m, s in zip(
            jax.tree.leaves(draws), jax.tree.leaves(q.mean), jax.tree.leaves(q.std), strict=True
        ):
            assert d.shape == (n, *m.shape)
            np.testing.assert_array_less(np.abs(np.mean(d, 0) - m), Z * s / np.sqrt(n))
            # sd of a sample variance of a Gaussian: σ² √(2/(n-1)).
            np.testing.assert_array_less(
                np.abs(np.var(d, 0, ddof=1) - s**2), Z * s**2 * np.sqrt(2 / (n - 1))
            )
        snr = q.signal_to_noise
        for r, m, s in zip(
            jax.tree.leaves(snr), jax.tree.leaves(q.mean), jax.tree.leaves(q.std), strict=True
        ):
            np.testing.assert_allclose(r, np.abs(m) / s)


@pytest.mark.parametrize("estimator", ["weights", "local_reparam", "flipout"])
def test_monte_carlo_kl_drives_a_step_for_a_non_gaussian_prior(estimator):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(16, 3)), jnp.float32)
    y = jnp.asarray(rng.normal(size=16), jnp.float32)
    model = models.get("linear", num_outputs=1)
    prior = priors.make("scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025")
    lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=0.5), prior, num_data=16)
    method = vi.build(
        lp,
        vi.Config(
            init_step_size=1e-2,
            num_epochs=10,
            batch_size=16,
            vi_num_samples=3,
            vi_sigma_init=0.1,
            vi_estimator=estimator,
        ),
    )
    state = method.init(None, model.init(jax.random.PRNGKey(0), x[:1]), Batch(x, y))
    new, info = jax.jit(method.step)(jax.random.PRNGKey(1), state, Batch(x, y))
    assert all(np.isfinite(v) for v in info)
    assert not np.allclose(jax.tree.leaves(new.rho)[0], jax.tree.leaves(state.rho)[0])


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(vi_sigma_init=0.0), "--vi-sigma-init 0.0 out of range; allowed: > 0"),
        (dict(vi_sigma_init=-1.0), "--vi-sigma-init -1.0"),
        (dict(vi_num_samples=0), "--vi-num-samples 0"),
        (
            dict(kl_weighting="linear"),
            "unknown --kl-weighting 'linear'; allowed: uniform, blundell",
        ),
        (dict(optimizer="rmsprop"), "unknown --optimizer 'rmsprop'; allowed: adam, sgd"),
        (dict(vi_ensemble_size=0), "--vi-ensemble-size 0 out of range; allowed: 1..65536"),
        (
            dict(vi_estimator="reinforce"),
            "unknown --vi-estimator 'reinforce'; allowed: weights, local_reparam, flipout",
        ),
    ],
)
def test_config_refuses(kw, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("-", "\\-")):
        vi.Config(init_step_size=1e-3, num_epochs=1, batch_size=8, **kw)


# --- gradient estimators ------------------------------------------------------------------------


def gradient_estimates(estimator, prior, num_estimates, seed=0):
    """Single-sample gradients of −L̂ on one minibatch of a 3-50-1 ReLU MLP, float64.

    SGD without momentum at step size 1 on the first step moves (μ, ρ) by exactly −gradient.
    """
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(8, 3)))
    y = jnp.asarray(rng.normal(size=8))
    model = models.get("mlp_regression_small", num_outputs=1)
    lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=0.5), prior, num_data=40)
    method = vi.build(
        lp,
        vi.Config(
            init_step_size=1.0,
            num_epochs=1,
            batch_size=8,
            optimizer="sgd",
            momentum_decay=0.0,
            vi_sigma_init=0.3,
            vi_estimator=estimator,
        ),
    )
    params = model.init(jax.random.PRNGKey(seed), x[:1])
    state = method.init(None, params, Batch(x, y))
    # Means away from the initialiser's zero biases, so that the ReLUs' kinks matter.
    state = state._replace(
        mean=jax.tree.map(lambda a: a + 0.3 * jnp.asarray(rng.normal(size=a.shape)), state.mean)
    )

    def grad(key):
        new, _ = method.step(key, state, Batch(x, y))
        old = jnp.concatenate([a.ravel() for a in jax.tree.leaves((state.mean, state.rho))])
        moved = jnp.concatenate([a.ravel() for a in jax.tree.leaves((new.mean, new.rho))])
        return old - moved

    keys = jax.random.split(jax.random.PRNGKey(seed + 1), num_estimates)
    return np.asarray(jax.jit(jax.vmap(grad))(keys))


@pytest.mark.slow
@pytest.mark.parametrize(
    "prior",
    [priors.Gaussian(1.0), priors.make("scale_mixture:pi=0.5,sigma1=1,sigma2=0.05")],
    ids=["gaussian", "scale_mixture"],
)
def test_every_estimator_is_unbiased_for_the_same_elbo_gradient(prior):
    with jax.enable_x64(True):
        n = 10_000
        reference = gradient_estimates("weights", prior, n)
        ref_mean, ref_var = reference.mean(0), reference.var(0, ddof=1)
        for estimator in ("local_reparam", "flipout"):
            found = gradient_estimates(estimator, prior, n)
            # Independent means of n iid estimates: their difference has standard error
            # √((v₁ + v₂)/n); with ~500 coordinates, |Δ| > 5 se has probability 3e-4 in all.
            se = np.sqrt((found.var(0, ddof=1) + ref_var) / n)
            t = (found.mean(0) - ref_mean) / np.maximum(se, 1e-12)
            np.testing.assert_array_less(np.abs(t), Z)
            # All coordinates at once: Σ t² is χ²_d for unbiased estimators (sd √(2d)), so a
            # bias common to many coordinates shows even where each is within Z se.
            d = t.size
            assert np.sum(t**2) < d + Z * np.sqrt(2 * d), (np.sum(t**2), d)
            # Power: the large coordinates are resolved to about 6 % (median se / |gradient|).
            big = np.abs(ref_mean) > 0.1 * np.abs(ref_mean).max()
            assert np.median(se[big] / np.abs(ref_mean[big])) < 0.1
            if estimator == "local_reparam":
                # Per-example noise: lower variance per step than one weight sample per batch.
                assert np.sum(found.var(0)) < np.sum(ref_var)


class _ConvNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.Conv(2, (3, 3))(x).reshape((x.shape[0], -1)))


class _SharedDense(nn.Module):
    @nn.compact
    def __call__(self, x):
        layer = nn.Dense(4)
        return layer(nn.relu(layer(x)))


@pytest.mark.parametrize(
    "net, x, fragment",
    [
        (
            _ConvNet(),
            jnp.zeros((4, 6, 6, 1)),
            "supports networks of dense layers only; the parameters of Conv_0",
        ),
        (
            _SharedDense(),
            jnp.zeros((4, 4)),
            "needs each dense layer applied once; Dense_0 is shared",
        ),
    ],
)
def test_layer_noise_estimators_refuse_networks_they_cannot_run_exactly(net, x, fragment):
    lp = LogPosterior(net.apply, likelihoods.Categorical(10), priors.Gaussian(1.0), 4)
    params = jax.eval_shape(net.init, jax.random.PRNGKey(0), x[:1])
    for estimator in ("local_reparam", "flipout"):
        method = vi.build(
            lp, vi.Config(init_step_size=1e-3, num_epochs=1, batch_size=4, vi_estimator=estimator)
        )
        # The run driver traces init before it writes anything, so this is where it fails.
        with pytest.raises(ConfigError, match=f"--vi-estimator {estimator} {fragment}"):
            jax.eval_shape(lambda p, m=method: m.init(None, p, Batch(x, jnp.zeros(4, int))), params)


# --- the conjugate optimum ----------------------------------------------------------------------


def conjugate_setup(temperature):
    rng = np.random.default_rng(0)
    n, noise, weight_decay = 48, 0.4, 3.0
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) - 0.7 + noise * rng.normal(size=n)
    model = models.get("linear", num_outputs=1)
    lp = LogPosterior(
        model.apply,
        likelihoods.Gaussian(noise_std=noise),
        priors.Gaussian(weight_decay),
        n,
        temperature=temperature,
    )
    # Exact tempered posterior over (w, b): mean m = Λ⁻¹Xᵀy/σ², precision Λ/T with
    # Λ = λI + XᵀX/σ². The mean-field Gaussian closest in KL(q ‖ p) to N(m, (Λ/T)⁻¹) has the
    # same means and variances T/Λ_ii (Bishop 2006, Sec. 10.1.2).
    xa = np.concatenate([x, np.ones((n, 1))], axis=1)
    precision = weight_decay * np.eye(4) + xa.T @ xa / noise**2
    mean = np.linalg.solve(precision, xa.T @ y / noise**2)
    return model, lp, Batch(jnp.asarray(x), jnp.asarray(y)), mean, temperature / np.diag(precision)


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["weights", "local_reparam", "flipout"])
@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_mfvi_reaches_the_mean_field_optimum_of_the_conjugate_posterior(temperature, estimator):
    with jax.enable_x64(True):
        model, lp, batch, exact_mean, exact_var = conjugate_setup(temperature)
        steps, tail, replicates = 3000, 300, 16
        # Full batch, so the only noise is the reparameterisation's; the cosine schedule
        # shrinks it towards the end, and the iterates are averaged over the last `tail` steps.
        config = vi.Config(
            init_step_size=0.05,
            num_epochs=steps,
            batch_size=lp.num_data,
            vi_num_samples=8,
            vi_sigma_init=0.1,
            vi_estimator=estimator,
        )
        method = vi.build(lp, config)

        def flat(state):
            d = state.mean["params"]["Dense_0"]
            r = state.rho["params"]["Dense_0"]
            m = jnp.concatenate([d["kernel"][:, 0], d["bias"]])
            s = jax.nn.softplus(jnp.concatenate([r["kernel"][:, 0], r["bias"]]))
            return m, s**2

        def replicate(key):
            state = method.init(None, model.init(jax.random.PRNGKey(0), batch.x[:1]), None)

            def body(s, k):
                s, _ = method.step(k, s, batch)
                return s, flat(s)

            _, (means, variances) = jax.lax.scan(body, state, jax.random.split(key, steps))
            return means[-tail:].mean(0), variances[-tail:].mean(0)

        keys = jax.random.split(jax.random.PRNGKey(1), replicates)
        means, variances = (np.asarray(a) for a in jax.jit(jax.vmap(replicate))(keys))
        # Independent replicates: the spread of their averages is the optimiser's noise, and
        # the mean over replicates must sit within Z standard errors of the exact optimum.
        for found, exact in ((means, exact_mean), (variances, exact_var)):
            se = found.std(0, ddof=1) / np.sqrt(replicates)
            np.testing.assert_array_less(np.abs(found.mean(0) - exact), Z * se)
        # ... and that noise is small: under 2 % of the posterior std and of the variance.
        assert np.all(means.std(0, ddof=1) / np.sqrt(replicates) < 0.02 * np.sqrt(exact_var))
        assert np.all(variances.std(0, ddof=1) / np.sqrt(replicates) < 0.02 * exact_var)
