"""The lock of a run directory: one writing process at a time, and only its owner removes it.

The lock is the file ``.lock`` in the run directory, held with an exclusive ``flock`` for as
long as the run writes. The kernel drops a ``flock`` when its process dies, so a lock left by a
killed run is stale by construction (its process is gone) and is taken over; a live one is
never broken. The file records the holder's process id, host, start time and a random token;
a process removes the file only while it holds the lock and the token is its own, so it never
deletes a lock it does not own. The file is never opened through a symbolic link: a ``.lock``
that is a link is refused, so its holder's record cannot land in a file outside the directory.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with hold(folder):
    ...     holder(folder)["pid"] == os.getpid()
    True
    >>> holder(folder) is None
    True
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

from bnnkit.errors import ConfigError

LOCK_FILE = ".lock"


#: Opening a lock never follows a symbolic link: a ``.lock`` planted as a link to a file
#: elsewhere would otherwise have the holder's record written into that file.
_NO_LINK = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open(path: Path, flags: int) -> int:
    """``os.open`` of a lock file without following a link.

    Raises:
        ConfigError: the lock file is a symbolic link.
    """
    try:
        return os.open(path, flags | _NO_LINK, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            raise ConfigError(
                f"{str(path)!r} is a symbolic link; a run directory's lock must be a file of "
                "its own (bnnkit writes no file through a link); remove the link"
            ) from None
        raise


def _record(path: Path) -> dict:
    """What a lock file says about its holder (empty when unreadable or a link)."""
    try:
        fd = _open(path, os.O_RDONLY)
    except (OSError, ConfigError):
        return {}
    with os.fdopen(fd, "rb") as f:
        text = f.read(1 << 16)
    try:
        value = json.loads(text.decode("utf-8", errors="replace").strip())
    except (json.JSONDecodeError, RecursionError):
        return {}
    if isinstance(value, int):  # the plain process id an older bnnkit wrote
        return {"pid": value}
    return value if isinstance(value, dict) else {}


def _is_locked(path: Path) -> bool:
    """Whether some live process holds ``path``'s flock (probed without keeping it)."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a flock taken by the probe
    return False


def holder(directory: str | os.PathLike) -> dict | None:
    """The live holder of ``directory``'s lock (pid, host, since), or ``None`` when free."""
    path = Path(directory) / LOCK_FILE
    if not _is_locked(path):
        return None
    return _record(path) or {"pid": None}


def _in_use(directory: Path, who: dict) -> ConfigError:
    pid = who.get("pid")
    since = f" since {who['since']}" if who.get("since") else ""
    return ConfigError(
        f"run directory {str(directory)!r} is in use by process {pid}{since}; allowed: one "
        "writing process at a time (wait for it to finish or stop it)"
    )


@contextlib.contextmanager
def hold(directory: str | os.PathLike) -> Iterator[None]:
    """Hold ``directory``'s lock while the block runs; the directory must exist.

    Raises:
        ConfigError: another live process holds it.
    """
    directory = Path(directory)
    path = directory / LOCK_FILE
    token = secrets.token_hex(8)
    for _ in range(100):
        fd = _open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _in_use(directory, _record(path)) from None
        # The holder before us may have removed the file between our open and our flock: then
        # we hold a lock on a file nobody else can see, and must lock the current one instead.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    else:  # pragma: no cover - only under a storm of competing processes
        raise ConfigError(f"could not lock {str(path)!r}; try again")
    try:
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "token": token,
                    "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                }
            ).encode(),
        )
        os.fsync(fd)
        yield
    finally:
        # Still holding the flock, so nobody else can have replaced the file's contents.
        if _record(path).get("token") == token:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        os.close(fd)
