"""Sampler efficiency: function-space ESS per 1,000 gradient evaluations, same budget each.

Every sampler runs 4 chains from the same initial positions on the same posterior: first its
burn-in (a fixed number of iterations; its gradient evaluations and divergences are reported
apart), then sampling until each chain has spent the same budget of gradient evaluations.

- ``fixed``: the paper's HMC with published-style (ε, τ), ε tuned by dual averaging during
  burn-in, identity mass (``--adapt step``, the default);
- ``mass``: ``--adapt mass`` (Stan's windows, diagonal Fisher mass matrix, jittered τ);
- ``chees``: ``--adapt chees`` (ChEES across the chains, pooled diagonal mass matrix);
- ``nuts``: bnnkit's NUTS (window adaptation, diagonal mass);
- ``mclmc``: unadjusted MCLMC (``bnnkit mclmc`` defaults: tuned per chain, 10 steps per kept
  draw); ``mclmc-adjusted``: its Metropolis-adjusted variant (MAMS, ``--adjusted``, one
  trajectory per kept draw). Their burn-in is ``mclmc_burn_in`` iterations (10,000 unadjusted
  steps; MILE tunes for 50,000); an
  isokinetic McLachlan step costs 2 gradient evaluations (``mclmc.GRADIENTS_PER_STEP``), which
  is what their budget counts;
- ``auto``: ``bnnkit hmc``'s no-knob default (``--adapt auto``: NUTS during burn-in sets ε, a
  diagonal mass matrix and τ per chain, then jittered HMC);
- ``auto-ensemble``, ``mclmc-ensemble``: ``auto`` and ``mclmc`` with chain k started at member
  k of a deep ensemble trained as ``bnnkit reference`` trains it (its SGD updates, counted in
  whole-data gradient equivalents, are ``init_gradients``; not on (d), which has one mode);
- ``blackjax``: only on (d), BlackJAX's own NUTS with its window adaptation, the peer.

Efficiency is the effective sample size of the predictions on test inputs (function space:
the predictive mean for regression, the class probabilities for classification, on up to 1,000
test points; ESS across chains, BlackJAX's estimator) per 1,000 gradient evaluations of all
chains after burn-in. The minimum over test points is what limits a Bayesian model average;
the median is typical. Chains that settle in different modes have a small ESS across chains
whatever their mixing, so the within-chain figure is reported too: each chain's own ESS
(bnnkit's bulk ESS of that chain alone), summed over the chains, per 1,000 gradients (its
minimum and median over test points). Burn-in divergences are a share of burn-in iterations.

Cases:
  (a) yacht_0, bnn_hmc's heteroscedastic ``mlp_regression_small``;
  (b) concrete_0, ``mlp_regression_small`` with a fixed noise std 0.35 (the demo);
  (c) MNIST, first 160 training images, ``mlp_classification`` (needs BNNKIT_DATA_DIR);
  (d) Bayesian linear regression with covariates on scales 100, 1 and 0.01 (unstandardised).

    python benchmarks/sampler_efficiency.py [--cases a b c d] [--budget-scale 1.0]

Targets: an adaptive mode at least 3x the fixed figure on (a) and (c); on (d) within 1.5x of
BlackJAX NUTS's gradients per effective sample; burn-in divergences under 2 % on (a)-(d).
Compare ratios within one run; absolute times depend on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import likelihoods, models, priors
from bnnkit.inference import hmc, mclmc, nuts
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.log_posterior import LogPosterior
from bnnkit.metrics import diagnostics
from bnnkit.problem import ProblemConfig, build
from bnnkit.types import Batch

NUM_CHAINS = 4
SAMPLERS = (
    "fixed",
    "mass",
    "chees",
    "nuts",
    "auto",
    "mclmc",
    "mclmc-adjusted",
    "auto-ensemble",
    "mclmc-ensemble",
    "blackjax",
)
#: Rows whose chains start at the members of a deep ensemble.
ENSEMBLE_ROWS = ("auto-ensemble", "mclmc-ensemble")


@dataclasses.dataclass
class Case:
    name: str
    log_posterior: LogPosterior
    batch: Batch
    init: callable  # key -> params
    predict: callable  # params -> (points,) or (points, classes) function values
    budget: int  # gradient evaluations per chain
    num_burn_in: int  # iterations of burn-in of the adaptive samplers
    fixed: dict  # the paper-style HMC settings
    fixed_burn_in: int | None = None  # the paper's burn-in iterations, where they differ
    mclmc_burn_in: int = 1000  # MCLMC's tuning iterations
    init_seed: int = 1  # of the chains' initial positions
    config: ProblemConfig | None = None  # the problem (None: no ensemble can be trained)


def problem_case(
    name, config: ProblemConfig, budget, num_burn_in, fixed, fixed_burn_in=None
) -> Case:
    problem = build(config)
    x = problem.to_device(problem.dataset.x_test[:1000])
    classification = problem.dataset.task == "classification"

    def predict(params):
        out = problem.apply(params, x)
        if classification:
            return jax.nn.softmax(out, -1)
        return problem.likelihood_at(params).mean_std(out)[0]

    return Case(
        name,
        problem.log_posterior,
        problem.train_batch(),
        problem.init_params,
        predict,
        budget,
        num_burn_in,
        fixed,
        fixed_burn_in,
        config=config,
    )


def ensemble_members(case: Case, seed: int, folder: str) -> tuple[object, float]:
    """``NUM_CHAINS`` members of a deep ensemble trained as ``bnnkit reference`` trains it
    (stacked), and its cost in whole-data gradient equivalents (examples seen / N)."""
    from bnnkit.experiments import reference
    from bnnkit.experiments.run_reuse import run_or_reuse
    from bnnkit.runs.initial import positions_from_run

    built = build(case.config)
    n = built.dataset.num_train
    config = reference.Config(members=NUM_CHAINS, seed=seed).ensemble_config(n)
    run_or_reuse(case.config, config, folder, progress=False, overwrite=True)
    updates = config.num_epochs * (n // config.batch_size)
    cost = NUM_CHAINS * updates * config.batch_size / n
    return positions_from_run(folder, built, NUM_CHAINS), cost


def linear_case(budget, num_burn_in) -> Case:
    rng = np.random.default_rng(0)
    n, scales = 200, np.array([100.0, 1.0, 0.01])
    x = rng.normal(size=(n, 3)) * scales
    y = x @ np.array([0.02, -1.0, 30.0]) + 0.5 + rng.normal(size=n)
    model = models.get("linear", num_outputs=1)
    lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=1.0), priors.Gaussian(0.01), n)
    batch = Batch(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
    x_test = jnp.asarray(rng.normal(size=(50, 3)) * scales, jnp.float32)

    def predict(params):
        return model.apply(params, x_test)[:, 0]

    # Posterior sds range over about 4 orders of magnitude: a fixed step must suit the smallest.
    xa = np.concatenate([x, np.ones((n, 1))], 1)
    sd = np.sqrt(np.diag(np.linalg.inv(0.01 * np.eye(4) + xa.T @ xa)))
    fixed = dict(
        step_size=float(0.5 * sd.min()),
        trajectory_len=float(1.5 * sd.max()),
        max_num_leapfrog_steps=1_000_000,
    )
    return Case(
        "(d) linear regression, covariate scales 100 / 1 / 0.01",
        lp,
        batch,
        lambda key: model.init(key, batch.x[:1]),
        predict,
        budget,
        num_burn_in,
        fixed,
    )


def summary(
    preds: list, burn_grads: float, grads: float, burn_divergent: float, seconds: float
) -> dict:
    """ESS per 1,000 sampling gradients (all chains) of the kept predictions."""
    draws = np.stack(preds, axis=1).reshape((NUM_CHAINS, len(preds), -1))
    # A class probability that rounds to exactly 0 or 1 in every draw carries no information
    # (its ESS is 0/0): such outputs are left out of the minimum and the median.
    varying = np.ptp(draws.reshape((-1, draws.shape[-1])), axis=0) > 0
    constant = int((~varying).sum())
    draws = draws[..., varying] if varying.any() else draws
    ess = diagnostics.ess(draws) if len(preds) >= 4 else np.full(draws.shape[-1], np.nan)
    ess = ess[np.isfinite(ess)] if np.any(np.isfinite(ess)) else np.array([np.nan])
    # Within-chain: each chain's own ESS of each output, summed over the chains.
    within = (
        np.sum([diagnostics.ess(chain[None]) for chain in draws], axis=0)
        if len(preds) >= 4
        else np.full(draws.shape[-1], np.nan)
    )
    within = within[np.isfinite(within)] if np.any(np.isfinite(within)) else np.array([np.nan])
    rhat = diagnostics.split_rhat(draws) if len(preds) >= 4 else np.array([np.nan])
    return {
        "kept": len(preds),
        "burn_in_gradients": int(burn_grads),
        "gradients": int(grads),
        "ess_min": float(ess.min()),
        "ess_median": float(np.median(ess)),
        "min_per_1000": 1000 * float(ess.min()) / grads,
        "median_per_1000": 1000 * float(np.median(ess)) / grads,
        "within_min_per_1000": 1000 * float(within.min()) / grads,
        "within_median_per_1000": 1000 * float(np.median(within)) / grads,
        "burn_in_divergent": burn_divergent,
        "rhat_max": float(np.nanmax(rhat)) if np.any(np.isfinite(rhat)) else float("nan"),
        "constant_outputs": constant,
        "seconds": seconds,
    }


def run_method(
    case: Case, method, num_burn_in: int, key, gradients_per_step: int = 1, init=None
) -> dict:
    """Burn-in, then chains advanced together until each has spent the sampling budget
    (``gradients_per_step``: gradient evaluations per logged integrator step; ``init``: the
    chains' starting positions, stacked, with their cost in gradients, instead of the
    model's initialisation)."""
    keys = jax.random.split(key, NUM_CHAINS)
    init_gradients = 0.0
    if init is None:
        params = jax.vmap(case.init)(
            jax.random.split(jax.random.PRNGKey(case.init_seed), NUM_CHAINS)
        )
    else:
        params, init_gradients = init
    state = jax.vmap(lambda k, p: method.init(k, p, case.batch), axis_name=MEMBERS)(keys, params)
    step = jax.jit(jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS))
    predict = jax.jit(jax.vmap(case.predict))
    burn_grads, grads, burn_divergent, preds, it = 0.0, np.zeros(NUM_CHAINS), 0, [], 0
    t0 = time.perf_counter()
    while it < num_burn_in or grads.min() < case.budget:
        state, info = step(
            jax.random.split(jax.random.fold_in(key, it), NUM_CHAINS), state, case.batch
        )
        info = jax.device_get(info)
        if it < num_burn_in:
            burn_grads += gradients_per_step * float(np.sum(info.num_leapfrog))
            burn_divergent += int(np.sum(info.divergent))
        else:
            grads += gradients_per_step * np.asarray(info.num_leapfrog)
            preds.append(np.asarray(predict(state.position), np.float64))
        it += 1
    return {
        **summary(
            preds,
            burn_grads,
            grads.sum(),
            burn_divergent / (NUM_CHAINS * num_burn_in),
            time.perf_counter() - t0,
        ),
        "init_gradients": int(init_gradients),
    }


def blackjax_nuts(case: Case, num_burn_in: int, key) -> dict:
    """The peer: BlackJAX's window adaptation and NUTS, per chain, same budget."""
    import blackjax

    def logdensity(params):
        return case.log_posterior(params, case.batch)

    params = jax.vmap(case.init)(jax.random.split(jax.random.PRNGKey(case.init_seed), NUM_CHAINS))
    warmup = blackjax.window_adaptation(blackjax.nuts, logdensity)

    def adapt(k, p):
        (state, parameters), info = warmup.run(k, p, num_steps=num_burn_in)
        return (
            state,
            parameters,
            jnp.sum(info.info.num_integration_steps),
            jnp.sum(info.info.is_divergent),
        )

    keys = jax.random.split(key, NUM_CHAINS)
    t0 = time.perf_counter()
    states, parameters, used, divergent = jax.jit(jax.vmap(adapt))(keys, params)
    predict = jax.jit(jax.vmap(case.predict))

    @jax.jit
    def step(keys, states, parameters):
        def one(k, s, p):
            return blackjax.nuts(logdensity, **p).step(k, s)

        return jax.vmap(one)(keys, states, parameters)

    grads, preds, it = np.zeros(NUM_CHAINS), [], 0
    while grads.min() < case.budget:
        states, info = step(
            jax.random.split(jax.random.fold_in(key, it), NUM_CHAINS), states, parameters
        )
        grads += np.asarray(info.num_integration_steps)
        preds.append(np.asarray(predict(states.position), np.float64))
        it += 1
    return summary(
        preds,
        float(np.sum(used)),
        grads.sum(),
        float(np.sum(divergent)) / (NUM_CHAINS * num_burn_in),
        time.perf_counter() - t0,
    )


def cases(names, scale, data_dir):
    out = []
    if "a" in names:
        out.append(
            problem_case(
                "(a) yacht_0, heteroscedastic mlp_regression_small",
                ProblemConfig("yacht_0", "mlp_regression_small"),
                int(400_000 * scale),
                300,
                dict(step_size=1e-5, trajectory_len=0.15, max_num_leapfrog_steps=15_000),
                fixed_burn_in=10,
            )
        )  # bnn_hmc's UCI command: --num_burn_in_iterations=10
    if "b" in names:
        out.append(
            problem_case(
                "(b) concrete_0, mlp_regression_small, noise std 0.35",
                ProblemConfig("concrete_0", "mlp_regression_small", noise_std=0.35),
                int(200_000 * scale),
                300,
                dict(step_size=2e-3, trajectory_len=0.5, max_num_leapfrog_steps=5000),
            )
        )
    if "c" in names:
        out.append(
            problem_case(
                "(c) MNIST-160, mlp_classification",
                ProblemConfig(
                    "mnist", "mlp_classification", subset_train_to=160, data_dir=data_dir
                ),
                int(60_000 * scale),
                200,
                dict(step_size=5e-4, trajectory_len=0.1, max_num_leapfrog_steps=2000),
            )
        )
    if "d" in names:
        out.append(linear_case(int(100_000 * scale), 300))
    return out


def print_case(name: str, result: dict) -> None:
    """One case's table: each row's figures and its ratio to the paper's fixed HMC."""
    rows = result["rows"]
    print(
        f"\n{name}: {result['budget']:,} sampling gradient evaluations per chain, "
        f"{result['num_burn_in']} burn-in iterations"
    )
    print(
        f"{'sampler':<14} {'ESS/1k grads min':>16} {'median':>8} {'min/fixed':>9} "
        f"{'within min':>10} {'median':>8} {'burn-in grads':>13} {'burn-in div':>11} "
        f"{'R-hat max':>9} {'kept':>6} {'seconds':>8} {'init grads':>10}"
    )
    base = rows["fixed"]["min_per_1000"] if "fixed" in rows else float("nan")
    base = base if base > 0 else float("nan")
    for row, r in rows.items():
        print(
            f"{row:<14} {r['min_per_1000']:16.3f} {r['median_per_1000']:8.3f} "
            f"{r['min_per_1000'] / base:9.2f} "
            f"{r.get('within_min_per_1000', float('nan')):10.3f} "
            f"{r.get('within_median_per_1000', float('nan')):8.3f} "
            f"{r['burn_in_gradients']:13,d} "
            f"{r['burn_in_divergent']:11.1%} {r['rhat_max']:9.3f} {r['kept']:6d} "
            f"{r['seconds']:8.1f} {r.get('init_gradients', 0):10,d}"
        )
    if "blackjax" in rows:
        for row in [n for n in rows if n not in ("fixed", "blackjax")]:
            ratio = rows["blackjax"]["min_per_1000"] / rows[row]["min_per_1000"]
            print(
                f"gradients per effective sample, {row} / BlackJAX NUTS: {ratio:.2f} "
                "(target <= 1.5)"
            )


def combine(paths: list[str]) -> None:
    """Print the tables of several result files (e.g. cases or rows run in parallel)."""
    merged: dict = {}
    for path in paths:
        with open(path) as f:
            for name, result in json.load(f).items():
                entry = merged.setdefault(name, {**result, "rows": {}})
                entry["rows"].update(result["rows"])
    order = (
        "fixed",
        "mass",
        "mass-tau1",
        "chees",
        "nuts",
        "auto",
        "mclmc",
        "mclmc-adjusted",
        "auto-ensemble",
        "mclmc-ensemble",
        "blackjax",
    )
    for name in sorted(merged):
        rows = merged[name]["rows"]
        merged[name]["rows"] = {
            k: rows[k]
            for k in sorted(rows, key=lambda k: (order.index(k) if k in order else len(order), k))
        }
        print_case(name, merged[name])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["a", "b", "c", "d"])
    parser.add_argument(
        "--budget-scale", type=float, default=1.0, help="multiply every case's gradient budget"
    )
    parser.add_argument(
        "--samplers",
        nargs="+",
        default=list(SAMPLERS),
        choices=SAMPLERS,
        help="rows to run (fixed is the reference of the ratio column)",
    )
    parser.add_argument(
        "--trajectory-len",
        type=float,
        default=3.0,
        help="τ of the adaptive HMC rows (mass: jittered fractions of it)",
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="of the chains' keys (the initial positions' is seed + 1)",
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--combine",
        nargs="+",
        default=None,
        metavar="JSON",
        help="print the tables of these result files and exit",
    )
    parser.add_argument(
        "--row-name",
        default=None,
        help="store a single adaptive row under this name (e.g. mass-tau1)",
    )
    parser.add_argument(
        "--mclmc",
        default=None,
        metavar="SETTINGS",
        help="settings of the mclmc rows other than their defaults, as "
        "'name=value,...' (e.g. preconditioner=fisher)",
    )
    args = parser.parse_args()
    if args.combine:
        combine(args.combine)
        return
    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({platform.machine()}), "
        f"{NUM_CHAINS} chains per sampler"
    )
    results = {}
    key = jax.random.PRNGKey(args.seed)
    mclmc_settings = {}
    for item in args.mclmc.split(",") if args.mclmc else []:
        name, _, value = item.partition("=")
        kind = {f.name: f.type for f in dataclasses.fields(mclmc.Config)}[name]
        mclmc_settings[name] = (
            value
            if "str" in str(kind)
            else (
                value == "True"
                if "bool" in str(kind)
                else float(value)
                if "float" in str(kind)
                else int(value)
            )
        )
    for case in cases(args.cases, args.budget_scale, args.data_dir):
        case.init_seed = args.seed + 1

        def hmc_row(case=case, num_burn_in=case.num_burn_in, **settings):
            config = hmc.Config(
                num_iterations=10**7, num_burn_in=num_burn_in, num_chains=NUM_CHAINS, **settings
            )
            return run_method(case, hmc.build(case.log_posterior, config), num_burn_in, key)

        adaptive = dict(
            step_size=1e-3, trajectory_len=args.trajectory_len, max_num_leapfrog_steps=1000
        )

        def mclmc_row(case=case, init=None, **settings):
            config = mclmc.Config(
                num_iterations=10**7,
                num_burn_in=case.mclmc_burn_in,
                num_chains=NUM_CHAINS,
                **mclmc_settings,
                **settings,
            )
            return run_method(
                case,
                mclmc.build(case.log_posterior, config),
                case.mclmc_burn_in,
                key,
                mclmc.GRADIENTS_PER_STEP,
                init=init,
            )

        def auto_row(case=case, init=None):
            config = hmc.Config(
                num_iterations=10**7, num_burn_in=case.num_burn_in, num_chains=NUM_CHAINS
            )
            return run_method(
                case, hmc.build(case.log_posterior, config), case.num_burn_in, key, init=init
            )

        members = {}

        def ensemble(case=case, members=members):
            if not members:
                folder = tempfile.mkdtemp(prefix="bnnkit_efficiency_ensemble_")
                members["init"] = ensemble_members(case, args.seed, folder)
            return members["init"]

        runners = {
            "fixed": lambda case=case, hmc_row=hmc_row: hmc_row(
                adapt="step", num_burn_in=case.fixed_burn_in or case.num_burn_in, **case.fixed
            ),
            "mass": lambda hmc_row=hmc_row, adaptive=adaptive: hmc_row(adapt="mass", **adaptive),
            "chees": lambda hmc_row=hmc_row, adaptive=adaptive: hmc_row(adapt="chees", **adaptive),
            "nuts": lambda case=case: run_method(
                case,
                nuts.build(
                    case.log_posterior,
                    nuts.Config(
                        step_size=1e-3,
                        num_iterations=10**7,
                        num_burn_in=case.num_burn_in,
                        num_chains=NUM_CHAINS,
                    ),
                ),
                case.num_burn_in,
                key,
            ),
            "auto": auto_row,
            "mclmc": mclmc_row,
            "mclmc-adjusted": lambda mclmc_row=mclmc_row: mclmc_row(adjusted=True),
            "auto-ensemble": lambda auto_row=auto_row, ensemble=ensemble: auto_row(init=ensemble()),
            "mclmc-ensemble": lambda mclmc_row=mclmc_row, ensemble=ensemble: mclmc_row(
                init=ensemble()
            ),
            "blackjax": lambda case=case: blackjax_nuts(case, case.num_burn_in, key),
        }
        rows = {}
        for name in args.samplers:
            if name == "blackjax" and not case.name.startswith("(d)"):
                continue  # the peer row belongs to the linear case
            if name in ENSEMBLE_ROWS and case.config is None:
                continue  # no dataset to train an ensemble on (and one mode)
            rows[args.row_name or name] = runners[name]()
            print(f"  {name}: {rows[args.row_name or name]}", flush=True)
        results[case.name] = {"budget": case.budget, "num_burn_in": case.num_burn_in, "rows": rows}
        print_case(case.name, results[case.name])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
