"""The events of a transaction on the workers' path (claims, outcomes), and what follows its commit.

Such a transaction locks only the step rows it touches, and appends its events to the run's
pending events, unnumbered: no row of the run is touched (see migration 0002 for why). The run's
sequence numbers are handed out later, in commit order, by ``number_events`` (here, at most every
``NUMBER_EVERY`` seconds per worker and run), by every write through a handle, and by ``log``.

The workers' path does not rebuild the run's document: the step rows are the truth it acts on. A
transaction that sees no step of the run open (``run_over``) concludes it after its commit
(``conclude``: the document and the policy's verdict, under the run's lock, once per run).
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from resumable.core.stamps import stamp
from resumable.store.postgres import conclude, runstate
from resumable.store.postgres.queries import WORK, Q

if TYPE_CHECKING:
    from resumable.core.types import Event
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place

# How often a worker numbers its run's pending events (and so how far behind `log` and `status
# --watch` may be while the run goes on): the run's row is locked for a moment each time, and NOTIFY
# takes a database-wide lock at commit, so neither happens at every transaction.
NUMBER_EVERY = 1.0
_last_numbered: dict[int, float] = {}
_written: dict[int, str] = {}  # runs this process appended events to (row key -> id)
REFRESH_LOCK = 0x736E6170  # "snap": the advisory lock space of snapshot refreshes (key: the run's row)


class Batch:
    """The events of one transaction on one run, and whether it stops the run."""

    def __init__(self, pk: int, run_id: str) -> None:
        self.pk = pk
        self.run_id = run_id
        self.bodies: list[str] = []
        self.stop = False
        self.tx = secrets.token_hex(8)
        self.notify_work = False

    def add(self, *events: Event) -> None:
        at = stamp(time.time())
        for event in events:
            event.setdefault("at", at)
            self.bodies.append(runstate.encode_event(event))

    def send(self, conn: Connection) -> None:
        """The last statements before the COMMIT (in pipeline mode they travel with it). The run's
        row is touched only to stop it (a failure, rare), last: the workers' lock order."""
        if self.notify_work:
            conn.execute(Q.notify, {"channel": WORK, "payload": self.run_id})
        if self.bodies:
            conn.execute(Q.append_events, {"pk": self.pk, "bodies": self.bodies, "tx": self.tx})
            wrote(self)
        if self.stop:
            conn.execute(Q.stop_run, {"pk": self.pk})


def wrote(batch: Batch) -> None:
    """This process appended the batch's events (numbered when it stops, if not before)."""
    if batch.bodies:
        _written[batch.pk] = batch.run_id


def saved(conn: Connection, batch: Batch) -> bool:
    """Whether the batch's events are in the database (after a commit whose answer was lost)."""
    return bool(batch.bodies) and conn.execute(Q.saved, {"pk": batch.pk, "tx": batch.tx}).fetchone() is not None


def follow_up(place: Place, run_id: str, pk: int, *, over: bool) -> None:
    """After a commit: note what is left to do for the run, done by ``tidy`` (once the worker has
    started the steps it claimed: a step's process never waits for this)."""
    _, was_over = place.follow_ups.get(pk, (run_id, False))
    place.follow_ups[pk] = (run_id, was_over or over)


def tidy(place: Place) -> None:
    """Conclude the runs seen with nothing open; number the events of the others when this
    process last did so long enough ago."""
    while place.follow_ups:
        pk, (run_id, over) = place.follow_ups.popitem()
        if over:
            conclude.conclude_run(place, run_id)
            continue
        now = time.monotonic()
        if now >= _last_numbered.get(pk, 0.0) + NUMBER_EVERY:
            _last_numbered[pk] = now
            number_events(place, run_id, pk)


def number_written(place: Place) -> None:
    """Number the events this process appended (a worker stopping): `log` is current at once."""
    tidy(place)
    for pk, run_id in list(_written.items()):
        number_events(place, run_id, pk)
        _written.pop(pk, None)


def number_events(place: Place, run_id: str, pk: int) -> None:
    """Number the run's committed pending events (unless another process holds the run's row: it
    numbers them), tell watchers, and have the snapshot refreshed when the events after it outgrew it."""
    def txn(conn: Connection) -> Any:
        # One round trip: the numbering, the notification, the COMMIT (read after it).
        numbered = conn.execute(Q.sequence_events, {"pk": pk, "run": None, "min_tail": runstate.SNAPSHOT_MIN_TAIL,
                                                       "channel": runstate.CHANGED, "payload": run_id})
        return numbered

    got = place.write(txn, what=f"number the events of run {run_id}", patience=0, pipeline=True).fetchone()
    if got is not None and got[2]:
        place.refresher().ask(run_id)  # beside this thread's transactions (``snapshots``)


def refresh_snapshot(place: Place, run_id: str) -> None:
    """Store the document as of the events read now: a pure function of them, so no lock of the
    run is needed; a concurrent refresher's newer snapshot is never replaced by an older one."""
    handle = place.handle(run_id)

    def store(conn: Connection) -> None:
        row = runstate.find_row(conn, run_id, lock=False)
        if row is None or row.seq == 0:
            return
        wanted = conn.execute(Q.claim_refresh, {"pk": row.pk, "space": REFRESH_LOCK,
                                                "min_tail": runstate.SNAPSHOT_MIN_TAIL}).fetchone()
        if not (wanted and wanted[0]):
            return  # refreshed meanwhile, or being refreshed: the document is not read for nothing
        snap = conn.execute(Q.snapshot_seq, (row.pk,)).fetchone()
        state = runstate.current(conn, row, handle.state, handle.location)
        handle.state = state
        base = int(snap[0]) if snap else 0
        if state.doc is None or state.seq <= base:
            return
        covered = conn.execute(Q.event_bytes, (row.pk, base, state.seq)).fetchone()
        from resumable.core import jsonio

        doc = jsonio.dumps(state.doc).decode("utf-8")
        conn.execute(Q.refresh_snapshot, {"pk": row.pk, "seq": state.seq, "doc": doc, "snap_bytes": len(doc),
                                          "covered": int(covered[0]) if covered else 0})

    try:
        place.write(store, what=f"refresh the snapshot of run {run_id}", patience=0)
    except BaseException:
        handle.state = None  # a replay that stopped half way leaves a half-built document
        raise
