"""SIGTERM and SIGHUP stop a run the way Ctrl-C does.

A scheduler's pre-emption or a closed terminal should leave a run as an interrupt leaves it:
writes in flight dropped, the lock let go, the last state on disk for ``--resume``. While a run
directory is open (:func:`bnnkit.runs.lifecycle.opened`) and around the command line, these
signals raise :class:`Terminated`, a ``KeyboardInterrupt``, so whatever handles Ctrl-C handles
them too.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: Signals that stop a run the way Ctrl-C does: a scheduler's pre-emption, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """A run stopped by SIGTERM or SIGHUP.

    Raised in the main thread when the signal arrives (:func:`stopped_by_signals`), so the run
    unwinds exactly as after Ctrl-C: writes in flight are dropped, the lock is let go and the
    last state stays on disk for ``--resume``. A ``KeyboardInterrupt``, so whatever handles
    Ctrl-C handles it too.

    Attributes:
        signum: the signal's number (the command line exits with ``128 + signum``).
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.

    Only signals left at their default action are taken over (an ignored SIGHUP, as under
    ``nohup``, stays ignored; a caller's own handler stays), and they are given back after the
    block. Outside the main thread, where Python delivers no signal, this does nothing.

    Example:
        >>> import os
        >>> with stopped_by_signals():
        ...     try:
        ...         os.kill(os.getpid(), signal.SIGTERM)
        ...     except Terminated as stop:
        ...         print(stop.signum == signal.SIGTERM)
        True
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
