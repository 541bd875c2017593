"""The docs: settings pages match the Configs, and the site builds without warnings."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from bnnkit import METHODS
from bnnkit.settings import flag, setting

ROOT = Path(__file__).resolve().parents[1]


def load_generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_up_to_date(tmp_path):
    generate = load_generator()
    written = generate.write(tmp_path)
    assert len(written) == 8  # the problem and seven methods
    for path in written:
        committed = ROOT / "docs" / path.relative_to(tmp_path)
        assert committed.is_file(), f"{committed} missing: run python docs/generate.py"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed} is stale: run python docs/generate.py")


def test_every_setting_is_on_its_page():
    for name, module in METHODS.items():
        page = (ROOT / "docs" / "methods" / f"{name}.md").read_text(encoding="utf-8")
        for field in dataclasses.fields(module.Config):
            if field.metadata.get("cli"):
                assert f"| `{flag(module.Config, field.name)}` |" in page, (name, field.name)
                for alias in field.metadata.get("aliases", ()):
                    assert f"`{alias}`" in page, (name, alias)


def test_a_pipe_in_help_does_not_split_the_row():
    generate = load_generator()
    @dataclasses.dataclass(frozen=True)
    class Example:
        mode: str = setting("a", help="a | b", choices=("a", "b"))

    row = generate.settings_table(Example).splitlines()[-1]
    assert row == "| `mode` | `--mode` |  | `'a'` | a \\| b; one of `a`, `b` |"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed")
def test_mkdocs_build_is_strict_clean(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "methods" / "hmc" / "index.html").is_file()
