"""Run directories: their files, the lock, the record, and the rules for resume and overwrite.

A run directory holds::

    run.json         the record: method, resolved configs, versions, seed, git hash, start/end
                     times, status ("running" / "finished") and the layout version
    state.npz        latest full method state of every member (for exact resume)
    samples/         one file per kept unit (iteration or epoch): the posterior the method
                     returned there, written by :mod:`bnnkit.posterior.store`
    metrics.jsonl    one line per unit (acceptance, step size, losses, test metrics, ...)
    evaluation*.json, predictions/   written by ``bnnkit evaluate``

Every write goes through :mod:`bnnkit.storage` (atomic, pickle-free). A lock file holds the
writer's process id, so two processes never write one directory; a lock left by a process that
is gone is taken over.

Example:
    >>> import tempfile
    >>> rundir = RunDir(tempfile.mkdtemp() + "/run")
    >>> rundir.prepare(resume=False, overwrite=False)
    >>> rundir.sample_file(3).name
    'sample_0000003.npz'
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError

RUN_FILE = "run.json"
STATE_FILE = "state.npz"
SAMPLES_DIR = "samples"
LOG_FILE = "metrics.jsonl"
LOCK_FILE = ".lock"

#: Version of the layout written by this bnnkit; runs without it predate the one driver.
LAYOUT = 2


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
    """Versions of bnnkit, its numerical dependencies and Python, and the JAX backend."""
    import blackjax
    import flax
    import jax
    import optax

    import bnnkit

    return {
        "bnnkit": bnnkit.__version__, "jax": jax.__version__, "flax": flax.__version__,
        "optax": optax.__version__, "blackjax": blackjax.__version__,
        "numpy": np.__version__, "python": platform.python_version(),
        "backend": jax.default_backend(),
    }


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
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

    def sample_file(self, unit: int) -> Path:
        return self.samples_dir / f"sample_{unit:07d}.npz"

    def exists(self) -> bool:
        return self.path.is_dir() and any(self.path.iterdir())

    def read_record(self) -> dict:
        """``run.json``.

        Raises:
            ConfigError: no run here, or a damaged record.
        """
        if not self.run_file.is_file():
            raise ConfigError(f"{str(self.path)!r} is not a bnnkit run directory (no {RUN_FILE})")
        record = storage.read_json(self.run_file)
        if not isinstance(record, dict) or "method" not in record:
            raise ConfigError(f"{str(self.run_file)!r} is damaged: it names no method")
        return record

    def write_record(self, record: Mapping[str, Any]) -> None:
        storage.write_json(self.run_file, dict(record))

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
            if entry.name == LOCK_FILE and not _lock_is_held(entry):
                continue
            if entry == self.samples_dir and entry.is_dir() and not any(entry.iterdir()):
                continue
            return False
        return True

    def _clear(self) -> None:
        for name in (RUN_FILE, STATE_FILE, LOG_FILE, LOCK_FILE, "laplace.npz"):
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
        for pattern in ("evaluation*.json", "predictions/*.npz"):
            for f in self.path.glob(pattern):
                f.unlink()
        if self.samples_dir.is_dir():
            for f in self.samples_dir.glob("*.npz"):
                f.unlink()

    def sample_units(self) -> list[int]:
        """Units (iterations or epochs) that have a stored posterior, in order."""
        if not self.samples_dir.is_dir():
            return []
        units = []
        for f in self.samples_dir.glob("sample_*.npz"):
            with contextlib.suppress(ValueError):
                units.append(int(f.stem.split("_")[1]))
        return sorted(units)

    def remove_samples_from(self, unit: int) -> None:
        """Delete stored posteriors of units ``>= unit`` (recomputed identically on resume)."""
        for u in self.sample_units():
            if u >= unit:
                self.sample_file(u).unlink()

    def append_log(self, records: list[dict]) -> None:
        """Append unit records (one JSON line each), flushed and fsynced."""
        if not records:
            return
        with open(self.log_file, "a") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_log(self, upto_unit: int) -> None:
        """Keep only log lines of units < ``upto_unit`` (used on resume)."""
        if not self.log_file.is_file():
            return
        kept = []
        with open(self.log_file) as f:
            for line in f:
                with contextlib.suppress(json.JSONDecodeError):
                    if json.loads(line).get("iteration", -1) < upto_unit:
                        kept.append(line if line.endswith("\n") else line + "\n")
        storage.atomic_write_bytes(self.log_file, "".join(kept).encode())

    def read_log(self) -> list[dict]:
        """Every complete line of ``metrics.jsonl`` (a torn last line is skipped)."""
        if not self.log_file.is_file():
            return []
        records = []
        with open(self.log_file) as f:
            for line in f:
                if line.strip():
                    with contextlib.suppress(json.JSONDecodeError):
                        records.append(json.loads(line))
        return records

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Refuse two processes writing one run directory at the same time."""
        lock_path = self.path / LOCK_FILE
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

    Example:
        >>> check_same_settings({"a": 1, "n": 5}, {"a": 1, "n": 9}, {"n"})
        >>> check_same_settings({"a": 1}, {"a": 2})
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --resume with a different config: a was 1 in the stored run ...
    """
    for key in sorted(set(stored) | set(given)):
        if key not in may_change and stored.get(key) != given.get(key):
            raise ConfigError(
                f"--resume with a different config: {key} was {stored.get(key)!r} in the stored "
                f"run but is {given.get(key)!r} now"
            )
