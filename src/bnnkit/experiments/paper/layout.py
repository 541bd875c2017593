"""Where a paper study keeps what it makes: the file names and the parts' subfolders.

The driver (:mod:`bnnkit.experiments.paper.study`) writes these and the findings
(:mod:`bnnkit.experiments.paper.results`) read them back, so both take the names from here.
"""

from __future__ import annotations

__all__ = [
    "FINDINGS_FILE",
    "FINDINGS_JSON",
    "PARTS",
    "REPORT_DIR",
    "SETTINGS_FILE",
]

SETTINGS_FILE = "paper.json"
FINDINGS_FILE = "findings.md"
FINDINGS_JSON = "findings.json"
REPORT_DIR = "report"
#: The parts, in the order they run; each is a subfolder of ``--out``.
PARTS = (
    "compare_methods",
    "convergence",
    "shift",
    "shift_mnist",
    "surface",
    "temperature",
    "prior_sweep",
    "bbb_mnist",
)
