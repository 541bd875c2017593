"""``bnnkit evaluate RUN_DIR``: metrics and diagnostics recomputed from stored samples."""

from __future__ import annotations

import argparse
import json
import sys

from bnnkit.commands.advice import spelt
from bnnkit.commands.command import Command
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.evaluation import evaluate
from bnnkit.metrics.levels import LEVELS
from bnnkit.report.tables import print_table

#: What each outcome of the verdict means, shown under ``bnnkit evaluate --help``.
OUTCOMES = {
    "certified": "every level passes.",
    "reproducible": "every level a reproducible run needs passes ({needed}): another run "
    "would reproduce its model average, good enough to rank approximations; not certified.",
    "not a reference": "a level a reproducible run needs failed; the verdict's last lines "
    "say what would help, in the flags of the command that made the run.",
}
#: Columns of the verdict's help: what an 80-column terminal shows whole.
HELP_WIDTH = 79


def verdict_help() -> str:
    """How to read the verdict, from its levels (:data:`bnnkit.metrics.levels.LEVELS`), laid
    out in :data:`HELP_WIDTH` columns.

    Example:
        >>> text = verdict_help()
        >>> text.splitlines()[2].split()[:2], max(map(len, text.splitlines())) <= HELP_WIDTH
        (['L0', 'numerics'], True)
    """
    import textwrap

    lines = textwrap.wrap(
        "For Markov chains the output ends with one verdict on the test predictions, "
        "judged at these levels:",
        HELP_WIDTH,
    )
    lines += [f"  {level.name} {level.asks}" for level in LEVELS]
    lines.append("and one of these outcomes:")
    needed = ", ".join(level.name for level in LEVELS if level.reproducible)
    column = 2 + max(map(len, OUTCOMES)) + 2
    for outcome, meaning in OUTCOMES.items():
        lines += textwrap.wrap(
            meaning.format(needed=needed),
            HELP_WIDTH,
            initial_indent=f"  {outcome:<{column - 2}}",
            subsequent_indent=" " * column,
            break_on_hyphens=False,
        )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    # The verdict's levels as laid out here, above the pointer to the docs the parser ends with.
    p.epilog = verdict_help() + (f"\n{p.epilog}" if p.epilog else "")
    if not issubclass(p.formatter_class, argparse.RawDescriptionHelpFormatter):
        p.formatter_class = type(
            "VerdictHelpFormatter", (p.formatter_class, argparse.RawDescriptionHelpFormatter), {}
        )
    p.add_argument("run_dir", help="a run directory")
    p.add_argument(
        "--reference",
        default=None,
        help="another run on the same data (e.g. HMC) to compare against",
    )
    p.add_argument(
        "--reference-probs",
        default=None,
        metavar="cifar10_hmc|imdb_hmc|FILE",
        help="released HMC test-set probabilities (or a whitespace-delimited table, "
        "one row per test point) to score agreement and total variation against",
    )
    p.add_argument(
        "--corruption",
        default=None,
        help="evaluate on test images under this CIFAR-10-C-style corruption",
    )
    p.add_argument("--severity", type=int, default=None, help="corruption severity, 1..5")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="fit temperature scaling of the predictive (classification: one "
        "temperature; regression: one stretch of the predictive about its mean) "
        "on the run's validation set (--validation-size), and report the test "
        "metrics after it",
    )
    p.add_argument(
        "--conformal",
        type=float,
        default=None,
        metavar="ALPHA",
        help="split conformal prediction at miscoverage ALPHA, calibrated on the "
        "run's validation set: LAC sets (classification) or intervals from "
        "|y - mean| / std (regression), with their test coverage and mean size "
        "or width",
    )
    p.add_argument(
        "--ood",
        default=None,
        metavar="DATASET",
        help="out-of-distribution detection against DATASET's test inputs (e.g. "
        "fashion_mnist for an MNIST run): AUROC and FPR at 95%% TPR of the "
        "predictive entropy and the mutual information",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    add_trust_model_argument(p)


def run(args: argparse.Namespace) -> int:
    result = evaluate(
        args.run_dir,
        reference=args.reference,
        reference_probs=args.reference_probs,
        corruption=args.corruption,
        severity=args.severity,
        calibrate=args.calibrate,
        conformal=args.conformal,
        ood=args.ood,
        trust_model=args.trust_model,
    )
    for differ in result.get("reference", {}).get("settings_differ", ()):
        print(
            f"bnnkit: warning: the reference run targets another posterior: {differ}",
            file=sys.stderr,
        )
    result = spelt(result)  # the advice in the flags of the command that made the run
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print_table(result, title=f"evaluation of {args.run_dir}")
    return 0


COMMAND = Command(
    help="recompute metrics and diagnostics of a run",
    add_arguments=add_arguments,
    run=run,
    docs="concepts/reference.md",
)
