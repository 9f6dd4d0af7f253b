"""``run.map``'s progress bar: rich, on a terminal only, imported only when one is drawn."""

from __future__ import annotations

import sys
import threading

from resumable.core.text import escape_controls


class Bar:
    """Counts finished items (thread-safe); draws nothing."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.failed = 0

    def advance(self, n: int = 1, *, failed: int = 0) -> None:
        with self.lock:
            self.done += n
            self.failed += failed

    def close(self) -> None:
        pass


class RichBar(Bar):
    def __init__(self, label: str, total: int) -> None:
        super().__init__()
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.label = escape(escape_controls(label))
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                                 transient=False)
        self.task = self.progress.add_task(self.label, total=total)
        self.progress.start()

    def advance(self, n: int = 1, *, failed: int = 0) -> None:
        super().advance(n, failed=failed)
        description = self.label if not self.failed else f"{self.label} [red]({self.failed} failed)[/]"
        self.progress.update(self.task, advance=n, description=description)

    def close(self) -> None:
        self.progress.stop()


def open_bar(label: str, total: int, wanted: bool | None) -> Bar:
    """A drawn bar when ``wanted`` (None: when stderr is a terminal), else a counter."""
    if wanted is None:
        try:
            wanted = sys.stderr.isatty()
        except (AttributeError, ValueError):
            wanted = False
    if not wanted or total == 0:
        return Bar()
    return RichBar(label, total)

