"""The docs: generated pages match the code, the nav reaches every page (each method's from
``METHODS``), every command points at a page that exists, the README stays a front page, and
the site builds without warnings."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
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


GENERATED = (
    "reference/problem.md",
    "reference/commands.md",
    "reference/python-api.md",
    "reference/datasets.md",
    "reference/models.md",
)


def test_generated_pages_are_up_to_date(tmp_path):
    generate = load_generator()
    written = generate.write(tmp_path)
    assert len(written) == len(METHODS) + len(GENERATED)  # one page per method, and the rest
    assert {p.relative_to(tmp_path).as_posix() for p in written} == {
        *GENERATED,
        *(f"reference/methods/{name}.md" for name in METHODS),
    }
    for path in written:
        committed = ROOT / "docs" / path.relative_to(tmp_path)
        assert committed.is_file(), f"{committed} missing: run python docs/generate.py"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed} is stale: run python docs/generate.py"
        )


def test_every_command_and_every_public_name_is_on_a_reference_page():
    import bnnkit
    from bnnkit.commands import COMMANDS

    reference = ROOT / "docs" / "reference"
    commands = (reference / "commands.md").read_text(encoding="utf-8")
    api = (reference / "python-api.md").read_text(encoding="utf-8")
    configs = {}
    for method, module in METHODS.items():  # a method's command and Config: on its own page
        page = (reference / "methods" / f"{method}.md").read_text(encoding="utf-8")
        assert f"`bnnkit {method} --dataset" in page, method
        assert f"\n## bnnkit.{module.Config.API_NAME}\n" in page, method
        configs[module.Config.API_NAME] = method
    for name in set(COMMANDS()) - set(METHODS):
        assert f"\n### {name}\n" in commands, name
    for name in set(bnnkit.__all__) - {"__version__"} - set(configs):
        assert f"\n## bnnkit.{name}\n" in api, name
    # Neither index names a method, so adding one changes neither.
    for method, module in METHODS.items():
        assert f"\n### {method}\n" not in commands, method
        assert f"\n## bnnkit.{module.Config.API_NAME}\n" not in api, method


def test_a_method_page_links_the_guide_that_names_it(tmp_path):
    generate = load_generator()
    # Derived from the guides' front matter, and checked against it: a guide that names a
    # method is linked from that method's page, and only from its.
    guides = generate.guides()
    assert guides, "no guide names a method in its front matter"
    for name in METHODS:
        page = (ROOT / "docs" / "reference" / "methods" / f"{name}.md").read_text(encoding="utf-8")
        if name in guides:
            assert f"(../../{guides[name]})" in page, name
            assert (ROOT / "docs" / guides[name]).is_file(), guides[name]
        else:
            assert "How to use it" not in page, name
    # The check can fail: a guide naming no method that exists is not linked from anywhere.
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "x.md").write_text("---\nmethods: [hmc]\n---\n# X\n")
    assert generate.guides(tmp_path) == {"hmc": "guides/x.md"}
    assert "../../guides/x.md" in generate.method_page("hmc", "guides/x.md")


def test_every_command_points_at_a_page_that_exists():
    from bnnkit.cli import build_parser
    from bnnkit.commands import COMMANDS

    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    for name, command in COMMANDS().items():
        assert (ROOT / "docs" / command.docs).is_file(), (name, command.docs)
        help_text = sub.choices[name].format_help()
        # the last line of `bnnkit COMMAND --help` is the pointer to the command's page
        assert help_text.rstrip().splitlines()[-1] == f"docs: docs/{command.docs}", name


def test_readme_is_a_front_page_listing_every_command():
    from bnnkit.commands import COMMANDS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250, "README.md is the front page: move details to docs/"
    # Every command but the methods' has its line; the README names the methods it tours and
    # points at `bnnkit --help` and the docs' Methods section for all of them (derived from
    # METHODS), so a new method needs no README edit. A row it has must be a real command.
    for name in set(COMMANDS()) - set(METHODS):
        assert f"| `bnnkit {name}` |" in readme, f"bnnkit {name} is missing from the README"
    for name in re.findall(r"^\| `bnnkit ([a-z-]+)` \|", readme, flags=re.MULTILINE):
        assert name in COMMANDS(), f"the README lists bnnkit {name}, which does not exist"


# A stated time: "9 min 42 s", "3 to 9 minutes", "about 21 min".
TIME = re.compile(r"(?:about )?\d+(?:\.\d+)?(?: to \d+)? min(?:utes)?(?: \d+ s)?")
MAKE_TARGET = re.compile(r"`make (?:demo|test|test-slow)`|^make (?:demo|test)\b", re.MULTILINE)


def makefile_times() -> set[str]:
    # The Makefile's comments hold the measured times (and on what machine and load); a
    # comment's figure may wrap onto the next line.
    lines = (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    comments = " ".join(line.lstrip("# ") for line in lines if line.startswith("#"))
    return set(TIME.findall(comments))


def times_stated_beside_a_make_target(text: str) -> set[str]:
    # A clause (up to a full stop or a semicolon) that names a make target and states a time;
    # a tutorial's own time beside "which is what `make test-slow` does" is another clause.
    clauses = re.split(r"\n\s*\n|(?<=[.;])\s+", text)
    return {t for clause in clauses if MAKE_TARGET.search(clause) for t in TIME.findall(clause)}


def test_every_stated_time_of_a_make_target_is_the_makefiles():
    measured = makefile_times()
    assert {"3 to 9 minutes", "9 min 42 s", "25 min 24 s"} <= measured, measured
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    stated = {
        p.relative_to(ROOT).as_posix(): times_stated_beside_a_make_target(
            p.read_text(encoding="utf-8")
        )
        for p in pages
    }
    assert stated["README.md"] and stated["docs/getting-started.md"]
    unmeasured = {
        page: sorted(times - measured) for page, times in stated.items() if times - measured
    }
    assert not unmeasured, f"times the Makefile's comments do not state: {unmeasured}"
    # The check can fail: a rounded or stale time beside a make target is one the Makefile lacks.
    stale = "make test   # the test suite but its slow checks (about 21 min on 2 cores)"
    assert times_stated_beside_a_make_target(stale) - measured == {"about 21 min"}


def test_every_setting_is_on_its_page():
    for name, module in METHODS.items():
        page = (ROOT / "docs" / "reference" / "methods" / f"{name}.md").read_text(encoding="utf-8")
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


needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed"
)


def built_nav(docs_dir: Path | None = None):
    """The site's files and navigation as ``mkdocs build`` makes them: mkdocs.yml loaded, its
    hooks run on the config (``method_nav.py`` fills the methods), then mkdocs's own
    ``get_files`` and ``get_navigation``. ``docs_dir`` replaces the docs folder."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files
    from mkdocs.structure.nav import get_navigation

    overrides = {} if docs_dir is None else {"docs_dir": str(docs_dir)}
    config = load_config(str(ROOT / "mkdocs.yml"), **overrides)
    config = config.plugins.on_config(config)
    files = get_files(config)
    return files, get_navigation(files, config)


def reached(nav) -> set[str]:
    return {page.file.src_uri for page in nav.pages}


@needs_mkdocs
def test_every_method_page_is_in_the_nav():
    _, nav = built_nav()
    missing = {f"reference/methods/{name}.md" for name in METHODS} - reached(nav)
    assert not missing, f"methods without a page in the nav: {sorted(missing)}"


@needs_mkdocs
def test_every_docs_page_is_reached_by_the_nav():
    # mkdocs --strict warns about a page the nav leaves out only with mkdocs.yml's
    # validation setting; this holds whatever that setting says.
    files, nav = built_nav()
    pages = {f.src_uri for f in files.documentation_pages()}
    assert pages == reached(nav), f"pages the nav does not reach: {sorted(pages - reached(nav))}"


@needs_mkdocs
def test_an_unreachable_page_is_caught(tmp_path):
    # The check above can fail: a copy of docs/ with one page more than the nav reaches.
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "docs" / "orphan.md").write_text("# not in the nav\n", encoding="utf-8")
    files, nav = built_nav(tmp_path / "docs")
    pages = {f.src_uri for f in files.documentation_pages()}
    assert pages - reached(nav) == {"orphan.md"}


@pytest.mark.slow
@needs_mkdocs
def test_mkdocs_build_is_strict_clean(tmp_path):
    # No -q: it lowers mkdocs' log level to ERROR, so --strict never sees a warning to count.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert result.returncode == 0 and not warnings, "\n".join(warnings) or result.stderr
    for name in METHODS:
        assert (tmp_path / "site" / "reference" / "methods" / name / "index.html").is_file(), name
