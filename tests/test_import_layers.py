"""bnnkit's modules form layers: no module imports, even inside a function, one that imports it
back (directly or through others), and no folder of src/bnnkit/ imports one that imports it
back. A circle is how a lower layer comes to know a higher one (the runs the command line, the
priors the problem); this test names the first one found."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import bnnkit

SRC = Path(bnnkit.__file__).resolve().parent.parent


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "bnnkit").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(found: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other bnnkit modules, wherever in it they stand."""

    def resolve(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in found.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                base, names = "", [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("bnnkit"):
                    target = name if name in found else resolve(base or name)
                    if target and target != module:
                        edges[module].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def folder(module: str) -> str:
    """A module's folder under src/bnnkit/ (a module directly in it is its own)."""
    parts = module.split(".")
    if len(parts) > 2 or (SRC / "bnnkit" / parts[-1]).is_dir():
        return ".".join(parts[:2])
    return module


def test_no_module_imports_one_that_imports_it_back():
    assert circles(imports(modules())) == []


def test_no_folder_imports_one_that_imports_it_back():
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports(modules()).items():
        for target in targets:
            if folder(module) != folder(target):
                edges[folder(module)].add(folder(target))
    assert circles(edges) == []


def test_the_check_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
