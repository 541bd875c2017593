"""The three outcomes of the verdict on synthetic chains: converged, mixed-multimodal (each chain
mixed, the chains in K modes) and not-mixed (the failing chains named), in regression and
classification shapes; and the words it uses for a plain density, from Python and the CLI.
Then the calibration of the reference levels (certified, reproducible, not a reference) on runs
of real samplers, at the end.

The synthetic chains are stationary AR(1) series with autocorrelation ρ = 0.3 (ESS ≈ N(1 − ρ)/
(1 + ρ) ≈ 0.54 N), N = 500 draws per chain: every check that should pass has a margin far
beyond its own noise (per chain an ESS of about 270 against the 50 asked on 95 % of the
quantities; R-hat within chains of that ESS is below 1.1 on ≥ 99.9 % of them, see
:mod:`bnnkit.metrics.within_chain`), and every check that should fail does by many standard
errors, as each test says.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import bnnkit
from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.inference import hmc
from bnnkit.metrics import convergence, modes, within_chain
from bnnkit.metrics.findings import THRESHOLDS
from bnnkit.metrics.vocabulary import PARAMETERS_CLI, PARAMETERS_PYTHON
from bnnkit.problem import ProblemConfig

NOISE = 0.5  # the synthetic regression's observation noise


def ar1(shape, rho=0.3, seed=0):
    """Stationary AR(1) draws with unit marginal variance along axis 1 of ``shape``."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape)
    out[:, 0] = rng.normal(size=(shape[0], *shape[2:]))
    for t in range(1, shape[1]):
        out[:, t] = rho * out[:, t - 1] + np.sqrt(1 - rho**2) * rng.normal(
            size=(shape[0], *shape[2:])
        )
    return out


def regression(means, spread=0.2, chains=4, samples=500, points=40, seed=0):
    """Per-draw predictions ``mean_c + spread · AR(1)`` on ``points`` test inputs, and their
    Gaussian log densities at targets y = 0."""
    f = np.asarray(means, np.float64)[:, None, None] + spread * ar1(
        (chains, samples, points), seed=seed
    )
    log_density = -0.5 * (f / NOISE) ** 2 - np.log(NOISE) - 0.5 * np.log(2 * np.pi)
    return f, log_density


def test_iid_draws_converge_in_one_mode():
    f, log_density = regression([0.0] * 4)
    v = convergence.verdict(f, log_density=log_density, acceptance_rate=0.9, num_divergent=0)
    assert v["level"] == "converged" and v["converged"] and not v["problems"]
    assert v["modes"] == {"count": 1, "groups": [[0, 1, 2, 3]]}
    assert all(w["mixed"] and w["lpd"]["flat"] for w in v["within"])
    assert v["summary"] == "each chain mixed and the 4 chains agree"


def test_each_chain_in_one_mode_of_a_mixture_is_mixed_multimodal():
    # A two-component mixture whose components sit 4 posterior sds (0.8 / 0.2) apart; chains
    # 0 and 2 stay in one, 1 and 3 in the other. Within each chain everything passes; across
    # chains R-hat is ~2.5 on every prediction (B/W ≈ 250 · 0.8² / 0.04), so between fails.
    f, log_density = regression([0.0, 0.8, 0.0, 0.8])
    v = convergence.verdict(f, log_density=log_density, acceptance_rate=0.9, num_divergent=0)
    assert [w["mixed"] for w in v["within"]] == [True] * 4
    assert v["rhat_share_below"] == 0.0
    assert v["level"] == "mixed-multimodal" and not v["converged"]
    assert v["modes"] == {"count": 2, "groups": [[0, 2], [1, 3]]}
    assert v["summary"] == (
        "each chain mixed; the chains sit in 2 distinct modes (chains "
        "0, 2 | 1, 3); the model average pools them, a valid reference "
        "for it"
    )
    assert any("2 distinct modes" in p for p in v["problems"])
    # Chains in different modes have no pooled ESS to ask for; only the modes are reported.
    assert not any("ESS" in p for p in v["problems"])


def test_a_drifting_chain_is_not_mixed_and_named():
    # Chain 3's predictions drift by 3 of their sds (0.6) over its run: its quarters' means
    # differ by ~0.45 against a within-piece sd of ~0.2 (R-hat ≫ 1.1 on every prediction),
    # and its halves' model averages differ by ~0.15 nats per point against a standard error
    # of ~0.005. The other chains are stationary.
    f, log_density = regression([0.0] * 4)
    f[3] += np.linspace(0.0, 0.6, 500)[:, None]
    log_density[3] = -0.5 * (f[3] / NOISE) ** 2 - np.log(NOISE) - 0.5 * np.log(2 * np.pi)
    v = convergence.verdict(f, log_density=log_density, acceptance_rate=0.9, num_divergent=0)
    assert [w["mixed"] for w in v["within"]] == [True, True, True, False]
    assert v["level"] == "not-mixed" and not v["converged"]
    assert v["summary"] == "chain 3 failed the within-chain checks"
    assert not v["within"][3]["lpd"]["flat"] and v["within"][3]["rhat_share_below"] == 0.0
    named = [p for p in v["problems"] if "chain 3" in p]
    assert any("split R-hat within chain 3" in p for p in named)
    assert any("running log predictive density of chain 3" in p for p in named)
    assert not any("chain 0" in p or "chain 1" in p or "chain 2" in p for p in v["problems"])
    assert any("--until-converged" in a for a in v["advice"])


def test_classification_probabilities_converge_or_split_into_modes():
    # Probabilities of 3 classes from logits (2, 0, -1) per test point plus AR(1) noise of sd
    # 0.3; the label is class 0. A second mode moves the logits to (0, 2, -1): the class-0
    # probability moves from ~0.84 to ~0.11, tens of sds, so those chains disagree.
    def probs(logits, seed):
        z = np.asarray(logits)[None, None, None, :] + 0.3 * ar1((2, 500, 30, 3), seed=seed)
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    a, b = probs([2.0, 0.0, -1.0], 1), probs([0.0, 2.0, -1.0], 2)
    same = np.concatenate([a, probs([2.0, 0.0, -1.0], 3)])
    v = convergence.verdict(same, log_density=np.log(same[..., 0]))
    assert v["level"] == "converged" and v["modes"]["count"] == 1
    split = np.concatenate([a, b])
    v = convergence.verdict(split, log_density=np.log(split[..., 0]))
    assert [w["mixed"] for w in v["within"]] == [True] * 4
    assert v["level"] == "mixed-multimodal"
    assert v["modes"] == {"count": 2, "groups": [[0, 1], [2, 3]]}


@pytest.mark.parametrize("seed", range(6))
def test_one_mode_exactly_when_the_between_chain_check_passes(seed):
    # Chains at random offsets of 0 to 0.2 of the spread: near the R-hat threshold, where the
    # grouping's rule and the between-chain check could part ways if they were not the same.
    rng = np.random.default_rng(seed)
    f, _ = regression(rng.uniform(0.0, 0.2, size=4) * 0.2, seed=seed)
    v = convergence.verdict(f)
    stats = modes.HalfStatistics.of(f)
    assert (v["modes"]["count"] == 1) == (v["rhat_share_below"] >= convergence.RHAT_SHARE)
    for group in v["modes"]["groups"]:  # every mode passes the rule by itself
        assert modes.agree(
            stats, group, threshold=convergence.RHAT_THRESHOLD, share=convergence.RHAT_SHARE
        )[0]


def test_stationary_chains_keep_a_flat_running_lpd():
    # 200 stationary chains whose draws spread as widely as the noise (so 4 standard errors,
    # ~0.11 nats, are far above the 0.01 floor and the rule rests on its standard error):
    # drift / se should be close to N(0, 1). Its sd over 200 chains is within ±5 % of the
    # truth at one standard error, so [0.8, 1.2] fails only for a miscalibrated se;
    # P(|z| > 4) ≈ 6e-5 per chain, and 3 or more flagged has probability ~1e-9 (the ESS
    # estimate's own error fattens the tail a little, which the bound leaves room for).
    _, log_density = regression([0.0] * 200, spread=1.0, chains=200, samples=200, points=20, seed=5)
    checks = [within_chain.lpd_drift(log_density[c]) for c in range(200)]
    z = np.array([c.drift / c.drift_se for c in checks])
    assert 0.8 < z.std() < 1.2, z.std()
    assert sum(not c.flat for c in checks) <= 2


def test_words_for_a_plain_density_from_python_and_from_the_command_line():
    drifting = ar1((4, 400, 6))
    drifting[1] += np.linspace(0.0, 3.0, 400)[:, None]
    python = convergence.verdict(drifting, vocabulary=PARAMETERS_PYTHON)
    cli = convergence.verdict(drifting, vocabulary=PARAMETERS_CLI)
    python_text = " ".join(python["problems"] + python["advice"] + [python["summary"]])
    cli_text = " ".join(cli["problems"] + cli["advice"])
    assert python["level"] == cli["level"] == "not-mixed"
    for words in (python_text, cli_text):
        assert "parameters" in words
        assert "test prediction" not in words and "function" not in words
    assert "--" not in python_text and "num_iterations" in python_text
    assert "--num-iterations" in cli_text


def test_sample_speaks_of_parameters_and_config_fields():
    # Two modes at ±5 with unit sds: crossing costs ~12 nats, which HMC's short trajectories
    # do not climb in 500 iterations; chains start two in each mode.
    def log_density(p):
        import jax.numpy as jnp

        x = p["x"]
        return jnp.logaddexp(-0.5 * (x - 5.0) ** 2, -0.5 * (x + 5.0) ** 2).sum()

    import jax.numpy as jnp

    config = hmc.Config(
        step_size=0.3,
        trajectory_len=1.0,
        adapt="mass",
        num_chains=4,
        num_iterations=600,
        num_burn_in=100,
        seed=1,
    )
    start = {"x": jnp.array([[-5.0], [5.0], [-5.0], [5.0]])}
    verdict = bnnkit.sample(log_density, start, config).convergence
    assert verdict["level"] == "mixed-multimodal"
    assert verdict["modes"]["groups"] == [[0, 2], [1, 3]]
    text = " ".join(verdict["problems"] + verdict["advice"] + [verdict["summary"]])
    assert "of parameters" in text and "num_chains" in text and "num_iterations" in text
    assert "--" not in text and "test prediction" not in text and "model average" not in text


# Calibration of the reference levels (bnnkit.metrics.levels) on runs of real samplers: a
# linear model on yacht split 0 with the noise std fixed at 0.35 (standardised targets), whose
# posterior is Gaussian, so that every level has a known answer.
#
# - L0: tuned MCLMC's energy errors are Gaussian at its target, so the bulk's ratio to the
#   target is near 1 (a median of 10 steps' χ²₁/10, about 0.93) and spikes have probability
#   ~1e-16 per iteration; an untuned step 0.2 (no burn-in) reads tens of times the target.
# - L2: the halves' W₁ is the Monte Carlo error of their means: with fixed noise each half's
#   predictive is nearly Gaussian, so W₁ ≈ |Δμ_i| and E|Δμ_i| = √(2/π) sd_i √(1/ESS_a +
#   1/ESS_b) (sd_i the spread of the draws' means at point i, ESS of each half the sum of its
#   chains'). The long reference's measured W₁ is checked against that prediction; with 1,200
#   draws per chain it is about a fifth of the run's distance to its ensemble, 40 % of
#   :data:`bnnkit.metrics.halves.RATIO`; a tenth of the draws has √10 times the error, past it.
# - L1: a tenth of the draws (120 per chain, each chain's ESS at its 5 % slowest prediction
#   about 40 to 100) is near the within-chain bar of 50; the long run's (800 to 1,000) far
#   above it.

LINEAR = ProblemConfig("yacht_0", "linear", noise_std=0.35)


def mclmc_levels(run_dir, capsys, *flags):
    """Run ``bnnkit mclmc`` with ``flags`` on the linear problem; its levels and its last
    printed line."""
    argv = ["mclmc", "--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.35"]
    argv += ["--num-chains", "2", *flags, "--dir", str(run_dir), "--no-progress"]
    assert main(argv) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    return evaluate(run_dir, write=False)["levels"], last


def test_an_over_stepped_mclmc_fails_numerics(tmp_path, capsys):
    over, last = mclmc_levels(
        tmp_path / "over",
        capsys,
        "--num-iterations",
        "80",
        "--num-burn-in",
        "0",
        "--step-size",
        "0.2",
    )
    assert over["L0"]["status"] == "fail" and over["verdict"] == "not a reference"
    figures = over["L0"]["figures"]
    assert min(figures["energy_ratio"]) > 10 * THRESHOLDS.max_energy_ratio  # ~30× on yacht
    assert min(figures["spike_share"]) > 0.5
    # The last line of the run's output says so, in the flags of bnnkit mclmc.
    assert last.startswith("verdict: not a reference (L0 FAIL")
    assert "--energy-var-end" in last and "--num-burn-in" in last
    # A run whose log holds no energy errors (as MCLMC's did before it logged them) still
    # evaluates, with level 0 "not recorded" and the other levels as they are.
    log = tmp_path / "over" / "metrics.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text(
        "".join(
            json.dumps({k: v for k, v in line.items() if k != "energy_var"}) + "\n"
            for line in lines
        )
    )
    older = evaluate(tmp_path / "over", write=False)["levels"]
    assert older["L0"]["status"] == "not recorded" and "L0" in older["failed"]
    assert older["L1"] == over["L1"] and older["L2"] == over["L2"]


def predicted_w1(folder, kept):
    """The halves' W₁ the Monte Carlo error of their means predicts, from each chain's ESS, on
    the first ``kept`` draws of each chain."""
    import math

    from bnnkit.evaluation.predictions import run_prediction
    from bnnkit.metrics import mcmc
    from bnnkit.runs.stored import load_run

    stored = load_run(folder / "chains", network=True)
    f = run_prediction(
        stored.record, stored.problem, stored.posterior, stored.problem.dataset.x_test
    ).per_sample[:, :kept]
    ess = np.stack([mcmc.ess_mean(chain[None], split=False) for chain in f])
    half = f.shape[0] // 2
    spread = f.reshape(-1, f.shape[-1]).std(axis=0)
    error = spread * np.sqrt(1 / ess[:half].sum(0) + 1 / ess[half:].sum(0))
    return float(np.mean(math.sqrt(2 / math.pi) * error))


@pytest.mark.slow
def test_a_long_fixed_noise_reference_is_certified_and_a_tenth_of_it_is_not(tmp_path):
    from bnnkit.experiments.reference import Config, reference

    folder = tmp_path / "ref"

    def made(num_samples, resume):
        config = Config(members=4, num_tuning=200, num_samples=num_samples, ensemble_steps=200)
        return reference(LINEAR, config, folder, resume=resume, progress=False).evaluation

    tenth = made(120, False)["levels"]  # the first 120 draws of the long chains, bit for bit
    tenth_w1 = predicted_w1(folder, 120)
    long = made(1200, True)["levels"]
    assert long["verdict"] == "certified", long["problems"]
    # Tuned, the energy errors sit at their target, without a spike (see above).
    t = THRESHOLDS
    assert all(0.5 < r < t.max_energy_ratio for r in long["L0"]["figures"]["energy_ratio"])
    assert max(long["L0"]["figures"]["spike_share"]) <= t.max_spike_share
    assert tenth["verdict"] != "certified" and "L2" in tenth["failed"]
    for found, predicted in ((tenth, tenth_w1), (long, predicted_w1(folder, 1200))):
        # The halves' distance is their Monte Carlo error (within a factor 2: the 31 test
        # points of a 7-parameter model are about 7 independent ones).
        assert 0.5 < found["L2"]["figures"]["halves"]["wasserstein_1"] / predicted < 2.0
    l1, l2, l3 = (long[name]["figures"] for name in ("L1", "L2", "L3"))
    ratio = l2["halves"]["wasserstein_1"] / l2["ensemble"]["wasserstein_1"]
    assert ratio < 0.6 * t.halves_ratio  # about 0.2: a margin of 2.5 on the threshold
    assert l2["ensemble"]["run"].endswith("ensemble")
    assert all(c["ess_p5"] > 4 * t.min_chain_ess for c in l1["chains"])
    assert sum(l1["rhat_histogram"]["counts"]) == 31
    assert abs(l3["lpd"]["change"]) < t.lpd_tolerance
