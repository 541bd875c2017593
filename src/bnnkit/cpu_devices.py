"""Several JAX devices on one CPU for the command line, so that a run's chains use every core.

On a CPU, XLA runs one device's program on one core at a time for operations as small as a
UCI network's: the eight chains of a reference, vmapped on one device, leave the other cores
idle. With ``D`` CPU devices a run's chains (members) are split over them
(:mod:`bnnkit.runs.sharding`, ``--shard auto``), and each core advances its share side by side
(``docs/performance.md`` measures it). ``D`` is a power of two, at most 8, and at most the
cores this process may use, so that the default 8 chains (and any count that is a multiple of
``D``) divide evenly.

``BNNKIT_CPU_DEVICES`` sets ``D`` (``1``: one device, as a program that imports bnnkit has).
The setting is left alone when ``XLA_FLAGS`` already names a count
(``--xla_force_host_platform_device_count``) or ``jax.config`` sets ``jax_num_cpu_devices``,
when the process joins a run of several processes (each keeps one device), and once JAX has
started. It touches the CPU backend only: on a GPU or TPU the run's devices are the
accelerators. A run records the devices it ran on, and a resume on others says that it goes on
as a valid chain, not bit for bit (:func:`bnnkit.runs.sharding.resume_note`).

Example:
    >>> device_count({}, cores=2)
    2
    >>> device_count({}, cores=6)
    4
    >>> device_count({}, cores=64)
    8
    >>> device_count({"BNNKIT_CPU_DEVICES": "1"}, cores=16)
    1
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from bnnkit.errors import ConfigError

#: The environment variable that sets the number of CPU devices.
ENV = "BNNKIT_CPU_DEVICES"
#: The most devices chosen by default: the default reference's 8 chains, one per device.
MOST = 8
#: The flag of ``XLA_FLAGS`` that already sets the count, which is then left alone.
XLA_FLAG = "xla_force_host_platform_device_count"


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every system
        return os.cpu_count() or 1


def device_count(environ: Mapping[str, str] = os.environ, *, cores: int | None = None) -> int:
    """The number of CPU devices the command line asks JAX for.

    ``BNNKIT_CPU_DEVICES`` when set, else the largest power of two at most ``min(cores, 8)``.

    Raises:
        ConfigError: a value that is not a whole number of at least 1.
    """
    given = environ.get(ENV, "").strip()
    if given:
        try:
            count = int(given)
        except ValueError:
            count = 0
        if count < 1:
            raise ConfigError(
                f"{ENV}={given!r}: a whole number of CPU devices >= 1 is allowed (1: one "
                "device), or leave it unset for one per core"
            )
        return count
    cores = usable_cores() if cores is None else cores
    count = 1
    while count * 2 <= min(cores, MOST):
        count *= 2
    return count


def enable_for_command_line(environ: Mapping[str, str] = os.environ) -> int | None:
    """Ask JAX for :func:`device_count` CPU devices, unless the count is already set, several
    processes run together, or JAX has started; returns the count set (``None``: left alone).

    Raises:
        ConfigError: a bad ``BNNKIT_CPU_DEVICES``.
    """
    count = device_count(environ)
    import jax

    if XLA_FLAG in environ.get("XLA_FLAGS", "") or jax.config.jax_num_cpu_devices != -1:
        return None
    if jax.distributed.is_initialized():
        return None
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX has started (a program that called main() after running JAX)
        return None
    return count
