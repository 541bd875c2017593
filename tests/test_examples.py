"""The tutorials' scripts (``examples/``) run as written, on small settings, so a tutorial
cannot rot; each script checks the verdict and figures its page states and exits non-zero when
they do not hold; and every script is on a tutorial page, which shows it verbatim
(``tests/test_tutorial_pages.py`` keeps the page's copy equal to the file)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: Scripts another test already runs on small settings: the paper's study is
#: tests/experiments/test_paper.py::test_tiny_study_end_to_end (it needs the real data).
RUN_ELSEWHERE = {"paper_study.py"}


def scripts() -> list[str]:
    """Every example with a ``__main__`` block (the others are modules the scripts import)."""
    return sorted(
        p.name
        for p in EXAMPLES.glob("*.py")
        if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")
    )


def included() -> dict[str, str]:
    """Which tutorial page shows each example file (a block ``python title="examples/NAME"``)."""
    pages = {}
    for page in sorted((ROOT / "docs" / "tutorials").glob("*.md")):
        for name in re.findall(
            r'^```python title="examples/([^"]+)"$', page.read_text(encoding="utf-8"), re.M
        ):
            pages[name] = page.name
    return pages


def test_every_example_is_on_a_tutorial_page_and_every_script_is_run():
    files = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts(), "no example scripts found"
    assert set(included()) == files, "examples not on a tutorial page, or pages naming none"
    for name in RUN_ELSEWHERE:
        assert name in scripts(), name
    for name in scripts():
        text = (EXAMPLES / name).read_text(encoding="utf-8")
        assert "--small" in text, f"{name} takes no --small: the tests could not run it small"


@pytest.mark.slow  # each script end to end: 1 to 3 minutes on 2 cores
@pytest.mark.parametrize("name", [s for s in scripts() if s not in RUN_ELSEWHERE])
def test_example_runs_on_small_settings(name, tmp_path):
    # As a user runs it, in a fresh process from the repository root; no real data needed.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--small", "--out", str(tmp_path / "runs")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"{name} failed:\n{output}"
    assert (tmp_path / "runs").is_dir() and any((tmp_path / "runs").iterdir()), name
