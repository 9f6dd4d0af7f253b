"""A run in PostgreSQL, behind the ``RunHandle`` protocol (``store.backend``)."""

from __future__ import annotations

import hashlib
import os
import time
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.core.model import refuse_unreadable
from resumable.errors import CorruptRunError, InvalidInputError, NoRunError, RefusedError, StoreError
from resumable.store.postgres import runstate
from resumable.store.postgres.queries import Q
from resumable.store.postgres.runstate import RunRow, RunState, RunWriter
from resumable.store.postgres.schema import NoSchemaError
from resumable.store.values import Record

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence

    from resumable.core.types import Event
    from resumable.core.types import RunDocument as Doc
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.listen import Listener
    from resumable.store.postgres.place import Place

_HEX = frozenset("0123456789abcdef")
COALESCE = 0.25  # seconds: the shortest spacing of changes reported to a watcher


class PgRunHandle:
    def __init__(self, place: Place, run_id: str) -> None:
        self.place = place
        self._run_id = run_id
        self.state: RunState | None = None
        # The run's row as this process last wrote it, while no other writer is known to write the
        # run (see ``_commit_at_once``); None once another one was seen.
        self._row: RunRow | None = None
        self._contended = False  # a write at once found another writer's events: catch up first
        self._listener: Listener | None = None
        self._last_change = 0.0

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def location(self) -> str:
        return f"{self.place.root}#{self._run_id}"

    @property
    def warning(self) -> str | None:
        return None

    def missing(self) -> NoRunError:
        return NoRunError(f"cannot read run {self._run_id} from {self.place.root}: no such run — create it"
                          " with `resumable init`")

    # -- reads ----------------------------------------------------------------------------------

    def exists(self) -> bool:
        def look(conn: Connection) -> bool:
            row = runstate.find_row(conn, self._run_id, lock=False)
            return row is not None and row.seq > 0

        try:
            return self.place.read(look, what=f"look for run {self._run_id}")
        except NoSchemaError:
            return False  # a database resumable never wrote to holds no run

    def load(self) -> Doc | None:
        """The document: the numbered events, then the workers' events not numbered yet."""
        def catch_up(conn: Connection) -> tuple[RunState | None, Doc | None]:
            row = runstate.find_row(conn, self._run_id, lock=False)
            if row is None or row.seq == 0:
                return None, None
            state = runstate.current(conn, row, self.state, self.location)
            return state, runstate.with_pending(conn, state, self.location)

        try:
            self.state, doc = self.place.read(catch_up, what=f"read run {self._run_id}")
        except NoSchemaError:
            self.state = None
            return None  # no run: an init creates the schema with it; `read` says why there is none
        except BaseException:
            self.state = None  # a replay that stopped half way leaves a half-built document
            raise
        # A newer resumable's document, or a malformed one, is refused, never handed out to be misread.
        return None if doc is None else refuse_unreadable(doc, self._run_id)

    def read(self) -> Doc:
        doc = self.load()
        if doc is None:
            raise self.place.no_schema or self.missing()
        return doc

    def history(self, since: int = 0) -> Iterator[Record]:
        """Every numbered event after ``since``; the workers' pending events are numbered first,
        so the history read is the whole history committed (and a later read only adds to it)."""
        self._number_pending()
        db = self.place.ready()
        conn = db.connect()
        try:
            row = runstate.find_row(conn, self._run_id, lock=False)
            if row is None:
                return
            for seq, body in runstate.iter_history(conn, row.pk, since, self.location):
                yield Record(seq, runstate.decode_event(body, seq, self.location), runstate.record_line(seq, body))
        except StoreError:
            raise
        except Exception as exc:
            from resumable.store.postgres.db import first_line

            raise StoreError(f"{self.place.root}: cannot read the history of {self._run_id}:"
                             f" {first_line(exc)}") from exc
        finally:
            conn.close()

    # -- writes ---------------------------------------------------------------------------------

    def commit(self, events: Sequence[Event], *, lazy_view: bool = False) -> list[Any]:
        if not events:
            return []
        init = verbs.stamp_batch(events)
        for event in events:
            runstate.encode_event(event)  # refused before anything is sent
        if not init:
            done = self._commit_at_once(events)
            if done is not None:
                return done
        units = sorted({u for u in map(_unit_of, events) if u is not None})

        def lock_steps(conn: Connection) -> Any:
            # A unit a worker may be claiming or completing: its step row is locked first (the
            # workers' lock order: steps, then the run), so the two never change it at once.
            return conn.execute(Q.lock_steps_of, {"run": self._run_id, "steps": units})

        def body(w: RunWriter) -> list[Any]:
            out = w.apply(events)
            done = [u for e in events if (u := _unit_of(e)) is not None and e.get("state") == "done"]
            if w.row.job is not None and done:
                # Recorded done here: a worker that holds the step is fenced off, its dependents freed.
                w.conn.execute(Q.mark_done, {"pk": w.row.pk, "steps": done})
            return out

        result: list[Any] = self.write(body, init=init, what=f"write run {self._run_id}",
                                       first=lock_steps if units else None)
        return result

    def _commit_at_once(self, events: Sequence[Event]) -> list[Any] | None:
        """The events applied to the document this process holds and written in one round trip,
        without first locking the run and reading what others wrote since: on a run without a job
        (no worker writes it) that only this process has been seen writing. The write holds only
        if the run is still at the document's sequence number (``save_if_current``); else nothing
        was written, and None says to write the usual way (which catches up first)."""
        state, known = self.state, self._row
        if state is None or known is None or known.job is not None or known.seq != state.seq \
                or known.pk != state.pk or state.doc is None:
            return None
        row = RunRow((known.pk, known.seq, known.status, known.job, known.stopping, known.snap_bytes,
                      known.tail_bytes))
        holder: list[RunWriter] = []
        saved_before: list[bool] = []

        def txn(conn: Connection) -> tuple[list[Any], Any] | None:
            if holder:
                return None  # tried again (the server aborted the first try): the usual write follows
            writer = RunWriter(conn, row, state, self._run_id, self.location)
            holder.append(writer)
            return writer.apply(events), writer.save_if_current()

        def probe(conn: Connection) -> bool:
            saved = bool(holder) and holder[0].saved(conn)
            if saved:
                saved_before.append(True)
            return saved

        try:
            got = self.place.write(txn, what=f"write run {self._run_id}", probe=probe, single=True)
        except BaseException:
            if holder and holder[0].applied:  # (an event refused leaves the document as it was)
                self._forget()  # the document held changed and may not be stored: read it again
            raise
        if got is not None:
            out, cursor = got
            # The commit's answer was lost and the probe found the events; else the statement says.
            answer = None if saved_before or cursor is None else cursor.fetchone()
            if saved_before or answer is not None:
                if answer is not None:
                    row.tail_bytes, row.snap_bytes = int(answer[0]), int(answer[1])
                self._row = row
                return list(out)
        # Another process wrote the run (or the try was repeated): the document held was changed
        # by the events applied to it, so it is read again, and later writes catch up first until
        # one finds nothing to catch up on.
        self._forget()
        self._contended = True
        return None

    def _forget(self) -> None:
        self.state = None
        self._row = None

    def write(self, body: Callable[[RunWriter], Any], *, init: bool = False, create: bool = False,
              what: str, patience: float | None = None, first: Callable[[Connection], Any] | None = None,
              gate: Callable[[Connection], bool] | None = None) -> Any:
        """Run ``body`` on a ``RunWriter`` holding the run's row lock, store what it staged, commit.
        The cached document survives only a transaction that committed. ``init``/``create``: see
        ``writer``; ``first``: statements sent before the run's lock is asked for (step rows to
        lock first), their result in the writer's ``first_rows``; ``gate``: asked once the run's
        row is locked, before its document is read: False ends the transaction there, nothing
        written (``write`` returns None)."""
        holder: list[RunWriter] = []
        tries = [0]

        def txn(conn: Connection) -> Any:
            tries[0] += 1
            if tries[0] > 1:
                self.state = None  # an earlier try may have changed the cached document
            if gate is not None:
                conn.execute(Q.lock_run, (self._run_id,))
                if not gate(conn):
                    return None
            writer = self.writer(conn, init=init, create=create, first=first)
            holder[:] = [writer]
            out = body(writer)
            writer.save()
            return out

        def probe(conn: Connection) -> bool:
            return bool(holder) and holder[0].saved(conn)

        try:
            out = self.place.write(txn, what=what, probe=probe, patience=patience, pipeline=True,
                                   migrate=init or create)
        except BaseException:
            self._row = None
            if holder and (holder[0].applied or holder[0].bodies):
                self.state = None
            raise
        if holder:
            self.state = holder[0].state
            # Written on a document that had missed nothing: the next write may skip catching up.
            alone = holder[0].alone
            self._row = holder[0].row if alone is True or (alone is None and not self._contended) else None
            self._contended = self._contended and alone is not True
        return out

    def writer(self, conn: Connection, *, init: bool = False, create: bool = False,
               first: Callable[[Connection], Any] | None = None) -> RunWriter:
        """A writer for this run inside the caller's transaction: the row locked, the document
        caught up. ``init`` starts the run: a row of its own, archiving a finished run (refused over
        a live one); ``create`` makes the row only if there is none (the writer's document is then
        None: the caller commits the init)."""
        if init or create:
            conn.execute(Q.create_run, (self._run_id,))
        first_rows = first(conn) if first is not None else None
        held = self.state.seq if self.state is not None else None
        row, caught_up = runstate.lock_and_catch_up(conn, self._run_id, self.state, self.location)
        if row is None or (row.seq == 0 and not (init or create)):
            raise self.missing()
        state = caught_up if caught_up is not None else RunState(row.pk, 0, None)
        self.state = state
        if init and state.doc is not None:
            from resumable.core.model import LIVE_RUN_STATES

            # Refused here (a live run) before anything changes; a finished run is archived and the
            # new run gets a row of its own, so its history starts afresh, as a new journal does.
            status = state.doc.get("status")
            if isinstance(status, str) and status in LIVE_RUN_STATES:
                raise RefusedError(f"{self.location} is a LIVE checkpoint (status={status}). Resume it — do"
                                   " not re-init. Finalize it first if it is really over.")
            conn.execute(Q.archive_run, (row.pk,))
            got = conn.execute(Q.new_run, (self._run_id,)).fetchone()
            assert got is not None
            row = runstate.find_row(conn, self._run_id, lock=True)
            assert row is not None
            state = self.state = RunState(row.pk, 0, None)
        writer = RunWriter(conn, row, state, self._run_id, self.location)
        writer.first_rows = first_rows
        writer.alone = None if held is None else held == row.seq
        return writer

    def flush(self) -> None:
        pass  # the database is the view: nothing is derived outside it

    # -- changes --------------------------------------------------------------------------------

    def _number_pending(self) -> None:
        def number(conn: Connection) -> None:
            conn.execute(Q.lock_run, (self._run_id,))
            conn.execute(Q.sequence_events, {"pk": None, "run": self._run_id, "min_tail": runstate.SNAPSHOT_MIN_TAIL,
                                              "channel": runstate.CHANGED, "payload": self._run_id})

        self.place.write(number, what=f"number the events of run {self._run_id}", pipeline=True)

    def change_token(self) -> Hashable:
        def token(conn: Connection) -> Hashable:
            row = runstate.find_row(conn, self._run_id, lock=False)
            if row is None:
                return None
            pending = conn.execute(Q.last_pending, (row.pk,)).fetchone()
            return row.pk, row.seq, pending[0] if pending else None

        return self.place.read(token, what=f"read run {self._run_id}")

    def wait_for_change(self, token: Hashable, timeout: float) -> Hashable:
        """Block on ``LISTEN`` until a commit to this run is announced (or ``timeout``). Changes
        are reported at most every ``COALESCE`` seconds: a busy run commits hundreds of times a
        second, and a watcher redrawing on each would only burn the CPU the workers need."""
        if self._listener is None:
            self._listener = self.place.listener([runstate.CHANGED])
        deadline = time.monotonic() + timeout
        while True:
            current = self.change_token()  # read after LISTEN is in place: no change slips between
            now = time.monotonic()
            left = deadline - now
            if current != token or left <= 0:
                if current != token and now < self._last_change + COALESCE and left > 0:
                    time.sleep(min(self._last_change + COALESCE - now, left))
                    current = self.change_token()
                self._last_change = time.monotonic()
                return current
            self._listener.wait(left, want=self._run_id)

    # -- logs and blobs -------------------------------------------------------------------------

    def log_dir(self) -> str:
        return os.path.join(self.place.local_dir(), self._run_id, "logs")

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        ref = f"sha256:{digest}"

        def put(conn: Connection) -> None:
            row = runstate.find_row(conn, self._run_id, lock=False)
            if row is None:
                raise self.missing()
            conn.execute(Q.put_blob, (row.pk, ref, data))

        self.place.write(put, what=f"store a value of {len(data)} bytes for run {self._run_id}")
        return ref

    def get_blob(self, ref: str) -> bytes:
        kind, _, digest = ref.partition(":")
        if kind != "sha256" or len(digest) != 64 or not _HEX.issuperset(digest):
            raise InvalidInputError(f"not a blob reference: {ref[:80]!r} (expected sha256:<64 hex>)")

        def get(conn: Connection) -> bytes | None:
            row = conn.execute(Q.get_blob, (self._run_id, ref)).fetchone()
            return bytes(row[0]) if row is not None else None

        data = self.place.read(get, what=f"read a stored value of run {self._run_id}")
        if data is None:
            raise CorruptRunError(f"{self.location}: stored value {ref} is missing: re-run the step that"
                                  " produced it")
        if hashlib.sha256(data).hexdigest() != digest:
            raise CorruptRunError(f"{self.location}: stored value {ref} is damaged (its content no longer"
                                  " matches its hash): re-run the step that produced it")
        return data

    def foreign(self, ref: str | None = None) -> str | None:
        # Who may write a run's rows is the database's roles' business: whoever can, can also change
        # its records. A pickle read from here is as trusted as the credentials that reach it.
        return None

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None


def _unit_of(event: Mapping[str, Any]) -> str | None:
    """The unit a ``unit`` event is about (its step row, on a submitted run)."""
    unit = event.get("unit") if event.get("t") == "unit" else None
    return unit if isinstance(unit, str) else None
