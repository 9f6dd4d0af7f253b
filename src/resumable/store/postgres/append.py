"""The events of a transaction on the workers' path (claims, outcomes), and what follows its commit.

Such a transaction locks only the step rows it touches; its events get the run's sequence numbers
in ``append_events``, the statement sent together with the COMMIT (pipeline mode), so the run's
row is locked only while the server runs that statement and flushes the commit: never across a
round trip or client-side work. Sequence numbers are handed out in commit order (the next writer
waits for the row until this commit is visible), so a reader that saw event N has seen every event
before it: ``log --since N`` and ``status --watch`` never skip one.

The workers' path does not rebuild the run's document: the step rows are the truth it acts on.
After the commit, the writer that saw the run's last open step close, or the run stop, concludes
it (``conclude``: the document and the policy's verdict, under the run's lock, once per run), and
one whose events outgrew the stored snapshot refreshes it, without the run's lock.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resumable.core.stamps import stamp
from resumable.store.postgres import conclude, runstate
from resumable.store.postgres.queries import WORK, Q

if TYPE_CHECKING:
    from psycopg import Cursor

    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place

# NOTIFY takes a database-wide lock at commit: a busy run announces its changes to watchers at most
# this often (a watcher redraws at most every 0.25 s anyway), and always when it ends.
CHANGED_EVERY = 0.2
_last_changed: dict[str, float] = {}


@dataclass(frozen=True, slots=True)
class Appended:
    """The run as the transaction left it."""

    seq: int
    open_steps: int
    stopping: bool
    tail_bytes: int
    snap_bytes: int
    has_job: bool


class Batch:
    """The events of one transaction on one run, and how it moves the run's counters."""

    def __init__(self, pk: int, run_id: str) -> None:
        self.pk = pk
        self.run_id = run_id
        self.bodies: list[str] = []
        self.bytes = 0
        self.open_steps_change = 0
        self.stop = False
        self.tx = secrets.token_hex(8)
        self.notify_work = False

    def add(self, *events: dict[str, Any]) -> None:
        at = stamp(time.time())
        for event in events:
            event.setdefault("at", at)
            body = runstate.encode_event(event)
            self.bodies.append(body)
            self.bytes += len(body)

    def send(self, conn: Connection) -> Cursor[Any] | None:
        """The last statements before the COMMIT (in pipeline mode they travel with it)."""
        if self.notify_work:
            conn.execute(Q.notify, {"channel": WORK, "payload": self.run_id})
        now = time.monotonic()
        if self.bodies and now >= _last_changed.get(self.run_id, 0.0) + CHANGED_EVERY:
            _last_changed[self.run_id] = now
            conn.execute(Q.notify, {"channel": runstate.CHANGED, "payload": self.run_id})
        if not self.bodies and not self.open_steps_change and not self.stop:
            return None
        return conn.execute(Q.append_events, {
            "pk": self.pk, "bodies": self.bodies, "open_steps_change": self.open_steps_change, "bytes": self.bytes,
            "stop": self.stop, "tx": self.tx})


def appended(cursor: Cursor[Any] | None) -> Appended | None:
    """What ``append_events`` answered (read after the commit)."""
    if cursor is None:
        return None
    try:
        row = cursor.fetchone()
    except Exception:  # the commit's answer was lost, and a probe found it saved: nothing to follow up
        return None
    return Appended(int(row[0]), int(row[1]), bool(row[2]), int(row[3]), int(row[4]), bool(row[5])) if row else None


def saved(conn: Connection, batch: Batch) -> bool:
    """Whether the batch's events are in the database (after a commit whose answer was lost)."""
    return bool(batch.bodies) and conn.execute(Q.saved, {"pk": batch.pk, "tx": batch.tx}).fetchone() is not None


def follow_up(place: Place, run_id: str, after: Appended | None) -> None:
    """After the commit: conclude the run when it may be over, refresh a snapshot outgrown."""
    if after is None:
        return
    if after.has_job and (after.open_steps <= 0 or after.stopping):
        conclude.conclude_run(place, run_id)
    elif after.tail_bytes >= max(after.snap_bytes, runstate.SNAPSHOT_MIN_TAIL):
        refresh_snapshot(place, run_id)


def refresh_snapshot(place: Place, run_id: str) -> None:
    """Store the document as of the events read now: a pure function of them, so no lock of the
    run is needed; a concurrent refresher's newer snapshot is never replaced by an older one."""
    handle = place.handle(run_id)

    def store(conn: Connection) -> None:
        row = runstate.find_row(conn, run_id, lock=False)
        if row is None or row.seq == 0:
            return
        snap = conn.execute("SELECT seq FROM resumable_snapshots WHERE run_pk = %s", (row.pk,)).fetchone()
        state = runstate.current(conn, row, handle.state, handle.location)
        handle.state = state
        base = int(snap[0]) if snap else 0
        if state.doc is None or state.seq <= base:
            return
        covered = conn.execute("SELECT coalesce(sum(length(body)), 0) FROM resumable_events WHERE run_pk = %s"
                               " AND seq > %s AND seq <= %s", (row.pk, base, state.seq)).fetchone()
        from resumable.core import jsonio

        doc = jsonio.dumps(state.doc).decode("utf-8")
        conn.execute(Q.refresh_snapshot, {"pk": row.pk, "seq": state.seq, "doc": doc, "snap_bytes": len(doc),
                                          "covered": int(covered[0]) if covered else 0})

    try:
        place.write(store, what=f"refresh the snapshot of run {run_id}", patience=0)
    except BaseException:
        handle.state = None  # a replay that stopped half way leaves a half-built document
        raise
