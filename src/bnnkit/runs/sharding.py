"""Several devices: split chains, or the training data, over them with ``jax.sharding``.

On several devices (GPUs, TPU cores, or CPU devices simulated with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) a run places its state and its
training data with :func:`placement`, full-batch (HMC, NUTS) and minibatch methods (SGD,
ensembles, SGMCMC, VI) alike:

- ``"chains"``: the chains (members) are split over the devices; each device runs its chains'
  arithmetic, so the result is that of one device up to how XLA compiles a smaller batch of
  chains (see ``tests/runs/test_sharding.py`` for what is guaranteed); a sequential ensemble
  runs each device's members one after another, the devices side by side;
- ``"data"``: the training examples (full batch), or each minibatch's, are split over the
  devices and one chain's gradient is a sum over devices, as the paper ran HMC on 8 GPUs; XLA
  inserts the cross-device sum, so the code is the same on one device or many. A minibatch
  method keeps the whole training set on every device and splits each gathered minibatch.

Example:
    >>> placement("none", num_chains=4, num_data=100) is None
    True
    >>> two = [jax.devices()[0]] * 2  # 3 chains do not divide over 2 devices, nor may the data
    >>> placement("auto", num_chains=3, num_data=100, devices=two, auto_data=False) is None
    True
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bnnkit.errors import ConfigError

SHARD_MODES = ("auto", "chains", "data", "none")


def placement(
    shard: str,
    num_chains: int,
    num_data: int,
    devices=None,
    *,
    data_label: str = "data",
    auto_data: bool = True,
):
    """Shardings for (chain-stacked state, training batch), or ``None`` for one device.

    A minibatch method passes its minibatch size as ``num_data``: the batch sharding is then
    that of each minibatch, and the full training set is replicated.

    Args:
        shard: ``"chains"``, ``"data"``, ``"none"`` or ``"auto"`` (chains if they divide evenly
            over the devices, else data if the examples do and ``auto_data``, else none).
        num_chains: chains run together.
        num_data: training examples (full batch) or examples per minibatch.
        devices: defaults to ``jax.devices()``.
        data_label: what ``num_data`` counts, for the error message.
        auto_data: whether ``"auto"`` may split the data.

    Raises:
        ConfigError: an unknown mode, or a split that does not divide evenly.
    """
    check_mode(shard)
    devices = list(jax.devices() if devices is None else devices)
    n = len(devices)
    if shard == "none" or n == 1:
        return None
    if shard == "auto":
        data = auto_data and num_data % n == 0
        shard = "chains" if num_chains % n == 0 else "data" if data else "none"
        if shard == "none":
            return None
    count = num_chains if shard == "chains" else num_data
    if count % n:
        label = "chains" if shard == "chains" else data_label
        raise ConfigError(f"--shard {shard}: {count} {label} do not divide over {n} devices")
    mesh = Mesh(np.array(devices), ("d",))
    replicated = NamedSharding(mesh, PartitionSpec())
    split = NamedSharding(mesh, PartitionSpec("d"))
    if shard == "chains":
        return split, replicated
    return replicated, split


def check_mode(shard: str) -> None:
    """Raises ConfigError for a mode outside :data:`SHARD_MODES`."""
    if shard not in SHARD_MODES:
        raise ConfigError(f"unknown --shard {shard!r}; allowed: {', '.join(SHARD_MODES)}")


#: The key of ``run.json`` that records the devices a run ran on.
RECORD_KEY = "devices"


def described(placements) -> dict:
    """What ``run.json`` records of where a run ran: the platform, the number of devices its
    state was placed on, and what it split over them (``"chains"``, ``"data"`` or ``"none"``).

    Example:
        >>> described(None)["devices"], described(None)["split"]
        (1, 'none')
    """
    if placements is None:
        return {"platform": jax.default_backend(), "devices": 1, "split": "none"}
    members = placements[0]
    return {
        "platform": jax.default_backend(),
        "devices": int(members.mesh.size),
        "split": "chains" if members.spec == PartitionSpec("d") else "data",
    }


def resume_note(recorded: dict | None, now: dict) -> str | None:
    """A warning for a resume placed otherwise than the run was made (``None``: the same, or
    a run made before runs recorded it): XLA compiles a smaller batch of chains, or a sum over
    devices, to other roundings, so the run goes on as a valid chain, not bit for bit.

    Example:
        >>> made = {"platform": "cpu", "devices": 2, "split": "chains"}
        >>> resume_note(made, made) is None
        True
        >>> note = resume_note(made, {"platform": "cpu", "devices": 1, "split": "none"})
        >>> note.split(":")[0]
        'the run was made on 2 cpu devices (chains split over them) and goes on on 1 cpu device'
    """
    if recorded is None or recorded == now:
        return None

    def where(d: dict) -> str:
        split = f" ({d['split']} split over them)" if d.get("split") not in (None, "none") else ""
        plural = "s" if d.get("devices") != 1 else ""
        return f"{d.get('devices')} {d.get('platform')} device{plural}{split}"

    hint = ""
    if recorded.get("platform") == "cpu":
        n = recorded.get("devices")
        hint = f" (BNNKIT_CPU_DEVICES={n} gives the command line {n} CPU device{'s' * (n != 1)})"
    return (
        f"the run was made on {where(recorded)} and goes on on {where(now)}: its draws from "
        f"here are a valid continuation, not bit for bit an uninterrupted run's{hint}"
    )
