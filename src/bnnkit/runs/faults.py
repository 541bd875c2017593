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

A composite run (:mod:`bnnkit.runs.composite`) adds two points of its own,
``composite-started`` (its record says "running", no stage has run in this call) and
``stage-done`` (a stage's run has ended, the parent record does not say so yet), and names a
point inside one of its stages ``STAGE/NAME`` (``chains/sample-recorded:2``: the second kept
sample of the chains' stage), counted within that stage.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Iterator

ENV = "BNNKIT_KILL_AT"
POINTS = ("locked", "started", "sample-recorded", "sample-written", "state-recorded", "unit-done")
COMPOSITE_POINTS = ("composite-started", "stage-done")
_reached: Counter[str] = Counter()
_stage: list[str] = []


def point(name: str) -> None:
    """Die here if ``BNNKIT_KILL_AT`` names this point (and its count is reached)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, count = spec.partition(":")
    if target not in (name, *(f"{s}/{name}" for s in _stage[-1:])):
        return
    _reached[target] += 1
    if _reached[target] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def within(stage: str) -> Iterator[None]:
    """Name the points reached in the block as points of the composite's stage ``stage``."""
    _stage.append(stage)
    try:
        yield
    finally:
        _stage.pop()
