"""Several processes (hosts): one run over every process's devices with ``jax.distributed``.

After :func:`initialize`, ``jax.devices()`` lists the devices of every process, so the mesh of
:func:`bnnkit.runs.sharding.placement` spans all hosts: with ``--shard data`` one chain's
full-batch gradient is a sum over every host's examples (XLA inserts the cross-host sum under
``jit``), with ``--shard chains`` the chains are split over the hosts. Every process runs the
same program (the same command line on each host); JAX's coordination service (process 0's
``--coordinator-address``) connects them, and XLA's collectives (NCCL on GPUs, gloo on CPUs)
move the data.

Each host reads the whole training set from its own copy of the file and keeps only the rows
of its own devices (:func:`place`). Only process 0 touches the run directory: it checks it,
holds its lock, reads a state to resume from and writes every file; the others write nothing
and learn process 0's decisions through collectives (:func:`first_decides`,
:func:`from_first`), so they need no access to the run directory. A run on several processes
is therefore the same run, atomic and resumable, as on one.

Started by, in this order:

- explicit settings (``--coordinator-address HOST:PORT --num-processes N --process-id I``),
- or, with ``distributed="auto"`` (the default), a SLURM job step or an Open MPI launch with
  more than one task, which JAX's own cluster detection reads (``srun -n 4 bnnkit hmc ...``);
- otherwise the run is one process, exactly as without this module.

Example:
    >>> initialize(Hosts(distributed="off"))
    Processes(index=0, count=1)
    >>> Hosts(num_processes=2, process_id=2, coordinator_address="localhost:1234")
    Traceback (most recent call last):
    ...
    bnnkit.errors.ConfigError: --process-id 2 must be < --num-processes 2 (numbered from 0)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import jax
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.settings import check_numbers, setting

DISTRIBUTED_MODES = ("auto", "on", "off")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Hosts:
    """How this process joins a run over several processes.

    Attributes:
        distributed: ``"auto"``: join when the coordinator flags are given or a SLURM / Open
            MPI launch of several tasks is detected; ``"on"``: always (what is not given is
            detected by JAX); ``"off"``: never.
        coordinator_address: process 0's ``HOST:PORT``, the same on every process.
        num_processes: processes in the run.
        process_id: this process's number, ``0 <= process_id < num_processes``.
        timeout: seconds to wait for every process to connect.
    """

    distributed: str = setting(
        "auto",
        choices=DISTRIBUTED_MODES,
        help="run over several processes with jax.distributed: auto joins when the flags "
        "below are given or a SLURM/Open MPI launch of several tasks is detected",
    )
    coordinator_address: str | None = setting(
        None,
        metavar="HOST:PORT",
        help="process 0's address and a free port, the same for every process",
    )
    num_processes: int | None = setting(
        None, help="processes in the run (one per host)", bounds=(1, 2**16)
    )
    process_id: int | None = setting(
        None,
        metavar="I",
        help="this process's number, 0 to --num-processes - 1",
        bounds=(0, 2**16 - 1),
    )
    timeout: int = setting(
        300,
        flag="--distributed-timeout",
        metavar="SECONDS",
        help="seconds to wait for every process to connect",
        bounds=(1, 7 * 24 * 3600),
    )

    def __post_init__(self):
        check_numbers(self)
        if self.distributed not in DISTRIBUTED_MODES:
            raise ConfigError(
                f"unknown --distributed {self.distributed!r}; allowed: "
                f"{', '.join(DISTRIBUTED_MODES)}"
            )
        given = [
            f
            for f in ("coordinator_address", "num_processes", "process_id")
            if getattr(self, f) is not None
        ]
        if self.distributed == "off" and given:
            raise ConfigError(f"--distributed off contradicts --{given[0].replace('_', '-')}")
        if (
            self.process_id is not None
            and self.num_processes is not None
            and self.process_id >= self.num_processes
        ):
            raise ConfigError(
                f"--process-id {self.process_id} must be < --num-processes "
                f"{self.num_processes} (numbered from 0)"
            )
        if self.coordinator_address is not None:
            host, _, port = self.coordinator_address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"--coordinator-address {self.coordinator_address!r} must be "
                    "HOST:PORT with a port from 1 to 65535"
                )
        missing = [
            f
            for f in ("coordinator_address", "num_processes", "process_id")
            if getattr(self, f) is None
        ]
        if given and missing and cluster_processes() is None:
            # Outside SLURM / Open MPI nothing could fill them in: say so now, not after a
            # timeout.
            raise ConfigError(
                f"--{given[0].replace('_', '-')} needs "
                f"{' and '.join('--' + m.replace('_', '-') for m in missing)} as well (or a "
                "SLURM/Open MPI launch that provides them)"
            )

    def wanted(self) -> bool:
        """Whether this process should join a run over several processes."""
        if self.distributed == "off":
            return False
        if self.distributed == "on" or self.coordinator_address is not None:
            return True
        if self.num_processes is not None or self.process_id is not None:
            return True
        return (cluster_processes() or 1) > 1


@dataclasses.dataclass(frozen=True)
class Processes:
    """This process's place among the processes of a run."""

    index: int
    count: int


def cluster_processes() -> int | None:
    """Tasks of the SLURM job step or Open MPI launch this process belongs to, if any.

    These are the environment variables JAX's cluster detection reads
    (``jax._src.clusters``): SLURM's inside an ``srun`` step, Open MPI's under ``mpirun``.
    """
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
    if all(name in os.environ for name in slurm):
        for name in ("SLURM_PROCID", "SLURM_LOCALID"):
            _env_count(name, low=0)
        name = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in os.environ else "SLURM_NTASKS"
        return _env_count(name)
    if "OMPI_MCA_orte_hnp_uri" in os.environ and "OMPI_COMM_WORLD_SIZE" in os.environ:
        return _env_count("OMPI_COMM_WORLD_SIZE")
    return None


def _env_count(name: str, low: int = 1) -> int:
    """An environment variable a cluster launcher sets to a count or an index.

    Raises:
        ConfigError: it is not an integer >= ``low``, naming the variable and its value.
    """
    text = os.environ[name].strip()
    if not (text.isdigit() and int(text) >= low):
        raise ConfigError(
            f"environment variable {name}={os.environ[name]!r} is not an integer "
            f">= {low}; allowed: what SLURM or Open MPI sets (unset it to run as "
            "one process)"
        )
    return int(text)


def check_coordinator(hosts: Hosts) -> None:
    """Refuse, in one line, a coordinator that cannot be used, before JAX aborts the process
    on it: process 0 must be able to listen on the address's port, every other process must
    reach it within ``hosts.timeout`` seconds (process 0 may start later).

    Raises:
        ConfigError: naming the address, what failed and the timeout setting.
    """
    if hosts.coordinator_address is None or hosts.process_id is None:
        return  # a cluster launcher's or JAX's own detection fills it in
    host, _, port = hosts.coordinator_address.rpartition(":")
    host = host.strip("[]")
    address = f"--coordinator-address {hosts.coordinator_address}"
    try:
        socket.getaddrinfo(host, int(port))
    except OSError as err:
        raise ConfigError(
            f"{address}: host {host!r} cannot be resolved ({err.strerror or err})"
            "; allowed: process 0's host name or IP address"
        ) from None
    if hosts.process_id == 0:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            try:
                probe.bind(("", int(port)))
            except OSError as err:
                raise ConfigError(
                    f"{address}: process 0 cannot listen on port {port} "
                    f"({err.strerror or err}); allowed: a free port"
                ) from None
        return
    deadline = time.monotonic() + hosts.timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(5.0, hosts.timeout)):
                return
        except OSError as err:
            reason = err.strerror or type(err).__name__
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"{address} cannot be reached within --distributed-timeout "
                f"{hosts.timeout} s ({reason}); allowed: process 0's address, "
                "with process 0 started (a longer --distributed-timeout waits "
                "longer)"
            )
        time.sleep(0.5)


def initialize(hosts: Hosts = Hosts()) -> Processes:
    """Join the run's processes with ``jax.distributed.initialize`` if ``hosts`` asks to.

    Must be called before anything else uses JAX (the CLI calls it first); calling it again,
    once joined, does nothing. Cross-process collectives on CPUs use gloo.

    Returns:
        This process's index and the number of processes (``Processes(0, 1)`` alone).

    Raises:
        ConfigError: JAX was already in use, or the processes did not all connect within
            ``hosts.timeout`` seconds.
    """
    if not jax.distributed.is_initialized() and hosts.wanted():
        check_coordinator(hosts)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        try:
            jax.distributed.initialize(
                coordinator_address=hosts.coordinator_address,
                num_processes=hosts.num_processes,
                process_id=hosts.process_id,
                initialization_timeout=hosts.timeout,
            )
        except RuntimeError as err:
            raise ConfigError(f"cannot start the processes of a distributed run: {err}") from err
        except ValueError as err:  # what JAX could neither read nor detect
            raise ConfigError(f"--distributed: {err}") from err
    return Processes(jax.process_index(), jax.process_count())


def is_writer() -> bool:
    """Whether this process writes the run directory (process 0, or the only one)."""
    return jax.process_index() == 0


def first_decides(decide: Callable[[], T]) -> T | None:
    """``decide()`` on process 0 only; every process raises if it refused.

    With one process this is ``decide()``. With several, the others wait for process 0's
    verdict, so that a refusal (a run directory in the way, a lock held) ends every process
    with an error instead of leaving them waiting for a process 0 that has gone.

    Returns:
        ``decide()``'s value on process 0, ``None`` on the others.

    Raises:
        ConfigError: process 0's own error there; on the others, one saying process 0 refused.
    """
    if jax.process_count() == 1:
        return decide()
    value, error = None, None
    if is_writer():
        try:
            value = decide()
        except (ConfigError, OSError) as err:
            error = err
    _agree(error)
    return value


@contextlib.contextmanager
def first_holds(make: Callable[[], contextlib.AbstractContextManager]) -> Iterator[None]:
    """Process 0 enters the context ``make()`` (the run directory's lock); the others none.

    Raises:
        ConfigError: as :func:`first_decides`.
    """
    if jax.process_count() == 1:
        with make():
            yield
        return
    with contextlib.ExitStack() as stack:
        first_decides(lambda: stack.enter_context(make()))
        yield


def _agree(error: BaseException | None) -> None:
    from jax.experimental import multihost_utils

    refused = int(multihost_utils.broadcast_one_to_all(np.int32(error is not None)))
    if error is not None:
        raise error
    if refused:
        raise ConfigError(
            f"process 0 refused the run (its error says why); this is process "
            f"{jax.process_index()} of {jax.process_count()}"
        )


def first_says(answer: bool) -> bool:
    """Process 0's ``answer`` on every process (unchanged with one process): for decisions
    every process must take alike, such as stopping at a deadline that each process's own
    clock would reach at a different unit.

    Example:
        >>> first_says(True)
        True
    """
    if jax.process_count() == 1:
        return bool(answer)
    from jax.experimental import multihost_utils

    return bool(int(multihost_utils.broadcast_one_to_all(np.int32(bool(answer)))))


def from_first(start: int, state: Any, template: Any) -> tuple[int, Any]:
    """Process 0's ``(start unit, state)`` on every process; unchanged with one process.

    Process 0 reads the state a resume starts from; the others receive it bit for bit (its
    bytes are summed with zeros from the other processes, which is exact).

    Args:
        start: the unit to start from (process 0's counts).
        state: process 0's stored state, or ``None`` for a run starting afresh.
        template: the state's shapes and dtypes (``jax.eval_shape``).
    """
    if jax.process_count() == 1:
        return start, state
    from jax.experimental import multihost_utils

    start = int(multihost_utils.broadcast_one_to_all(np.int64(start)))
    if not is_writer() or state is None:
        state = None if start == 0 else jax.tree.map(lambda t: np.zeros(t.shape, t.dtype), template)
    if state is None:
        return start, None
    leaves, treedef = jax.tree.flatten(state)
    raw = [np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8) for a in leaves]
    raw = multihost_utils.broadcast_one_to_all(raw)
    out = [
        np.asarray(r).view(t.dtype).reshape(t.shape)
        for r, t in zip(raw, jax.tree.leaves(template), strict=True)
    ]
    return start, jax.tree.unflatten(treedef, [jax.numpy.asarray(a) for a in out])


def place(tree: Any, sharding: jax.sharding.Sharding) -> Any:
    """``tree`` placed with ``sharding``; over several processes each keeps only its devices'
    part of the (identical) host copy."""
    if jax.process_count() == 1:
        if jax.default_backend() != "cpu":
            return jax.device_put(tree, sharding)
        # On a CPU the host copy is the device's memory: splitting it there costs no
        # compilation, where splitting a device array compiles a slicing program for every
        # leaf's shape (a second or two of a reference's start, measured in docs/performance).
        return jax.tree.map(lambda a: jax.device_put(_host(a), sharding), tree)

    def one(a):
        if isinstance(a, jax.Array) and not a.is_fully_addressable:
            return jax.device_put(a, sharding)
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(one, tree)


def _host(a: Any) -> Any:
    """``a`` as a host array, where it is one (a typed PRNG key stays as it is)."""
    if isinstance(a, jax.Array) and jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        return a
    return np.asarray(a)


def fetch(tree: Any) -> Any:
    """``tree`` with every array spread over several processes gathered whole into this
    process's memory (a collective: every process calls it at the same point); unchanged
    with one process."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    def one(a):
        if isinstance(a, jax.Array) and not a.is_fully_addressable:
            if a.is_fully_replicated:
                return np.asarray(a.addressable_data(0))
            return multihost_utils.process_allgather(a, tiled=True)
        return a

    return jax.tree.map(one, tree)
