"""Command-line flags derived from Config dataclasses, and Configs built back from them.

Every field declared with :func:`bnnkit.settings.setting` becomes one flag (plus its aliases):
its type, default, choices and help come from the field, so the command line and the library
cannot disagree on a default. Booleans that default to True are offered as ``--no-...``
switches; required fields (no default) are required flags. Values are validated by the Config
itself, once, with its one-line errors.

Example:
    >>> import argparse
    >>> from bnnkit.inference import hmc
    >>> parser = argparse.ArgumentParser()
    >>> add_config_arguments(parser, hmc.Config)
    >>> args = parser.parse_args(["--step-size", "1e-3", "--trajectory-len", "0.1",
    ...                           "--num-iterations", "10", "--num-chains", "4"])
    >>> config_from_args(args, hmc.Config).num_chains
    4
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterable
from typing import Any

from bnnkit.settings import flag


def _base_type(annotation: Any) -> type:
    """``float`` for ``float | None``; ``str`` when a union mixes kinds (parsed by the Config)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else str
    return annotation


def add_config_arguments(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    *,
    skip: Iterable[str] = (),
    only: Iterable[str] | None = None,
) -> None:
    """Add one flag per CLI field of the dataclass ``cls`` to ``parser`` (or a group).

    Args:
        parser: an ``ArgumentParser`` or an argument group.
        cls: a Config dataclass whose fields were declared with ``setting``.
        skip: field names not to offer.
        only: if given, offer only these fields.
    """
    hints = typing.get_type_hints(cls)
    skip = set(skip)
    only = None if only is None else set(only)
    for field in dataclasses.fields(cls):
        meta = field.metadata
        if (
            not meta.get("cli")
            or field.name in skip
            or (only is not None and field.name not in only)
        ):
            continue
        names = [flag(cls, field.name), *meta.get("aliases", ())]
        required = field.default is dataclasses.MISSING
        default = None if required else field.default
        kind = _base_type(hints[field.name])
        text = meta["help"]
        metavar = meta.get("metavar")
        if meta.get("choices"):
            metavar = metavar or "{" + ",".join(meta["choices"]) + "}"
        if kind is bool:
            action = "store_false" if default is True else "store_true"
            parser.add_argument(*names, dest=field.name, action=action, default=default, help=text)
            continue
        if meta.get("action") == "append":
            parser.add_argument(
                *names, dest=field.name, action="append", default=None, metavar=metavar, help=text
            )
            continue
        parser.add_argument(
            *names,
            dest=field.name,
            type=kind,
            default=default,
            required=required,
            metavar=metavar or _metavar(kind),
            help=text,
        )


def _metavar(kind: type) -> str | None:
    return {int: "N", float: "X", str: None}.get(kind)


def config_from_args(args: argparse.Namespace, cls: type, **extra: Any) -> Any:
    """``cls`` built from the parsed flags it declared (others keep their defaults)."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if f.metadata.get("cli") and hasattr(args, f.name)
    }
    return cls(**{**values, **extra})


def add_progress_flag(parser: Any) -> None:
    """``--no-progress``, the same on every command that shows progress (``args.progress``).

    Example:
        >>> p = argparse.ArgumentParser()
        >>> add_progress_flag(p)
        >>> p.parse_args([]).progress, p.parse_args(["--no-progress"]).progress
        (True, False)
    """
    parser.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress output (a bar on a terminal, plain lines in a log)",
    )


def add_folder_flags(parser: Any, what: str, where: str, resume: str) -> None:
    """``--resume``, ``--overwrite`` and ``--no-progress`` of a command that writes ``what``
    into the folder ``where`` names and can continue it where ``resume`` says.

    Example:
        >>> p = argparse.ArgumentParser()
        >>> add_folder_flags(p, "the surface", "--out", "continue a grid that was cut off")
        >>> [a.help for a in p._actions[1:3]]
        ['continue a grid that was cut off', 'replace the surface in --out']
    """
    parser.add_argument("--resume", action="store_true", help=resume)
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what} in {where}")
    add_progress_flag(parser)
