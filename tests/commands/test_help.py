"""``--help`` of every command: help text, defaults, choices and models; ``--version``."""

from __future__ import annotations

import argparse
import dataclasses
from importlib import metadata

import pytest

from bnnkit.cli import build_parser, main
from bnnkit.inference import METHODS
from bnnkit.models import ALIASES, MODELS


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return dict(parser._subparsers._group_actions[0].choices)


def help_text(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # the text without its line wrapping


def test_every_option_of_every_command_has_help():
    for name, parser in commands().items():
        for action in parser._actions:
            assert action.help and action.help.strip(), (name, action.option_strings)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_method_help_shows_defaults_and_choices(method, capsys):
    text = help_text(method, capsys)
    for field in dataclasses.fields(METHODS[method].Config):
        meta = field.metadata
        if not meta.get("cli"):
            continue
        flag = meta.get("flag") or "--" + field.name.replace("_", "-")
        assert flag in text, flag
        for alias in meta.get("aliases", ()):
            assert alias in text, alias
        if meta.get("choices"):
            assert "{" + ",".join(meta["choices"]) + "}" in text, flag
        default = field.default
        if default is dataclasses.MISSING or default is None or isinstance(default, bool):
            continue
        if "default" not in meta["help"]:
            assert f"(default: {default})" in text, flag


def test_model_help_lists_every_model_and_alias(capsys):
    text = help_text("hmc", capsys)
    for name in [*MODELS, *ALIASES]:
        assert name in text


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"bnnkit {metadata.version('bnnkit')}"


def test_top_level_help_groups_every_command_once(capsys):
    from bnnkit.commands import COMMANDS, GROUPS, groups

    with pytest.raises(SystemExit):
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    # each group's heading, then its commands, in the order groups() gives them
    listed: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.endswith(":") and line[:-1] in GROUPS.values():
            current = line[:-1]
            listed[current] = []
        elif current is not None and line.startswith("  ") and not line.startswith("   "):
            listed[current].append(line.split()[0])
    assert listed == {GROUPS[g]: list(names) for g, names in groups().items()}
    # the methods' group is METHODS, and every command is in exactly one group
    assert listed["methods"] == list(METHODS)
    everything = [name for names in listed.values() for name in names]
    assert sorted(everything) == sorted(COMMANDS()) and len(set(everything)) == len(everything)


def test_command_help_ends_with_its_docs_page(capsys):
    with pytest.raises(SystemExit):
        main(["hmc", "--help"])
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == (
        "docs: docs/reference/methods/hmc.md"
    )
