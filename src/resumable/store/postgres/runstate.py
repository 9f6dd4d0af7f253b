"""A run's document in PostgreSQL: loading it, catching up, and the write path (``RunWriter``).

The history (``resumable_events``) is the source of truth; the document is the latest snapshot
plus the events after it, replayed with ``core.events.apply``, so both stores build a document
the same way. A process keeps the document between writes (``RunState``) and only reads the events
other processes appended since, so a write costs the same at 10 or 100,000 units.

A write through a handle (``init``, ``unit``, ``submit``, a run's conclusion: not the workers'
claims and completions, see ``append``) holds the run's row lock (``SELECT ... FOR NO KEY UPDATE`` on its
``resumable_runs`` row) from reading the latest sequence number to committing its events: such
writers queue on the lock and each applies its events to the latest document, so the checkpoint
rules of ``apply`` (no demotion of done, finalize refusals) see every earlier write. The workers'
writes touch units only through their step rows, which such a write locks first when its events
touch them (``handle``). A row lock rather than
serializable transactions because every write of a run touches the same row: under serializable
isolation concurrent writers of one run would nearly all fail and retry (16 writers: most of each
round's work thrown away), while the lock queues them and each does its work once.
"""

from __future__ import annotations

import secrets
import zlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from resumable.core import jsonio
from resumable.core.events import apply, is_event
from resumable.core.model import refuse_newer, shape_problem
from resumable.core.stamps import parse_stamp, stamp
from resumable.errors import CorruptRunError, InvalidInputError, NewerFormatError
from resumable.store.postgres.queries import Q

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from psycopg import Cursor

    from resumable.core.types import Event
    from resumable.core.types import RunDocument as Doc
    from resumable.store.postgres.db import Connection

CHANGED = "resumable_changed"  # NOTIFY channel: payload = run id, on every commit
RECORD_FORMAT = 1  # the journal's record format: `log --json` prints the same lines in both stores
_RESERVED = frozenset({"v", "seq", "crc"})
# Refresh the stored snapshot once the events after it hold this share of its size (and at least
# this many bytes): loading stays snapshot + a bounded tail, snapshot bytes stay O(history).
SNAPSHOT_MIN_TAIL = 16 * 1024


class RunState:
    """A run's document as this process knows it: its row, the last event applied, the document."""

    __slots__ = ("doc", "pk", "seq")

    def __init__(self, pk: int, seq: int, doc: Doc | None) -> None:
        self.pk = pk
        self.seq = seq
        self.doc = doc


class RunRow:
    __slots__ = ("job", "pk", "seq", "snap_bytes", "status", "stopping", "tail_bytes")

    def __init__(self, row: Sequence[Any]) -> None:
        self.pk, self.seq, self.status, self.job, self.stopping, self.snap_bytes, self.tail_bytes = row




def encode_event(event: Event) -> str:
    if _RESERVED.intersection(event):
        raise InvalidInputError(f"an event may not carry the keys {', '.join(sorted(_RESERVED))}")
    try:
        return jsonio.dumps(event).decode("utf-8")
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"value cannot be stored as JSON: {exc}") from exc


def decode_event(body: str, seq: int, where: str) -> Event:
    try:
        event = jsonio.loads(body.encode("utf-8"))
    except ValueError as exc:
        raise CorruptRunError(f"{where}: event {seq} cannot be read ({exc})") from exc
    if not isinstance(event, dict):
        raise CorruptRunError(f"{where}: event {seq} is not an object")
    version = event.get("v")
    if isinstance(version, int) and version > RECORD_FORMAT:
        raise NewerFormatError(f"{where}: event {seq} was written by a newer resumable (format {version});"
                               " upgrade resumable")
    if not is_event(event):
        raise CorruptRunError(f"{where}: event {seq} has no kind (t)")
    return event


def record_line(seq: int, body: str) -> str:
    """The event as a journal line (``{"v":1,"seq":N,...,"crc":"..."}``), for ``log --json``."""
    head = f'{{"v":{RECORD_FORMAT},"seq":{seq},'.encode() + body.encode("utf-8")[1:-1]
    return (head + b',"crc":"%08x"}' % zlib.crc32(head)).decode("utf-8")


def find_row(conn: Connection, run_id: str, *, lock: bool) -> RunRow | None:
    row = conn.execute(Q.find_run_locked if lock else Q.find_run, (run_id,)).fetchone()
    return RunRow(row) if row is not None else None


def _replay(conn: Connection, state: RunState, where: str) -> None:
    rows = conn.execute(Q.events_after, (state.pk, state.seq))
    doc = state.doc
    for seq, body in rows:
        if seq != state.seq + 1:
            raise CorruptRunError(f"{where}: the history jumps from event {state.seq} to {seq}")
        doc, _ = apply(doc, decode_event(body, seq, where))
        state.seq = seq
        state.doc = doc


def load(conn: Connection, pk: int, where: str) -> RunState:
    """The run's document from its latest snapshot and the events after it."""
    snap = conn.execute(Q.snapshot_of, (pk,)).fetchone()
    state = RunState(pk, 0, None)
    if snap is not None:
        try:
            doc = jsonio.loads(snap[1].encode("utf-8"))
        except ValueError as exc:
            raise CorruptRunError(f"{where}: the stored snapshot cannot be read ({exc})") from exc
        state.seq, state.doc = int(snap[0]), doc
    _replay(conn, state, where)
    return state


def with_pending(conn: Connection, state: RunState, where: str) -> Doc | None:
    """The document with the committed events not numbered yet applied after the numbered ones
    (a copy: the cached state stays at its last numbered event)."""
    pending = conn.execute(Q.pending_events, {"pk": state.pk}).fetchall()
    if not pending:
        return state.doc
    doc = jsonio.loads(jsonio.dumps(state.doc)) if state.doc is not None else None
    for event_id, body in pending:
        doc, _ = apply(doc, decode_event(body, int(event_id), f"{where} (pending)"))
    return doc


def current(conn: Connection, row: RunRow, state: RunState | None, where: str) -> RunState:
    """``state`` brought up to ``row`` (catching up on the events since), or loaded afresh."""
    if state is None or state.pk != row.pk or state.seq > row.seq:
        return load(conn, row.pk, where)
    if state.seq < row.seq:
        _replay(conn, state, where)
    return state


def lock_and_catch_up(conn: Connection, run_id: str, state: RunState | None, where: str
                      ) -> tuple[RunRow | None, RunState | None]:
    """The run's row, locked, and the document caught up to it. The events after the cached
    sequence number are asked for in the same round trip as the lock: in pipeline mode the
    statements travel together, and each runs after the one before it, so after the lock is held."""
    conn.execute(Q.lock_run, (run_id,))
    # The workers' pending events first get their numbers (``append``), so this writer's follow them.
    conn.execute(Q.sequence_events, {"pk": None, "run": run_id, "min_tail": SNAPSHOT_MIN_TAIL, "channel": CHANGED,
                                      "payload": run_id})
    rows = conn.execute(Q.find_run, (run_id,))
    tail = None
    if state is not None:
        tail = conn.execute(Q.events_after, (state.pk, state.seq))
    got = rows.fetchone()
    if got is None:
        return None, None
    row = RunRow(got)
    if row.seq == 0:
        return row, None
    if tail is None or state is None or state.pk != row.pk or state.seq > row.seq:
        return row, load(conn, row.pk, where)
    doc = state.doc
    for seq, body in tail.fetchall():
        if seq != state.seq + 1:
            raise CorruptRunError(f"{where}: the history jumps from event {state.seq} to {seq}")
        doc, _ = apply(doc, decode_event(body, seq, where))
        state.seq = seq
        state.doc = doc
    return row, state


class RunWriter:
    """The events of one transaction on one run, applied to its document under the row lock."""

    def __init__(self, conn: Connection, row: RunRow, state: RunState, run_id: str, where: str) -> None:
        self.conn = conn
        self.row = row
        self.state = state
        self.run_id = run_id
        self.where = where
        self.tx = secrets.token_hex(8)
        self.first_seq = row.seq + 1
        self.bodies: list[str] = []
        self.applied = False  # the cached document changed: forget it if the transaction fails
        self.force_snapshot = False
        self.first_rows: Any = None  # what the writer's ``first`` statements asked for, before the lock
        # Whether the document it started from had missed no other writer's events (None: it
        # was read afresh).
        self.alone: bool | None = False

    @property
    def doc(self) -> Mapping[str, Any]:
        return self.state.doc or {}

    def apply(self, events: Sequence[Event]) -> list[Any]:
        """Apply ``events`` in order; a refusal or bad input raises before anything is stored."""
        outputs = []
        if self.state.doc is not None and events and events[0].get("t") != "init":
            refuse_newer(self.state.doc, self.run_id)  # an upgrade is the remedy, not an edit
            problem = shape_problem(self.state.doc)
            if problem is not None:
                raise InvalidInputError(f"{self.where}: {problem} — fix the document (or delete the run"
                                        " and init afresh); nothing was written")
        for event in events:
            if not isinstance(event.get("at"), str):
                event["at"] = stamp()
            body = encode_event(event)
            doc, out = apply(self.state.doc, event)
            self.applied = True
            self.state.doc = doc
            self.bodies.append(body)
            outputs.append(out)
            if event.get("t") in ("finalize", "base"):
                self.force_snapshot = True
        return outputs

    def save(self) -> None:
        """Store the staged events and move the run's row on, in one statement (inside the
        caller's transaction; in pipeline mode it travels with the COMMIT)."""
        if not self.bodies:
            return
        params, snapshot = self._params()
        self.conn.execute(Q.save_events_and_snapshot if snapshot else Q.save_events, params)
        self._moved_on(params, snapshot)

    def save_if_current(self) -> Cursor[Any] | None:
        """As ``save``, on a run without a job whose row this writer did not lock: written only
        if the run is still at the writer's sequence number (the cursor, read after the COMMIT,
        has a row then), else nothing is (see ``save_events_if_current``)."""
        if not self.bodies:
            return None
        params, snapshot = self._params()
        params["expect"] = self.row.seq
        params["size"] = sum(len(b) for b in self.bodies)
        cursor = self.conn.execute(Q.save_events_and_snapshot_if_current if snapshot else Q.save_events_if_current,
                                   params)
        self._moved_on(params, snapshot)
        return cursor

    def _params(self) -> tuple[dict[str, Any], bool]:
        first = self.row.seq + 1
        seq = self.row.seq + len(self.bodies)
        size = sum(len(b) for b in self.bodies)
        doc: Mapping[str, Any] = self.state.doc or {}
        status = doc.get("status")
        updated = parse_stamp(doc.get("updatedAt"))
        tail = self.row.tail_bytes + size
        snapshot = self.force_snapshot or tail >= max(self.row.snap_bytes, SNAPSHOT_MIN_TAIL)
        params: dict[str, Any] = {
            "pk": self.row.pk, "first": first, "tx": self.tx, "bodies": self.bodies, "seq": seq,
            "status": status if isinstance(status, str) else None,
            "updated": datetime.fromtimestamp(updated, UTC) if updated is not None else None,
            "tail": 0 if snapshot else tail,
            "channel": CHANGED, "run": self.run_id,
        }
        if snapshot:
            params["doc"] = jsonio.dumps(doc).decode("utf-8")
            params["snap_bytes"] = len(params["doc"])
        return params, snapshot

    def _moved_on(self, params: Mapping[str, Any], snapshot: bool) -> None:
        self.row.seq = params["seq"]
        self.row.tail_bytes = params["tail"]
        if snapshot:
            self.row.snap_bytes = params["snap_bytes"]
        self.state.seq = params["seq"]
        self.bodies = []

    def saved(self, conn: Connection) -> bool:
        """Whether this writer's events are in the database (after a commit whose answer was lost)."""
        row = conn.execute(Q.saved, {"pk": self.row.pk, "tx": self.tx}).fetchone()
        return row is not None


def iter_history(conn: Connection, pk: int, since: int, where: str) -> Iterator[tuple[int, str]]:
    """(seq, body) of every event after ``since``, streamed (a long history is not held at once)."""
    with conn.cursor(name=f"resumable_history_{secrets.token_hex(4)}") as cur:
        cur.itersize = 2000
        cur.execute(Q.events_after, (pk, since))
        expect = since + 1
        for seq, body in cur:
            if seq != expect:
                raise CorruptRunError(f"{where}: the history jumps from event {expect - 1} to {seq}")
            expect += 1
            yield int(seq), body
