"""The convergence verdict: each criterion fails when, and only when, it should."""

from __future__ import annotations

import json

import numpy as np

from bnnkit.cli import main
from bnnkit.metrics import convergence


def independent(chains=4, samples=500, points=30, seed=0):
    return np.random.default_rng(seed).normal(size=(chains, samples, points))


def test_mixed_chains_converge():
    # Independent draws: split R-hat - 1 is O(1/n) (n = 250 per half-chain, so ~0.004 ± 0.005),
    # far below 0.05, and the ESS is ~2,000 ≫ 100; no criterion can fail by chance.
    v = convergence.verdict(independent(), acceptance_rate=0.8, num_divergent=0)
    assert v["converged"] and not v["problems"] and not v["advice"]
    assert v["rhat_share_below"] == 1.0 and v["ess_min"] > 1000


def test_chains_in_different_places_do_not_converge():
    draws = independent() + 3.0 * np.arange(4)[:, None, None]  # means 3 posterior sds apart
    v = convergence.verdict(draws)
    assert not v["converged"]
    assert any("split R-hat" in p for p in v["problems"])
    assert any("more iterations" in a for a in v["advice"])


def test_too_few_effective_samples_do_not_converge():
    # AR(1) chains with ρ = 0.995 from their stationary distribution: agreeing, but the ESS of
    # 4 × 500 draws is about 2000 (1 - ρ)/(1 + ρ) ≈ 5, far below 100.
    rng = np.random.default_rng(1)
    rho, draws = 0.995, np.empty((4, 500, 10))
    draws[:, 0] = rng.normal(size=(4, 10))
    for t in range(1, 500):
        draws[:, t] = rho * draws[:, t - 1] + np.sqrt(1 - rho**2) * rng.normal(size=(4, 10))
    v = convergence.verdict(draws)
    assert not v["converged"] and v["ess_min"] < convergence.MIN_ESS
    assert any("more chains" in a for a in v["advice"])


def test_stuck_or_diverging_samplers_and_unfinished_runs_are_named():
    draws = independent()
    stuck = convergence.verdict(draws, acceptance_rate=0.01, num_divergent=0)
    assert not stuck["converged"] and "stuck" in stuck["problems"][0]
    diverging = convergence.verdict(draws, acceptance_rate=0.8, num_divergent=21)
    assert not diverging["converged"] and "21 divergences" in diverging["problems"][0]
    assert convergence.verdict(draws, num_divergent=20)["converged"]  # exactly 1 % is allowed
    unfinished = convergence.verdict(draws, finished=False)
    assert not unfinished["converged"] and "--resume" in unfinished["advice"][0]
    one_chain = convergence.verdict(independent(chains=1, samples=2000))
    assert not one_chain["converged"] and "2 chains" in one_chain["advice"][-1]


def test_capped_trajectories_are_named_with_the_advice_that_applies():
    hmc = convergence.capped_warning(970, 1000, "hmc")
    assert hmc.startswith("970 of 1000 iterations after burn-in (97%) hit the cap")
    assert "--max-num-leapfrog-steps" in hmc and "--max-tree-depth" not in hmc
    assert "--max-tree-depth" in convergence.capped_warning(1, 1000, "nuts")
    assert convergence.capped_warning(0, 1000, "hmc") is None
    assert convergence.capped_warning(0, 0, "nuts") is None


def test_a_run_forced_to_hit_the_cap_says_so(tmp_path, capsys):
    # τ = 10 in units of the adapted metric, at most 2 leapfrog steps: nearly every iteration
    # after burn-in wants more and is capped. The share reaches the record, the log, the
    # sampler's warning in --json and the printed table.
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "hmc",
                "--dataset",
                "yacht_0",
                "--model",
                "linear",
                "--noise-std",
                "0.35",
                "--adapt",
                "mass",
                "--trajectory-len",
                "10",
                "--max-num-leapfrog-steps",
                "2",
                "--num-iterations",
                "40",
                "--num-burn-in",
                "20",
                "--num-chains",
                "2",
                "--dir",
                str(run_dir),
                "--no-progress",
                "--no-evaluate",
            ]
        )
        == 0
    )
    record = json.loads((run_dir / "run.json").read_text())
    assert record["capped"]["share"] > 0.5 and record["capped"]["num_capped"] > 20
    log = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert (
        sum(sum(line["capped"]) for line in log if not line["burn_in"])
        == (record["capped"]["num_capped"])
    )
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sampler"]["num_capped"] == record["capped"]["num_capped"]
    warning = result["sampler"]["warning"]
    assert "hit the cap on trajectory length" in warning and "--max-num-leapfrog-steps" in warning
    assert main(["evaluate", str(run_dir)]) == 0
    assert "capped trajectories (after burn-in)" in capsys.readouterr().out


def test_evaluate_json_carries_the_one_verdict_and_its_thresholds(tmp_path, capsys):
    # A run of chains is judged once, by the levels: --json holds their verdict with the
    # thresholds it applied and its advice in bnnkit hmc's flags, and no other verdict.
    run_dir = tmp_path / "run"
    args = ["hmc", "--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.35"]
    args += ["--step-size", "1e-2", "--trajectory-len", "0.05", "--num-iterations", "10"]
    args += ["--num-burn-in", "2", "--num-chains", "2", "--dir", str(run_dir), "--no-progress"]
    assert main([*args, "--no-evaluate"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "convergence" not in result
    verdict = result["levels"]
    assert verdict["thresholds"]["max_divergent_share"] == 0.01
    assert verdict["verdict"] == "not a reference"  # 8 kept draws per chain: too few for L1
    assert verdict["advice"] and all("_" not in a.split(":")[-1] for a in verdict["advice"])
    assert main(["evaluate", str(run_dir)]) == 0
    assert "not a reference" in capsys.readouterr().out


def ar1(chains, samples, rho, seed):
    """Stationary AR(1) traces with unit marginal variance: a settled chain's log posterior."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(chains, samples)) * np.sqrt(1 - rho**2)
    out = np.empty((chains, samples))
    out[:, 0] = rng.normal(size=chains)
    for t in range(1, samples):
        out[:, t] = rho * out[:, t - 1] + noise[:, t]
    return out


def test_settled_chains_are_not_rising():
    # Stationary AR(1), ρ = 0.5 (ESS ≈ n/3 = 67 per half): the rise in standard errors is
    # close to N(0, 1), so P(z > 4) ≈ 3e-5 per chain; of 200 chains 0.006 are expected to
    # fire, and 3 or more has probability ~1e-9. (The ESS estimate's own error fattens the
    # tail a little, which this bound leaves room for.)
    rising, z = convergence.rising_chains(ar1(200, 400, 0.5, seed=3))
    assert rising.sum() <= 2, np.sort(z)[-5:]
    assert abs(float(np.mean(z))) < 0.5  # centred: no drift is made up


def test_climbing_chains_are_rising_and_the_verdict_says_what_to_do():
    # A rise of 4 marginal sds over the trace: half means ~2 apart, against a standard error
    # of ~sqrt(2 · 3 / 200) ≈ 0.17 for ρ = 0.5, so z ≈ 12 ≫ 4 in every chain.
    trace = ar1(4, 400, 0.5, seed=4)
    trace[:2] += np.linspace(0.0, 4.0, 400)
    rising, z = convergence.rising_chains(trace)
    assert rising.tolist() == [True, True, False, False], z
    v = convergence.verdict(
        independent(), acceptance_rate=0.8, num_divergent=0, log_posterior=trace
    )
    assert not v["converged"] and v["rising_chains"] == 2
    assert any("still rising in 2 of 4 chains" in p for p in v["problems"])
    assert any("--init-checkpoint" in a for a in v["advice"])
    settled = convergence.verdict(
        independent(), acceptance_rate=0.8, num_divergent=0, log_posterior=trace[2:]
    )
    assert settled["converged"] and settled["rising_chains"] == 0
    assert convergence.verdict(independent())["rising_chains"] is None


def test_stuck_advice_follows_the_step_size_the_chains_ran_at():
    from bnnkit.inference.base import Loop
    from bnnkit.metrics.convergence import sampler_warning
    from bnnkit.runs.tally import SamplerTally

    # The README's old first example: --step-size 1e-5, adaptation raised it to 1.4e-4 in 10
    # burn-in iterations, then acceptance 0.027 with 279 of 360 transitions divergent.
    raised = sampler_warning(0.027, 279, 360, step_size=1.4e-4, given_step_size=1e-5, burn_in=10)
    assert "burn-in raised the step size to 0.00014 (from --step-size 1e-05)" in raised
    assert "(it had 10 iterations)" in raised
    assert "use a smaller --step-size" not in raised
    # A step size that was not raised (or no adaptation): a smaller one is the advice.
    kept = sampler_warning(0.027, 279, 360, step_size=1e-5, given_step_size=1e-5, burn_in=10)
    assert "use a smaller --step-size (the chains ran at 1e-05)" in kept
    draws = np.random.default_rng(0).normal(size=(4, 50, 3))
    v = convergence.verdict(
        draws,
        acceptance_rate=0.027,
        num_divergent=150,
        step_size=1.4e-4,
        given_step_size=1e-5,
        burn_in=10,
    )
    assert any(a.startswith("burn-in raised the step size") for a in v["advice"])
    assert not any("use a smaller --step-size" in a for a in v["advice"])
    # The run's tally passes the logged step size and the given one.
    tally = SamplerTally(Loop("iterations", 40, num_members=2, burn_in=10), given_step_size=1e-5)
    for unit in range(40):
        tally.add(
            {
                "burn_in": unit < 10,
                "acceptance_rate": [0.0, 0.05],
                "divergent": [True, True],
                "step_size": [1.2e-4, 1.6e-4],
            }
        )
    assert "burn-in raised the step size to 0.00014" in tally.warning()
