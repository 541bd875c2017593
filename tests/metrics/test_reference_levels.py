"""The four reference levels on synthetic inputs, one module each: L0's numerics from log lines,
L1's stationary chains, L2's halves and their W₁ on a grid, L3's plateau, the verdict they
make together, and how tables print them (runs of real samplers are in
``test_verdict_levels.py``).

Synthetic chains are stationary AR(1) series (ρ = 0.3) unless a test adds a drift; each test
says why its margins are far beyond the noise of what it checks.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bnnkit.command_flags import spelling as flag_spelling
from bnnkit.evaluation.comparison import noise_floor
from bnnkit.metrics import halves, levels, numerics, plateau, stationarity
from bnnkit.metrics.findings import THRESHOLDS, Finding, not_recorded
from bnnkit.predict import Prediction
from bnnkit.report.tables import levels_rows


def ar1(shape, rho=0.3, seed=0):
    """Stationary AR(1) draws with unit marginal variance along axis 1 of ``shape``."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape)
    out[:, 0] = rng.normal(size=(shape[0], *shape[2:]))
    for t in range(1, shape[1]):
        out[:, t] = rho * out[:, t - 1] + math.sqrt(1 - rho**2) * rng.normal(
            size=(shape[0], *shape[2:])
        )
    return out


def regression(f, noise=1.0):
    """A regression prediction of per-draw means ``f`` (chains, samples, points) and a fixed
    noise std."""
    chains, samples, points = f.shape
    means = f.reshape(chains * samples, points)
    return Prediction("regression", means=means, stds=np.full_like(means, noise), per_sample=f)


# L2: W₁ on a grid


@pytest.mark.parametrize("shift", [0.01, 0.1, 1.0])
def test_w1_on_the_grid_is_the_shift_between_two_equal_gaussians(shift):
    # W₁(N(0, s²), N(δ, s²)) = |δ|; the grid's error is far below the smallest shift.
    w = halves.mixture_w1(
        np.zeros((1, 4)), 2 * np.ones((1, 4)), np.full((1, 4), shift), 2 * np.ones((1, 4))
    )
    assert np.allclose(w, shift, rtol=1e-3, atol=1e-5)


def test_w1_on_the_grid_agrees_with_many_draws_of_two_mixtures():
    # Two 3-component mixtures; 200,000 draws each put scipy's W₁ within about 0.005 of the
    # truth (its error scales as σ/√M), so the grid's value must be within 0.02.
    from scipy.stats import wasserstein_distance

    rng = np.random.default_rng(0)
    ma, sa = np.array([[-1.0], [0.5], [2.0]]), np.array([[0.5], [1.0], [0.3]])
    mb, sb = np.array([[-0.5], [0.5], [1.0]]), np.array([[0.7], [0.6], [0.4]])

    def draws(m, s):
        which = rng.integers(0, 3, 200_000)
        return m[which, 0] + s[which, 0] * rng.normal(size=200_000)

    sampled = wasserstein_distance(draws(ma, sa), draws(mb, sb))
    assert halves.mixture_w1(ma, sa, mb, sb)[0] == pytest.approx(sampled, abs=0.02)


def test_the_grid_is_as_good_as_one_32_times_finer():
    # Two halves of 300 draws each, means spread 0.3 and stds 1 to 1.1, 0.01 apart: the
    # module's claim of an error below 0.1 % of W₁.
    rng = np.random.default_rng(0)
    ma, mb = 0.3 * rng.normal(size=(2, 300, 20))
    sa, sb = 1 + 0.1 * rng.random((2, 300, 20))
    fine = halves.mixture_w1(ma, sa, mb + 0.01, sb, grid=32 * halves.W1_GRID)
    assert np.allclose(halves.mixture_w1(ma, sa, mb + 0.01, sb), fine, rtol=1e-3)


def test_halves_are_the_first_and_second_half_of_the_chains():
    assert halves.split_chains(1) is None
    assert halves.split_chains(4) == ([0, 1], [2, 3])
    f = np.arange(4)[:, None, None] + np.zeros((4, 3, 2))  # chain c predicts c
    whole, a, b = halves.averages(regression(f))
    assert a.means.mean() == 0.5 and b.means.mean() == 2.5 and whole.means.mean() == 1.5


def test_halves_that_agree_pass_and_halves_in_two_modes_fail_against_the_ensemble():
    # Chains' draws spread 0.2 around their mode; the ensemble sits 1.0 away. Agreeing halves
    # (4 chains of 500 draws, ESS ≈ 1,000 per half): their means differ by about 0.2/√500 ≈
    # 0.01, far below the ensemble's distance. Halves in modes 0.8 apart: W₁ ≈ 0.8 > 0.75 · 0.6
    # (the whole run's average sits 0.6 from the ensemble).
    y = np.zeros(20)
    same = regression(0.2 * ar1((4, 500, 20)))
    ensemble = regression(np.ones((4, 1, 20)))
    found = halves.reproducibility(same, y, ensemble, ensemble_run="ens")
    assert found.status == "pass" and found.figures["judged_against"] == "ensemble"
    assert (
        found.figures["halves"]["wasserstein_1"] < 0.05 < found.figures["ensemble"]["wasserstein_1"]
    )
    split = regression(0.2 * ar1((4, 500, 20)) + np.array([0.0, 0.0, 0.8, 0.8])[:, None, None])
    found = halves.reproducibility(split, y, ensemble)
    apart = found.figures["halves"]["wasserstein_1"]
    # The modes' shift, within the halves' own error (about 0.01, above) three times over.
    assert found.status == "fail" and abs(apart - 0.8) < 0.03
    assert f"{apart:.3g} in W₁" in found.problems[0]


def test_without_an_ensemble_the_halves_are_judged_against_the_predictive_scale():
    y = np.zeros(20)
    found = halves.reproducibility(regression(0.2 * ar1((4, 500, 20))), y)
    assert found.status == "pass" and found.figures["ensemble"] is None
    assert found.figures["note"].startswith("no ensemble to compare")
    assert found.figures["tolerances"]["wasserstein_1"] == pytest.approx(
        THRESHOLDS.absolute_w1 * found.figures["scale"]
    )
    one = halves.reproducibility(regression(0.2 * ar1((1, 500, 20))), y)
    assert one.status == "fail" and "one chain" in one.problems[0]


def test_classification_halves_are_scored_by_total_variation_and_agreement():
    # Probabilities of 2 classes near (0.8, 0.2) with AR(1) noise of 0.02; halves in modes whose
    # class-0 probability differs by 0.2 have TV 0.2 ≫ the absolute 0.02.
    p = 0.8 + 0.02 * ar1((4, 300, 10))
    probs = np.stack([p, 1 - p], axis=-1)
    pred = Prediction("classification", probs=probs.mean((0, 1)), per_sample=probs)
    found = halves.reproducibility(pred, np.zeros(10, int))
    assert found.status == "pass" and found.figures["halves"]["agreement"] == 1.0
    moved = probs.copy()
    moved[2:, ..., 0] -= 0.2
    moved[2:, ..., 1] += 0.2
    pred = Prediction("classification", probs=moved.mean((0, 1)), per_sample=moved)
    found = halves.reproducibility(pred, np.zeros(10, int))
    assert found.status == "fail"
    assert found.figures["halves"]["total_variation"] == pytest.approx(0.2, abs=0.01)


def test_the_noise_floor_scores_the_reference_halves_as_the_method_is_scored():
    y = np.zeros(20)
    reference = regression(0.2 * ar1((4, 200, 20)))
    method = regression(0.2 * ar1((1, 200, 20), seed=1) + 0.3)
    floor = noise_floor(method, reference, y)
    assert floor["chains"] == ([0, 1], [2, 3])
    assert set(floor) >= {"rmse_to_reference_mean", "wasserstein_1", "lpd_difference"}
    assert floor["rmse_to_reference_mean"] < 0.05 and floor["method_lpd_difference"] < -0.02
    assert "one chain" in noise_floor(method, method, y)["note"]


# L0: numerics from the log


def lines(key, values):
    """Log lines of kept iterations, one value per chain each."""
    return [{key: list(v), "divergent": [False] * len(v)} for v in values]


def test_adjusted_samplers_are_judged_by_their_divergences():
    kept = [{"divergent": [False, False], "acceptance_rate": [0.8, 0.9]}] * 200
    assert numerics.numerics(kept, "nuts", {}).status == "pass"
    kept = kept[:190] + [{"divergent": [True, False], "acceptance_rate": [0.8, 0.9]}] * 10
    found = numerics.numerics(kept, "hmc", {"step_size": 0.01, "num_burn_in": 100})
    assert found.status == "fail" and found.figures["divergent_share"] == 0.025
    assert found.remedies[0].changes[0] == ("step_size", "smaller")


def test_unadjusted_mclmc_is_judged_by_its_energy_errors_and_spikes():
    # Energy errors at their target: ΔE²/(d v) of each step a χ²₁, an iteration's mean that of
    # 10 steps; the median sits near 0.93 and a spike (mean > 10) has probability ~1e-16.
    rng = np.random.default_rng(0)
    target = 0.1
    energy = target * rng.chisquare(1, size=(500, 2, 10)).mean(-1)
    found = numerics.numerics(lines("energy_var", energy), "mclmc", {"energy_var_end": target})
    assert found.status == "pass" and max(found.figures["spike_share"]) == 0.0
    assert all(0.6 < r < 1.4 for r in found.figures["energy_ratio"])
    over = numerics.numerics(lines("energy_var", 50 * energy), "mclmc", {"energy_var_end": target})
    assert over.status == "fail" and "exceeds its target" in over.problems[0]
    spiky = energy.copy()
    spiky[::20, 1] = 30 * target  # chain 1 spikes in 5 % of its iterations
    found = numerics.numerics(lines("energy_var", spiky), "mclmc", {"energy_var_end": target})
    assert found.status == "fail" and found.figures["spike_share"][1] == 0.05
    assert "chain 1 (5.0%)" in found.problems[0]
    # Spikes alone keep the run from certified, not from reproducible; steps cut off, or a bulk
    # above its target, are numerics that failed.
    assert found.soft and found.figures["cut_share"] == [0.0, 0.0]
    assert not over.soft
    cut = lines("energy_var", energy)
    for line in cut[::20]:
        line["divergent"] = [False, True]
    broken = numerics.numerics(cut, "mclmc", {"energy_var_end": target})
    assert broken.status == "fail" and not broken.soft
    assert broken.figures["cut_share"][1] == 0.05 and "chain 1 (5.0%)" in broken.problems[0]
    assert "integration failed" in broken.problems[0]
    # A step a shorter retry resolved is a spike (the tuned ε failed there), not a cut-off.
    retried = lines("energy_var", energy)
    for line in retried:
        line["num_retried"] = [0, 0]
    for line in retried[::20]:
        line["num_retried"] = [0, 2]
    resolved = numerics.numerics(retried, "mclmc", {"energy_var_end": target})
    assert resolved.status == "fail" and resolved.soft
    assert resolved.figures["cut_share"] == [0.0, 0.0] and resolved.figures["retry_share"] == [
        0.0,
        0.05,
    ]
    assert (
        resolved.figures["spike_share"][1] == 0.05 and "taken again shorter" in resolved.problems[0]
    )


def test_numerics_not_logged_are_not_recorded():
    old = [{"divergent": [False], "acceptance_rate": [1.0]}] * 50  # MCLMC before energy_var
    assert numerics.numerics(old, "mclmc", {}).status == "not recorded"
    assert numerics.numerics([{"loss": 1.0}], "sgmcmc", {}).status == "not recorded"


def test_energy_advice_names_only_flags_of_the_command_that_made_the_run():
    # The levels say what helps in the run's settings; each command spells them in its flags.
    remedies = numerics.energy_remedies(0.1, spikes=False)
    reference = " ".join(r.text(flag_spelling("reference")) for r in remedies)
    assert "--num-tuning" in reference and "--sampler nuts" in reference
    assert "--energy-var-end" not in reference and "--adjusted" not in reference
    own = " ".join(r.text(flag_spelling("mclmc")) for r in remedies)
    assert "--energy-var-end" in own and "--adjusted" in own and "--sampler" not in own


# L1 and L3


def test_stationary_chains_pass_and_a_drifting_functional_fails_its_chain():
    # 4 chains of 400 AR(1) draws: ESS ≈ 215 per chain (50 asked); the test LPD of chain 2
    # rises by 0.5 over the run, its quarters' means 0.375 apart against a standard error of
    # about 0.1 · √(2/54) ≈ 0.02 (noise sd 0.1, quarters of ESS ≈ 54).
    draws = ar1((4, 400, 30))
    lpd = 0.1 * ar1((4, 400), seed=1)
    found = stationarity.stationarity(draws, functionals={"test LPD": lpd})
    assert found.status == "pass"
    assert sum(found.figures["rhat_histogram"]["counts"]) == 30
    lpd[2] += np.linspace(0.0, 0.5, 400)
    found = stationarity.stationarity(draws, functionals={"test LPD": lpd})
    assert [c["stationary"] for c in found.figures["chains"]] == [True, True, False, True]
    assert "test LPD of chain 2 drifts" in found.problems[0]


def test_too_few_draws_fail_level_one_without_a_histogram():
    found = stationarity.stationarity(ar1((2, 10, 5)))
    assert found.status == "fail" and found.figures["rhat_histogram"] is None


def test_plateau_passes_settled_chains_and_fails_a_moving_average():
    means = 0.1 * ar1((4, 300, 10))
    stds = np.full_like(means, 0.5)

    def density(m):
        return -0.5 * (m / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)

    assert plateau.plateau(density(means), means=means, stds=stds).status == "pass"
    moving = means + np.linspace(0.0, 1.0, 300)[None, :, None]
    found = plateau.plateau(density(moving), means=moving, stds=stds)
    assert found.status == "fail" and found.figures["lpd"]["change"] > 0.1


def test_plateau_scales_with_the_runs_distance_to_its_ensemble():
    """A drift that moves the LPD by about 0.1 nats fails the absolute tolerance (0.01), passes
    beside an ensemble 20 times the changes away (half of it allowed) and fails beside one
    0.02 nats away (the absolute tolerance then rules): margins of 5x and more either way."""
    means = 0.1 * ar1((4, 300, 10))
    drift = np.linspace(0.0, 0.5, 300)[None, :, None]
    moving, stds = means + drift, np.full_like(means, 0.5)
    density = -0.5 * (moving / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)
    alone = plateau.plateau(density, means=moving, stds=stds)
    change = alone.figures["lpd"]["change"]
    assert alone.status == "fail" and abs(change) > 5 * THRESHOLDS.lpd_tolerance
    lpd, std = alone.figures["lpd"], alone.figures["std"]
    far = {"lpd": lpd["all"] - 20 * abs(change), "std": std["all"] + 20 * abs(std["change"])}
    beside = plateau.plateau(density, means=moving, stds=stds, ensemble=far)
    assert beside.status == "pass" and beside.figures["allowed"]["lpd"] > 5 * abs(change)
    near = {"lpd": lpd["all"] - 0.02, "std": far["std"]}
    assert plateau.plateau(density, means=moving, stds=stds, ensemble=near).status == "fail"
    # The figures judge again to the same finding, as a stored evaluation's do.
    assert plateau.judge(beside.figures).status == "pass"


# The verdict and its rows


PASS = Finding("pass")
FAIL = Finding("fail", ("x",))


@pytest.mark.parametrize(
    ("failing", "expected"),
    [
        ((), "certified"),
        (("L1",), "reproducible"),
        (("L2",), "not a reference"),
        (("L0", "L1"), "not a reference"),
    ],
)
def test_the_verdict_of_the_levels(failing, expected):
    found = {level.name: PASS for level in levels.LEVELS}
    for name in failing:
        found[name] = Finding("fail", ("x",), remedies=levels.level(name).remedies)
    v = levels.verdict(found)
    assert v.outcome == expected and v.failed == list(failing)
    text = v.line(flag_spelling("reference"))
    assert text.startswith(f"verdict: {expected} (")
    if "L1" in failing:
        assert "more draws: a larger --num-samples" in text and "--num-iterations" not in text


def test_energy_spikes_alone_leave_a_run_reproducible_never_certified():
    found = {level.name: PASS for level in levels.LEVELS}
    spikes = Finding("fail", ("energy spikes",), soft=True)
    found["L0"] = spikes
    assert levels.verdict(found).outcome == "reproducible"
    found["L1"] = FAIL
    v = levels.verdict(found)
    assert v.outcome == "reproducible" and v.failed == ["L0", "L1"]
    assert "L0 (numerics) failed" in v.summary
    found["L0"] = Finding("fail", ("energy spikes",))
    assert levels.verdict(found).outcome == "not a reference"


def test_a_level_not_recorded_is_named_and_keeps_the_run_from_its_verdict():
    found = {level.name: PASS for level in levels.LEVELS}
    found["L0"] = not_recorded("no energy errors")
    v = levels.verdict(found)
    assert v.outcome == "not a reference" and v.summary == "L0 (numerics) not recorded"
    assert "L0 not recorded" in v.line()


def test_the_verdict_reads_back_as_stored_with_its_thresholds():
    found = {level.name: PASS for level in levels.LEVELS}
    found["L1"] = Finding("fail", ("x",), {"chains": None}, levels.level("L1").remedies)
    v = levels.verdict(found)
    stored = json.loads(json.dumps(v.to_dict()))
    assert levels.Verdict.from_dict(stored) == v
    assert stored["thresholds"]["max_divergent_share"] == THRESHOLDS.max_divergent_share == 0.01
    # One table: every threshold a level names is in it, once, and stored with the verdict.
    named = {name for level in levels.LEVELS for name in level.thresholds}
    assert named <= set(stored["thresholds"]) == set(THRESHOLDS.to_dict())


def test_rows_show_every_level_and_the_histogram_and_older_evaluations_show_none():
    y = np.zeros(20)
    pred = regression(0.2 * ar1((4, 400, 20)))
    log_density = -0.5 * pred.per_sample**2 - 0.5 * math.log(2 * math.pi)
    kept = [{"divergent": [False] * 4, "acceptance_rate": [0.9] * 4}] * 400
    evidence = levels.Evidence(pred, y, log_density, kept, "hmc", {})
    found = levels.judge(evidence)
    assert found.outcome == "certified", found.problems
    table = dict(levels_rows({"levels": found.to_dict()}))
    assert table["verdict"].startswith("certified")
    assert table["  L2 reproducible halves"].startswith("pass: W₁")
    assert any(name.startswith("    R-hat") for name in table)
    assert levels_rows({}) == []
