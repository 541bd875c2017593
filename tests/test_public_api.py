"""The top-level API: every exported name resolves and is documented, and the README and the
docs' examples use it."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bnnkit

ROOT = Path(__file__).resolve().parents[1]
# Data, not functions or classes: documented by the package docstring instead of their own.
VALUES = {"__version__", "METHODS"}


def python_block(page: str, section: str) -> str:
    """The first ```python block of the ``## section`` of a docs page (``docs/<page>``)."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return body.split("```python\n", 1)[1].split("```", 1)[0]


def docs_python_examples() -> dict[str, str]:
    """The Python examples of the docs that run as written, by where they are: the run, the
    evaluation and the export of Getting started, and the method interface used directly."""
    return {
        "getting-started.md": python_block("getting-started.md", "From Python"),
        "concepts/method-interface.md": python_block(
            "concepts/method-interface.md", "Using it directly"
        ),
    }


def readme_python_example() -> str:
    """The ```python block of the README's tour."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("name", bnnkit.__all__)
def test_every_exported_name_resolves_and_is_documented(name):
    value = getattr(bnnkit, name)
    if name in VALUES:
        assert name in bnnkit.__doc__ or name == "__version__"
        return
    assert inspect.isfunction(value) or inspect.isclass(value), (name, value)
    doc = inspect.getdoc(value)
    assert doc and doc != inspect.getdoc(object), name
    assert name in dir(bnnkit)


def method_names() -> dict[str, type]:
    """Each registered method's Config by the public name it states."""
    return {module.Config.API_NAME: module.Config for module in bnnkit.METHODS.values()}


def test_all_lists_every_lazy_name_and_every_method_config():
    assert len(bnnkit.__all__) == len(set(bnnkit.__all__))
    assert set(bnnkit.__all__) == {"ConfigError", "__version__", *bnnkit._LAZY, *method_names()}


def test_method_configs_are_the_registered_ones():
    names = method_names()
    assert len(names) == len(bnnkit.METHODS), "two methods' Configs state the same API_NAME"
    for name, config in names.items():
        # a class's name: capitalised, which is what lets bnnkit resolve it lazily
        assert name.isidentifier() and name[:1].isupper(), name
        assert getattr(bnnkit, name) is config, name
        assert name in dir(bnnkit), name
    assert names["HMC"] is bnnkit.METHODS["hmc"].Config  # the names users already write
    assert names["Ensemble"] is bnnkit.METHODS["ensemble"].Config


def test_static_view_names_only_real_names():
    # The TYPE_CHECKING block's __all__ and imports (for static checkers) name nothing that
    # bnnkit does not offer at run time, and each name it lists is imported there or defined.
    tree = ast.parse((ROOT / "src" / "bnnkit" / "__init__.py").read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    static = next(
        ast.literal_eval(node.value)
        for node in block.body
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__"
    )
    imported = {
        alias.asname or alias.name
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(static) <= set(bnnkit.__all__)
    assert set(static) - imported <= {"ConfigError", "__version__"}
    assert imported <= set(static)
    for name in imported:
        assert getattr(bnnkit, name) is not None, name


def test_import_is_cheap_until_a_name_is_touched():
    # A fresh interpreter: ``import bnnkit`` must not import JAX; a method's Config does.
    code = (
        "import sys, bnnkit; assert 'jax' not in sys.modules, 'jax at import'; "
        "bnnkit.ConfigError; assert 'jax' not in sys.modules, 'jax at ConfigError'; "
        "config = bnnkit.SGD; assert 'jax' in sys.modules; "
        "assert config is bnnkit.METHODS['sgd'].Config"
    )
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_evaluate_stays_the_function_whatever_the_import_order():
    # No submodule is named like a public function, so importing one cannot rebind the name.
    src = ROOT / "src" / "bnnkit"
    submodules = {p.stem for p in src.glob("*.py")} | {
        p.name for p in src.iterdir() if (p / "__init__.py").is_file()
    }
    assert not submodules & set(bnnkit._LAZY), submodules & set(bnnkit._LAZY)
    # A fresh interpreter, so the submodule is imported before the public name is looked up.
    code = (
        "import bnnkit.evaluation, bnnkit; from bnnkit.evaluation import export_samples; "
        "import importlib; m = importlib.import_module('bnnkit.evaluation'); "
        "assert bnnkit.evaluate is m.evaluate, bnnkit.evaluate; "
        "from bnnkit import evaluate; assert evaluate is m.evaluate; "
        "assert bnnkit.evaluation is m"
    )
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert bnnkit.evaluate is importlib.import_module("bnnkit.evaluation").evaluate


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        bnnkit.nope  # noqa: B018


@pytest.mark.parametrize(
    "code",
    [readme_python_example(), *docs_python_examples().values()],
    ids=["README.md", *docs_python_examples()],
)
def test_python_examples_use_the_top_level_api(code):
    assert "import bnnkit\n" in code
    # nothing from submodules: the example is what `bnnkit.__all__` offers
    assert "from bnnkit" not in code


@pytest.mark.slow
def test_docs_python_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # their run directories are relative
    for where, code in docs_python_examples().items():
        exec(compile(code, where, "exec"), {"__name__": "docs"})
    assert (tmp_path / "runs" / "yacht_hmc" / "evaluation.json").is_file()
    assert (tmp_path / "runs" / "yacht_hmc.npz").is_file()
