"""Named points in a run's life where a test may kill the process, to prove crash safety.

Setting ``BNNKIT_KILL_AT=NAME`` (or ``NAME:COUNT``, the COUNT-th time) makes the process send
itself SIGKILL when it reaches point NAME, exactly like a power cut there. Unset, a point costs
one dictionary lookup. The points, in the order a run reaches them:

- ``locked``: the directory exists and is locked, nothing else is written yet;
- ``started``: ``run.json`` says "starting", ``samples/`` does not exist yet;
- ``sample-recorded``: a sample's manifest line is written, the sample not yet renamed;
- ``sample-written``: the sample is in place, its unit's log line and state not yet;
- ``state-recorded``: the state's manifest line is written, the state not yet renamed;
- ``unit-done``: a unit and all its files are complete.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "BNNKIT_KILL_AT"
POINTS = ("locked", "started", "sample-recorded", "sample-written", "state-recorded", "unit-done")
_reached: Counter[str] = Counter()


def point(name: str) -> None:
    """Die here if ``BNNKIT_KILL_AT`` names this point (and its count is reached)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, count = spec.partition(":")
    if target != name:
        return
    _reached[name] += 1
    if _reached[name] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
