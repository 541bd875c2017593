"""Does the advice of a default reference's verdict work? Each change it prints, followed.

For each split, the default ``bnnkit reference`` (``--model mlp_regression_small``, seed 0)
runs; its verdict (``chains/evaluation.json``, ``levels``) names for each failed level the
remedies whose changes it prints as the command's settings. Each distinct change printed is
then followed on its own, as a user would, from a new folder:

- a value to set (``sampler nuts``) is set;
- ``a longer num_tuning`` doubles the tuning iterations, ``a larger num_samples`` the kept
  ones (the default's, :data:`bnnkit.experiments.reference.DEFAULT_BUDGET`), ``a larger
  members`` the ensemble's members and so the chains;

with ``--max-time`` at ``--time-factor`` times the default's wall time on that split, so that
a change which cannot finish in a budget a user would give it counts as not helping. The
table gives, per change and per level that printed it, the splits where it was printed, where
that level passed after it, and where the verdict rose; a change whose level passed after it
on fewer than half of the splits where that level printed it fails the test of printed advice
for that level (:mod:`bnnkit.metrics.measured_advice` leaves it out there).

    BNNKIT_DATA_DIR=... python benchmarks/advice_followed.py --root DIR
        [--datasets yacht_0 ...] [--time-factor 4] [--levels L2 L3] [--out FILE.json]

Each folder is kept under ``--root``; a finished one is read again, not rerun.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from bnnkit.command_flags import spelling
from bnnkit.experiments.reference import DEFAULT_BUDGET, Config
from bnnkit.metrics.findings import COMPARATIVES
from bnnkit.metrics.levels import VERDICTS
from peer_bde import reference_command

DATASETS = ("yacht_0", "concrete_0", "energy_0", "boston_0", "wine-quality-red_0")


def flags_for(advice: str) -> list[str] | None:
    """The command-line flags that follow one printed change (``None``: not followed here).

    Example:
        >>> flags_for("sampler nuts"), flags_for("a longer num_tuning")
        (['--sampler', 'nuts'], ['--num-tuning', '1000'])
        >>> flags_for("a larger num_samples"), flags_for("a smaller energy_var_end")
        (['--num-samples', '400'], None)
        >>> flags_for("a larger members")
        ['--members', '16']
    """
    tuning, kept = DEFAULT_BUDGET["mclmc"]
    doubled = {"num_tuning": 2 * tuning, "num_samples": 2 * kept, "members": 2 * Config().members}
    words = advice.split()
    if len(words) == 2 and not words[0].startswith("a"):
        return ["--" + words[0].replace("_", "-"), words[1]]
    if len(words) == 3 and words[0] == "a" and words[2] in doubled:
        return ["--" + words[2].replace("_", "-"), str(doubled[words[2]])]
    return None


def printed_changes(levels: dict) -> dict[str, list[str]]:
    """Each change the verdict prints for ``bnnkit reference`` before any is left out as
    measured (``"sampler nuts"``), and the failed levels whose remedies print it: the
    remedies' changes of the settings the command has a flag for.

    Example:
        >>> levels = {"failed": ["L0"], "L0": {"remedies": [{"helps": "h", "changes":
        ...     [["adjusted", "on"], ["sampler", "nuts"], ["num_tuning", "longer"]]}]}}
        >>> printed_changes(levels)
        {'sampler nuts': ['L0'], 'a longer num_tuning': ['L0']}
    """
    spell = spelling("reference")
    found: dict[str, list[str]] = {}
    for level in levels.get("failed", []):
        for remedy in levels[level].get("remedies", []):
            for name, value in remedy["changes"]:
                if spell(name) is None:
                    continue
                text = f"a {value} {name}" if value in COMPARATIVES else f"{name} {value}"
                if level not in found.setdefault(text, []):
                    found[text].append(level)
    return found


def run_reference(folder: Path, dataset: str, extra: list[str]) -> dict:
    """The reference in ``folder`` (run unless it has finished): its levels and wall time."""
    done = folder / "chains" / "evaluation.json"
    record = folder.with_suffix(".json")
    if record.is_file():  # written once the run has ended, kept draws or not
        return json.loads(record.read_text())
    command = reference_command(dataset, "mlp_regression_small", 0, folder, *extra)
    start = time.perf_counter()
    subprocess.run(command, check=False, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    levels = json.loads(done.read_text())["levels"] if done.is_file() else None
    result = {"extra": extra, "seconds": seconds, "levels": levels}
    record.write_text(json.dumps(result))
    return result


def followed(
    root: Path, dataset: str, time_factor: float, only: tuple[str, ...] | None = None
) -> dict:
    """The default reference on ``dataset`` and each change its verdict prints, followed (only
    those printed by the levels ``only`` names, where given)."""
    default = run_reference(root / dataset / "default", dataset, [])
    levels = default["levels"]
    rows = {}
    for change, printed_by in printed_changes(levels).items():
        printed_by = [level for level in printed_by if only is None or level in only]
        if not printed_by:
            continue
        flags = flags_for(change)
        if flags is None:
            continue
        budget = ["--max-time", f"{round(time_factor * default['seconds'])}s"]
        name = "_".join(flags).strip("-").replace("--", "")
        after = run_reference(root / dataset / name, dataset, flags + budget)["levels"]
        rank = VERDICTS.index(after["verdict"]) if after else len(VERDICTS)
        before = VERDICTS.index(levels["verdict"])
        rows[change] = {
            "printed_by": printed_by,
            "verdict_after": after["verdict"] if after else "stopped before any kept draw",
            "passed_after": [
                level for level in printed_by if after and after[level].get("status") == "pass"
            ],
            "raised_verdict": rank < before,
        }
    return {"verdict": levels["verdict"], "failed": levels["failed"], "changes": rows}


def table(results: dict) -> str:
    """Per change and level that printed it: the splits where it was printed, where that
    level passed after it and where the verdict rose; as Markdown."""
    tally: dict[tuple[str, str], list[int]] = {}
    for found in results.values():
        for change, row in found["changes"].items():
            for level in row["printed_by"]:
                count = tally.setdefault((change, level), [0, 0, 0])
                count[0] += 1
                count[1] += level in row["passed_after"]
                count[2] += row["raised_verdict"]
    lines = [
        "| printed change | for | splits printed | the level passed after | verdict rose "
        "| passes the test |",
        "|---|---|---:|---:|---:|---|",
    ]
    for (change, level), (printed, passed, raised) in sorted(tally.items()):
        ok = "yes" if 2 * passed >= printed else "no"
        lines.append(f"| {change} | {level} | {printed} | {passed} | {raised} | {ok} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--time-factor", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--levels", nargs="+", default=None, help="follow only the changes these levels print"
    )
    args = parser.parse_args()
    if args.time_factor <= 0:
        parser.error(f"--time-factor must be positive, got {args.time_factor}")
    results = {}
    for dataset in args.datasets:
        (args.root / dataset).mkdir(parents=True, exist_ok=True)
        only = None if args.levels is None else tuple(args.levels)
        results[dataset] = followed(args.root, dataset, args.time_factor, only)
        print(dataset, json.dumps(results[dataset]), flush=True)
    print(table(results))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(table(results) + "\n")


if __name__ == "__main__":
    main()
