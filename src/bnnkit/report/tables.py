"""Summary tables of an evaluation, for the terminal (rich) and as markdown, and long tables of
measurements as markdown and CSV.

The rows of an evaluation come in groups, one function each, in the order of the evaluation's
sections (:mod:`bnnkit.evaluation.sections`): a new section's keys get their rows from one new
function listed in :func:`rows`. Keys an older evaluation lacks give no rows, so an
``evaluation.json`` stored by an earlier bnnkit still reads.
"""

from __future__ import annotations

from typing import Any

from bnnkit.metrics.levels import MARKS, Verdict, level
from bnnkit.prior_check import PriorCheck


def rows(result: dict[str, Any], *, full: bool = True) -> list[tuple[str, str]]:
    """(quantity, value) rows of an evaluation dict from :func:`bnnkit.evaluation.evaluate`,
    one group per part of it, in the order of its sections.

    Args:
        result: the evaluation.
        full: every row (the report, markdown); ``False`` for the terminal's table, which
            shows the prior check only where it warns (:func:`prior_check_rows`).
    """
    return [
        *_run_rows(result),
        *levels_rows(result),
        *prior_check_rows(result, full=full),
        *_sampler_rows(result),
        *_diagnostics_rows(result),
        *recorded_convergence_rows(result),
        *_reference_rows(result),
        *posthoc_rows(result),
    ]


def _run_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """What was evaluated, under which shift, and the test metrics."""
    out = [("dataset", result["dataset"]), ("model", result["model"])]
    if "corruption" in result:
        shift = result["corruption"]
        out.append(("covariate shift", f"{shift['name']}, severity {shift['severity']}"))
    out.append(
        ("chains x kept samples", f"{result['num_chains']} x {result['num_samples_per_chain']}")
    )
    out += [(f"test {name}", f"{value:.4f}") for name, value in result["test"].items()]
    return out


def _sampler_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """A Markov chain sampler's statistics after burn-in."""
    sampler = result.get("sampler")
    if not sampler:
        return []
    out = [
        ("acceptance rate (after burn-in)", f"{sampler['acceptance_rate']:.3f}"),
        ("divergences (after burn-in)", str(sampler["num_divergent"])),
    ]
    if sampler.get("num_capped"):
        share = sampler["num_capped"] / sampler["num_transitions"]
        out.append(
            ("capped trajectories (after burn-in)", f"{sampler['num_capped']} ({share:.0%})")
        )
    if sampler.get("warning"):
        out.append(("  warning", sampler["warning"]))
    return [
        *out,
        ("step size per chain", ", ".join(f"{s:.2e}" for s in sampler["step_size"])),
        ("leapfrog steps per iteration", ", ".join(str(n) for n in sampler["num_leapfrog"])),
        (
            "seconds per iteration (mean after burn-in)",
            f"{sampler['seconds_per_iteration']:.3f}",
        ),
    ]


def _diagnostics_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Split R-hat and ESS per space, or why there are none."""
    if result.get("independent_draws"):
        # R-hat and ESS measure Markov chains; draws from an approximation are independent.
        return [("split R-hat, ESS", "– (independent draws)")]
    diag = result.get("diagnostics")
    if not diag:
        return []
    out = []
    for space in ("weights", "function"):
        r, e = diag[space]["rhat"], diag[space]["ess"]
        out.append(
            (
                f"split R-hat, {space} (median / p90 / max)",
                f"{r['median']:.3f} / {r['p90']:.3f} / {r['max']:.3f}",
            )
        )
        out.append((f"ESS, {space} (min / median)", f"{e['min']:.1f} / {e['median']:.1f}"))
    return out


def recorded_convergence_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The convergence verdict an evaluation stored by an older bnnkit holds (its outcome and
    summary, each chain, its problems and advice), shown as recorded; newer evaluations hold
    the one verdict of the levels (:func:`levels_rows`)."""
    verdict = result.get("convergence")
    if not verdict:
        return []
    out = [("convergence (recorded)", "yes" if verdict["converged"] else "NO")]
    if "level" in verdict:
        out.append(("  verdict (recorded)", f"{verdict['level']}: {verdict['summary']}"))
        out += [
            (f"  chain {check['chain']}", "mixed" if check["mixed"] else "NOT mixed")
            for check in verdict.get("within") or ()
        ]
    out += [("  problem", problem) for problem in verdict["problems"]]
    out += [("  to do", advice) for advice in verdict["advice"]]
    return out


#: The widest bar of the R-hat histogram, in characters.
_BAR = 24


def rhat_histogram_rows(histogram: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A compact text histogram of R-hat values (a level's ``rhat_histogram``): one row per
    bin that holds any, its range and a bar of ``█`` with its count.

    Example:
        >>> h = {"edges": [1.0, 1.02, 1.04, 1.06], "counts": [30, 0, 1], "undefined": 0}
        >>> for row in rhat_histogram_rows(h):
        ...     print(row)
        ('    R-hat < 1.02', '████████████████████████ 30')
        ('    R-hat ≥ 1.04', '█ 1')
    """
    if not histogram:
        return []
    edges, counts = histogram["edges"], histogram["counts"]
    most = max(max(counts), 1)
    out = []
    for i, count in enumerate(counts):
        if not count:
            continue
        if i == 0:
            span = f"< {edges[1]:g}"
        elif i == len(counts) - 1:
            span = f"≥ {edges[i]:g}"
        else:
            span = f"{edges[i]:g} – {edges[i + 1]:g}"
        out.append((f"    R-hat {span}", "█" * max(1, round(_BAR * count / most)) + f" {count}"))
    if histogram.get("undefined"):
        out.append(("    R-hat undefined", f"{histogram['undefined']} (constant)"))
    return out


def levels_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The verdict (``levels``, :mod:`bnnkit.metrics.levels`): the outcome, each level's
    status and figures (its row of :data:`~bnnkit.metrics.levels.LEVELS`), the histogram of
    R-hat within chains per test point, what failed and what to do (the advice as stored, or as
    the command that prints it spelt it). Nothing for an evaluation stored before the levels."""
    found = result.get("levels")
    if not found:
        return []
    verdict = Verdict.from_dict(found)
    out = [("verdict", f"{verdict.outcome}: {verdict.summary}")]
    for name, finding in verdict.findings.items():
        known = level(name)
        asks = known.asks if known else name
        detail = finding.why if finding.status == "not recorded" else ""
        if known and finding.status != "not recorded":
            detail = known.row(finding.figures)
        out.append((f"  {name} {asks}", f"{MARKS[finding.status]}: {detail}"))
        if finding.figures.get("rhat_histogram"):
            out.append(("  R-hat within chains per test point (worst chain)", ""))
            out += rhat_histogram_rows(finding.figures["rhat_histogram"])
        if finding.figures.get("note"):
            out.append((f"  {name} note", finding.figures["note"]))
    out += [("  problem", problem) for problem in verdict.problems]
    return out + [("  to do", advice) for advice in found.get("advice", ())]


def _reference_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The comparisons with a reference run and with a table of reference probabilities."""
    out = []
    ref = result.get("reference")
    if ref:
        floor = result.get("reference_noise_floor") or {}
        for name, value in ref.items():
            if name not in ("run", "settings_differ"):
                out.append((f"vs reference: {name}", f"{value:.4f}"))
                if isinstance(floor.get(name), float):
                    out.append(("  noise floor (reference half vs half)", f"{floor[name]:.4f}"))
        if "method_lpd_difference" in floor:
            out.append(
                ("vs reference: test LPD difference", f"{floor['method_lpd_difference']:+.4f}")
            )
            out.append(
                ("  noise floor (reference half vs half)", f"{floor['lpd_difference']:+.4f}")
            )
        if floor.get("note"):
            out.append(("  noise floor", floor["note"]))
        out += [("  reference differs", d) for d in ref.get("settings_differ", ())]
    probs = result.get("reference_probs")
    if probs:
        out.append((f"vs {probs['source']}: agreement", f"{probs['agreement']:.4f}"))
        out.append((f"vs {probs['source']}: total_variation", f"{probs['total_variation']:.4f}"))
        if "order" in probs:
            out.append(("  its test-set order", probs["order"]))
            out.append(("  bnnkit's test-set order", probs["bnnkit_order"]))
    return out


def prior_check_rows(result: dict[str, Any], *, full: bool = True) -> list[tuple[str, str]]:
    """Rows of the prior check the run recorded before its chains
    (:mod:`bnnkit.prior_check`): its figures, its warning and its note; "not recorded"
    for a run made before runs recorded it, nothing for an evaluation stored before that.
    With ``full=False`` (the terminal's table), only a check that warns: its figures and its
    warning, so that a run whose prior is sound prints no more than before.

    Example:
        >>> prior_check_rows({"prior_check": None})
        [('prior check', 'not recorded (the run was made before runs recorded it)')]
        >>> prior_check_rows({"prior_check": None}, full=False)
        []
    """
    if "prior_check" not in result:
        return []
    values = result["prior_check"]
    if not isinstance(values, dict):
        if not full:
            return []
        return [("prior check", "not recorded (the run was made before runs recorded it)")]
    found = PriorCheck.from_dict(values)
    if not full and not found.warning:
        return []
    return [
        ("prior check", found.summary().removeprefix("prior check ")),
        *(
            (f"  {what}", line)
            for what, line in (("warning", found.warning), ("note", found.note))
            if line and (full or what == "warning")
        ),
    ]


def posthoc_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the post-hoc parts of an evaluation: temperature scaling, conformal prediction
    and out-of-distribution detection, where asked for."""
    out = []
    scaled = result.get("temperature_scaling")
    if scaled:
        for name in ("temperature", "std_scale"):
            if name in scaled:
                out.append(
                    (
                        f"fitted {name.replace('_', ' ')}",
                        f"{scaled[name]:.4f} ({scaled['validation_size']} held out)",
                    )
                )
        out += [(f"calibrated test {k}", f"{v:.4f}") for k, v in scaled["test"].items()]
    conf = result.get("conformal")
    if conf:
        out.append(
            ("conformal score, held-out points", f"{conf['score']}, {conf['calibration_size']}")
        )
        out.append(
            ("conformal test coverage", f"{conf['coverage']:.4f} (1 − α = {1 - conf['alpha']:g})")
        )
        size = (
            ("mean set size", conf["mean_set_size"])
            if "mean_set_size" in conf
            else ("mean interval width", conf["mean_width"])
        )
        out.append((f"conformal {size[0]}", f"{size[1]:.4f}"))
    found = result.get("ood")
    if found:
        out.append(("OOD dataset", str(found["dataset"])))
        for score in ("entropy", "mutual_information"):
            name = score.replace("_", " ")
            out.append((f"OOD AUROC, {name}", f"{found[score]['auroc']:.4f}"))
            out.append((f"OOD FPR at 95% TPR, {name}", f"{found[score]['fpr_at_95_tpr']:.4f}"))
    return out


def print_table(
    result: dict[str, Any], title: str = "bnnkit evaluation", *, brief: bool = False
) -> None:
    """The evaluation as a table on stdout, then, for a fit that is not clearly better than the
    constant predictor (:mod:`bnnkit.metrics.baseline`), its one warning line on stderr, and
    the prior check's warning, where the run recorded one. ``brief``: what was evaluated and
    the test metrics (and the comparison with a reference, when one was given) alone, as the
    end of a run shows them above its verdict's line (the per-chain detail is ``bnnkit
    evaluate``'s and the report's)."""
    import sys

    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    # A comparison asked for with --reference is a figure of the run, shown with the brief.
    brief_rows = [*_run_rows(result), *_reference_rows(result)] if brief else None
    for name, value in brief_rows if brief else rows(result, full=False):
        table.add_row(name, value)
    Console().print(table)
    poor = (result.get("baseline") or {}).get("poor_fit")
    if poor:
        print(f"bnnkit: warning: poor fit: {poor}", file=sys.stderr)
    warning = (result.get("prior_check") or {}).get("warning")
    if warning:
        print(f"bnnkit: warning: prior check: {warning}", file=sys.stderr)


def markdown(result: dict[str, Any]) -> str:
    lines = ["| quantity | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows(result)]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def long_markdown(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """A long table (one row per measurement) as markdown, floats to 4 decimals.

    Example:
        >>> print(long_markdown([{"method": "hmc", "accuracy": 0.91234}], ("method", "accuracy")))
        | method | accuracy |
        |---|---:|
        | hmc | 0.9123 |
    """
    numeric = [all(isinstance(r[c], (int, float)) for r in rows) for c in columns]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(_cell(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def csv_text(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """A long table as CSV with a header line, floats at full precision (``repr``).

    Example:
        >>> print(csv_text([{"method": "hmc", "nll": 0.25}], ("method", "nll")), end="")
        method,nll
        hmc,0.25
    """
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[r[c] for c in columns] for r in rows])
    return buffer.getvalue()
