"""The top-level API: every exported name resolves and is documented, and the README uses it."""

from __future__ import annotations

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


def readme_python_example() -> str:
    """The first ```python block of the README's "## Python" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


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


def test_all_lists_every_lazy_name():
    assert set(bnnkit.__all__) == {"ConfigError", "__version__", *bnnkit._LAZY}


def test_method_configs_are_the_registered_ones():
    configs = {bnnkit.HMC, bnnkit.NUTS, bnnkit.SGD, bnnkit.Ensemble, bnnkit.SGMCMC, bnnkit.VI,
               bnnkit.Laplace}
    assert configs == {module.Config for module in bnnkit.METHODS.values()}


def test_evaluate_stays_the_function_whatever_the_import_order():
    # No submodule is named like a public function, so importing one cannot rebind the name.
    src = ROOT / "src" / "bnnkit"
    submodules = {p.stem for p in src.glob("*.py")} | {p.name for p in src.iterdir()
                                                      if (p / "__init__.py").is_file()}
    assert not submodules & set(bnnkit._LAZY), submodules & set(bnnkit._LAZY)
    # A fresh interpreter, so the submodule is imported before the public name is looked up.
    code = ("import bnnkit.evaluation, bnnkit; from bnnkit.evaluation import export_samples; "
            "import importlib; m = importlib.import_module('bnnkit.evaluation'); "
            "assert bnnkit.evaluate is m.evaluate, bnnkit.evaluate; "
            "from bnnkit import evaluate; assert evaluate is m.evaluate; "
            "assert bnnkit.evaluation is m")
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    assert bnnkit.evaluate is importlib.import_module("bnnkit.evaluation").evaluate


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        bnnkit.nope  # noqa: B018


def test_readme_example_uses_the_top_level_api():
    code = readme_python_example()
    assert "import bnnkit\n" in code
    # nothing from submodules: the example is what `bnnkit.__all__` offers
    assert "from bnnkit" not in code


@pytest.mark.slow
def test_readme_python_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its run directories are relative
    exec(compile(readme_python_example(), "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "runs" / "yacht_hmc" / "evaluation.json").is_file()
    assert (tmp_path / "runs" / "yacht_hmc.npz").is_file()
