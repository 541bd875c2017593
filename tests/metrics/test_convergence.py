"""The sampler's health (stuck, unstable, capped trajectories) in the warnings and in level 0,
a climbing log posterior in level 1, and the one verdict in evaluate's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnnkit.cli import main
from bnnkit.command_flags import spelling as flag_spelling
from bnnkit.metrics.numerics import numerics
from bnnkit.metrics.sampler_health import capped_warning, sampler_warning
from bnnkit.metrics.stationarity import LONGER_START, stationarity


def independent(chains=4, samples=500, points=30, seed=0):
    return np.random.default_rng(seed).normal(size=(chains, samples, points))


def test_capped_trajectories_are_named_with_the_advice_that_applies():
    hmc = capped_warning(970, 1000, "hmc", flag_spelling("hmc"))
    assert hmc.startswith("970 of 1000 iterations after burn-in (97%) hit the cap")
    assert "--max-num-leapfrog-steps" in hmc and "--max-tree-depth" not in hmc
    assert "--max-tree-depth" in capped_warning(1, 1000, "nuts", flag_spelling("nuts"))
    assert "--max-tree-depth" not in capped_warning(1, 1000, "nuts", flag_spelling("reference"))
    assert capped_warning(0, 1000, "hmc") is None
    assert capped_warning(0, 0, "nuts") is None


@pytest.mark.slow
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


def test_a_climbing_log_posterior_fails_level_one_and_says_what_to_do():
    # A rise of 4 marginal sds over the trace: the quarters' means ~3 apart, against a standard
    # error of ~sqrt(2 · 3 / 100) ≈ 0.25 for ρ = 0.5, so z ≈ 12 ≫ 4 in the two rising chains;
    # the settled ones (AR(1), ρ = 0.5) stay within 4 standard errors.
    trace = ar1(4, 400, 0.5, seed=4)
    trace[:2] += np.linspace(0.0, 4.0, 400)
    found = stationarity(independent(samples=400), functionals={"log posterior": trace})
    assert [c["stationary"] for c in found.figures["chains"]] == [False, False, True, True]
    assert any("log posterior of chains 0 and 1 drifts" in p for p in found.problems)
    assert found.remedies[0] == LONGER_START
    assert "--init-checkpoint" in found.remedies[0].text(flag_spelling("hmc"))
    settled = stationarity(
        independent(chains=2, samples=400), functionals={"log posterior": trace[2:]}
    )
    assert settled.status == "pass" and settled.remedies == ()


def test_stuck_advice_follows_the_step_size_the_chains_ran_at():
    from bnnkit.inference.base import Loop
    from bnnkit.runs.tally import SamplerTally

    # The README's old first example: --step-size 1e-5, adaptation raised it to 1.4e-4 in 10
    # burn-in iterations, then acceptance 0.027 with 279 of 360 transitions divergent.
    hmc = flag_spelling("hmc")
    raised = sampler_warning(0.027, 279, 360, step_size=1.4e-4, given_step_size=1e-5, spell=hmc)
    assert "a step size that burn-in does not raise: a longer --num-burn-in" in raised
    assert "(burn-in raised it to 0.00014 from 1e-05)" in raised
    assert "a smaller --step-size" not in raised
    # A step size that was not raised (or no adaptation): a smaller one is the advice.
    kept = sampler_warning(0.027, 279, 360, step_size=1e-5, given_step_size=1e-5, spell=hmc)
    assert "a smaller step: a smaller --step-size" in kept and "ran at 1e-05" in kept
    # Level 0 says the same, as data: a step size burn-in does not raise.
    kept_lines = [
        {"divergent": [True, False], "acceptance_rate": [0.03, 0.03], "step_size": [1.4e-4, 1.4e-4]}
    ] * 50
    found = numerics(kept_lines, "hmc", {"step_size": 1e-5})
    assert found.remedies[0].helps == "a step size that burn-in does not raise"
    assert ("step_size", "smaller") not in found.remedies[0].changes
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
    assert "burn-in raised it to 0.00014" in tally.warning()
