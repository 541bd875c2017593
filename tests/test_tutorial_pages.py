"""Each tutorial page shows its scripts inline, as they are in ``examples/``.

A page is read in the repository as often as on the site, so the code is in the page itself
(a fenced block titled with the script's path, ``python title="examples/NAME.py"``), not
pulled in when the site is built. These tests keep each block equal to its file, character for
character; after editing a script, ``python tests/test_tutorial_pages.py`` rewrites the blocks.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "tutorials"
#: A fenced block showing a script: its opening line names the file, its body is the file.
BLOCK = re.compile(r'^```python title="(examples/[^"]+)"\n(.*?)^```$', re.M | re.S)


def blocks(text: str) -> list[tuple[str, str]]:
    """The ``(path, code)`` of every script block of a page, in order.

    Args:
        text: a Markdown page.

    Returns:
        Each block's file path (relative to the repository root) and its text.

    Example:
        >>> blocks('Intro\\n```python title="examples/a.py"\\nx = 1\\n```\\n')
        [('examples/a.py', 'x = 1\\n')]
    """
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def synced(text: str, root: Path = ROOT) -> str:
    """``text`` with every script block's body replaced by its file's text.

    Args:
        text: a Markdown page.
        root: the folder the blocks' paths are relative to.

    Returns:
        The page with each block equal to its file.
    """

    def body(m: re.Match) -> str:
        code = (root / m.group(1)).read_text(encoding="utf-8")
        return f'```python title="{m.group(1)}"\n{code}```'

    return BLOCK.sub(body, text)


def pages() -> list[Path]:
    return sorted(PAGES.glob("*.md"))


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_each_script_block_is_its_file(page):
    text = page.read_text(encoding="utf-8")
    assert "--8<--" not in text, (
        f"{page.name} includes a file at build time; read in the "
        "repository it shows the include line, not the code"
    )
    for path, code in blocks(text):
        assert (ROOT / path).is_file(), f"{page.name} shows {path}, which does not exist"
        assert code == (ROOT / path).read_text(encoding="utf-8"), (
            f"{page.name}'s block of {path} differs from the file: run "
            "python tests/test_tutorial_pages.py"
        )


def test_every_example_is_shown_on_a_page():
    shown = {path for page in pages() for path, _ in blocks(page.read_text(encoding="utf-8"))}
    files = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}
    assert files, "no example scripts found"
    assert files <= shown, f"not shown on any tutorial page: {sorted(files - shown)}"


def test_a_stale_block_is_found_and_rewritten(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "a.py").write_text("x = 2\n", encoding="utf-8")
    page = 'Before\n\n```python title="examples/a.py"\nx = 1\n```\n\nAfter ```code```\n'
    assert blocks(page) == [("examples/a.py", "x = 1\n")]
    fixed = synced(page, tmp_path)
    assert blocks(fixed) == [("examples/a.py", "x = 2\n")]
    assert fixed.startswith("Before\n\n") and fixed.endswith("\n\nAfter ```code```\n")


if __name__ == "__main__":
    for page in pages():
        old = page.read_text(encoding="utf-8")
        new = synced(old)
        if new != old:
            page.write_text(new, encoding="utf-8")
            print(f"rewrote {page.relative_to(ROOT)}", file=sys.stderr)
