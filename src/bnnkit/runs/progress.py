"""One progress display for every long loop (HMC iterations, training epochs, curvature chunks).

On a terminal it is a rich bar whose counter and remaining time stay visible at 80 columns: the
status (``accept 0.93 | step 1.05e-03 | ...``) takes what is left of the line and drops whole
fields from its end, never a number cut in half. When the output is not a terminal (a log
file, CI, ``nohup``) it prints a plain line every ``log_every`` units, or by default whenever
10 % of the units or 30 seconds have passed, so a log shows progress. Either way, once the
second unit has run (the first one compiles), a run expected to take longer than a minute more
says how long; while burn-in still tunes the step size (and with it the cost of an iteration)
that estimate says it is provisional, and a second one follows once burn-in has ended.
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


def fit_fields(text: str, width: int) -> str:
    """The fields of ``text`` (separated by :data:`FIELD_SEPARATOR`) that fit in ``width``
    columns, whole: fields are dropped from the end rather than cut.

    Example:
        >>> status = "sampling | accept 0.93 | step 1.05e-03 | L 506"
        >>> fit_fields(status, 40)
        'sampling | accept 0.93 | step 1.05e-03'
        >>> fit_fields(status, 30), fit_fields(status, 5)
        ('sampling | accept 0.93', '')
    """
    fields = text.split(FIELD_SEPARATOR) if text else []
    while fields and len(FIELD_SEPARATOR.join(fields)) > width:
        fields.pop()
    return FIELD_SEPARATOR.join(fields)


class _Fields:
    """A rich renderable: the status fields that fit the width it is given, whole."""

    def __init__(self, text: str):
        self.text = text

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        yield Text(fit_fields(self.text, options.max_width), no_wrap=True, overflow="crop")

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement(0, min(len(self.text), options.max_width))


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

    def __init__(self, label: str, total: int, start: int = 0, *, enabled: bool = True,
                 log_every: int | None = None, unit_name: str = "units",
                 stream: TextIO | None = None, console: Any = None, settle_after: int = 0):
        self.enabled = enabled
        self.label, self.total, self.done, self.start = label, total, start, start
        self.log_every, self.unit_name = log_every, unit_name
        self.settle_after = settle_after
        self.t_settled: float | None = None  # when the first steady unit ended
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
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.table import Column

        class StatusColumn(ProgressColumn):
            # What is left of the line, filled with whole fields, so the counter and the
            # remaining time survive a narrow terminal and no number is cut in half.
            def render(self, task: Any) -> Any:
                return _Fields(task.fields.get("stats", ""))

        status = StatusColumn(table_column=Column(ratio=1, no_wrap=True, min_width=0))
        self.progress = Progress(
            TextColumn(f"[bold]{self.label}[/bold]"), BarColumn(bar_width=16),
            MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(), status,
            transient=False, expand=True, console=console,
        )
        self.task = self.progress.add_task(self.label, total=self.total, completed=self.start,
                                           stats="")
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
        if not self.enabled:
            return
        self.done += advance
        now = time.perf_counter()
        if self.t_first is None:
            self.t_first = now
        elif self.done == self.start + 2:
            self._estimate(now, self.t_first, 1)
        if self.settle_after > self.start + 1 and self.done == self.settle_after + 1:
            self.t_settled = now
        elif self.t_settled is not None and self.done == self.settle_after + 2:
            self._estimate(now, self.t_settled, self.settle_after + 1 - self.start)
        if self.progress is not None:
            self.progress.update(self.task, advance=advance, stats=stats)
        elif self._line_due(now):
            self.last_line, self.line_units = now, self.done
            print(self._line(now, stats), file=self.stream, flush=True)

    def _estimate(self, now: float, since: float, before: int) -> None:
        """Announce the time left at the speed of the units since ``since`` (``before`` units
        after the start had run by then; the first unit compiles, so it is never counted)."""
        per_unit = (now - since) / (self.done - self.start - before)
        left = self.total - self.done
        if left * per_unit < ESTIMATE_MIN_SECONDS:
            return
        text = (f"{self.label}: about {duration(left * per_unit)} for the {left:,} "
                f"{self.unit_name} left at the current speed ({per_unit:.3g} s each)")
        if self.done <= self.settle_after:
            text += (f"; provisional: burn-in still tunes the step size for "
                     f"{self.settle_after - self.done:,} more, which changes the speed")
        self.message(text)

    def _line_due(self, now: float) -> bool:
        if self.done >= self.total:
            return True
        if self.log_every:
            return self.done % self.log_every == 0
        every = max(1, round(LINE_FRACTION * self.total))
        return (self.done - self.line_units >= every
                or now - self.last_line >= LINE_SECONDS)

    def _line(self, now: float, stats: str) -> str:
        elapsed = now - self.t0
        # After the first (compiling) unit, the speed of the units since then.
        since_first = self.done - self.start - 1
        per_unit = ((now - self.t_first) / since_first if since_first > 0 and self.t_first
                    else elapsed / max(self.done - self.start, 1))
        left = (self.total - self.done) * per_unit
        line = (f"{self.label} {self.done:,}/{self.total:,} "
                f"({100 * self.done // max(self.total, 1)} %) elapsed {duration(elapsed)}, "
                f"left {duration(left)}")
        return f"{line} | {stats}" if stats else line

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
