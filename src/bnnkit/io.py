"""Run directories and atomic, pickle-free storage.

A run directory holds::

    run.json         resolved config, versions, seed, git hash, start/end times, status
    state.npz        latest full chain state (params, cached gradient, step size, adaptation,
                     iteration) for exact resume
    samples/         one file per kept iteration: sample_<iteration>.npz, leaves (chains, ...)
    metrics.jsonl    one line per iteration (acceptance, step size, log posterior, divergences)
    evaluation.json  metrics and diagnostics written by ``bnnkit evaluate``

Every file is written to a temporary name in the same directory, flushed, fsynced and renamed,
so a crash leaves either the old file or the new one, never half of one. Arrays are stored as
``.npz`` read back with ``allow_pickle=False``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bnnkit.errors import ConfigError

RUN_FILE = "run.json"
STATE_FILE = "state.npz"
SAMPLES_DIR = "samples"
LOG_FILE = "metrics.jsonl"


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a mix."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def read_json(path: str | os.PathLike) -> Any:
    with open(path) as f:
        return json.load(f)


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, Any]) -> None:
    """Atomically save a flat mapping of name -> array as an uncompressed ``.npz``."""
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    atomic_write_bytes(path, buffer.getvalue())


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Load an ``.npz`` written by :func:`save_arrays`; pickled objects are refused."""
    with np.load(path, allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files}


def flatten_tree(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """A pytree as ``{"<prefix>params/Dense_0/kernel": array, ...}`` (keys are tree paths).

    Example:
        >>> flatten_tree({"params": {"w": np.zeros(2)}})
        {'params/w': array([0., 0.])}
    """
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        out[prefix + path_to_str(path)] = np.asarray(leaf)
    return out


def path_to_str(path: tuple) -> str:
    parts = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return "/".join(parts)


def unflatten_tree(template: Any, arrays: Mapping[str, np.ndarray], prefix: str = "") -> Any:
    """Inverse of :func:`flatten_tree`, shaped by ``template``'s tree structure."""
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(template)
    leaves = []
    for path, _ in leaves_with_path:
        key = prefix + path_to_str(path)
        if key not in arrays:
            raise ConfigError(f"stored arrays lack {key!r}; the file belongs to another model")
        leaves.append(arrays[key])
    return jax.tree_util.tree_unflatten(treedef, leaves)


def git_hash() -> str | None:
    """The source tree's commit, when bnnkit runs from a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def versions() -> dict[str, str]:
    import blackjax
    import flax
    import optax

    import bnnkit

    return {
        "bnnkit": bnnkit.__version__, "jax": jax.__version__, "flax": flax.__version__,
        "optax": optax.__version__, "blackjax": blackjax.__version__,
        "numpy": np.__version__, "python": platform.python_version(),
        "backend": jax.default_backend(),
    }


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _lock_is_held(lock_path: Path) -> bool:
    """Whether the process named in a lock file is still alive (on this machine)."""
    try:
        pid = int(lock_path.read_text().strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDir:
    """A run directory: paths plus the rules for creating, resuming and overwriting it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def state_file(self) -> Path:
        return self.path / STATE_FILE

    @property
    def samples_dir(self) -> Path:
        return self.path / SAMPLES_DIR

    @property
    def log_file(self) -> Path:
        return self.path / LOG_FILE

    def sample_file(self, iteration: int) -> Path:
        return self.samples_dir / f"sample_{iteration:07d}.npz"

    def exists(self) -> bool:
        return self.path.is_dir() and any(self.path.iterdir())

    def prepare(self, *, resume: bool, overwrite: bool) -> None:
        """Create the directory, or check that it may be resumed or overwritten.

        Raises:
            ConfigError: a non-empty directory without ``resume``/``overwrite``, both flags, or
                ``resume`` of a directory that holds no run.
        """
        if resume and overwrite:
            raise ConfigError("--resume and --overwrite exclude each other")
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"run directory {str(self.path)!r} is a file")
        if resume:
            if not self.run_file.is_file():
                raise ConfigError(f"nothing to resume: {str(self.path)!r} holds no {RUN_FILE}")
            return
        if self.exists():
            if not overwrite:
                raise ConfigError(
                    f"run directory {str(self.path)!r} is not empty; pass --resume to continue "
                    "it or --overwrite to replace it"
                )
            if not (self.run_file.is_file() or self._is_skeleton()):
                raise ConfigError(
                    f"refusing to overwrite {str(self.path)!r}: it is not empty and holds no "
                    f"{RUN_FILE}, so it is not a bnnkit run"
                )
            self._clear()
        self.samples_dir.mkdir(parents=True, exist_ok=True)

    def _is_skeleton(self) -> bool:
        """Only what a run leaves before its run.json exists: an empty samples/ and a lock."""
        for entry in self.path.iterdir():
            if entry.name == ".lock" and not _lock_is_held(entry):
                continue
            if entry == self.samples_dir and entry.is_dir() and not any(entry.iterdir()):
                continue
            return False
        return True

    def _clear(self) -> None:
        for name in (RUN_FILE, STATE_FILE, LOG_FILE, ".lock"):
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
        for pattern in ("evaluation*.json", "predictions/*.npz"):
            for f in self.path.glob(pattern):
                f.unlink()
        if self.samples_dir.is_dir():
            for f in self.samples_dir.glob("*.npz"):
                f.unlink()

    def sample_iterations(self) -> list[int]:
        """Iterations that have a stored sample, in order."""
        if not self.samples_dir.is_dir():
            return []
        its = []
        for f in self.samples_dir.glob("sample_*.npz"):
            with contextlib.suppress(ValueError):
                its.append(int(f.stem.split("_")[1]))
        return sorted(its)

    def append_log(self, records: list[dict]) -> None:
        """Append iteration records (one JSON line each), flushed and fsynced."""
        if not records:
            return
        with open(self.log_file, "a") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_log(self, upto_iteration: int) -> None:
        """Keep only log lines of iterations < ``upto_iteration`` (used on resume)."""
        if not self.log_file.is_file():
            return
        kept = []
        with open(self.log_file) as f:
            for line in f:
                with contextlib.suppress(json.JSONDecodeError):
                    if json.loads(line).get("iteration", -1) < upto_iteration:
                        kept.append(line if line.endswith("\n") else line + "\n")
        atomic_write_bytes(self.log_file, "".join(kept).encode())

    def read_log(self) -> list[dict]:
        if not self.log_file.is_file():
            return []
        with open(self.log_file) as f:
            return [json.loads(line) for line in f if line.strip()]

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Refuse two processes writing one run directory at the same time."""
        lock_path = self.path / ".lock"
        if lock_path.exists() and not _lock_is_held(lock_path):
            # Left by a process that was killed: nobody is writing the directory any more.
            with contextlib.suppress(FileNotFoundError):
                lock_path.unlink()
        try:
            fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            raise ConfigError(
                f"run directory {str(self.path)!r} is in use by another process (remove "
                f"{str(lock_path)!r} if that process is gone)"
            ) from None
        try:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                lock_path.unlink()


def check_same_settings(stored: Mapping[str, Any], given: Mapping[str, Any],
                        may_change: frozenset[str] | set[str] = frozenset()) -> None:
    """Refuse a ``--resume`` whose settings differ from the stored run's, naming the first.

    Raises:
        ConfigError: a setting outside ``may_change`` differs.
    """
    for key in sorted(set(stored) | set(given)):
        if key not in may_change and stored.get(key) != given.get(key):
            raise ConfigError(
                f"--resume with a different config: {key} was {stored.get(key)!r} in the stored "
                f"run but is {given.get(key)!r} now"
            )

