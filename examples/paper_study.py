"""The paper's whole study: every analysis of Izmailov et al. (2021), its findings scored.

Each of the six findings of the paper's abstract gets the figures it rests on and a verdict,
and everything goes into one report (``report/report.md`` and a self-contained
``report/report.html``). The same as ``bnnkit paper --scale SCALE --out DIR``.

    python examples/paper_study.py --scale small   # about an hour on 2 CPU cores
    python examples/paper_study.py --small         # --scale tiny: a pipeline check, minutes

It needs MNIST (and Fashion-MNIST at --scale full): from --data-dir or $BNNKIT_DATA_DIR when
the files are there, otherwise downloaded once into the cache. It ends by checking what the
tutorial states: six findings, each with a verdict, and the report written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bnnkit.experiments.paper.scales import SCALES, Config
from bnnkit.experiments.paper.study import Study, paper
from bnnkit.experiments.paper.verdicts import VERDICTS


def main(
    out: Path,
    small: bool = False,
    scale: str = "small",
    data_dir: str | None = None,
    progress: bool = True,
) -> Study:
    config = Config(scale="tiny" if small else scale, data_dir=data_dir)
    # Called again on the same folder, finished runs are reused and cut-off ones resumed.
    study = paper(config, out / f"paper_{config.scale}", progress=progress)
    for finding in study.findings:
        print(f"{finding.number}. {finding.claim}: {finding.verdict}")
    print(f"report: {study.report}")
    check(study)
    return study


def check(study: Study) -> None:
    """What the tutorial states, checked: each of the paper's six findings has a verdict,
    and the report is written (Markdown and self-contained HTML). Exits with a message
    otherwise."""
    numbers = [finding.number for finding in study.findings]
    unknown = [(f.number, f.verdict) for f in study.findings if f.verdict not in VERDICTS]
    missing = [name for name in ("report.md", "report.html") if not (study.report / name).is_file()]
    if numbers != [1, 2, 3, 4, 5, 6] or unknown or missing:
        sys.exit(
            f"paper_study.py: expected findings 1 to 6, each with one of {VERDICTS}, "
            f"and {study.report}/report.md and report.html; got findings {numbers}, "
            f"unknown verdicts {unknown}, missing {missing}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="--scale tiny (a quick check)")
    parser.add_argument("--scale", default="small", choices=tuple(SCALES))
    parser.add_argument("--data-dir", default=None, help="folder with the datasets")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="folder for the study")
    args = parser.parse_args()
    main(args.out, small=args.small, scale=args.scale, data_dir=args.data_dir)
