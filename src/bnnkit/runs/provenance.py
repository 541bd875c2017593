"""Where a run comes from: the digest of the settings that decide what it computes (an edit
of ``run.json`` is detected by it), the versions and the git commit that made it, and when.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit.runs import manifest_lines

#: The parts of ``run.json`` that decide what a run computes; their digest detects an edit.
SETTINGS_KEYS = ("method", "layout", "problem", "method_config", "loop", "dataset", "manifest")


def settings_digest(record: Mapping[str, Any]) -> str:
    """The sha256 of the settings ``record`` stores (canonical JSON of :data:`SETTINGS_KEYS`).

    Example:
        >>> settings_digest({"method": "hmc"}) == settings_digest({"method": "hmc", "git": "x"})
        True
    """
    settings = {k: record.get(k) for k in SETTINGS_KEYS}
    for key in (manifest_lines.IDENTITY_KEY, manifest_lines.HEAD_KEY):
        if key in record:
            # Where the manifest's chain starts and, once finished, ends: only runs made since
            # the chain have them, so the digests of older runs are what they were.
            settings[key] = record[key]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def git_hash() -> str | None:
    """The source tree's commit, when bnnkit runs from a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def package_version() -> str:
    """The installed bnnkit distribution's version (``"unknown"`` when bnnkit runs from a
    source tree that was never installed).

    Example:
        >>> package_version() != ""
        True
    """
    try:
        return importlib.metadata.version("bnnkit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def versions() -> dict[str, str]:
    """Versions of bnnkit, its numerical dependencies and Python, and the JAX backend."""
    import blackjax
    import flax
    import jax
    import optax

    return {
        "bnnkit": package_version(),
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "blackjax": blackjax.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "backend": jax.default_backend(),
    }


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
