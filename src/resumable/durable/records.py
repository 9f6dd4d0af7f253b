"""The run as durable steps see it: one handle, the current document kept in memory, group commit.

**Reads.** A cache hit looks its unit up in the document this process already holds: no file is read
and no lock of the store is taken. The document is caught up (``handle.load()``: only records other
processes appended are read) after every commit of this process and, on the hit path, once
``REFRESH_EVERY`` seconds have passed, so an invalidation written meanwhile by ``resumable rerun``
is seen within that time.

**Writes: group commit.** A thread with records to write queues them; if no commit is in progress it
becomes the leader: it takes everything queued, commits it with one ``handle.commit`` (one fsync),
and goes on until the queue is empty. Threads whose records were taken by a leader wait for it (or,
with ``wait=False``, go on and are told through their callback). Alone, a thread commits its own
records at once, with no hand-off to another thread. If the store refuses a batch because of one of
its records, each entry is committed on its own, so one bad record fails only its own call.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from resumable.durable.digest import Digest, pick
from resumable.errors import InvalidInputError, RefusedError
from resumable.store.backend import Provenance, UnitDigest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.core.types import Event, RunDocument, Unit
    from resumable.store.backend import RunHandle

REFRESH_EVERY = 1.0  # seconds: how stale a cache hit's view of other processes' writes may be
FREEZE_FROM = 10_000  # units: a run this big, once loaded, is frozen out of the cyclic collector's sight


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off while a run is loaded: a big run is millions of new objects, which
    it would otherwise walk over and over as they are made (most of the time of loading 100,000 units)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Ticket:
    """Records queued for one commit; ``error`` is set when they could not be committed."""

    __slots__ = ("done", "error", "events", "on_done")

    def __init__(self, events: list[Event], on_done: Callable[[Ticket], None] | None) -> None:
        self.events = events
        self.on_done = on_done
        self.done = False
        self.error: BaseException | None = None


class Records:
    def __init__(self, handle: RunHandle) -> None:
        self.handle = handle
        self.lock = threading.RLock()  # the handle is not thread-safe: every use holds this
        self._doc: RunDocument | None = None
        self._refreshed = 0.0
        self._cv = threading.Condition(threading.Lock())  # never taken twice by one thread
        self._queue: list[Ticket] = []
        self._busy = False
        self.commits = 0  # handle.commit calls made (group commit shows as fewer than records)
        # Bumped (with ``lock`` held) whenever the document held may have changed: a look-up made
        # before and a claim taken after can tell whether the look-up is still the answer.
        self.generation = 0
        self._digest: Digest | None = None  # while no document is held (``digest``)
        self._digest_checked = 0.0

    # -- reads --
    def units(self, *, fresh: bool = False) -> dict[str, Unit]:
        """The run's units as last seen (call with ``lock`` held; treat as read-only)."""
        if fresh or self._doc is None or time.monotonic() - self._refreshed > REFRESH_EVERY:
            self.refresh()
        doc = self._doc
        units = doc.get("units") if doc is not None else None
        return units if isinstance(units, dict) else {}

    def doc(self) -> RunDocument | None:
        with self.lock:
            self.refresh()
            return self._doc

    def head(self) -> RunDocument | None:
        """The run's document, but for a run not loaded yet only its fields other than units
        (status, ...), from a digest when the store can read one (which ``take_digest`` then gives
        to the first map): a look at a big run's status does not load it whole."""
        with self.lock:
            digest = self._current_digest(make=True)
            return digest.head if digest is not None else self.doc()

    def take_digest(self) -> Digest | None:
        """The digest read while no document was held, if it still stands for the run; it is the
        caller's from now on (its results are handed out as they are)."""
        with self.lock:
            digest = self._current_digest(make=self._doc is None)
            self._digest = None
            return digest

    def standing_digest(self) -> Digest | None:
        """The digest while no document is held and it stands for the run (call with ``lock``
        held): a call's look-up is answered from it, the run's files looked at at most once per
        ``REFRESH_EVERY`` seconds, as the document held is caught up on the hit path."""
        digest = self._digest
        if digest is None or self._doc is not None:
            return None
        now = time.monotonic()
        if now - self._digest_checked > REFRESH_EVERY:
            if self.handle.change_token() != digest.token:
                self._digest = None
                return None
            self._digest_checked = now
        return digest

    def _current_digest(self, *, make: bool) -> Digest | None:
        if self._doc is not None:
            return None
        digest = self._digest
        if digest is not None and self.handle.change_token() != digest.token:
            digest = self._digest = None  # the run changed since
        if digest is None and make and isinstance(self.handle, UnitDigest):
            token = self.handle.change_token()
            with gc_paused():
                found = self.handle.digest(pick)
            if found is not None:
                digest = self._digest = Digest(found[0], found[1], token)
                self._digest_checked = time.monotonic()
                if len(digest.units) >= FREEZE_FROM:
                    gc.freeze()  # as a loaded document is (``refresh``): its results are the maps' answers
        return digest

    def refresh(self) -> None:
        with self.lock:
            self._digest = None  # the document answers from now on
            first = self._doc is None
            with gc_paused():
                self._doc = self.handle.load()
            self._refreshed = time.monotonic()
            self.generation += 1
            units = self._doc.get("units") if first and self._doc is not None else None
            if isinstance(units, dict) and len(units) >= FREEZE_FROM:
                # The run's document lives as long as the process: out of the collector's sight,
                # it is not walked again and again (a second at 100,000 units), as the runner does.
                # What is frozen is still freed when no longer referenced, unless in a cycle.
                gc.freeze()

    def blob(self, ref: str) -> bytes:
        with self.lock:
            return self.handle.get_blob(ref)

    def put_blob(self, data: bytes) -> str:
        with self.lock:
            return self.handle.put_blob(data)

    def get_blob(self, ref: str) -> bytes:
        return self.blob(ref)

    def pickle_problem(self, ref: str | None) -> str | None:
        """Why a pickle read from this run may hold someone else's bytes (``Provenance``), or None;
        a store that cannot tell is not trusted with pickles."""
        with self.lock:
            if not isinstance(self.handle, Provenance):
                return "this store cannot tell who wrote it"
            return self.handle.foreign(ref)

    # -- writes --
    def commit(self, events: Sequence[Event]) -> None:
        """Commit ``events`` and return once they are durable (group-committed with others)."""
        cv = self._cv
        with cv:
            alone = not self._busy and not self._queue
            if alone:
                self._busy = True
        if not alone:
            ticket = self.submit(list(events), None, wait=True)
            if ticket.error is not None:
                raise ticket.error
            return
        # No commit in progress and nothing queued: commit at once, with no ticket and no hand-off.
        try:
            self._commit(list(events))
        except Exception:
            self._release()  # records others queued meanwhile are still committed
            raise
        except BaseException:
            with self._cv:  # interrupted: step down; a waiting thread leads what is queued
                self._busy = False
                self._cv.notify_all()
            raise
        self._release()

    def _release(self) -> None:
        """End a commit made without a ticket: lead what was queued meanwhile, or step down."""
        with self._cv:
            if not self._queue:
                self._busy = False
                self._cv.notify_all()
                return
        self._lead()

    def submit(self, events: list[Event], on_done: Callable[[Ticket], None] | None, *,
               wait: bool = False, enqueue_only: bool = False) -> Ticket:
        """Queue ``events``; ``on_done(ticket)`` runs once they are committed (or failed). With
        ``wait``, return only then. Either way this thread may lead commits of others' records,
        unless ``enqueue_only`` (the caller then calls ``lead_if_idle`` once it may block)."""
        ticket = Ticket(events, on_done)
        with self._cv:
            self._queue.append(ticket)
            if enqueue_only:
                return ticket
            if self._busy:
                if not wait:
                    return ticket
                while not ticket.done and self._busy:
                    self._cv.wait()
                if ticket.done:
                    return ticket
            self._busy = True
        self._lead()
        return ticket

    def lead_if_idle(self) -> None:
        with self._cv:
            if self._busy or not self._queue:
                return
            self._busy = True
        self._lead()

    def _lead(self) -> None:
        batch: list[Ticket] = []
        try:
            while True:
                with self._cv:
                    batch, self._queue = self._queue, []
                    if not batch:
                        self._busy = False
                        self._cv.notify_all()
                        return
                self._write(batch)
                with self._cv:
                    self._cv.notify_all()
                done, batch = batch, []
                for t in done:
                    if t.on_done is not None:
                        try:
                            t.on_done(t)
                        except Exception:
                            pass  # a caller's bookkeeping must not stop the commits of others
        except BaseException as exc:
            with self._cv:
                for t in batch:
                    if not t.done:
                        t.error, t.done = exc, True
                self._busy = False
                self._cv.notify_all()
            raise

    def _write(self, batch: list[Ticket]) -> None:
        events = [ev for t in batch for ev in t.events]
        try:
            self._commit(events)
        except (RefusedError, InvalidInputError) as exc:
            if len(batch) == 1:
                batch[0].error = exc
            else:
                for t in batch:  # one record's fault must not fail the others
                    try:
                        self._commit(t.events)
                    except Exception as one:
                        t.error = one
        except Exception as exc:
            for t in batch:
                t.error = exc
        for t in batch:
            t.done = True

    def _commit(self, events: list[Event]) -> None:
        if not events:
            return
        with self.lock:
            try:
                self.handle.commit(events, lazy_view=True)
                self.commits += 1
            except BaseException:
                # The handle's cache may have been dropped on a failure: look again.
                self.generation += 1
                self._digest = None
                self._doc = self.handle.load()
                self._refreshed = time.monotonic()
                raise
            finally:
                self.generation += 1
            if self._doc is None:
                self.refresh()
            # Otherwise the document held is the handle's own, which the commit updated in place
            # (a reload it had to do is caught by the next refresh, within REFRESH_EVERY).

    def commit_now(self, events: Sequence[Event], *, lazy_view: bool = False) -> list[Any]:
        """A run-level write (begin, finalize): straight through, after anything queued."""
        with self._cv:
            while self._busy:
                self._cv.wait()
            self._busy = True
        try:
            with self.lock:
                try:
                    return self.handle.commit(list(events), lazy_view=lazy_view)
                finally:
                    self._digest = None
                    self._doc = self.handle.load()
                    self._refreshed = time.monotonic()
                    self.generation += 1
        finally:
            self._lead()  # release; also drains anything queued meanwhile
