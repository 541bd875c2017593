"""``bnnkit paper``: the findings scored from hand-made results (each verdict both ways), the
folder checks before anything is written, and the whole tiny study end to end (slow)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import pytest

from bnnkit import storage
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.experiments.paper import verdicts
from bnnkit.experiments.paper.layout import FINDINGS_JSON, PARTS, REPORT_DIR, SETTINGS_FILE
from bnnkit.experiments.paper.levels import FEW_DRAWS, NOT_RECORDED, VOUCHED, weakest_verdict
from bnnkit.experiments.paper.method_rows import beats_standard_settings
from bnnkit.experiments.paper.part_settings import compare_settings, prior_settings
from bnnkit.experiments.paper.results import findings
from bnnkit.experiments.paper.scales import BASELINE_PRIORS, CIFAR_METHODS, SCALES, Config
from bnnkit.experiments.paper.study import paper
from bnnkit.experiments.paper.verdicts import Finding, assessed, findings_markdown
from bnnkit.report.kinds import FINDING_FIGURE
from experiment_checks import png_ok


def _compare(hmc_nll: float, ens_tv: float) -> dict:
    rows = [
        {"method": "HMC (reference)", "accuracy": 0.80, "nll": hmc_nll},
        {"method": "SGD", "accuracy": 0.75, "nll": 0.90, "agreement": 0.8, "total_variation": 0.3},
        {
            "method": "Deep ensemble (K=5)",
            "accuracy": 0.78,
            "nll": 0.70,
            "agreement": 0.85,
            "total_variation": ens_tv,
        },
        {
            "method": "SGLD",
            "accuracy": 0.70,
            "nll": 1.00,
            "agreement": 0.7,
            "total_variation": 0.40,
        },
    ]
    return {
        "mnist": {"problem": {}, "rows": rows},
        "yacht": {"problem": {}, "rows": [{"method": "HMC (reference)", "rmse": 1.0}]},
    }


def test_finding_one_needs_hmc_below_both_sgd_and_the_ensemble():
    assert verdicts.finding_hmc_beats_standard(_compare(0.6, 0.2), True).verdict == "reproduced"
    # Below SGD (0.90) but above the ensemble (0.70): not reproduced.
    found = verdicts.finding_hmc_beats_standard(_compare(0.8, 0.2), False)
    assert found.verdict == "not reproduced"
    assert "not a reference" in found.caveat
    assert verdicts.finding_hmc_beats_standard({}, None).verdict == "not measured"


def test_a_finding_on_an_unmixed_reference_is_not_assessable():
    found = verdicts.finding_hmc_beats_standard(_compare(0.6, 0.2))
    assert found.verdict == "reproduced"
    # The same figures on chains that failed the within-chain verdict: withheld either way.
    for figures in (found, verdicts.finding_hmc_beats_standard(_compare(0.8, 0.2))):
        unmixed = assessed(figures, ["converged", "not-mixed"])
        assert (unmixed.verdict, unmixed.reference) == ("not assessable", "not-mixed")
        assert unmixed.measured == figures.measured
    # Chains that each mixed (in several modes) keep the verdict and name their level.
    multimodal = assessed(found, ["converged", "mixed-multimodal"])
    assert (multimodal.verdict, multimodal.reference) == ("reproduced", "mixed-multimodal")
    # A run without a verdict (too few draws; results written before levels were) cannot
    # carry a finding either.
    unjudged = assessed(found, ["converged", None])
    assert (unjudged.verdict, unjudged.reference) == ("not assessable", "not judged")
    # Nothing measured stays "not measured", whatever the reference.
    missing = assessed(verdicts.finding_no_cold_posterior(None), ["not-mixed"])
    assert missing.verdict == "not measured"


def test_findings_read_the_level_of_each_part_s_hmc_runs(tmp_path):
    for part in ("compare_methods", "temperature", "prior_sweep", "shift"):
        (tmp_path / part).mkdir(parents=True)
    compare = _compare(0.6, 0.2)
    compare["mnist"]["rows"][0]["level"] = "mixed-multimodal"
    # The natural-image setting runs SGD and the ensemble only; its reference did not mix.
    compare["cifar10_proxy"] = {
        "problem": {},
        "rows": [
            {**r, "level": "not-mixed"} if r["method"] == "HMC (reference)" else r
            for r in compare["mnist"]["rows"]
            if r["method"] != "SGLD"
        ],
    }
    storage.write_json(tmp_path / "compare_methods" / "results.json", compare)
    storage.write_json(
        tmp_path / "shift" / "shift_table.json", {"rows": _shift((0.9, 0.5), (0.85, 0.6))}
    )
    rows = _temperature({1.0: 0.50, 0.1: 0.55}, {1.0: 0.6, 0.1: 0.6}, {1.0: 0.6, 0.1: 0.5})["rows"]
    for r in rows:
        r["method"] = "hmc" if r["line"] == "HMC" else "sgmcmc"
        r["level"] = (
            {1.0: "converged", 0.1: "not-mixed"}[r["temperature"]] if r["method"] == "hmc" else None
        )
    storage.write_json(tmp_path / "temperature" / "results.json", {"rows": rows})
    storage.write_json(
        tmp_path / "prior_sweep" / "results.json",
        [{"dataset": "yacht", "rmse": r, "level": "converged"} for r in (1.0, 1.05)],
    )
    by = {f.number: f for f in findings(tmp_path)}
    # Finding 1 rests on both image references, so on the weaker; finding 2 on MNIST's alone.
    assert (by[1].verdict, by[1].reference) == ("not assessable", "not-mixed")
    assert (by[2].verdict, by[2].reference) == ("not measured", "mixed-multimodal")
    assert (by[3].verdict, by[3].reference) == ("not assessable", "not-mixed")
    assert (by[4].verdict, by[4].reference) == ("reproduced", "converged")
    # The shift table is the CIFAR-10 proxy's, so its reference carries finding 5.
    assert (by[5].verdict, by[5].reference) == ("not assessable", "not-mixed")
    # SGLD ran on MNIST only: finding 6 rests on MNIST's reference.
    assert (by[6].verdict, by[6].reference) == ("reproduced", "mixed-multimodal")
    table = findings_markdown(list(by.values()), "tiny")
    assert "| mixed-multimodal | reproduced" in table and "not assessable" in table


def _yacht(hmc_nll: float, sgd_nll: float | None, level: str = "converged") -> dict:
    # A regression setting's rows: the reference, SGD (None: not run) and the ensemble.
    rows = [
        {"method": "HMC (reference)", "rmse": 0.5, "nll": hmc_nll, "level": level},
        {"method": "SGD", "rmse": 0.7, "nll": sgd_nll},
        {"method": "Deep ensemble (K=5)", "rmse": 0.6, "nll": 1.3},
    ]
    if sgd_nll is None:
        rows[1] = {"method": "SGD", "note": "left out"}
    return {"problem": {}, "rows": rows}


def test_finding_one_scores_the_regression_setting_beside_the_images():
    # The images reproduce it (HMC 0.6 below SGD 0.9 and the ensemble 0.7); yacht decides.
    compare = {**_compare(0.6, 0.2), "yacht": _yacht(1.2, 1.4)}
    found = verdicts.finding_hmc_beats_standard(compare)
    assert found.verdict == "reproduced"
    assert found.measured.endswith(
        "; yacht: NLL reference 1.200, SGD 1.400, ensemble 1.300; RMSE 0.500 / 0.700 / 0.600"
    )
    assert found.measured.startswith("mnist: NLL reference 0.600")
    # Yacht's reference above SGD's NLL: not reproduced, though the images still are.
    compare["yacht"] = _yacht(1.5, 1.4)
    assert verdicts.finding_hmc_beats_standard(compare).verdict == "not reproduced"
    # On yacht alone, its figures carry the verdict.
    assert verdicts.finding_hmc_beats_standard({"yacht": _yacht(1.2, 1.4)}).verdict == "reproduced"
    assert (
        verdicts.finding_hmc_beats_standard({"yacht": _yacht(1.5, 1.4)}).verdict == "not reproduced"
    )
    # SGD not run on yacht: said so, and the verdict is the images' alone.
    compare["yacht"] = _yacht(1.5, None)
    found = verdicts.finding_hmc_beats_standard(compare)
    assert found.verdict == "reproduced"
    assert "yacht: NLL reference 1.500, SGD not run, ensemble 1.300" in found.measured
    assert "RMSE 0.500 / not run / 0.600 (not judged: a method did not run)" in found.measured
    found = verdicts.finding_hmc_beats_standard({"yacht": _yacht(1.5, None)})
    assert found.verdict == "not measured" and "SGD not run" in found.measured


def test_finding_one_judges_a_regression_reference_only_where_it_can_carry_a_verdict():
    # Yacht's chains did not mix: shown, not judged, and the images' verdict stands.
    compare = {**_compare(0.6, 0.2), "yacht": _yacht(1.5, 1.4, "not-mixed")}
    found = verdicts.finding_hmc_beats_standard(compare)
    assert found.verdict == "reproduced"
    assert found.measured.endswith(
        "(not judged: its reference's chains did not mix or were not judged)"
    )
    assert beats_standard_settings(compare) == ["mnist"]
    # The reference levels find it reproducible: judged, and its worse NLL decides.
    compare["yacht"]["rows"][0]["levels"] = "reproducible"
    assert beats_standard_settings(compare) == ["mnist", "yacht"]
    assert verdicts.finding_hmc_beats_standard(compare).verdict == "not reproduced"
    # Alone and unmixed, yacht carries the finding, whose level then withholds the verdict.
    compare = {"yacht": _yacht(1.2, 1.4, "not-mixed")}
    assert beats_standard_settings(compare) == ["yacht"]
    found = assessed(verdicts.finding_hmc_beats_standard(compare), ["not-mixed"])
    assert found.verdict == "not assessable"


def test_one_verdict_decides_whether_a_finding_is_assessed():
    found = verdicts.finding_hmc_beats_standard(_compare(0.6, 0.2))
    assert weakest_verdict(["certified", "reproducible"]) == "reproducible"
    assert weakest_verdict(["reproducible", "not a reference"]) == "not a reference"
    assert weakest_verdict(["not a reference", None]) == NOT_RECORDED
    # Reproducible or certified references carry the verdict and say so; their recorded
    # convergence levels, if any, play no part.
    vouched = assessed(found, ["converged", "not-mixed"], ["certified", "reproducible"])
    assert (vouched.verdict, vouched.reference, vouched.caveat) == (
        "reproduced",
        "reproducible",
        "reference reproducible",
    )
    # Not a reference, or not judged: withheld.
    for reference_verdicts in (["certified", "not a reference"], ["certified", None]):
        withheld = assessed(found, [None, None], reference_verdicts)
        assert withheld.verdict == "not assessable", reference_verdicts
        assert withheld.reference == weakest_verdict(reference_verdicts)
    certified = assessed(found, [None], ["certified"])
    assert (certified.verdict, certified.caveat) == ("reproduced", "reference certified")
    table = findings_markdown([vouched, withheld], "tiny")
    assert "| reference | verdict |" in table and "HMC reference |" not in table
    assert "| reproducible | reproduced (reference reproducible) |" in table
    assert "| not recorded | not assessable (its HMC reference has no verdict" in table


def test_findings_name_the_weakest_verdict_of_each_part_s_runs(tmp_path):
    for part in ("compare_methods", "temperature", "prior_sweep"):
        (tmp_path / part).mkdir(parents=True)
    compare = {**_compare(0.6, 0.2), "yacht": _yacht(1.2, 1.4)}
    compare["mnist"]["rows"][0].update(levels="certified")
    compare["yacht"]["rows"][0]["levels"] = "reproducible"
    storage.write_json(tmp_path / "compare_methods" / "results.json", compare)
    rows = _temperature({1.0: 0.50, 0.1: 0.55}, {1.0: 0.6, 0.1: 0.6}, {1.0: 0.6, 0.1: 0.5})["rows"]
    for r in rows:
        r["method"] = "hmc" if r["line"] == "HMC" else "sgmcmc"
        r["levels"] = {1.0: "certified", 0.1: "reproducible"}[r["temperature"]]
    storage.write_json(tmp_path / "temperature" / "results.json", {"rows": rows})
    # A prior sweep written before the one verdict: its rows hold their convergence level.
    storage.write_json(
        tmp_path / "prior_sweep" / "results.json",
        [{"dataset": "yacht", "rmse": r, "level": "converged"} for r in (1.0, 1.05)],
    )
    by = {f.number: f for f in findings(tmp_path)}
    # Finding 1 rests on MNIST's reference and yacht's: the weaker of the two.
    assert (by[1].verdict, by[1].reference) == ("reproduced", "reproducible")
    assert by[1].caveat == "reference reproducible"
    # Findings 2 and 6 rest on MNIST's alone.
    assert (by[2].reference, by[6].reference) == ("certified", "certified")
    assert by[6].caveat == "reference certified"
    # The temperature sweep's HMC runs: the weakest is reproducible.
    assert (by[3].verdict, by[3].reference) == ("reproduced", "reproducible")
    # The older prior sweep is read as recorded.
    assert (by[4].verdict, by[4].reference) == ("reproduced", "converged")
    table = findings_markdown(list(by.values()), "tiny")
    assert "| reproducible | reproduced (reference reproducible) |" in table
    assert "| converged | reproduced |" in table


def test_finding_six_compares_ensemble_and_sgld_total_variation():
    assert verdicts.finding_ensembles_close(_compare(0.6, 0.43)).verdict == "reproduced"  # ≤ 1.1×
    assert verdicts.finding_ensembles_close(_compare(0.6, 0.45)).verdict == "not reproduced"
    # Where MFVI ran, the ensemble must also be closer than it; a picked prior is named.
    compare = _compare(0.6, 0.43)
    compare["mnist"]["rows"].append({"method": "MFVI", "total_variation": 0.42, "agreement": 0.5})
    found = verdicts.finding_ensembles_close(compare)
    assert found.verdict == "not reproduced" and "MFVI 0.420" in found.measured
    compare["mnist"]["rows"][-1]["total_variation"] = 0.6
    compare["mnist"]["rows"][2]["prior"] = "fanin_gaussian:scale=14.142"
    found = verdicts.finding_ensembles_close(compare)
    assert found.verdict == "reproduced" and "scale=14.142" in found.caveat


def _convergence(one: float, several: float, n: int) -> dict:
    return {
        "num_test_points": n,
        "reference": "the run's own model average",
        "chains": [
            {"scheme": "1 chain x 40 samples", "agreement": one, "total_variation": 0.1},
            {"scheme": "4 chains x 10 samples", "agreement": several, "total_variation": 0.1},
        ],
    }


def test_finding_two_allows_two_binomial_standard_errors():
    # a = 0.9 on n = 1,000 points: 2 SE = 2·√(0.09/1000) ≈ 0.019.
    assert (
        verdicts.finding_one_long_chain(_convergence(0.885, 0.9, 1000), True).verdict
        == "reproduced"
    )
    assert (
        verdicts.finding_one_long_chain(_convergence(0.875, 0.9, 1000), True).verdict
        == "not reproduced"
    )
    # The same gap on 100,000 points is 8 standard errors: a real difference.
    assert (
        verdicts.finding_one_long_chain(_convergence(0.885, 0.9, 100_000), True).verdict
        == "not reproduced"
    )
    assert verdicts.finding_one_long_chain(None, None).verdict == "not measured"


def _temperature(hmc: dict, plain: dict, augmented: dict) -> dict:
    rows = [
        {"line": line, "temperature": t, "nll": v}
        for line, values in (("HMC", hmc), ("SGHMC-CLR", plain), ("SGHMC-CLR + augment", augmented))
        for t, v in values.items()
    ]
    return {"rows": rows}


def test_finding_three_needs_hmc_best_at_one_and_augmentation_to_gain_from_cooling():
    good = _temperature({1.0: 0.50, 0.1: 0.55}, {1.0: 0.6, 0.1: 0.6}, {1.0: 0.6, 0.1: 0.5})
    assert verdicts.finding_no_cold_posterior(good).verdict == "reproduced"
    cold_hmc = _temperature({1.0: 0.60, 0.1: 0.50}, {1.0: 0.6, 0.1: 0.6}, {1.0: 0.6, 0.1: 0.5})
    assert verdicts.finding_no_cold_posterior(cold_hmc).verdict == "not reproduced"
    no_augment_effect = _temperature({1.0: 0.5}, {1.0: 0.6, 0.1: 0.5}, {1.0: 0.6, 0.1: 0.5})
    assert verdicts.finding_no_cold_posterior(no_augment_effect).verdict == "not reproduced"
    assert verdicts.finding_no_cold_posterior(None).verdict == "not measured"
    # The full-batch line may be MCLMC's (rows say method "hmc" for either sampler).
    mclmc = _temperature({1.0: 0.50, 0.1: 0.55}, {1.0: 0.6, 0.1: 0.6}, {1.0: 0.6, 0.1: 0.5})
    for r in mclmc["rows"]:
        r["method"] = "sgmcmc"
        if r["line"] == "HMC":
            r.update(line="MCLMC", method="hmc")
    found = verdicts.finding_no_cold_posterior(mclmc)
    assert found.verdict == "reproduced" and found.measured.startswith("MCLMC NLL at T=1 0.500")


def test_finding_three_leaves_out_a_colder_posterior_whose_chains_did_not_mix(tmp_path):
    # T = 1 (each chain mixed, too few pooled draws) against T = 0.3 (mixed, two modes);
    # T = 0.1's chains drifted: left out and named, and the finding rests on the other two.
    temperature = _temperature(
        {1.0: 0.60, 0.3: 0.50, 0.1: 0.40}, {1.0: 0.6, 0.1: 0.6}, {1.0: 0.6, 0.1: 0.5}
    )
    levels = {1.0: FEW_DRAWS, 0.3: "mixed-multimodal", 0.1: "not-mixed"}
    for r in temperature["rows"]:
        r["method"] = "hmc" if r["line"] == "HMC" else "sgmcmc"
        r["level"] = levels[r["temperature"]] if r["method"] == "hmc" else None
    (tmp_path / "temperature").mkdir()
    storage.write_json(tmp_path / "temperature" / "results.json", temperature)
    found = {f.number: f for f in findings(tmp_path)}[3]
    # Cooling to 0.3 lowers the NLL by 17 %: the cold posterior effect, on judged chains.
    assert (found.verdict, found.reference) == ("not reproduced", FEW_DRAWS)
    assert "best 0.500 at T=0.3" in found.measured
    assert found.measured.endswith("left out, their HMC chains did not mix: T=0.1")
    assert "pooled draws are fewer" in found.caveat


def test_finding_four_bounds_accuracy_spread_by_four_standard_errors():
    # a ≈ 0.9 on 10,000 points: 4 SE = 4·√(0.09/10^4) = 0.012.
    rows = [{"dataset": "mnist160", "accuracy": a, "num_test": 10_000} for a in (0.895, 0.905)]
    assert verdicts.finding_prior_robust(rows).verdict == "reproduced"
    rows[1]["accuracy"] = 0.915
    assert verdicts.finding_prior_robust(rows).verdict == "not reproduced"
    yacht = [{"dataset": "yacht", "rmse": r} for r in (1.0, 1.05)]
    assert verdicts.finding_prior_robust(yacht).verdict == "reproduced"
    yacht[1]["rmse"] = 1.3
    assert verdicts.finding_prior_robust(yacht).verdict == "not reproduced"


def test_finding_four_reports_the_underfitting_prior_without_judging_it():
    rows = [
        {"dataset": "mnist160", "key": key, "prior": key, "accuracy": a, "num_test": 10_000}
        for key, a in (("gaussian_small", 0.30), ("gaussian", 0.895), ("fanin_gaussian", 0.905))
    ]
    found = verdicts.finding_prior_robust(rows)
    assert found.verdict == "reproduced", found
    assert "over 2 priors" in found.measured
    assert "gaussian_small, not judged: 0.300" in found.measured
    # A spread among the judged priors still fails it.
    rows[2]["accuracy"] = 0.95
    assert verdicts.finding_prior_robust(rows).verdict == "not reproduced"


def test_finding_four_leaves_out_priors_whose_chains_did_not_mix_and_names_them(tmp_path):
    # a ≈ 0.9 on 10,000 points: 4 SE = 0.012, so Laplace's 0.80 would fail the finding.
    rows = [
        {
            "dataset": "mnist160",
            "key": key,
            "prior": key,
            "accuracy": a,
            "num_test": 10_000,
            "level": level,
        }
        for key, a, level in (
            ("gaussian", 0.895, "converged"),
            ("fanin_gaussian", 0.905, "mixed-few-draws"),
            ("laplace", 0.80, "not-mixed"),
        )
    ]
    # Yacht has one mixed prior only: nothing to compare there.
    rows += [
        {"dataset": "yacht", "key": key, "prior": key, "rmse": r, "level": level}
        for key, r, level in (("gaussian", 0.3, "converged"), ("laplace", 0.6, "not-mixed"))
    ]
    found = verdicts.finding_prior_robust(rows)
    assert found.verdict == "reproduced", found
    assert "yacht: RMSE" not in found.measured
    assert found.measured.endswith(
        "left out, their chains did not mix: mnist160 laplace, yacht gaussian, yacht laplace"
    )
    # The finding carries the weakest level of the priors it judged, not of those left out.
    (tmp_path / "prior_sweep").mkdir()
    storage.write_json(tmp_path / "prior_sweep" / "results.json", rows)
    by = {f.number: f for f in findings(tmp_path)}
    assert (by[4].verdict, by[4].reference) == ("reproduced", FEW_DRAWS)
    # With no prior mixed, nothing is left out, and the finding is not assessable.
    for r in rows:
        r["level"] = "not-mixed"
    storage.write_json(tmp_path / "prior_sweep" / "results.json", rows)
    by = {f.number: f for f in findings(tmp_path)}
    assert (by[4].verdict, by[4].reference) == ("not assessable", "not-mixed")
    assert "left out" not in by[4].measured


def test_prior_sweep_samples_each_prior_from_the_reference_members():
    plan = SCALES["small"]
    for name, setting in prior_settings(Config(scale="small"), "study").items():
        factor = plan.yacht_factor if name == "yacht" else 1
        config = setting.sampler_config(0)
        assert type(config).__module__ == "bnnkit.inference.mclmc"
        assert (config.num_iterations, config.num_burn_in, config.num_chains) == (
            plan.hmc_iterations * factor,
            plan.hmc_burn_in * factor,
            plan.prior_chains,
        )
        # The members of the same problem's reference: the compare-methods setting's.
        source = {"yacht": "yacht", "mnist160": "mnist"}[name]
        assert config.init_checkpoint.endswith(f"study/compare_methods/{source}/hmc/ensemble")
        compared = compare_settings(Config(scale="small"))[source].problem
        for field in ("dataset", "model", "subset_train_to", "noise_std"):
            assert setting.problem.get(field) == getattr(compared, field), (name, field)


def _shift(hmc: tuple[float, float], sgd: tuple[float, float]) -> list[dict]:
    return [
        {"label": label, "corruption": c, "severity": s, "accuracy": acc}
        for label, (clean, shifted) in (("mnist/hmc", hmc), ("mnist/sgd", sgd))
        for c, s, acc in (("clean", 0, clean), ("fog", 5, shifted))
    ]


def test_finding_five_needs_hmc_lead_to_shrink_under_shift():
    assert (
        verdicts.finding_poor_under_shift(_shift((0.9, 0.5), (0.85, 0.6))).verdict == "reproduced"
    )
    assert (
        verdicts.finding_poor_under_shift(_shift((0.9, 0.7), (0.85, 0.6))).verdict
        == "not reproduced"
    )
    # Behind on clean images and less behind under shift: HMC lost less to the shift.
    assert (
        verdicts.finding_poor_under_shift(_shift((0.80, 0.6), (0.85, 0.62))).verdict
        == "not reproduced"
    )
    assert verdicts.finding_poor_under_shift([]).verdict == "not measured"


def test_scales_grow_and_keep_three_chains_for_the_surface():
    tiny, small, full = (SCALES[k] for k in ("tiny", "small", "full"))
    for scale in (tiny, small, full):
        assert scale.hmc_chains >= 3 and scale.hmc_burn_in < scale.hmc_iterations
    for field in ("hmc_iterations", "epochs", "grid", "temperature_hmc_iterations"):
        assert getattr(tiny, field) < getattr(small, field) <= getattr(full, field), field


def test_every_scale_compares_known_methods_with_the_ones_the_findings_read():
    from bnnkit.experiments import compare_methods

    known = set(
        compare_methods.methods(
            compare_methods.SETTINGS["mnist160"], eta=1e-6, grad_rms=2.0, num_train=160
        )
    )
    read = {"SGD", "Deep ensemble (K=5)", "SGLD", "MFVI"}  # findings 1 and 6
    for name, scale in SCALES.items():
        chosen = known if scale.methods is None else set(scale.methods)
        assert read <= chosen <= known, name
        assert set(CIFAR_METHODS) <= chosen, name
        assert scale.baseline_priors and set(scale.baseline_priors) <= set(BASELINE_PRIORS), name
    # Only the pipeline check leaves methods out; small and full compare every one.
    assert SCALES["small"].methods is None and SCALES["full"].methods is None


def test_bad_scale_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["paper", "--scale", "huge", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown --scale 'huge'; allowed: tiny, small, full" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert main(["paper", "--images", "svhn", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--images" in err and "'svhn'" in err and "cifar10_proxy" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_foreign_folder_and_other_scale_are_refused_before_writing(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        paper(Config(scale="tiny"), foreign, progress=False)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    study = tmp_path / "study"
    study.mkdir()
    storage.write_json(study / SETTINGS_FILE, {"scale": "small", "seed": 0})
    with pytest.raises(ConfigError, match="--scale small"):
        paper(Config(scale="tiny"), study, progress=False)
    assert sorted(p.name for p in study.iterdir()) == [SETTINGS_FILE]


def paper_example():
    """``examples/paper_study.py`` (the tutorial's script) as a module."""
    path = Path(__file__).resolve().parents[2] / "examples" / "paper_study.py"
    spec = importlib.util.spec_from_file_location("paper_study_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # the whole tiny study, twice: about 9 minutes on 2 cores
def test_tiny_study_end_to_end(shared_data_dir, tmp_path, capsys):
    # The tutorial's script makes the study (its --small is --scale tiny), so the tutorial is
    # checked by the same run; the second call below is the command line's.
    study = paper_example().main(
        tmp_path, small=True, data_dir=str(shared_data_dir), progress=False
    )
    out = tmp_path / "paper_tiny"
    assert study.report == out / REPORT_DIR
    for part in PARTS:  # the tiny scale leaves out the MNIST shift table
        assert (out / part).is_dir() == (part != "shift_mnist"), part
    items = storage.read_json(out / FINDINGS_JSON)
    assert [f["number"] for f in items] == [1, 2, 3, 4, 5, 6]
    fields = {f.name for f in dataclasses.fields(Finding)}
    for f in items:
        assert set(f) == fields
        # Every finding has its data at the tiny scale (its verdict may go either way), and
        # it is withheld exactly when the verdict of its HMC references does not vouch for
        # them (the weakest of them is named as its reference).
        assert f["verdict"] in ("reproduced", "not reproduced", "not assessable"), f
        assert (f["verdict"] == "not assessable") == (f["reference"] not in VOUCHED), f
    report = (out / REPORT_DIR / "report.md").read_text()
    assert "The paper's findings" in report
    # Each finding has its figure, and the report shows it with the verdict under it.
    for f in items:
        assert png_ok(out / FINDING_FIGURE.format(f["number"])), f["number"]
        assert f"Finding {f['number']}: {f['claim']}" in report, f["number"]
        assert f"Verdict: {f['verdict']}" in report, f["number"]
    figures = sorted((out / REPORT_DIR / "figures").iterdir())
    assert len(figures) >= 10 and all(png_ok(f) for f in figures)
    shift = storage.read_json(out / "shift" / "shift_table.json")
    assert all(math.isfinite(r["nll"]) for r in shift["rows"])

    # Called again, it reuses every run: each run's log gains no unit.
    logs = {p: p.read_text() for p in out.rglob("metrics.jsonl")}
    assert logs
    capsys.readouterr()
    assert (
        main(
            [
                "paper",
                "--scale",
                "tiny",
                "--out",
                str(out),
                "--data-dir",
                str(shared_data_dir),
                "--no-progress",
            ]
        )
        == 0
    )
    assert {p: p.read_text() for p in out.rglob("metrics.jsonl")} == logs
