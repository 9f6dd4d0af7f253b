"""``status --watch``: redraw a run's view as it changes, until it ends.

Waiting costs one change-token check per interval (a stat pair in a runs directory, a ``NOTIFY`` in
PostgreSQL); the document is re-read only when the token moved, and then only the records appended
since (the handle catches up incrementally). On a terminal the frame is redrawn in place (rich Live)
and ticks every second so elapsed times move; into a pipe a new frame is printed only on a change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from resumable.errors import ResumableError
from resumable.view.printer import Printer
from resumable.view.status import LIVE, Line

if TYPE_CHECKING:
    from resumable.store.backend import RunHandle

WATCH_INTERVAL = 0.5  # seconds between two checks of the run's change token
TICK = 1.0  # re-render this often even without a change, so elapsed times move


def watch(
    handle: RunHandle,
    frame: Callable[[dict[str, Any], float], list[Line]],
    printer: Printer,
    *,
    interval: float | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Re-render as the run changes, until it leaves running/initializing. ``sleep`` replaces the
    handle's own wait (tests)."""
    if interval is None:
        interval = WATCH_INTERVAL
    token = handle.change_token()
    doc = handle.read()
    warning: str | None = None

    def wait(previous: Hashable) -> Hashable:
        if sleep is None:
            return handle.wait_for_change(previous, interval)
        sleep(interval)
        return handle.change_token()

    def lines() -> list[Line]:
        out = frame(doc, clock())
        if warning:
            out.append([(f"(last re-read failed: {warning}; showing the previous state)", "yellow")])
        return out

    def reread() -> None:
        nonlocal doc, warning
        try:
            doc, warning = handle.read(), None
        except ResumableError as exc:
            # A half-written external edit, or the run moved away mid-watch (gc): keep the last
            # good state and say so; the next change is read again.
            warning = str(exc)

    if not printer.color:
        printer.lines(lines())
        while doc.get("status") in LIVE:
            new = wait(token)
            if new == token:
                continue
            token = new
            reread()
            printer.text(f"── {time.strftime('%H:%M:%S', time.localtime(clock()))} ──")
            printer.lines(lines())
        return 0

    from rich.console import Group
    from rich.live import Live

    with Live(Group(*printer.texts(lines())), console=printer.console(), auto_refresh=False,
              transient=False) as live:
        last_draw = clock()
        while doc.get("status") in LIVE:
            new = wait(token)
            changed = new != token
            if changed:
                token = new
                reread()
            if changed or clock() - last_draw >= TICK:
                live.update(Group(*printer.texts(lines())), refresh=True)
                last_draw = clock()
    return 0
