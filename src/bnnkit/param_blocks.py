"""Subtrees of a parameter tree addressed by a path such as ``("params", "Dense_2")``.

Last-layer and Kronecker-factored Laplace approximations cover one layer (a *block*) of the
network; these two functions read and replace such a block without modifying anything in place.

Example:
    >>> params = {"params": {"Dense_0": {"kernel": 1}, "Dense_1": {"kernel": 2}}}
    >>> get_block(params, ("params", "Dense_1"))
    {'kernel': 2}
    >>> replace_block(params, ("params", "Dense_1"), {"kernel": 5})["params"]["Dense_1"]
    {'kernel': 5}
"""

from __future__ import annotations

from bnnkit.types import Params

Path = tuple[str, ...]


def get_block(params: Params, path: Path) -> Params:
    """The subtree of ``params`` at ``path``."""
    node = params
    for name in path:
        node = node[name]
    return node


def replace_block(params: Params, path: Path, block: Params) -> Params:
    """``params`` with the subtree at ``path`` replaced (nothing is modified in place)."""
    if not path:
        return block
    head, *rest = path
    return {**params, head: replace_block(params[head], tuple(rest), block)}
