"""``status --watch``: redraw a run's view as it changes, until it ends.

A run that is not running (not started yet, or ended) is waited for: until its next session
starts (up to ``--wait``, or until Ctrl-C), with one line saying so, and then followed; the
previous session's screen is not shown, so what stays on the screen is that session's result (a live
run's frame leaves out the result its document still carries from the session before).

Waiting costs one change-token check per interval (a stat pair in a runs directory, a ``NOTIFY`` in
PostgreSQL); the document is re-read only when the token moved, and then only the records appended
since (the handle catches up incrementally). On a terminal the frame is redrawn in place (rich Live)
and ticks every second so elapsed times move; into a pipe a new frame is printed only on a change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, cast

from resumable.core.text import escape_controls
from resumable.errors import ResumableError
from resumable.view.printer import Printer
from resumable.view.status import LIVE, Line

if TYPE_CHECKING:
    from resumable.store.backend import Doc, RunHandle

WATCH_INTERVAL = 0.5  # seconds between two checks of the run's change token
TICK = 1.0  # re-render this often even without a change, so elapsed times move


def await_run(find: Callable[[], Any], until: float | None, printer: Printer, what: str,
              *, interval: float | None = None, sleep: Callable[[float], None] = time.sleep) -> Any:
    """``find()`` (a run's handle, or None / NoRunError while it does not exist yet), asked again
    every interval until it answers or ``until`` (time.monotonic) passes: then None."""
    from resumable.errors import NoRunError

    said = False
    while True:
        try:
            found = find()
        except NoRunError:
            found = None
        if found is not None:
            return found
        if not said:
            printer.text(f"no run {what} yet; waiting for it to start (Ctrl-C to stop)")
            said = True
        if until is not None and time.monotonic() >= until:
            printer.text(f"no run {what} started in time")
            return None
        sleep(interval or WATCH_INTERVAL)


def watch(
    handle: RunHandle,
    frame: Callable[[Doc, float], list[Line]],
    printer: Printer,
    until: float | None = 0.0,
    *,
    interval: float | None = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Re-render as the run changes, until it leaves running/initializing. A run that is not
    running is first waited for until ``until`` (time.monotonic; None: until Ctrl-C; 0: not at
    all): 1 when no session started by then. ``sleep`` replaces the handle's own wait (tests)."""
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

    if doc.get("status") not in LIVE and until != 0:
        started = _await_session(handle, token, doc, printer, until, wait)
        if started is None:
            return 1
        token, doc = started

    def lines() -> list[Line]:
        out = frame(_this_session(doc), clock())
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


def _await_session(handle: RunHandle, token: Hashable, doc: Doc, printer: Printer,
                   until: float | None, wait: Callable[[Hashable], Hashable]
                   ) -> tuple[Hashable, Doc] | None:
    """Wait for the run's next session: (its change token, its document) once it is live, None
    when ``until`` passed first (said in one line)."""
    printer.text(escape_controls(f"run {doc.get('id')} is {doc.get('status')} ({doc.get('result') or 'no result'});"
                                 " waiting for its next session to start (Ctrl-C to stop)"))
    before = _ended(doc)
    while doc.get("status") not in LIVE:
        if until is not None and time.monotonic() >= until:
            printer.text(f"no session of run {escape_controls(str(doc.get('id')))} started in time")
            return None
        new = wait(token)
        if new != token:
            token = new
            try:
                doc = handle.read()
            except ResumableError:
                continue  # a write in flight, or the run moved away: asked again on the next change
            if _ended(doc) != before:
                break  # a session began and ended between two looks: its result is shown
    return token, doc


def _ended(doc: Doc) -> tuple[object, ...]:
    """How a run's last session ended, as far as a reader can tell."""
    return doc.get("status"), doc.get("result"), doc.get("updatedAt"), doc.get("ranSeconds")


def _this_session(doc: Doc) -> Doc:
    """The document as the watched session stands: a live run has no result yet (the one it
    carries is the previous session's, kept until this one records its own)."""
    if doc.get("status") not in LIVE or "result" not in doc:
        return doc
    view = dict(doc)
    del view["result"]
    return cast("Doc", view)
