"""The default sampler against the other modes and BlackJAX's NUTS on plain densities.

Every sampler runs 4 chains through ``bnnkit.sample`` (in memory), 500 burn-in + 1,000 kept
iterations, from the same starting positions, on each target, from two kinds of start, for
several seeds:

- ``default``: ``bnnkit.HMC()`` with no knobs (``--adapt auto``);
- ``mass``: ``--adapt mass`` with its default τ; ``chees``: ``--adapt chees`` with its default
  initial τ;
- ``nuts``: bnnkit's NUTS (window adaptation, diagonal mass);
- ``blackjax``: BlackJAX's NUTS after ``blackjax.window_adaptation`` (Stan's windows), 4 chains
  vmapped: the floor every ratio is taken against.

Targets (float32, written in JAX here; each has exact or quadrature reference moments):

- ``income``: Bayesian linear regression with known noise on a raw, income-scale predictor
  (intercept and income ~ 5e4 ± 2e4, not centred; 100 observations; N(0, 10²) priors): an
  exact 2-d Gaussian whose posterior sds are 0.19 and 3.5e-6, correlated −0.93. The badly
  scaled regression: from uniform(−2, 2) starts its log density is ~ −1e10 and the identity
  metric's stable step ~1e-6. (With a second raw predictor, age ~ 40 ± 12, two of four chains
  of every sampler here, BlackJAX's included, stay stranded on the ridge after 500 burn-in
  iterations: a diagonal metric estimated from a chain still far out is too small.)
- ``eight_schools``: the centred eight schools (Rubin 1981; Stan's priors μ ~ N(0, 5²),
  τ ~ half-Cauchy(0, 5), θ_j ~ N(μ, τ²)), sampled in (μ, log τ, θ): the classic funnel of a
  hierarchical model with published data, whose neck NUTS reaches only with small steps. Its
  reference mean of μ and log τ comes from quadrature over log τ (μ and θ integrate out).
- ``eight_schools_nc``: the same posterior non-centred (θ_j = μ + τ η_j, sampled in
  (μ, log τ, η)): no funnel, the target every sampler must pass with no knobs; the centred one
  stays as the case every sampler must be flagged on.
- ``gauss100``: a 100-d Gaussian with independent scales 10^-2 .. 10^2 (log-spaced).
- ``boston``: Bayesian linear regression on the raw Boston housing data (bundled with bnnkit;
  13 predictors on their own scales, TAX ~ 400, NOX ~ 0.5; known noise sd 4.7, N(0, 100²)
  priors): an exact 14-d Gaussian from a well-known data set.

Starts: ``dispersed`` (the reference mean plus 3 reference sds times a standard normal, per
parameter; eight schools: μ ~ N(0, 5²), log τ ~ N(1, 1), θ ~ N(μ, 5²)) and ``uniform``
(uniform(−2, 2) in every coordinate, Stan's default).

Reported per target, start and sampler (median over seeds): effective samples per 1,000
gradient evaluations of all chains counting burn-in (min over parameters of the
rank-normalised bulk ESS, :mod:`bnnkit.metrics.mcmc`) and the same with the tail ESS, the
kept-phase figure (bulk ESS per 1,000 kept-phase gradients), its ratio to BlackJAX's in the
same run, the share of kept iterations whose trajectory was capped, and failures: runs whose
largest rank-normalised R-hat is >= 1.01, or whose posterior mean is off the reference by
more than 4 Monte Carlo standard errors on some coordinate (|z| > 4: a 1e-4 chance per
coordinate for an unbiased sampler).

    python benchmarks/sampler_defaults.py [--seeds 3] [--quick] [--targets ...]
        [--samplers ...] [--json out.json]

``--quick``: one seed, 100 + 200 iterations, a smoke run. ``--before``: the interface of the
code before the default existed (``--adapt`` modes only, each given its ε and τ): run it with
that checkout's ``src`` on ``PYTHONPATH`` for before/after figures (the diagnostics are still
this file's checkout's, loaded from its path).

Targets: with no knobs, 0 failures; >= 2 effective samples per 1,000 gradients counting burn-in
on every target, and >= BlackJAX NUTS's wherever that converges. Compare within one run.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import importlib.util
import json
import math
import platform
import sys
import time
from pathlib import Path

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

import bnnkit
from bnnkit.inference import hmc, nuts

HERE = Path(__file__).resolve().parent


def _load_metrics(name, file):
    spec = importlib.util.spec_from_file_location(name, HERE.parent / "src/bnnkit/metrics" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The per-parameter diagnostics of this checkout, also under --before (older code lacks them):
# first their estimators, under the name the diagnostics import them by.
sys.modules.setdefault("bnnkit.metrics.mcmc_blocks", _load_metrics("mcmc_blocks", "mcmc_blocks.py"))
mcmc = _load_metrics("mcmc_diagnostics", "mcmc.py")

NUM_CHAINS = 4
SAMPLERS = ("default", "mass", "chees", "nuts", "blackjax")
TARGETS = ("income", "eight_schools", "eight_schools_nc", "gauss100", "boston")
STARTS = ("dispersed", "uniform")
RHAT_FAIL = 1.01
BIAS_Z = 4.0


class Target:
    """A log density over a flat float32 vector, its reference moments and its starts."""

    def __init__(self, name, dim, log_density, mean, sd, dispersed):
        self.name, self.dim, self.log_density = name, dim, log_density
        self.mean, self.sd = mean, sd  # reference (None where unknown per coordinate)
        self.dispersed = dispersed  # key -> (chains, dim)


def gaussian_regression(name, x, y, noise_sd, prior_sd):
    """An exact Gaussian posterior of a linear regression with known noise."""
    x64, y64 = np.asarray(x, np.float64), np.asarray(y, np.float64)
    precision = x64.T @ x64 / noise_sd**2 + np.eye(x64.shape[1]) / prior_sd**2
    cov = np.linalg.inv(precision)
    mean = cov @ x64.T @ y64 / noise_sd**2
    sd = np.sqrt(np.diag(cov))
    xj, yj = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)

    def log_density(beta):
        residual = yj - xj @ beta
        return -0.5 * jnp.sum(residual**2) / noise_sd**2 - 0.5 * jnp.sum(beta**2) / prior_sd**2

    def dispersed(key):
        z = jax.random.normal(key, (NUM_CHAINS, len(mean)))
        return jnp.asarray(mean + 3 * sd * np.asarray(z), jnp.float32)

    return Target(name, len(mean), log_density, mean, sd, dispersed)


def income_target():
    rng = np.random.default_rng(20240)
    n = 100
    income = rng.normal(5e4, 2e4, n)
    x = np.stack([np.ones(n), income], 1)
    y = 1.0 + 2e-5 * income + rng.normal(0, 0.5, n)
    return gaussian_regression("income", x, y, 0.5, 10.0)


def boston_target():
    path = Path(bnnkit.__file__).parent / "data/files/uci/boston/data.txt.gz"
    with gzip.open(path, "rt") as lines:
        data = np.loadtxt(lines)
    x = np.concatenate([np.ones((len(data), 1)), data[:, :-1]], 1)
    return gaussian_regression("boston", x, data[:, -1], 4.7, 100.0)


def gauss100_target():
    scales = np.logspace(-2, 2, 100)
    s = jnp.asarray(scales, jnp.float32)

    def log_density(x):
        return -0.5 * jnp.sum((x / s) ** 2)

    def dispersed(key):
        return 3 * s * jax.random.normal(key, (NUM_CHAINS, 100))

    return Target("gauss100", 100, log_density, np.zeros(100), scales, dispersed)


EIGHT_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools_reference():
    """E and sd of μ and log τ by quadrature over log τ (μ and θ integrate out exactly)."""
    log_tau = np.linspace(-12.0, 6.0, 20001)
    tau = np.exp(log_tau)
    var = EIGHT_SIGMA[None, :] ** 2 + tau[:, None] ** 2  # y_j | μ, τ ~ N(μ, σ_j² + τ²)
    prec = 1 / 25.0 + np.sum(1 / var, 1)
    mu_mean = np.sum(EIGHT_Y / var, 1) / prec
    # log p(y | τ) with μ ~ N(0, 25) integrated out, up to a constant.
    log_marginal = (
        -0.5 * np.sum(np.log(var), 1)
        - 0.5 * np.log(25.0 * prec)
        - 0.5 * np.sum(EIGHT_Y**2 / var, 1)
        + 0.5 * prec * mu_mean**2
    )
    log_prior = np.log(2 / (np.pi * 5 * (1 + (tau / 5) ** 2))) + log_tau  # half-Cauchy, Jacobian
    w = np.exp(log_marginal + log_prior - np.max(log_marginal + log_prior))
    w /= w.sum()
    e_mu = np.sum(w * mu_mean)
    sd_mu = math.sqrt(np.sum(w * (1 / prec + mu_mean**2)) - e_mu**2)
    e_lt = np.sum(w * log_tau)
    sd_lt = math.sqrt(np.sum(w * log_tau**2) - e_lt**2)
    return (e_mu, sd_mu), (e_lt, sd_lt)


def eight_schools_target():
    (e_mu, sd_mu), (e_lt, sd_lt) = eight_schools_reference()
    y, sigma = jnp.asarray(EIGHT_Y, jnp.float32), jnp.asarray(EIGHT_SIGMA, jnp.float32)

    def log_density(v):
        mu, log_tau, theta = v[0], v[1], v[2:]
        tau = jnp.exp(log_tau)
        return (
            -0.5 * jnp.sum(((y - theta) / sigma) ** 2)
            - 0.5 * jnp.sum(((theta - mu) / tau) ** 2)
            - 8 * log_tau
            - 0.5 * (mu / 5) ** 2
            - jnp.log1p((tau / 5) ** 2)
            + log_tau
        )

    mean = np.full(10, np.nan)
    sd = np.full(10, np.nan)
    mean[:2], sd[:2] = (e_mu, e_lt), (sd_mu, sd_lt)
    dispersed = functools.partial(eight_schools_starts, centred=True)
    return Target("eight_schools", 10, log_density, mean, sd, dispersed)


def eight_schools_nc_target():
    """The same posterior, non-centred: θ_j = μ + τ η_j with η_j ~ N(0, 1), sampled in
    (μ, log τ, η); the funnel's neck is gone, so a sampler needs no small steps. μ and log τ
    keep their reference moments."""
    centred = eight_schools_target()
    y, sigma = jnp.asarray(EIGHT_Y, jnp.float32), jnp.asarray(EIGHT_SIGMA, jnp.float32)

    def log_density(v):
        mu, log_tau, eta = v[0], v[1], v[2:]
        tau = jnp.exp(log_tau)
        theta = mu + tau * eta
        return (
            -0.5 * jnp.sum(((y - theta) / sigma) ** 2)
            - 0.5 * jnp.sum(eta**2)
            - 0.5 * (mu / 5) ** 2
            - jnp.log1p((tau / 5) ** 2)
            + log_tau
        )

    dispersed = functools.partial(eight_schools_starts, centred=False)
    return Target("eight_schools_nc", 10, log_density, centred.mean, centred.sd, dispersed)


def eight_schools_starts(key, *, centred: bool):
    """Dispersed starts of the eight schools, one row per chain: μ ~ N(0, 5²), log τ ~ N(1, 1),
    and θ ~ N(μ, 5²) (centred) or η ~ N(0, 1) (non-centred), from the same three keys."""
    k1, k2, k3 = jax.random.split(key, 3)
    mu = 5 * jax.random.normal(k1, (NUM_CHAINS, 1))
    log_tau = 1 + jax.random.normal(k2, (NUM_CHAINS, 1))
    z = jax.random.normal(k3, (NUM_CHAINS, 8))
    return jnp.concatenate([mu, log_tau, mu + 5 * z if centred else z], 1)


BUILDERS = {
    "income": income_target,
    "eight_schools": eight_schools_target,
    "eight_schools_nc": eight_schools_nc_target,
    "gauss100": gauss100_target,
    "boston": boston_target,
}


def config_for(sampler, *, seed, num_iterations, num_burn_in, before):
    common = dict(
        seed=seed,
        num_chains=NUM_CHAINS,
        num_iterations=num_iterations,
        num_burn_in=num_burn_in,
        checkpoint_every=num_iterations,
    )
    if sampler == "nuts":
        return nuts.Config(**common)
    if sampler == "default":
        return hmc.Config(**common)
    # Under --before the modes need both ε (where its search starts) and τ: the defaults of
    # this checkout, given explicitly.
    tau = {"mass": 2.0, "chees": 1.0}[sampler]
    knobs = dict(step_size=0.1, trajectory_len=tau) if before else {}
    return hmc.Config(adapt=sampler, **knobs, **common)


def run_bnnkit(target, sampler, start, *, seed, num_iterations, num_burn_in, before):
    config = config_for(
        sampler, seed=seed, num_iterations=num_iterations, num_burn_in=num_burn_in, before=before
    )
    began = time.perf_counter()
    chains = bnnkit.sample(target.log_density, start, config)
    draws = np.asarray(chains.positions, np.float64)
    steps = np.asarray(chains.info.num_leapfrog, np.int64)
    capped = getattr(chains.info, "capped", None)
    capped = (
        float(np.mean(np.asarray(capped)[:, num_burn_in:])) if capped is not None else float("nan")
    )
    divergent = float(np.mean(np.asarray(chains.info.divergent)[:, num_burn_in:]))
    return (
        draws,
        int(steps.sum()),
        int(steps[:, num_burn_in:].sum()),
        capped,
        divergent,
        (time.perf_counter() - began),
    )


def run_blackjax(target, start, *, seed, num_iterations, num_burn_in):
    began = time.perf_counter()
    warmup = blackjax.window_adaptation(blackjax.nuts, target.log_density)
    num_kept = num_iterations - num_burn_in

    def one_chain(key, position):
        warm_key, sample_key = jax.random.split(key)
        (state, parameters), warm_info = warmup.run(warm_key, position, num_steps=num_burn_in)
        kernel = blackjax.nuts(target.log_density, **parameters)

        def body(state, key):
            state, info = kernel.step(key, state)
            return state, (state.position, info.num_integration_steps, info.is_divergent)

        _, (draws, steps, divergent) = jax.lax.scan(
            body, state, jax.random.split(sample_key, num_kept)
        )
        return draws, warm_info.info.num_integration_steps, steps, divergent

    keys = jax.random.split(jax.random.PRNGKey(seed), NUM_CHAINS)
    draws, warm_steps, steps, divergent = jax.jit(jax.vmap(one_chain))(keys, start)
    draws = np.asarray(draws, np.float64)
    total = int(np.sum(warm_steps)) + int(np.sum(steps))
    return (
        draws,
        total,
        int(np.sum(steps)),
        float("nan"),
        float(np.mean(divergent)),
        time.perf_counter() - began,
    )


def measure(target, draws, total, kept):
    ess_bulk = mcmc.ess_bulk(draws)
    ess_tail = mcmc.ess_tail(draws)
    rhat = mcmc.rhat(draws)
    mcse = mcmc.mcse_mean(draws)
    z = (draws.mean((0, 1)) - target.mean) / mcse
    z_max = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else float("nan")
    rhat_max = float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("inf")
    bulk = float(np.nanmin(ess_bulk)) if np.isfinite(ess_bulk).any() else 0.0
    tail = float(np.nanmin(ess_tail)) if np.isfinite(ess_tail).any() else 0.0
    return {
        "per_1k": 1000 * bulk / total,
        "per_1k_tail": 1000 * tail / total,
        "kept_per_1k": 1000 * bulk / max(kept, 1),
        "ess_bulk": bulk,
        "ess_tail": tail,
        "rhat_max": rhat_max,
        "bias_z": z_max,
        "gradients": total,
        "failed": bool(not rhat_max < RHAT_FAIL or z_max > BIAS_Z),
    }


def starts_for(target, kind, seed):
    key = jax.random.fold_in(jax.random.PRNGKey(1000 + seed), TARGETS.index(target.name))
    if kind == "uniform":
        return jax.random.uniform(key, (NUM_CHAINS, target.dim), minval=-2.0, maxval=2.0)
    return jnp.asarray(target.dispersed(key), jnp.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument("--samplers", nargs="+", default=None, choices=SAMPLERS)
    parser.add_argument("--starts", nargs="+", default=list(STARTS), choices=STARTS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one seed, 100 + 200 iterations")
    parser.add_argument(
        "--before",
        action="store_true",
        help="the older interface: no default mode, every mode given ε and τ",
    )
    parser.add_argument("--json", default=None, help="write every run's figures here")
    args = parser.parse_args()
    samplers = args.samplers or [s for s in SAMPLERS if not (args.before and s == "default")]
    num_burn_in, num_iterations = (100, 300) if args.quick else (500, 1500)
    seeds = range(1 if args.quick else args.seeds)
    print(
        f"# {platform.processor() or platform.machine()}, jax {jax.__version__}, "
        f"blackjax {blackjax.__version__}; {NUM_CHAINS} chains, {num_burn_in} burn-in + "
        f"{num_iterations - num_burn_in} kept, seeds {list(seeds)}"
    )
    rows = []
    began = time.perf_counter()
    for name in args.targets:
        target = BUILDERS[name]()
        for kind in args.starts:
            for seed in seeds:
                start = starts_for(target, kind, seed)
                for sampler in samplers:
                    if sampler == "blackjax":
                        out = run_blackjax(
                            target,
                            start,
                            seed=seed,
                            num_iterations=num_iterations,
                            num_burn_in=num_burn_in,
                        )
                    else:
                        out = run_bnnkit(
                            target,
                            sampler,
                            start,
                            seed=seed,
                            num_iterations=num_iterations,
                            num_burn_in=num_burn_in,
                            before=args.before,
                        )
                    draws, total, kept, capped, divergent, seconds = out
                    row = {
                        "target": name,
                        "start": kind,
                        "seed": seed,
                        "sampler": sampler,
                        **measure(target, draws, total, kept),
                        "capped": capped,
                        "divergent": divergent,
                        "seconds": seconds,
                    }
                    rows.append(row)
                    print(
                        f"  {name:13s} {kind:9s} seed {seed} {sampler:8s} "
                        f"{row['per_1k']:8.2f}/1k (tail {row['per_1k_tail']:7.2f}, kept "
                        f"{row['kept_per_1k']:8.2f}) R-hat {row['rhat_max']:.3f} "
                        f"|z| {row['bias_z']:.1f} capped {capped:.2f} div {divergent:.2f} "
                        f"{seconds:.0f}s",
                        flush=True,
                    )
    print(f"\n# {time.perf_counter() - began:.0f} s in all\n")
    print(
        "| target | start | sampler | ESS/1k grads (burn-in counted) | tail | kept phase |"
        " x BlackJAX (all / kept) | capped | failed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.targets:
        for kind in args.starts:
            group = [r for r in rows if r["target"] == name and r["start"] == kind]
            floor = [r for r in group if r["sampler"] == "blackjax"]
            base = np.median([r["per_1k"] for r in floor]) if floor else float("nan")
            base_kept = np.median([r["kept_per_1k"] for r in floor]) if floor else float("nan")
            for sampler in samplers:
                runs = [r for r in group if r["sampler"] == sampler]
                per = np.median([r["per_1k"] for r in runs])
                tail = np.median([r["per_1k_tail"] for r in runs])
                kept = np.median([r["kept_per_1k"] for r in runs])
                failed = sum(r["failed"] for r in runs)
                print(
                    f"| {name} | {kind} | {sampler} | {per:.2f} | {tail:.2f} | {kept:.2f} | "
                    f"{per / base:.2f} / {kept / base_kept:.2f} | "
                    f"{np.median([r['capped'] for r in runs]):.2f} | {failed}/{len(runs)} |"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
