"""One progress bar for every long loop (HMC iterations, training epochs, curvature chunks)."""

from __future__ import annotations


class ProgressBar:
    """A rich bar with elapsed/remaining time and a free-text status column; a no-op if disabled.

    Example:
        >>> bar = ProgressBar("HMC", total=10, enabled=False)
        >>> bar.update(1, "accept 0.9")
        >>> bar.close()
    """

    def __init__(self, label: str, total: int, start: int = 0, *, enabled: bool = True):
        self.enabled = enabled
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stats]}"),
            transient=False,
        )
        self.task = self.progress.add_task(label, total=total, completed=start, stats="")
        self.progress.start()

    def update(self, advance: int = 1, stats: str = "") -> None:
        if self.enabled:
            self.progress.update(self.task, advance=advance, stats=stats)

    def close(self) -> None:
        if self.enabled:
            self.progress.stop()
