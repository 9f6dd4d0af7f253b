"""The write path of the file store: ``Writer.commit``.

Every write: take the run's lock, catch up on records other processes appended (and on a snapshot
another program edited, which is adopted as a new base), apply the events (which may refuse),
append their records and fsync, refresh the snapshot view when the policy says so, release.
"""

from __future__ import annotations

import os

from resumable import fsio
from resumable.core import jsonio, verbs
from resumable.core.events import apply
from resumable.core.model import LIVE_RUN_STATES, shape_problem
from resumable.errors import CorruptRunError, InvalidInputError, RefusedError
from resumable.store.files import journal, refresh
from resumable.store.files.cursor import Cursor
from resumable.store.files.layout import RunFiles, missing_run, no_parent, translate
from resumable.store.files.loader import Loaded, events_key
from resumable.store.files.lock import RunLock
from resumable.store.files.refresh import SnapshotView, estimated_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from resumable.core.types import Event
    from resumable.store.files.keeper import Keeper


# Writes one process makes through the index before it loads the whole document: a process that
# writes this often does better holding the document, each write then O(1) without any index read.
POINT_WRITES = 16


class Writer:
    """The write side of one run, for one process. Keeps the document in memory between writes and
    catches up under the lock, so a write costs O(1) however many units the run has."""

    def __init__(self, files: RunFiles) -> None:
        self.files = files
        self.lock = RunLock(files)
        self.cursor = Cursor(files)
        self.view = SnapshotView(self.cursor)
        self._keeper: Keeper | None = None
        self.point_writes = 0  # writes made through the index (``pointwrite``)

    @property
    def snapshot_error(self) -> str | None:
        return self.view.error

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()
        self.cursor.close_journal()
        self.lock.close()
        self.cursor.forget()

    def exists(self) -> bool:
        # A ulpi event log alone is a run too: ulpi's crash between its log's init record and
        # its first snapshot leaves just that (ulpi_adoption rebuilds the document from it).
        files = self.files
        return os.path.lexists(files.snapshot) or os.path.lexists(files.journal) \
            or os.path.lexists(files.events)

    def current(self) -> Loaded:
        """Catch up without writing and without the lock."""
        if self.cursor.state is None and not self.exists():
            return self.cursor.full_load()
        return self.cursor.catch_up()

    # -- commit --
    def commit(self, events: Sequence[Event], *, lazy_view: bool = False) -> list[Any]:
        """Apply ``events`` and make them durable, atomically: a refusal by any of them writes
        nothing. An ``init`` event starts the run (creating the directory, archiving a finished
        run's files) and must come alone. ``lazy_view`` leaves even a small run's snapshot to the
        amortised budget for this write (the journal has it; every resumable reader sees it)."""
        if not events:
            return []
        init = verbs.stamp_batch(events)
        if self.cursor.state is None:
            # Checked before taking the lock, whose file would otherwise be left behind by a write
            # to a run that does not exist, or whose ulpi event log cannot be verified (bad input
            # must change nothing on disk). Loaded now, a log is only caught up with under the lock.
            if events_key(self.files) is not None:
                self.current()
            elif not init and not self.exists():
                if not os.path.isdir(self.files.dir) and not self.files.by_id:
                    raise no_parent(self.files)
                raise missing_run(self.files)
        self.lock.acquire(create_dir=init)
        self.cursor.locked = True
        try:
            if init:
                return [self._init_locked(events[0], lazy_view)]
            if self.cursor.state is None and self.point_writes < POINT_WRITES and self.has_index():
                # Nothing of the run in memory (a CLI call): a large run's index makes this write
                # O(1) of its size; None when it cannot vouch for it.
                from resumable.store.files import pointwrite

                outputs = pointwrite.commit(self, events, lazy_view) if pointwrite.eligible(events) else None
                if outputs is not None:
                    self.point_writes += 1
                    return outputs
            return self._commit_locked(events, lazy_view)
        finally:
            self.cursor.locked = False
            self.lock.release()

    def _init_locked(self, event: Event, lazy_view: bool) -> Any:
        state = self.cursor.catch_up()
        status = state.doc.get("status") if state.doc is not None else None
        # str check first: a hand-edited status may be a list (unhashable: TypeError).
        if isinstance(status, str) and status in LIVE_RUN_STATES:
            raise RefusedError(
                f"{self.files.snapshot} is a LIVE checkpoint (status={status})."
                " Resume it — do not re-init. Finalize it first if it is really over."
            )
        if state.doc is None and not state.journal_exists:
            out: Any = self._commit_locked([event], lazy_view, state)[0]
            return out
        doc, output = apply(None, event)  # refusals before anything is written
        record = journal.encode(1, event)
        self.cursor.close_journal()
        self.cursor.forget()
        from resumable.store.files.reinit import move_old_logs, replace_run  # rare: init over a finished run

        base = replace_run(self.files, record)
        new = Loaded(doc, 1, len(record), 0, True, -1, 0, None, 0, None)
        self.cursor.state = new
        self.cursor.snap_offset = 0
        # An old ulpi status file still in place must be replaced now (unmarked next to the new
        # journal it would read as an edit); otherwise the usual policy applies.
        if self.has_index():
            self.keeper.drop()  # the old run's; the new run's is built with its first view (or write)
        self._after_write(new, force=os.path.lexists(self.files.snapshot), lazy=lazy_view)
        move_old_logs(self.files, base)
        return output

    def _commit_locked(self, events: Sequence[Event], lazy_view: bool,
                       state: Loaded | None = None) -> list[Any]:
        if state is None:
            state = self.cursor.catch_up()
            if state.doc is None:
                if not os.path.isdir(self.files.dir):
                    raise no_parent(self.files)
                raise missing_run(self.files)
            if state.shape_checked is not state.doc:
                # Only a document new to this process needs the look: apply() changes a document
                # in place and never breaks the shape of one that passed (every mutator keeps the
                # containers' types and never raises schemaVersion; tests/test_events.py checks),
                # so records caught up from other processes keep it fit unless one is a base or an
                # init, which replaces the document object. Checked on every write, it cost each
                # transition more than a microsecond.
                problem = shape_problem(state.doc)
                if problem is not None:
                    raise InvalidInputError(
                        f"{self.files.snapshot}: {problem} — fix the document (or move it aside and"
                        " init afresh); nothing was written"
                    )
                state.shape_checked = state.doc
        pending: list[Event] = []
        if state.adopt is not None and state.doc is not None:
            if state.adopt == "import" and state.events_stat is not None:
                from resumable.store.files import ulpi_adoption  # only for a ulpi run with an event log

                ulpi_adoption.note_in_sync(self.files, state.doc)
            # A copy: apply() below mutates the document in place, and the base record must hold
            # the document as adopted, not as it is after these events.
            adopted = jsonio.loads(jsonio.dumps(state.doc))
            pending.append({"t": "base", "at": events[0]["at"], "reason": state.adopt, "doc": adopted})
        outputs: list[Any] = []
        doc = state.doc
        before = (state.seq, state.offset)
        try:
            # Refusals happen here, before anything is written. apply() checks an event fully
            # before mutating, so only events after the first can leave the cache half-changed.
            for event in events:
                doc, out = apply(doc, event)
                outputs.append(out)
                pending.append(event)
            self.append(state, pending)
        except (RefusedError, InvalidInputError):
            if outputs:
                self.cursor.forget()  # earlier events of the batch changed the cached document
            raise
        except BaseException:
            # apply() mutates the cached document in place; if the records then never reach the
            # journal (a value JSON cannot hold, an interrupt), the cache holds a change that was
            # never saved and the next write would put it in the snapshot. Forget the cache.
            self.cursor.forget()
            raise
        state.doc = doc
        state.adopt = None
        keeper = self._keeper
        if (keeper is not None and keeper.pending is not None) or self.indexed(state):
            self.keeper.after_commit(state, before, pending)
        # A finished run's view is made exact once; an adopted base gets a fresh marker at once.
        force = False
        for ev in pending:  # a plain loop: every transition passes here
            if ev.get("t") in ("finalize", "base"):
                force = True
        self._after_write(state, force=force, lazy=lazy_view)
        return outputs

    @property
    def keeper(self) -> Keeper:
        """The index's keeper (imported only for a run that has, or wants, an index)."""
        if self._keeper is None:
            from resumable.store.files.keeper import Keeper

            self._keeper = Keeper(self.cursor)
        return self._keeper

    def has_index(self) -> bool:
        return os.access(self.files.index, os.F_OK, follow_symlinks=False)

    def indexed(self, state: Loaded) -> bool:
        """Whether the run keeps an index: it has one, or is large enough to want one (a small run
        costs no index module's import)."""
        doc = state.doc
        return self.has_index() or (isinstance(doc, dict) and isinstance(doc.get("units"), dict)
                                    and max(state.snap_size, estimated_bytes(doc)) > refresh.EXACT_SNAPSHOT_BYTES)

    def _after_write(self, state: Loaded, *, force: bool, lazy: bool) -> None:
        refreshes = self.view.refreshes
        self.view.after_write(state, force=force, lazy=lazy)
        if self.view.refreshes != refreshes and state.snap_seq == state.seq and self.indexed(state):
            self.keeper.after_refresh(state)

    def refresh_whole(self, *, rebuild: bool) -> None:
        """After a write through the index (``pointwrite``), under the lock: the snapshot view is
        due (or the index wants rebuilding), which takes the whole document, loaded now."""
        state = self.cursor.full_load()
        if state.doc is None:
            return
        if state.snap_seq != state.seq:
            self.view.refresh(state)
        if rebuild or state.snap_seq != state.seq:
            self.keeper.rebuild(state)
        else:
            self.keeper.after_refresh(state)

    def append(self, state: Loaded, events: list[Event]) -> None:
        """Append the records of ``events`` after ``state``'s last one and fsync them."""
        # Encode first: a value JSON cannot hold (e.g. undecodable argv bytes) must be refused
        # before the journal is created or touched.
        seq = state.seq
        chunks = []
        for ev in events:
            seq += 1
            chunks.append(journal.encode(seq, ev))
        data = b"".join(chunks)
        cursor = self.cursor
        fd = cursor.jfd if cursor.jfd is not None else cursor.open_journal()
        if state.torn and state.offset < cursor.snap_offset:
            raise CorruptRunError(  # never cut what the snapshot acknowledged (the loader checks)
                f"{self.files.journal}: the records the snapshot acknowledges end past byte"
                f" {state.offset}: nothing was changed; restore the journal from a backup")
        try:
            if state.offset and os.pread(fd, 1, state.offset - 1) != b"\n":
                # The record this one would follow lost its end (a flipped byte): appending would
                # bury acknowledged history in the middle of a damaged line.
                raise CorruptRunError(
                    f"{self.files.journal}: corrupt journal record ending at byte offset"
                    f" {state.offset}: nothing was changed; restore the journal from a backup")
            if state.torn:
                # A torn final fragment was never acknowledged (its fsync never returned); zero
                # padding is what resumable 0.1.0 kept ahead of its records.
                fsio.truncate(fd, state.offset, self.files.journal)
                state.torn = 0
            fsio.pwrite_all(fd, data, state.offset, self.files.journal)
            cursor.jsize = state.offset + len(data)
            fsio.fsync(fd, self.files.journal)
        except OSError as exc:
            rolled_back = self._rollback(state)
            err = translate(exc, f"cannot write {self.files.journal}")
            if not rolled_back:
                # R5 (proof suite): the unacknowledged record could not be cut off, so the next
                # reader may see it; say so rather than let the user believe it was not saved.
                err = type(err)(f"{err} (the journal could not be rolled back either: this last"
                                " write may or may not have been saved)")
            raise err from exc
        state.seq = seq
        state.offset += len(data)
        state.journal_exists = True

    def _rollback(self, state: Loaded) -> bool:
        """After a failed append: cut the journal back to the last acknowledged record (never
        retry the fsync: after a failed fsync the kernel may have dropped the dirty pages, so a
        retry could report success for data that is gone). Then forget the in-memory state."""
        fd = self.cursor.jfd
        self.cursor.jfd = None
        self.cursor.forget()
        if fd is None:
            return False
        try:
            # Nothing reached the file when the write itself failed before writing; the truncate
            # is still issued, so a partial write is cut off.
            fsio.truncate(fd, state.offset, self.files.journal)
        except OSError:
            return False  # the next reader may see the unacknowledged record; the error says so
        finally:
            os.close(fd)
        return True

    def flush(self) -> None:
        """Bring the snapshot up to date with everything this process knows (e.g. at exit)."""
        # Nothing to flush while an adoption is pending (a ulpi status file that was only read, or an
        # external edit not yet journaled): the file on disk *is* the document, and rewriting it
        # would modify a file that reads must leave alone (and, for an edit, stamp a marker
        # claiming the journal holds it when it does not).
        state = self.cursor.state
        if state is None and self.point_writes:
            self.point_writes = 0
            self.lock.acquire()
            self.cursor.locked = True
            try:
                self.refresh_whole(rebuild=False)
            finally:
                self.cursor.locked = False
                self.lock.release()
            return
        keeper = self._keeper
        held = keeper is not None and keeper.pending is not None  # index commits held back
        if state is None or (state.snap_seq == state.seq and not held) or state.adopt:
            return
        self.lock.acquire()
        self.cursor.locked = True
        try:
            state = self.cursor.catch_up()
            if state.doc is not None and state.snap_seq != state.seq and not state.adopt:
                self.view.refresh(state)
                if state.snap_seq == state.seq and self.indexed(state):
                    self.keeper.after_refresh(state)
            if keeper is not None and keeper.pending is not None and state.doc is not None and not state.adopt:
                keeper.catch_up(state)
        finally:
            self.cursor.locked = False
            self.lock.release()
