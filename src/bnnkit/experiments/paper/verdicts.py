"""The paper's six findings, each scored to a verdict from the figures measured here.

Each ``finding_*`` function reads one part's results (as the experiment wrote them) and
says whether they reproduce the paper's claim, with a rule written in its docstring;
:func:`assessed` then withholds the verdict when the HMC reference under the figures is not a
reference. :func:`findings_markdown` is the table of ``findings.md``.

Each finding names the weakest verdict of its references (:mod:`bnnkit.metrics.levels`: what
ranking approximations needs, whether another run would reproduce the reference's model
average); a verdict on reproducible or certified references says so. Results written before
the one verdict hold each reference's convergence level instead, which the finding names as
recorded and judges as it was then judged.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from bnnkit.experiments.paper.levels import (
    FEW_DRAWS,
    NOT_RECORDED,
    UNASSESSABLE,
    UNJUDGED_PRIORS,
    VOUCHED,
    judged_prior_rows,
    judged_temperature_rows,
    weakest_level,
    weakest_verdict,
)
from bnnkit.experiments.paper.method_rows import (
    STANDARD,
    beats_standard_settings,
    classification_settings,
    ran,
    reference_row,
    regression_settings,
    rows_by_method,
    sgld_settings,
)
from bnnkit.experiments.paper.scales import SCALES

#: The verdicts a finding can have. "not assessable": its figures rest on an HMC reference
#: that is not a reference, or was not judged, so they say nothing about the posterior.
VERDICTS = ("reproduced", "not reproduced", "not assessable", "not measured")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding of the paper: its claim, the figures measured here, the verdict (one of
    :data:`VERDICTS`) with what qualifies it (``caveat``: first "reference reproducible" or
    "reference certified"), and ``reference``: the weakest verdict of the HMC runs its figures
    rest on (:data:`LEVELS_VERDICTS`; for results written before the one verdict, their
    weakest convergence level as recorded); "" when they rest on none."""

    number: int
    claim: str
    measured: str
    verdict: str
    caveat: str = ""
    reference: str = ""


def assessed(
    finding: Finding,
    levels: Sequence[str | None],
    verdicts: Sequence[str | None] | None = None,
) -> Finding:
    """``finding`` with the weakest verdict of the HMC runs it rests on (``verdicts``, one per
    run; ``None``: none recorded): "not assessable" unless every one is reproducible or
    certified (:data:`VOUCHED`), which the caveat then names first. Runs whose results were
    written before the one verdict have none; their convergence ``levels`` are judged as
    recorded (:func:`_as_recorded`).

    Example:
        >>> found = Finding(1, "claim", "figures", "reproduced")
        >>> vouched = assessed(found, [None], ["reproducible"])
        >>> vouched.verdict, vouched.reference, vouched.caveat
        ('reproduced', 'reproducible', 'reference reproducible')
        >>> assessed(found, [None], ["not a reference"]).verdict
        'not assessable'
        >>> assessed(found, ["converged"]).reference  # results written before the verdict
        'converged'
    """
    verdict = weakest_verdict([None] * len(levels) if verdicts is None else verdicts)
    if verdict == NOT_RECORDED and any(level is not None for level in levels):
        return _as_recorded(finding, levels)
    finding = dataclasses.replace(finding, reference=verdict)
    if finding.verdict == "not measured" or not verdict:
        return finding
    if verdict in VOUCHED:
        return dataclasses.replace(finding, caveat=_joined(f"reference {verdict}", finding.caveat))
    why = (
        "has no verdict (too few kept draws to judge)"
        if verdict == NOT_RECORDED
        else "is not a reference"
    )
    return dataclasses.replace(
        finding,
        verdict="not assessable",
        caveat=f"its HMC reference {why}, so the figures do not describe the posterior",
    )


def _as_recorded(finding: Finding, levels: Sequence[str | None]) -> Finding:
    """``finding`` on runs whose results were written before the one verdict, judged by
    their convergence levels as then: not assessable where one's chains did not mix or it was
    not judged; a caveat where its pooled draws were few."""
    level = weakest_level(levels)
    finding = dataclasses.replace(finding, reference=level)
    if finding.verdict == "not measured":
        return finding
    if level == FEW_DRAWS:
        return dataclasses.replace(
            finding,
            caveat="each chain of its HMC reference mixed and the chains agree, but their "
            "pooled draws are fewer than the verdict then asked (ESS < 100 at the worst test "
            "point): the figures carry more Monte Carlo error",
        )
    if level not in UNASSESSABLE:
        return finding
    why = (
        "failed the within-chain verdict: its chains did not mix"
        if level == UNASSESSABLE[0]
        else "has no convergence verdict (too few kept draws to judge)"
    )
    return dataclasses.replace(
        finding,
        verdict="not assessable",
        caveat=f"its HMC reference {why}, so the figures do not describe the posterior",
    )


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def _verdict(ok: bool) -> str:
    return "reproduced" if ok else "not reproduced"


def _picked(sgd: Mapping[str, Any] | None) -> str:
    # The point estimates' prior, where it was picked on validation data.
    return (
        f" (their prior {sgd['prior']}, picked on validation)" if (sgd or {}).get("prior") else ""
    )


def _image_line(name: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, bool]:
    # A classification setting's figures, and whether the reference's NLL is below both.
    by = rows_by_method(rows)
    hmc = reference_row(rows)
    sgd, ens = (by[m] for m in STANDARD)
    line = (
        f"{name}: NLL reference {hmc['nll']:.3f}, SGD {sgd['nll']:.3f}, ensemble "
        f"{ens['nll']:.3f}; accuracy {hmc['accuracy']:.3f} / {sgd['accuracy']:.3f}"
        f" / {ens['accuracy']:.3f}{_picked(sgd)}"
    )
    return line, hmc["nll"] < sgd["nll"] and hmc["nll"] < ens["nll"]


def _regression_line(
    name: str, rows: Sequence[Mapping[str, Any]], judged: bool
) -> tuple[str, bool | None]:
    # A regression setting's figures ("not run" for a method without them) and, where it is
    # judged, whether the reference's NLL is below both; else why it is not.
    by = rows_by_method(rows)
    hmc, sgd, ens = reference_row(rows), *(by.get(m) for m in STANDARD)

    def figure(row: Mapping[str, Any] | None, key: str) -> str:
        return f"{row[key]:.3f}" if ran(row) and key in row else "not run"

    line = (
        f"{name}: NLL reference {figure(hmc, 'nll')}, SGD {figure(sgd, 'nll')}, ensemble "
        f"{figure(ens, 'nll')}; RMSE {figure(hmc, 'rmse')} / {figure(sgd, 'rmse')}"
        f" / {figure(ens, 'rmse')}{_picked(sgd)}"
    )
    if judged:
        return line, hmc["nll"] < sgd["nll"] and hmc["nll"] < ens["nll"]
    if ran(hmc) and ran(sgd) and ran(ens):
        return line + " (not judged: its reference's chains did not mix or were not judged)", None
    return line + " (not judged: a method did not run)", None


def finding_hmc_beats_standard(
    compare: Mapping[str, Any], converged: bool | None = None
) -> Finding:
    """(1) The HMC model average beats standard training (SGD) and deep ensembles.

    Reproduced when, on every setting judged (:func:`beats_standard_settings`: every
    classification setting, and each regression setting where SGD and the ensemble ran and
    whose reference can carry a verdict), the reference's test NLL is below SGD's and the
    deep ensemble's. Accuracy (classification) and RMSE (regression) are reported beside it,
    not judged; a regression setting not judged is shown, with why.
    """
    claim = (
        "BNNs (HMC) can outperform standard training and deep ensembles in accuracy and likelihood"
    )
    judged = beats_standard_settings(compare)
    lines = [_image_line(name, compare[name]["rows"]) for name in classification_settings(compare)]
    lines += [
        _regression_line(name, compare[name]["rows"], name in judged)
        for name in regression_settings(compare)
    ]
    if not lines:
        return Finding(1, claim, "no classification or regression setting ran", "not measured")
    parts = "; ".join(line for line, _ in lines)
    beats = [ok for _, ok in lines if ok is not None]
    if not beats:
        return Finding(1, claim, parts, "not measured")
    return Finding(1, claim, parts, _verdict(all(beats)), _convergence_caveat(converged))


def finding_one_long_chain(
    convergence: Mapping[str, Any] | None, converged: bool | None = None
) -> Finding:
    """(2) One long chain represents the posterior about as well as several short ones.

    Reproduced when the long chain's agreement with the reference model average is within 2
    binomial standard errors, 2·√(a(1−a)/n) on n test points, of the short chains' (or
    better); a gap larger than that is a real difference on these test points.
    """
    claim = "a single long HMC chain gives a comparable posterior to several shorter chains"
    chains = (convergence or {}).get("chains") or []
    if len(chains) < 2 or "agreement" not in chains[0]:
        return Finding(
            2, claim, "no chain comparison (regression, or too few samples)", "not measured"
        )
    one, several = chains[0], chains[1]
    n = int(convergence["num_test_points"])
    a = several["agreement"]
    tolerance = 2 * math.sqrt(max(a * (1 - a), 1 / n) / n)
    ok = one["agreement"] >= a - tolerance
    measured = (
        f"agreement with {convergence['reference']}: {one['scheme']} "
        f"{one['agreement']:.3f} (mean over chains), {several['scheme']} {a:.3f} "
        f"(2 SE {tolerance:.3f}); TV {one['total_variation']:.3f} vs "
        f"{several['total_variation']:.3f}"
    )
    return Finding(2, claim, measured, _verdict(ok), _convergence_caveat(converged))


def finding_no_cold_posterior(temperature: Mapping[str, Any] | None) -> Finding:
    """(3) No cold posterior effect for HMC without augmentation; it appears with it.

    Reproduced when HMC's test NLL at T = 1 is the lowest over the temperatures tried (or
    within 1 % of it), and SGHMC-CLR with augmentation gains more from cooling (its best NLL
    below T = 1 relative to its NLL at T = 1) than without augmentation. A temperature T < 1
    whose sampler failed the within-chain verdict is left out of the comparison (and named):
    its chains say nothing about that tempered posterior (:func:`judged_temperature_rows`).
    """
    claim = (
        "posterior tempering is not needed (no cold posterior effect for HMC); the "
        "effect is largely an artifact of data augmentation"
    )
    rows, dropped = judged_temperature_rows((temperature or {}).get("rows") or [])
    if not rows:
        return Finding(3, claim, "the temperature sweep did not run", "not measured")
    lines: dict[str, dict[float, float]] = {}
    for r in rows:
        lines.setdefault(r["line"], {})[float(r["temperature"])] = float(r["nll"])

    def gain(line: dict[float, float]) -> float:
        # Relative NLL improvement of the best T < 1 over T = 1 (positive: cooling helps).
        colder = [v for t, v in line.items() if t < 1]
        return (line[1.0] - min(colder)) / abs(line[1.0]) if colder and 1.0 in line else 0.0

    # The full-batch sampler's line is "HMC" or "MCLMC" (rows say method "hmc" for either).
    full_batch = {
        r["line"] for r in rows if r.get("method") == "hmc" or r["line"] in ("HMC", "MCLMC")
    }
    sampler = next((k for k in lines if k in full_batch), "HMC")
    hmc = lines.get(sampler)
    plain = next((v for k, v in lines.items() if k not in full_batch and "augment" not in k), None)
    augmented = next((v for k, v in lines.items() if "augment" in k), None)
    if hmc is None or 1.0 not in hmc or plain is None or augmented is None:
        return Finding(3, claim, "the sweep lacks HMC at T = 1 or an SGMCMC line", "not measured")
    hmc_ok = hmc[1.0] <= min(hmc.values()) * 1.01
    aug_ok = gain(augmented) > gain(plain)
    measured = (
        f"{sampler} NLL at T=1 {hmc[1.0]:.3f}, best {min(hmc.values()):.3f} at "
        f"T={min(hmc, key=hmc.get):g}; NLL gain from cooling: SGHMC-CLR "
        f"{100 * gain(plain):+.1f} %, with augmentation {100 * gain(augmented):+.1f} %"
        + (
            f"; left out, their {sampler} chains did not mix: T="
            + ", ".join(f"{t:g}" for t in dropped)
            if dropped
            else ""
        )
    )
    return Finding(3, claim, measured, _verdict(hmc_ok and aug_ok))


def finding_prior_robust(prior: Sequence[Mapping[str, Any]] | None) -> Finding:
    """(4) The model average is robust to the prior's scale and shape.

    Judged over the rows :func:`judged_prior_rows` keeps: the sweep's priors but
    :data:`UNJUDGED_PRIORS`, less those whose chains did not mix. Reproduced when, on every
    classification dataset of the sweep, the accuracies under those priors lie within 4
    binomial standard errors (4·√(a(1−a)/n), n test points) of each other; and on regression
    the RMSEs within 10 % of their mean. (Differences inside these bounds are what
    resampling the test set alone would give.)
    """
    claim = (
        "the BMA is robust to the prior scale, and similar under Gaussian, mixture and "
        "logistic priors"
    )
    every = list(prior or [])
    rows, dropped = judged_prior_rows(every)
    if not rows:
        return Finding(4, claim, "the prior sweep did not run", "not measured")
    aside = [r for r in every if r.get("key") in UNJUDGED_PRIORS]
    parts, ok = [], True
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == dataset]
        if "accuracy" in mine[0]:
            acc = [r["accuracy"] for r in mine]
            mean = sum(acc) / len(acc)
            n = int(mine[0]["num_test"])
            bound = 4 * math.sqrt(mean * (1 - mean) / n)
            ok &= max(acc) - min(acc) <= bound
            parts.append(
                f"{dataset}: accuracy {min(acc):.3f}–{max(acc):.3f} over "
                f"{len(acc)} priors (bound {bound:.3f})"
                + "".join(
                    f"; {r['prior']}, not judged: {r['accuracy']:.3f}"
                    for r in aside
                    if r["dataset"] == dataset
                )
            )
        else:
            rmse = [r["rmse"] for r in mine]
            mean = sum(rmse) / len(rmse)
            ok &= max(rmse) - min(rmse) <= 0.1 * mean
            parts.append(
                f"{dataset}: RMSE {min(rmse):.3f}–{max(rmse):.3f} over {len(rmse)} "
                "priors (bound 10 % of the mean)"
                + "".join(
                    f"; {r['prior']}, not judged: {r['rmse']:.3f}"
                    for r in aside
                    if r["dataset"] == dataset
                )
            )
    if dropped:
        parts.append(
            "left out, their chains did not mix: "
            + ", ".join(f"{r['dataset']} {r['prior']}" for r in dropped)
        )
    return Finding(4, claim, "; ".join(parts), _verdict(ok))


def finding_poor_under_shift(shift: Sequence[Mapping[str, Any]] | None) -> Finding:
    """(5) HMC generalises poorly under covariate shift, relative to its clean advantage.

    Reproduced when HMC's accuracy lead over the best of SGD and the deep ensemble (negative:
    a deficit) shrinks from the clean images to the highest severity (mean over the
    corruptions): HMC then loses more to the shift than they do.
    """
    claim = "Bayesian neural networks (HMC) generalise surprisingly poorly under domain shift"
    rows = list(shift or [])
    if not rows:
        return Finding(5, claim, "the covariate-shift table did not run", "not measured")
    top = max(r["severity"] for r in rows)

    def accuracy(label: str, severity: int) -> float | None:
        values = [r["accuracy"] for r in rows if r["label"] == label and r["severity"] == severity]
        return sum(values) / len(values) if values else None

    labels = list(dict.fromkeys(r["label"] for r in rows))
    hmc = next((x for x in labels if x.endswith("hmc")), None)
    others = [x for x in labels if x.endswith(("sgd", "deep"))]
    if hmc is None or not others:
        return Finding(5, claim, "the table lacks HMC, SGD or the ensemble", "not measured")
    clean_lead = accuracy(hmc, 0) - max(accuracy(x, 0) for x in others)
    shifted_lead = accuracy(hmc, top) - max(accuracy(x, top) for x in others)
    ok = shifted_lead < clean_lead
    measured = (
        f"accuracy lead of HMC over the best of SGD and the ensemble: clean "
        f"{clean_lead:+.3f}, severity {top} {shifted_lead:+.3f} (mean over "
        f"{len({r['corruption'] for r in rows}) - 1} corruptions)"
    )
    return Finding(5, claim, measured, _verdict(ok))


def finding_ensembles_close(compare: Mapping[str, Any]) -> Finding:
    """(6) Deep ensembles are about as close to HMC's predictive as SGLD, and closer than
    mean-field VI.

    Reproduced when, on every classification setting, the ensemble's total variation to HMC
    is at most SGLD's plus 10 % of it, and below MFVI's where MFVI ran. An ensemble whose
    prior was picked on validation (``Setting.baseline_priors``) is not on the reference's
    posterior: the caveat says that its distance includes the priors' difference.
    """
    claim = (
        "cheaper methods differ from HMC; deep ensembles are about as close to HMC as "
        "SGLD, and closer than mean-field VI"
    )
    names = sgld_settings(compare)
    if not names:
        return Finding(6, claim, "no classification setting ran SGLD", "not measured")
    parts, ok, priors = [], True, []
    for name in names:
        by = rows_by_method(compare[name]["rows"])
        ens, sgld, mfvi = by["Deep ensemble (K=5)"], by["SGLD"], by.get("MFVI")
        ok &= ens["total_variation"] <= 1.1 * sgld["total_variation"]
        line = (
            f"{name}: TV to HMC ensemble {ens['total_variation']:.3f}, SGLD "
            f"{sgld['total_variation']:.3f}"
        )
        if mfvi is not None and "total_variation" in mfvi:
            ok &= ens["total_variation"] < mfvi["total_variation"]
            line += f", MFVI {mfvi['total_variation']:.3f}"
        parts.append(line + f"; agreement {ens['agreement']:.3f} / {sgld['agreement']:.3f}")
        if ens.get("prior"):
            priors.append(f"{name}: {ens['prior']}")
    caveat = (
        "the ensemble's prior was picked on validation (" + "; ".join(priors) + "), not "
        "the reference's, so its distance to HMC includes the priors' difference"
        if priors
        else ""
    )
    return Finding(6, claim, "; ".join(parts), _verdict(ok), caveat)


def _convergence_caveat(converged: bool | None) -> str:
    if converged is None or converged:
        return ""
    return "the HMC reference is not a reference by its verdict"


def findings_markdown(items: Sequence[Finding], scale: str) -> str:
    """The findings as a markdown table, with the scale they were measured at."""
    lines = [
        "# The paper's findings, measured",
        "",
        f"Scale `{scale}`: {SCALES[scale].description}.",
        "",
        "A finding whose HMC reference is not a reference, or was not judged, is *not "
        "assessable*: its figures are shown, but they do not describe the posterior, so "
        "they neither reproduce the paper nor contradict it.",
        "",
        "*reference*: the weakest verdict of the references a finding rests on (certified: "
        "every level passes; reproducible: another run would reproduce its model average, "
        "which is what the figures compare; not a reference).",
        "",
        "| # | the paper finds | measured here | reference | verdict |",
        "|---|---|---|---|---|",
    ]
    for f in items:
        verdict = f.verdict + (f" ({f.caveat})" if f.caveat else "")
        lines.append(
            f"| {f.number} | {f.claim} | {f.measured} | {f.reference or '—'} | {verdict} |"
        )
    return "\n".join(lines) + "\n"
