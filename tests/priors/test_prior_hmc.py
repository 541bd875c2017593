"""HMC with every prior: without data it must sample the prior itself; with data, through the
CLI, a prior of each kind (hierarchical latents and an inferred noise std included) runs and
evaluates.

The no-data check is a consistency test of the sampler and each prior's ``log_prob``
(gradients, Jacobians of the log-parameterised latents): HMC on ``prior.log_prob`` of a
one-weight position must reproduce the prior's marginals, which are known in closed form
(a hierarchical weight's marginal is a Student-t). The chains are thinned to about one draw per
effective sample (the smaller of the bulk and tail ESS of Vehtari et al. 2021), so the kept
draws are approximately independent and the Kolmogorov-Smirnov statistic has its i.i.d. null
distribution. Each p-value is compared with ``FAMILY_ERROR / number of tests`` (Bonferroni), so
a correct sampler fails this file with probability about ``FAMILY_ERROR``; the residual
autocorrelation after thinning makes the test slightly anti-conservative, which the small
family-wise error leaves room for.
"""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bnnkit import priors, storage
from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.inference import hmc
from bnnkit.metrics import diagnostics
from bnnkit.runs import load_run

FAMILY_ERROR = 1e-3
NUM_CHAINS, NUM_ITERATIONS, NUM_BURN_IN = 4, 3300, 300
MIN_INDEPENDENT_DRAWS = 400  # below this KS has little power: the chains must mix to pass


def mixture_cdf(weights, scales, locs):
    parts = list(zip(weights, scales, locs, strict=True))
    return lambda x: sum(w * stats.norm.cdf(x, m, s) for w, s, m in parts)


# One weight per prior, named after it: {name: (spec, {quantity: CDF of its marginal})}.
# The weights are independent under the prior, so one chain over all of them (each leaf with its
# own family through layer rules) must reproduce every marginal, and compiles once.
CASES = {
    "gaussian": ("gaussian:scale=0.5", {"w": stats.norm(scale=0.5).cdf}),
    "scale_mixture": (
        "scale_mixture:pi=0.5,sigma1=1,sigma2=0.1",
        {"w": mixture_cdf((0.5, 0.5), (1.0, 0.1), (0.0, 0.0))},
    ),
    "mixture": (
        "mixture:weights=0.3/0.7,scales=0.5/1,locs=-2/1",
        {"w": mixture_cdf((0.3, 0.7), (0.5, 1.0), (-2.0, 1.0))},
    ),
    "logistic": ("logistic:scale=0.3", {"w": stats.logistic(scale=0.3).cdf}),
    "laplace": ("laplace:scale=0.5", {"w": stats.laplace(scale=0.5).cdf}),
    "student_t": ("student_t:df=3,scale=0.2", {"w": stats.t(3, scale=0.2).cdf}),
    # Marginal of w: Student-t with ν = 2a, scale √(b/a); the variance v = eᵘ: InvGamma(a, b).
    "hierarchical": (
        "hierarchical:concentration=3,scale=3",
        {"w": stats.t(6, scale=1.0).cdf, "v": stats.invgamma(3, scale=3).cdf},
    ),
}
NUM_TESTS = sum(len(marginals) for _, marginals in CASES.values())


def rank_normalized(draws: np.ndarray) -> np.ndarray:
    ranks = stats.rankdata(draws, axis=None).reshape(draws.shape)
    return stats.norm.ppf((ranks - 0.375) / (draws.size + 0.25))


def independent_draws(draws: np.ndarray) -> np.ndarray:
    """Every k-th draw of each chain, k = draws / min(bulk ESS, tail ESS)."""
    folded = np.abs(draws - np.median(draws))
    ess = min(
        float(diagnostics.ess(rank_normalized(draws))),
        float(diagnostics.ess(rank_normalized(folded))),
    )
    stride = max(1, math.ceil(draws.size / ess))
    return draws[:, ::stride].ravel()


def sample_prior_with_hmc(key: jax.Array) -> dict[str, np.ndarray]:
    """HMC on ``prior.log_prob`` alone (no data); kept draws of every weight and variance."""
    prior = priors.make("gaussian", layers=[f"{name}={spec}" for name, (spec, _) in CASES.items()])
    like = {"params": {name: jnp.zeros(()) for name in CASES}}
    start = {**like, **prior.init_latents(like)}
    method = hmc.build(
        lambda position, batch: prior.log_prob(position),
        hmc.Config(
            step_size=0.05,
            trajectory_len=1.0,
            num_iterations=NUM_ITERATIONS,
            num_burn_in=NUM_BURN_IN,
            max_num_leapfrog_steps=2000,
        ),
    )

    def one_chain(key):
        k_init, k_run = jax.random.split(key)
        # Dispersed starts, so that agreement is not an artefact of a shared initial point.
        leaves, treedef = jax.tree.flatten(start)
        noise = jax.random.normal(k_init, (len(leaves),))
        position = treedef.unflatten([a + 0.3 * e for a, e in zip(leaves, noise, strict=True)])
        state = method.init(None, position, None)

        def body(state, k):
            state, _ = method.step(k, state, None)
            return state, state.position

        _, positions = jax.lax.scan(body, state, jax.random.split(k_run, NUM_ITERATIONS))
        return jax.tree.map(lambda p: p[NUM_BURN_IN:], positions)

    positions = jax.jit(jax.vmap(one_chain))(jax.random.split(key, NUM_CHAINS))
    out = {(name, "w"): np.asarray(w, np.float64) for name, w in positions["params"].items()}
    for name, u in positions["prior"].items():
        out[(name, "v")] = np.exp(np.asarray(u, np.float64))
    return out


@pytest.mark.slow
def test_hmc_without_data_recovers_the_prior():
    draws = sample_prior_with_hmc(jax.random.PRNGKey(0))
    assert len(draws) == NUM_TESTS
    for name, (spec, marginals) in CASES.items():
        for quantity, cdf in marginals.items():
            kept = independent_draws(draws[(name, quantity)])
            assert kept.size >= MIN_INDEPENDENT_DRAWS, f"{spec} {quantity}: {kept.size} draws"
            p = stats.kstest(kept, cdf).pvalue
            assert p > FAMILY_ERROR / NUM_TESTS, (
                f"{spec}: HMC marginal of {quantity} differs from the prior (KS p = {p:.2g} on "
                f"{kept.size} thinned draws)"
            )


BASE = [
    "hmc",
    "--dataset",
    "yacht_0",
    "--model",
    "mlp_regression_small",
    "--step-size",
    "1e-3",
    "--trajectory-len",
    "0.002",
    "--num-burn-in",
    "1",
    "--num-chains",
    "2",
    "--no-progress",
]


def test_hmc_cli_with_a_laplace_prior(tmp_path, capsys):
    run_dir = tmp_path / "laplace"
    code = main(
        [
            *BASE,
            "--num-iterations",
            "4",
            "--noise-std",
            "0.35",
            "--no-evaluate",
            "--prior",
            "laplace:scale=0.5",
            "--dir",
            str(run_dir),
        ]
    )
    assert code == 0, capsys.readouterr().err
    record = storage.read_json(run_dir / "run.json")
    assert record["problem"]["prior"] == "laplace:scale=0.5"
    log = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(log) == 4 and all(np.isfinite(r["log_posterior"]).all() for r in log)


@pytest.mark.slow
def test_hierarchical_prior_with_inferred_noise_runs_and_evaluates(tmp_path, capsys):
    run_dir = str(tmp_path / "hier")
    priors_toml = tmp_path / "priors.toml"
    priors_toml.write_text(
        '[prior]\nfamily = "hierarchical"\nconcentration = 2\nscale = 2\n'
        '[prior.layers."Dense_0/kernel"]\nfamily = "ard"\nconcentration = 2\nscale = 1\n'
        '[prior.noise]\nfamily = "gamma"\nconcentration = 0.5\nrate = 1\n'
    )
    args = [*BASE, "--prior-file", str(priors_toml), "--no-evaluate", "--dir", run_dir]
    assert main([*args, "--num-iterations", "5"]) == 0, capsys.readouterr().err
    record, problem, samples, _ = load_run(run_dir)
    assert record["problem"]["noise_prior"] == "gamma:concentration=0.5,rate=1"
    assert record["problem"]["layer_priors"] == "Dense_0/kernel=ard:concentration=2,scale=1"
    assert samples.num_samples == 4
    assert samples.params["prior"]["Dense_0"]["kernel"].shape == (2, 4, 6)  # one per input
    assert samples.params["noise"]["log_std"].shape == (2, 4)
    result = evaluate(run_dir)
    assert np.isfinite(result["test"]["rmse"]) and np.isfinite(result["test"]["nll"])
    stds = storage.load_arrays(tmp_path / "hier" / "predictions" / "test.npz")["stds"]
    expected = np.exp(samples.flat()["noise"]["log_std"]) * problem.dataset.target_scale
    np.testing.assert_allclose(stds[:, 0], expected, rtol=1e-5)
