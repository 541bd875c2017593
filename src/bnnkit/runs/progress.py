"""One progress display for every long loop (HMC iterations, training epochs, curvature chunks).

On a terminal it is one line: the label and counter, then what fits of the time left, the
status fields (``accept 0.93 | step 1.05e-03 | div 0 (burn-in 2) | ...``), the bar and the
time elapsed, kept in the order of :data:`KEEP_ORDER` and each whole, never a number cut in
half: at 80 columns a sampler's line keeps the acceptance rate, the step size and the
divergences, at 120 nearly everything. When the output is not a terminal (a log
file, CI, ``nohup``) it prints a plain line every ``log_every`` units, or by default whenever
10 % of the units or 30 seconds have passed, so a log shows progress. Either way the time left
is measured, never guessed: it says "estimating" until units after the first ones (which
compile) have run, and then a run expected to take longer than a minute more says how long;
while burn-in still tunes the step size (and with it the cost of an iteration) that estimate
says it is provisional, and a second one follows once burn-in has ended. Units may come one at
a time or a block at once (:mod:`bnnkit.runs.blocks`).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

#: Plain-output defaults: a line at least every this many seconds, and every tenth of the run.
LINE_SECONDS = 30.0
LINE_FRACTION = 0.1
#: Announce the expected duration only of runs with at least this many seconds left.
ESTIMATE_MIN_SECONDS = 60.0


def duration(seconds: float) -> str:
    """A duration as people say it.

    Example:
        >>> duration(42), duration(150), duration(12_000), duration(200_000)
        ('42 s', '2 min 30 s', '3 h 20 min', '2 d 7 h')
    """
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {s} s" if s else f"{minutes} min"
    hours, m = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {m} min" if m else f"{hours} h"
    days, h = divmod(hours, 24)
    return f"{days} d {h} h" if h else f"{days} d"


#: Between the fields of a status line.
FIELD_SEPARATOR = " | "
#: Width of the bar itself, when the line has room for it.
BAR_WIDTH = 16

#: What a bar's line keeps as the terminal narrows, most useful first; pieces are dropped
#: from the end of this list, so at 80 columns a sampler shows its counter, the time left,
#: the acceptance rate, the step size and the divergences. Besides the label and the counter
#: (always shown) the pieces are the time left and the bar's elapsed time, the bar itself,
#: and the status fields by their first words: ``phase`` (``sampling`` or ``burn-in``),
#: ``accept``, ``step``, ``div`` (``burn-in div`` too), ``capped``, ``L``, ``log post``,
#: ``elbo``, ``test`` and ``other`` (any field not named, in its own order).
KEEP_ORDER: tuple[str, ...] = (
    "left",
    "accept",
    "step",
    "div",
    "phase",
    "other",
    "bar",
    "capped",
    "L",
    "elapsed",
    "log post",
    "elbo",
    "test",
)


def field_kind(field: str) -> str:
    """The name in :data:`KEEP_ORDER` of one status field.

    Example:
        >>> [field_kind(f) for f in ("sampling", "accept 0.93", "burn-in div 3", "L 250",
        ...                          "test rmse 0.41", "1,024/4,096 points")]
        ['phase', 'accept', 'div', 'L', 'test', 'other']
    """
    if field in ("sampling", "burn-in"):
        return "phase"
    words = field.removeprefix("burn-in ")
    for kind in ("accept", "step", "div", "capped", "L", "log post", "elbo", "test"):
        if words.startswith(kind + " "):
            return kind
    return "other"


def line_pieces(pieces: dict[str, str], status: str, width: int) -> dict[str, str]:
    """What a bar's line of ``width`` columns shows: ``label`` and ``counter`` always, then
    the pieces of :data:`KEEP_ORDER` while they fit, each whole.

    Args:
        pieces: the text of ``label``, ``counter``, ``left``, ``elapsed`` and ``bar`` (the
            bar's width in spaces).
        status: the status fields, joined by :data:`FIELD_SEPARATOR`.
        width: the columns of the line.

    Returns:
        The kept pieces by name (``status``: the kept fields, in their own order, joined).

    Example:
        >>> status = "sampling | accept 0.93 | step 1.05e-03 | L 506 | div 0 (burn-in 2)"
        >>> pieces = {"label": "HMC", "counter": "5/400", "left": "left 0:01:10",
        ...           "elapsed": "0:00:05", "bar": " " * BAR_WIDTH}
        >>> line_pieces(pieces, status, 80)["status"]
        'accept 0.93 | step 1.05e-03 | div 0 (burn-in 2)'
        >>> line_pieces(pieces, status, 60)["status"]
        'accept 0.93 | step 1.05e-03'
        >>> line_pieces(pieces, status, 30)
        {'label': 'HMC', 'counter': '5/400', 'left': 'left 0:01:10'}
    """
    from rich.cells import cell_len

    fields = [f for f in status.split(FIELD_SEPARATOR) if f] if status else []
    rank = {kind: i for i, kind in enumerate(KEEP_ORDER)}
    # Each optional piece, most useful first: (name, index of the field or -1, its text).
    ranked = sorted(
        [(name, -1, pieces[name]) for name in ("left", "elapsed", "bar") if pieces.get(name)]
        + [("status", i, f) for i, f in enumerate(fields)],
        key=lambda p: (rank[p[0] if p[1] < 0 else field_kind(p[2])], p[1]),
    )
    used = cell_len(pieces["label"]) + 1 + cell_len(pieces["counter"])
    kept: dict[str, str] = {"label": pieces["label"], "counter": pieces["counter"]}
    shown: list[int] = []
    for name, index, text in ranked:
        # A column costs a space before it; a field, the separator (the first, a space).
        cost = cell_len(text) + (len(FIELD_SEPARATOR) if shown and index >= 0 else 1)
        if used + cost > width:
            break
        used += cost
        if index >= 0:
            shown.append(index)
        else:
            kept[name] = text
    if shown:
        kept["status"] = FIELD_SEPARATOR.join(fields[i] for i in sorted(shown))
    return kept


def clock(seconds: float | None) -> str:
    """``h:mm:ss``, or ``-:--:--`` while unknown.

    Example:
        >>> clock(3725.2), clock(None)
        ('1:02:05', '-:--:--')
    """
    if seconds is None:
        return "-:--:--"
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}:{m:02d}:{s:02d}"


class _Line:
    """A rich renderable: a bar's whole line, the pieces of :func:`line_pieces` that fit the
    width it is given."""

    def __init__(self, label: str, task: Any):
        self.label, self.task = label, task

    def pieces(self) -> dict[str, str]:
        task = self.task
        total = int(task.total or 0)
        elapsed = task.finished_time if task.finished else task.elapsed
        return {
            "label": self.label,
            "counter": f"{int(task.completed):>{len(str(total))}}/{total}",
            "left": ""
            if task.finished
            else "left estimating"
            if task.fields.get("left") is None
            else f"left {clock(task.fields['left'])}",
            "elapsed": clock(elapsed),
            "bar": " " * BAR_WIDTH,
        }

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.progress_bar import ProgressBar as Bar
        from rich.table import Table
        from rich.text import Text

        kept = line_pieces(self.pieces(), self.task.fields.get("stats", ""), options.max_width)
        grid = Table.grid(padding=(0, 1))
        cells: list[Any] = [Text(kept["label"], style="bold")]
        if "bar" in kept:
            cells.append(Bar(total=self.task.total, completed=self.task.completed, width=BAR_WIDTH))
        cells.append(Text(kept["counter"], style="progress.download"))
        if "elapsed" in kept:
            cells.append(Text(kept["elapsed"], style="progress.elapsed"))
        if "left" in kept:
            cells.append(Text(kept["left"], style="progress.remaining"))
        if "status" in kept:
            cells.append(Text(kept["status"]))
        for _ in cells:
            grid.add_column(no_wrap=True)
        grid.add_row(*cells)
        yield grid

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement(0, options.max_width)


class ProgressBar:
    """Progress of ``total`` units: a rich bar on a terminal, plain lines otherwise.

    Args:
        label: what a unit is (``"HMC"``, ``"sgd epoch"``).
        total: units of the whole run.
        start: units already done (a resumed run).
        enabled: show anything at all.
        log_every: with plain output, a line every this many units (default: every 10 % of
            the run or 30 s, whichever comes first).
        unit_name: the unit's name in the time estimate (``"iterations"``).
        settle_after: units after which the speed is steady (the burn-in of a sampler whose
            step size, and so its cost per iteration, is tuned until then): an estimate made
            earlier says it is provisional, and another follows after them.
        stream: where plain output goes (default: standard output).
        console: a rich ``Console`` to draw the bar on (default: standard output, when it is
            a terminal).

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> bar = ProgressBar("HMC", total=4, stream=out, log_every=2)
        >>> for _ in range(4):
        ...     bar.update(1, "accept 0.90")
        >>> bar.close()
        >>> [line.split(" elapsed")[0] for line in out.getvalue().splitlines()]
        ['HMC 2/4 (50 %)', 'HMC 4/4 (100 %)']
    """

    def __init__(
        self,
        label: str,
        total: int,
        start: int = 0,
        *,
        enabled: bool = True,
        log_every: int | None = None,
        unit_name: str = "units",
        stream: TextIO | None = None,
        console: Any = None,
        settle_after: int = 0,
    ):
        self.enabled = enabled
        self.label, self.total, self.done, self.start = label, total, start, start
        self.log_every, self.unit_name = log_every, unit_name
        self.settle_after = settle_after
        self.t_settled: float | None = None  # when burn-in ended
        self.settled_done = self.first_done = start
        self.announced = self.announced_settled = False
        self.stream = stream if stream is not None else sys.stdout
        self.t0 = self.last_line = time.perf_counter()
        self.t_first: float | None = None  # when the first (compiling) unit ended
        self.line_units = start
        self.progress = None
        if not enabled:
            return
        if console is not None or (stream is None and self.stream.isatty()):
            self._start_bar(console)

    def _start_bar(self, console: Any) -> None:
        from rich.progress import Progress, ProgressColumn
        from rich.table import Column

        label = self.label

        class LineColumn(ProgressColumn):
            # The whole line in one column, so that what it keeps as the terminal narrows
            # follows KEEP_ORDER rather than the widths rich gives fixed columns.
            def render(self, task: Any) -> Any:
                return _Line(label, task)

        line = LineColumn(table_column=Column(ratio=1, no_wrap=True, min_width=0))
        self.progress = Progress(line, transient=False, expand=True, console=console)
        self.task = self.progress.add_task(
            self.label, total=self.total, completed=self.start, stats="", left=None
        )
        self.progress.start()

    def message(self, text: str) -> None:
        """A line above the bar (or in the plain output)."""
        if not self.enabled:
            return
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def update(self, advance: int = 1, stats: str = "") -> None:
        """``advance`` more units done (a block of them at once, or one)."""
        if not self.enabled:
            return
        self.done += advance
        now = time.perf_counter()
        if self.t_first is None:
            # The first units compile: the speed is measured from their end.
            self.t_first, self.first_done = now, self.done
        elif not self.announced:
            self.announced = True
            self._estimate(self._per_unit(now, self.t_first, self.first_done))
        if self.t_settled is None and self.start < self.settle_after <= self.done:
            self.t_settled, self.settled_done = now, self.done
        elif self.t_settled is not None and not self.announced_settled and self.announced:
            self.announced_settled = True
            self._estimate(self._per_unit(now, self.t_settled, self.settled_done))
        if self.progress is not None:
            self.progress.update(self.task, advance=advance, stats=stats, left=self._left(now))
        elif self._line_due(now):
            self.last_line, self.line_units = now, self.done
            print(self._line(now, stats), file=self.stream, flush=True)

    def _per_unit(self, now: float, since: float | None, done_then: int) -> float | None:
        """Seconds per unit of the units done since ``since`` (when ``done_then`` were), or
        ``None`` before any was measured."""
        if since is None or self.done <= done_then:
            return None
        return (now - since) / (self.done - done_then)

    def _left(self, now: float) -> float | None:
        """The time left at the speed measured since the first units (``None``: not yet)."""
        per_unit = self._per_unit(now, self.t_first, self.first_done)
        if self.t_settled is not None and self.done > self.settled_done:
            per_unit = self._per_unit(now, self.t_settled, self.settled_done)
        return None if per_unit is None else (self.total - self.done) * per_unit

    def _estimate(self, per_unit: float | None) -> None:
        """Announce the time left at ``per_unit`` seconds a unit (measured after the first,
        compiling, units)."""
        if per_unit is None:
            return
        left = self.total - self.done
        if left * per_unit < ESTIMATE_MIN_SECONDS:
            return
        text = (
            f"{self.label}: about {duration(left * per_unit)} for the {left:,} "
            f"{self.unit_name} left at the current speed ({per_unit:.3g} s each)"
        )
        if self.done < self.settle_after:
            text += (
                f"; provisional: burn-in still tunes the step size for "
                f"{self.settle_after - self.done:,} more, which changes the speed"
            )
        self.message(text)

    def _line_due(self, now: float) -> bool:
        if self.done >= self.total:
            return True
        if self.log_every:
            return self.done % self.log_every == 0
        every = max(1, round(LINE_FRACTION * self.total))
        return self.done - self.line_units >= every or now - self.last_line >= LINE_SECONDS

    def _line(self, now: float, stats: str) -> str:
        left = self._left(now)
        line = (
            f"{self.label} {self.done:,}/{self.total:,} "
            f"({100 * self.done // max(self.total, 1)} %) elapsed {duration(now - self.t0)}, "
            f"left {'estimating' if left is None else duration(left)}"
        )
        return f"{line} | {stats}" if stats else line

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
