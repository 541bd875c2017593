"""JAX's persistent compilation cache for the command line, on by default.

Most of a short command's wall time is XLA compiling the same programs it compiled the last
time it ran on the same model and data (the ensemble's epoch, the sampler's iteration, the
evaluation's predictive): with the cache, a user's second run loads them instead
(``benchmarks/compile_cache.py`` measures how much). The cached program is the one compiled, so
results are the same bits; an unreadable entry is compiled again, with JAX's warning.

The cache lives in ``<cache>/jax``, beside the downloaded datasets (``$BNNKIT_CACHE_DIR``, or
the user's cache folder), and is left alone when JAX's own ``JAX_COMPILATION_CACHE_DIR`` (or
``jax.config``) already names one. ``BNNKIT_COMPILE_CACHE=off`` turns it off; any other
value is the folder to use. Only the command line turns it on: a program that imports bnnkit
decides for itself (``jax.config.update("jax_compilation_cache_dir", ...)``).

Example:
    >>> cache_folder({"BNNKIT_COMPILE_CACHE": "off"}) is None
    True
    >>> cache_folder({"BNNKIT_COMPILE_CACHE": "/scratch/jax"}).as_posix()
    '/scratch/jax'
    >>> cache_folder({"BNNKIT_CACHE_DIR": "/data/bnnkit"}).as_posix()
    '/data/bnnkit/jax'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bnnkit.data.fetch import CACHE_DIR_ENV

#: The environment variable that turns the cache off (``off``) or names its folder.
ENV = "BNNKIT_COMPILE_CACHE"
OFF = ("off", "0", "false", "no")


def cache_folder(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the command line keeps compiled programs (``None``: nowhere)."""
    chosen = environ.get(ENV, "").strip()
    if chosen.lower() in OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()

    root = environ.get(CACHE_DIR_ENV)
    if root:
        return Path(root).expanduser() / "jax"
    import pooch

    return Path(pooch.os_cache("bnnkit")) / "jax"


def enable_for_command_line() -> Path | None:
    """Turn the cache on for this process, unless it is off or JAX already has one; returns
    the folder in use by bnnkit's choice (``None``: not turned on here).

    Every program is cached, however quickly it compiled: a command compiles dozens of
    small ones, and together they are most of its start.
    """
    import jax

    if jax.config.jax_compilation_cache_dir is not None:
        return None
    folder = cache_folder()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a cache that cannot be made costs a compilation, never the command
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
