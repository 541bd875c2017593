"""Prior densities against scipy.stats, sampling against stated moments and CDFs, the
hierarchical marginals, per-leaf rules, and the prior inside a problem.

Statistical checks use i.i.d. draws: a mean's Monte Carlo standard error is sd/√n, and the
Kolmogorov-Smirnov statistic of n i.i.d. draws has a known distribution, so each test fails a
correct implementation with probability below a stated family-wise error (Bonferroni).
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from bnnkit import priors
from bnnkit.errors import ConfigError
from bnnkit.log_posterior import LogPosterior
from bnnkit.problem import ProblemConfig, build
from bnnkit.types import Batch
from mcmc_checks import z_threshold

FAMILY_ERROR = 1e-3
N_IID = 50_000


def mixture_logpdf(x, weights, scales, locs):
    comps = [
        np.log(w) + stats.norm.logpdf(x, m, s)
        for w, s, m in zip(weights, scales, locs, strict=True)
    ]
    return np.logaddexp.reduce(np.stack(comps), axis=0)


def mixture_cdf(x, weights, scales, locs):
    return sum(w * stats.norm.cdf(x, m, s) for w, s, m in zip(weights, scales, locs, strict=True))


# (family, the same distribution in scipy as (logpdf, cdf)); ScaleMixture as a 2-component mix.
ELEMENTWISE = [
    (priors.Normal(0.7), stats.norm(scale=0.7)),
    (
        priors.ScaleMixture(pi=0.3, sigma1=1.0, sigma2=0.0025),
        ((0.3, 0.7), (1.0, 0.0025), (0.0, 0.0)),
    ),
    (
        priors.GaussianMixture(
            weights=(0.2, 0.5, 0.3), scales=(1.0, 0.1, 2.0), locs=(-1.0, 0.0, 0.5)
        ),
        ((0.2, 0.5, 0.3), (1.0, 0.1, 2.0), (-1.0, 0.0, 0.5)),
    ),
    (priors.Logistic(0.4), stats.logistic(scale=0.4)),
    (priors.Laplace(0.3), stats.laplace(scale=0.3)),
    (priors.StudentT(df=3.0, scale=0.1), stats.t(3.0, scale=0.1)),
    (priors.StudentT(df=0.5, scale=2.0), stats.t(0.5, scale=2.0)),
]
IDS = [
    "gaussian",
    "scale_mixture",
    "mixture",
    "logistic",
    "laplace",
    "student_t3",
    "student_t_half",
]


def scipy_logpdf(reference, x):
    if isinstance(reference, tuple):
        return mixture_logpdf(x, *reference)
    return reference.logpdf(x)


def scipy_cdf(reference, x):
    if isinstance(reference, tuple):
        return mixture_cdf(x, *reference)
    return reference.cdf(x)


def test_fan_in_is_the_product_of_all_but_the_last_axis():
    assert priors.fan_in((50, 10)) == 50
    assert priors.fan_in((3, 3, 16, 32)) == 144
    assert priors.fan_in((10,)) == 1


@pytest.mark.parametrize(("family", "reference"), ELEMENTWISE, ids=IDS)
def test_log_prob_matches_scipy(family, reference):
    rng = np.random.default_rng(0)
    # Points at several scales, so both components of a mixture and the tails are covered.
    x = np.concatenate(
        [rng.normal(size=50), 0.003 * rng.normal(size=50), 10 * rng.standard_cauchy(size=20)]
    ).astype(np.float32)
    expected = scipy_logpdf(reference, x.astype(np.float64))
    np.testing.assert_allclose(family.log_prob(jnp.asarray(x)), expected, rtol=2e-5, atol=2e-4)
    assert float(family.leaf_log_prob(jnp.asarray(x))) == pytest.approx(expected.sum(), rel=1e-5)


def test_fan_in_gaussian_matches_scipy_per_leaf():
    family = priors.FanInNormal(scale=1.5)
    w = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    expected = stats.norm.logpdf(w, scale=1.5 / np.sqrt(8)).sum()
    assert float(family.leaf_log_prob(jnp.asarray(w))) == pytest.approx(expected, rel=1e-5)
    bias = w[0]
    assert float(family.leaf_log_prob(jnp.asarray(bias))) == pytest.approx(
        stats.norm.logpdf(bias, scale=1.5).sum(), rel=1e-5
    )


NOISE = [
    (priors.Gamma(concentration=0.5, rate=1.0), stats.gamma(0.5, scale=1.0)),
    (priors.Gamma(concentration=3.0, rate=2.0), stats.gamma(3.0, scale=0.5)),
    (priors.HalfNormal(scale=0.5), stats.halfnorm(scale=0.5)),
    (priors.LogNormal(loc=-1.0, scale=0.5), stats.lognorm(0.5, scale=np.exp(-1.0))),
]
NOISE_IDS = ["gamma_half", "gamma3", "half_normal", "lognormal"]


@pytest.mark.parametrize(("family", "reference"), NOISE, ids=NOISE_IDS)
def test_noise_log_prob_matches_scipy_with_the_log_jacobian(family, reference):
    u = np.random.default_rng(2).normal(-0.5, 1.0, size=40)
    sigma = np.exp(u)
    np.testing.assert_allclose(
        family.log_prob(jnp.asarray(sigma, jnp.float32)),
        reference.logpdf(sigma),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        family.log_std_log_prob(jnp.asarray(u, jnp.float32)),
        reference.logpdf(sigma) + u,
        rtol=1e-5,
        atol=1e-5,
    )
    # Initialised at the mode of p(u): the derivative vanishes there.
    grad = jax.grad(lambda v: family.log_std_log_prob(v))(jnp.float32(family.init_log_std()))
    assert abs(float(grad)) < 1e-5


def test_hierarchical_joint_log_prob_matches_scipy():
    rng = np.random.default_rng(3)
    a, b = 2.5, 1.5
    w = rng.normal(size=(4, 3))
    u = rng.normal(size=())
    family = priors.InverseGammaNormal(concentration=a, scale=b)
    expected = (
        stats.norm.logpdf(w, scale=np.exp(u / 2)).sum()
        + stats.invgamma.logpdf(np.exp(u), a, scale=b)
        + u
    )
    got = family.leaf_log_prob(jnp.asarray(w, jnp.float32), jnp.asarray(u, jnp.float32))
    assert float(got) == pytest.approx(expected, rel=1e-5)

    ard = priors.ARD(concentration=a, scale=b)
    u = rng.normal(size=4)
    assert ard.latent_shape(w.shape) == (4,)
    expected = (
        stats.norm.logpdf(w, scale=np.exp(u / 2)[:, None]).sum()
        + (stats.invgamma.logpdf(np.exp(u), a, scale=b) + u).sum()
    )
    got = ard.leaf_log_prob(jnp.asarray(w, jnp.float32), jnp.asarray(u, jnp.float32))
    assert float(got) == pytest.approx(expected, rel=1e-5)
    for fam in (family, ard):
        u0 = fam.init_latent(w.shape, jnp.float32)
        grad = jax.grad(lambda v, fam=fam: jnp.sum(fam.latent_log_prob(v)))(u0)
        assert float(jnp.max(jnp.abs(grad))) < 1e-5  # the mode of p(u)


def ard_draws(family: priors.ARD, n: int):
    """n i.i.d. (weight, log-variance) pairs: an ARD kernel (n, 1) has one variance per row."""
    w, u = family.leaf_sample(jax.random.PRNGKey(4), (n, 1), jnp.float32)
    return np.asarray(w, np.float64)[:, 0], np.asarray(u, np.float64)


@pytest.mark.parametrize("family_cls", [priors.InverseGammaNormal, priors.ARD])
def test_hierarchical_marginal_is_student_t_by_quadrature(family_cls):
    """Integrating the joint density of one weight over its latent u gives the Student-t;
    this checks the log-Jacobian of u = log v (deterministic quadrature)."""
    a, b = 3.0, 2.0
    family = family_cls(concentration=a, scale=b)
    marginal = stats.t(2 * a, scale=np.sqrt(b / a))
    assert family.marginal() == priors.StudentT(df=2 * a, scale=np.sqrt(b / a))
    joint = jax.jit(lambda w, u: family.leaf_log_prob(w, u))
    for w in (0.0, 0.3, 1.7, -4.0):
        value, _ = integrate.quad(
            lambda u, w=w: float(np.exp(joint(jnp.float32(w), jnp.float32(u)))), -15, 15, limit=200
        )
        assert value == pytest.approx(marginal.pdf(w), rel=1e-4)


@pytest.mark.slow
def test_hierarchical_marginal_is_student_t_by_monte_carlo():
    """E_u[N(w; 0, eᵘ)] over the family's own latent draws is the Student-t density (within
    z MCSE), the sampled weights follow its CDF (KS), and a per-layer draw is N(0, eᵘ) given u."""
    a, b = 3.0, 2.0
    marginal = stats.t(2 * a, scale=np.sqrt(b / a))
    w, u = ard_draws(priors.ARD(concentration=a, scale=b), N_IID)
    points = np.array([0.0, 0.5, 1.0, 2.0, 4.0])
    dens = stats.norm.pdf(points[:, None], scale=np.exp(u / 2)[None])
    mcse = dens.std(axis=1) / np.sqrt(dens.shape[1])
    checks = len(points) + 2
    z = z_threshold(checks, FAMILY_ERROR)
    assert np.all(np.abs(dens.mean(axis=1) - marginal.pdf(points)) < z * mcse)
    assert stats.kstest(w, marginal.cdf).pvalue > FAMILY_ERROR / checks
    layer = priors.InverseGammaNormal(concentration=a, scale=b)
    w, u = layer.leaf_sample(jax.random.PRNGKey(5), (N_IID,), jnp.float32)
    assert u.shape == ()
    whitened = np.asarray(w, np.float64) / np.exp(float(u) / 2)
    assert stats.kstest(whitened, stats.norm.cdf).pvalue > FAMILY_ERROR / checks


MOMENT_FAMILIES = [
    priors.Normal(0.7),
    priors.ScaleMixture(pi=0.3, sigma1=1.0, sigma2=0.0025),
    priors.GaussianMixture(weights=(0.2, 0.5, 0.3), scales=(1.0, 0.1, 2.0), locs=(-1.0, 0, 0.5)),
    priors.Logistic(0.4),
    priors.Laplace(0.3),
    priors.StudentT(df=10.0, scale=0.1),  # finite 4th moment: the variance has an MCSE
]


def test_samples_match_stated_mean_and_variance():
    z = z_threshold(2 * (len(MOMENT_FAMILIES) + 1), FAMILY_ERROR)
    cases = [
        (f, np.asarray(f.sample(jax.random.PRNGKey(i), (N_IID,)), np.float64), f)
        for i, f in enumerate(MOMENT_FAMILIES)
    ]
    hier = priors.ARD(concentration=5.0, scale=2.0)  # marginal Student-t with ν = 10
    cases.append((hier, ard_draws(hier, N_IID)[0], hier.marginal()))
    for family, x, stated in cases:
        dev = x - stated.mean
        for label, values, truth in (
            ("mean", x, stated.mean),
            ("variance", dev**2, stated.variance),
        ):
            mcse = values.std() / np.sqrt(len(values))
            err = abs(values.mean() - truth) / mcse
            assert err < z, f"{family}: {label} {values.mean():.5g} vs {truth:.5g} ({err:.1f} MCSE)"


KS_CASES = [(f, r) for f, r in ELEMENTWISE] + [
    (priors.FanInNormal(scale=2.0), stats.norm(scale=2.0 / np.sqrt(10))),
]


@pytest.mark.slow
def test_samples_follow_the_stated_distribution():
    """KS on i.i.d. draws: each p-value is uniform under a correct sampler (Bonferroni)."""
    cases = [(f, r, lambda k, f=f: f.sample(k, (10, N_IID // 10))) for f, r in KS_CASES]
    cases += [(f, r, lambda k, f=f: f.sample(k, (N_IID,))) for f, r in NOISE]
    threshold = FAMILY_ERROR / len(cases)
    for i, (family, reference, draw) in enumerate(cases):
        x = np.asarray(draw(jax.random.PRNGKey(100 + i)), np.float64).ravel()
        p = stats.kstest(x, lambda v, r=reference: scipy_cdf(r, v)).pvalue
        assert p > threshold, f"{family}: KS p-value {p:.2g} < {threshold:.2g}"


# --- the joint prior over a position ------------------------------------------------------


def _position(rng):
    return {
        "params": {
            "Dense_0": {
                "kernel": jnp.asarray(rng.normal(size=(6, 5)), jnp.float32),
                "bias": jnp.asarray(rng.normal(size=5), jnp.float32),
            },
            "Dense_1": {
                "kernel": jnp.asarray(rng.normal(size=(5, 1)), jnp.float32),
                "bias": jnp.asarray(rng.normal(size=1), jnp.float32),
            },
        }
    }


def test_rules_pick_a_family_per_leaf_and_log_prob_sums_them():
    prior = priors.make(
        "laplace:scale=0.5",
        bias="gaussian:scale=2",
        layers=["Dense_1=student_t:df=3,scale=0.2", "Dense_*/kernel=fanin_gaussian:scale=1"],
    )
    assert prior.family_for("Dense_0/kernel") == priors.FanInNormal(1.0)  # last rule wins
    assert prior.family_for("Dense_0/bias") == priors.Normal(2.0)  # bias prior
    assert prior.family_for("Dense_1/bias") == priors.StudentT(3.0, 0.2)  # layer over bias
    assert priors.make("laplace").family_for("Dense_0/bias") == priors.Laplace(1.0)
    p = _position(np.random.default_rng(5))["params"]
    expected = (
        stats.norm.logpdf(p["Dense_0"]["kernel"], scale=1 / np.sqrt(6)).sum()
        + stats.norm.logpdf(p["Dense_0"]["bias"], scale=2.0).sum()
        + stats.norm.logpdf(p["Dense_1"]["kernel"], scale=1 / np.sqrt(5)).sum()
        + stats.t.logpdf(p["Dense_1"]["bias"], 3.0, scale=0.2).sum()
    )
    assert float(prior.log_prob({"params": p})) == pytest.approx(expected, rel=1e-5)
    assert float(prior.log_prob(p)) == pytest.approx(expected, rel=1e-5)  # a bare params tree


@pytest.mark.slow
def test_hierarchical_position_latents_and_noise():
    prior = priors.make(
        "hierarchical:concentration=2,scale=1",
        layers="Dense_0/kernel=ard:concentration=3,scale=2",
        noise="gamma:concentration=0.5,rate=1",
    )
    position = _position(np.random.default_rng(6))
    extra = prior.init_latents(position)
    assert jax.tree.map(jnp.shape, extra) == {
        "prior": {"Dense_0": {"kernel": (6,), "bias": ()}, "Dense_1": {"kernel": (), "bias": ()}},
        "noise": {"log_std": ()},
    }
    assert float(extra["prior"]["Dense_1"]["kernel"]) == pytest.approx(np.log(1 / 2))
    assert float(extra["noise"]["log_std"]) == pytest.approx(np.log(0.5))
    full = {**position, **extra}
    p, lat = full["params"], extra["prior"]
    ig = priors.InverseGammaNormal(2.0, 1.0)
    expected = (
        priors.ARD(3.0, 2.0).leaf_log_prob(p["Dense_0"]["kernel"], lat["Dense_0"]["kernel"])
        + sum(
            ig.leaf_log_prob(p[layer][leaf], lat[layer][leaf])
            for layer, leaf in (("Dense_0", "bias"), ("Dense_1", "kernel"), ("Dense_1", "bias"))
        )
        + stats.gamma.logpdf(0.5, 0.5)
        + np.log(0.5)
    )
    log_prob = jax.jit(prior.log_prob)
    assert float(log_prob(full)) == pytest.approx(float(expected), rel=1e-5)
    # A draw has the structure of the position (one latent family here keeps compiling cheap).
    small = priors.make(
        "laplace",
        layers="Dense_0/kernel=ard:concentration=3,scale=2",
        noise="lognormal:loc=0,scale=1",
    )
    start = {**position, **small.init_latents(position)}
    draw = small.sample(jax.random.PRNGKey(0), start)
    assert jax.tree.structure(draw) == jax.tree.structure(start)
    assert np.isfinite(float(small.log_prob(draw)))
    # Without its latents a hierarchical prior cannot score a position.
    with pytest.raises(ValueError, match="lacks the latent prior/Dense_0/"):
        priors.make("ard:concentration=3,scale=2").log_prob(position)


def test_closed_form_kl():
    rng = np.random.default_rng(7)
    mean = _position(rng)
    std = jax.tree.map(lambda m: jnp.full_like(m, 0.3), mean)
    prior = priors.make("fanin_gaussian:scale=1", bias="gaussian:scale=2")
    expected = 0.0
    for layer, leaf in (
        ("Dense_0", "kernel"),
        ("Dense_0", "bias"),
        ("Dense_1", "kernel"),
        ("Dense_1", "bias"),
    ):
        m = np.asarray(mean["params"][layer][leaf], np.float64)
        sp = 2.0 if leaf == "bias" else 1 / np.sqrt(m.shape[0])
        expected += np.sum(np.log(sp / 0.3) + (0.09 + m**2) / (2 * sp**2) - 0.5)
    assert prior.has_closed_form_kl
    assert float(prior.kl_closed_form(mean, std)) == pytest.approx(expected, rel=1e-5)
    iso = priors.Gaussian(weight_decay=4.0)
    same = priors.make("gaussian:scale=0.5", bias="gaussian:scale=0.5")
    assert float(iso.kl_closed_form(mean, std)) == pytest.approx(
        float(same.kl_closed_form(mean, std)), rel=1e-5
    )
    laplace = priors.make("laplace")
    assert not laplace.has_closed_form_kl
    with pytest.raises(ConfigError, match="no closed-form KL"):
        laplace.kl_closed_form(mean, std)


def test_make_defaults_and_refusals():
    assert priors.make() == priors.Gaussian(weight_decay=1.0)
    assert priors.make("gaussian", weight_decay=3.0) == priors.Gaussian(weight_decay=3.0)
    assert priors.make("gaussian:weight_decay=2") == priors.Gaussian(weight_decay=2.0)
    like = _position(np.random.default_rng(0))
    with pytest.raises(ConfigError, match="pattern 'Dense_9' matches no parameter"):
        priors.make("laplace", layers="Dense_9=gaussian", like=like)
    with pytest.raises(ConfigError, match=r"weight decay 3\.0 is not used by prior 'laplace"):
        priors.make("laplace:scale=0.1", weight_decay=3.0)
    with pytest.raises(ConfigError, match="weight decay -1 must be"):
        priors.make("laplace", weight_decay=-1)
    # A bare gaussian rule uses the weight decay: accepted.
    prior = priors.make("laplace", layers="Dense_1=gaussian", weight_decay=4.0)
    assert prior.family_for("Dense_1/kernel") == priors.Normal(0.5)
    with pytest.raises(ConfigError, match="invalid scale=-1"):
        priors.Laplace(scale=-1.0)


# --- the prior inside a problem ---------------------------------------------------------------


def test_a_named_prior_that_ignores_weight_decay_gets_no_default_weight_decay():
    # The heteroscedastic network's default λ = 10 is for the default Gaussian; a user who names
    # a family with its own scale gave no λ, so none is refused. A λ the user gives still is.
    from bnnkit.problem import ProblemConfig, build

    named = "scale_mixture:pi=0.5,sigma1=1,sigma2=0.0025"
    for prior in (named, "student_t:df=3,scale=0.1"):
        config = ProblemConfig("yacht_0", "mlp_regression_small", prior=prior)
        assert config.weight_decay == 1.0
        assert str(build(config).prior) == priors.spec.canonical(prior)
    assert ProblemConfig("yacht_0", "mlp_regression_small").weight_decay == 3.0
    layered = ProblemConfig(
        "yacht_0", "mlp_regression_small", prior=named, layer_priors="Dense_1=gaussian"
    )
    assert layered.weight_decay == 3.0  # λ reaches that layer's bare Gaussian
    given = ProblemConfig("yacht_0", "mlp_regression_small", prior=named, weight_decay=10)
    with pytest.raises(ConfigError, match=r"weight decay 10\.0 is not used by prior 'scale_mix"):
        build(given)


def test_old_configs_rebuild_with_the_weight_decay_prior():
    record = {
        "dataset": "yacht_0",
        "model": "mlp_regression_small",
        "noise_std": 0.5,
        "weight_decay": 2.0,
        "temperature": 1.0,
        "float64": False,
    }
    problem = build(ProblemConfig.from_dict(record))
    assert problem.prior == priors.Gaussian(weight_decay=2.0)
    position = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    assert set(position) == {"params"}


def test_config_is_canonical_and_reads_back_equal_from_json():
    config = ProblemConfig(
        dataset="yacht_0",
        model="mlp_regression_small",
        prior="student_t: scale=0.10, df=3",
        layer_priors=("Dense_1 = gaussian:scale=0.5", "Dense_0/bias=laplace"),
        noise_prior="gamma:rate=1,concentration=0.5",
    )
    assert config.prior == "student_t:df=3,scale=0.1"
    assert config.layer_priors == "Dense_1=gaussian:scale=0.5;Dense_0/bias=laplace"
    assert config.noise_prior == "gamma:concentration=0.5,rate=1"
    stored = json.loads(json.dumps(dataclasses.asdict(config)))
    assert stored == dataclasses.asdict(config)  # what --resume compares
    assert ProblemConfig.from_dict(stored) == config


def test_inferred_noise_in_the_log_posterior_and_predictions():
    from bnnkit.posterior import Samples
    from bnnkit.predict import predict

    problem = build(
        ProblemConfig(
            dataset="yacht_0",
            model="mlp_regression_small",
            prior="hierarchical:concentration=2,scale=2",
            noise_prior="lognormal:loc=-1,scale=0.5",
        )
    )
    position = jax.jit(problem.init_params)(jax.random.PRNGKey(0))
    assert set(position) == {"params", "prior", "noise"}
    assert problem.model.num_outputs == 1
    position["noise"]["log_std"] = jnp.float32(-0.7)
    batch = problem.train_batch()
    f = jax.jit(problem.apply)(position, batch.x)[:, 0]
    ll = stats.norm.logpdf(np.asarray(batch.y), np.asarray(f), np.exp(-0.7)).sum()
    lp = problem.log_posterior
    assert float(jax.jit(lp.log_likelihood)(position, batch)) == pytest.approx(ll, rel=1e-5)
    log_prior = float(jax.jit(problem.prior.log_prob)(position))
    expected = log_prior + ll
    assert float(jax.jit(lp)(position, batch)) == pytest.approx(expected, rel=1e-5)
    chunked = LogPosterior(lp.apply, lp.likelihood, lp.prior, lp.num_data, chunk_size=50)
    assert float(jax.jit(chunked)(position, batch)) == pytest.approx(expected, rel=1e-5)
    assert float(jax.jit(lp)(position, Batch(batch.x[:10], batch.y[:10]))) == pytest.approx(
        log_prior
        + len(batch.x)
        / 10
        * stats.norm.logpdf(np.asarray(batch.y[:10]), np.asarray(f[:10]), np.exp(-0.7)).sum(),
        rel=1e-5,
    )
    # Predictions use each sample's own noise std (in original units).
    two = jax.tree.map(lambda a: jnp.stack([a, a])[None], position)
    two["noise"]["log_std"] = jnp.asarray([[-0.7, 0.2]], jnp.float32)
    pred = predict(problem, Samples(two), problem.dataset.x_test[:5])
    scale = problem.dataset.target_scale
    np.testing.assert_allclose(pred.stds[:, 0], np.exp([-0.7, 0.2]) * scale, rtol=1e-5)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            dict(noise_prior="gamma:concentration=0.5,rate=1", noise_std=0.3),
            "infers the noise std; allowed: it or --noise-std 0.3, not both",
        ),
        (dict(noise_prior="gaussian"), "unknown noise prior family 'gaussian'"),
        (dict(layer_priors="Dense_7=laplace"), "pattern 'Dense_7' matches no parameter"),
    ],
)
def test_problem_refusals(changes, message):
    with pytest.raises(ConfigError, match=message):
        build(ProblemConfig(dataset="yacht_0", model="mlp_regression_small", **changes))
