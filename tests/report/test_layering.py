"""report/ sits above the runs and below nothing it reports on: it never imports experiments/.

The experiments write their folders and import report/'s tables and plots to do it; report/
reads those folders back. An import of ``bnnkit.experiments`` from report/ would be an arrow
up the layering (and a cycle), so the file names and the ``--out`` check both need live below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "src" / "bnnkit" / "report"


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``path`` names, at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "bnnkit":  # from bnnkit import experiments
                names.update(f"bnnkit.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(REPORT.rglob("*.py")), ids=lambda p: p.name)
def test_report_does_not_import_experiments(path):
    upward = sorted(
        m
        for m in imported_modules(path)
        if m == "bnnkit.experiments" or m.startswith("bnnkit.experiments.")
    )
    assert not upward, f"{path.name} imports {upward}"
