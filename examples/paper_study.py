"""The paper's whole study: every analysis of Izmailov et al. (2021), its findings scored.

Each of the six findings of the paper's abstract gets the figures it rests on and a verdict,
and everything goes into one report (``report/report.md`` and a self-contained
``report/report.html``). The same as ``bnnkit paper --scale SCALE --out DIR``.

    python examples/paper_study.py --scale small   # about 85 minutes on 2 CPU cores
    python examples/paper_study.py --small         # --scale tiny: a pipeline check, minutes

It needs MNIST (and Fashion-MNIST at --scale full): from --data-dir or $BNNKIT_DATA_DIR when
the files are there, otherwise downloaded once into the cache.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bnnkit.experiments import paper


def main(out: Path, small: bool = False, scale: str = "small", data_dir: str | None = None,
         progress: bool = True) -> paper.Study:
    config = paper.Config(scale="tiny" if small else scale, data_dir=data_dir)
    # Called again on the same folder, finished runs are reused and cut-off ones resumed.
    study = paper.paper(config, out / f"paper_{config.scale}", progress=progress)
    for finding in study.findings:
        print(f"{finding.number}. {finding.claim}: {finding.verdict}")
    print(f"report: {study.report}")
    return study


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="--scale tiny (a quick check)")
    parser.add_argument("--scale", default="small", choices=tuple(paper.SCALES))
    parser.add_argument("--data-dir", default=None, help="folder with the datasets")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="folder for the study")
    args = parser.parse_args()
    main(args.out, small=args.small, scale=args.scale, data_dir=args.data_dir)
