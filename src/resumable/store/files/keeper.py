"""Keeping a large run's unit index (``index.py``) exact as the writer that holds the whole document
commits: record by record when the index is in step with the journal, caught up from the journal
records past it when it is a little behind, rebuilt from the document otherwise (missing, far
behind, a whole-document record, out of room). Index failures never fail a write: the journal
already holds it, and an index left behind is caught up or rebuilt by the next writer (an index that
cannot be rebuilt is removed, never left claiming what it does not hold).

A writer that commits often (the runner: a few records per step) holds its index commits back: it
notes which units its records touch and brings the index up to date once the journal has grown by
``DEFER_BYTES`` past it, when the snapshot is refreshed, and when it flushes. An index commit costs
about as much as the journal append it follows, and most of it (the header, the head, the redo list)
is the same however many units it carries: batched, a step pays a fraction of it, and a unit touched
twice (started, then done) is written once. Readers lose nothing: an index behind the journal is
what they already handle, applying the records past it (``digests``, ``pointwrite``), and the lag
stays well inside what they accept (``pointwrite.TAIL_MAX``).
"""

from __future__ import annotations

import os
import zlib

from resumable import fsio
from resumable.errors import CorruptRunError
from resumable.store.files import index, journal, refresh
from resumable.store.files.index import Full, Index
from resumable.store.files.loader import pread_all
from resumable.store.files.refresh import estimated_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from resumable.core.types import Event
    from resumable.store.files.cursor import Cursor
    from resumable.store.files.loader import Loaded

# The bytes before a record's end that the index checks are still the journal's (``journal_mark``).
MARK = 4096
# Commits one writer makes record by record before it starts holding its index commits back, and
# the journal bytes it lets the index fall behind by then (readers apply up to TAIL_MAX of them).
DEFER_AFTER = 16
DEFER_BYTES = 128 * 1024
# Journal bytes past an index that a writer catches up from the journal rather than by a rebuild.
CATCH_UP_MAX = 1 << 20


def journal_mark(fd: int, end: int) -> tuple[int, int]:
    """(CRC-32, length) of the journal's last bytes before ``end``: what an index applied up to
    ``end`` checks the journal still holds (a journal replaced or rewritten fails it)."""
    width = min(MARK, end)
    data = pread_all(fd, end - width, width)
    if len(data) != width:
        raise ValueError("journal shorter than the index says")
    return zlib.crc32(data), width


def wanted(state: Loaded) -> bool:
    """Whether a run is large enough for an index: its snapshot is refreshed on a budget, not on
    every write (smaller runs load whole faster than an index is kept)."""
    doc = state.doc
    return isinstance(doc, dict) and isinstance(doc.get("units"), dict) and \
        max(state.snap_size, estimated_bytes(doc)) > refresh.EXACT_SNAPSHOT_BYTES


def touched_units(events: Iterable[Event], into: dict[str, None] | None = None) -> dict[str, None] | None:
    """The units some events change, in the order they first appear (a new unit's digest line must
    come in the document's order), added to ``into``; None when one of them replaces the whole
    document."""
    out: dict[str, None] = {} if into is None else into
    for ev in events:
        t = ev["t"]
        if t == "unit" or t == "invalidate":
            uid = ev.get("unit")
            if isinstance(uid, str):
                out[uid] = None
        elif t == "init" or t == "base":
            return None
    return out


class Keeper:
    __slots__ = ("base", "commits", "cursor", "foreign", "gave_up", "ino", "ix", "pending", "until")

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.gave_up = False  # the index could not be written here: leave it to other processes
        self.ix: Index | None = None  # kept open between commits, as the journal is
        self.ino = 0
        self.commits = 0
        # Held back (see the module docstring): the units touched since the index was last brought
        # up to date, the (seq, offset) it was at then, and the last record this writer appended;
        # ``foreign`` when another writer's records came in between (then the journal says which).
        self.pending: dict[str, None] | None = None
        self.base = (0, 0)
        self.until = (0, 0)
        self.foreign = False

    def _index(self) -> Index | None:
        """The index, its header read afresh: the one held open while the path still names it
        (a stat of the path, never an fstat between writes: see Cursor.identity), else reopened."""
        path = self.cursor.files.index
        try:
            ino = os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            self.close()
            return None
        if self.ix is not None and ino == self.ino and self.ix.reread():
            return self.ix
        self.close()
        self.ix = Index.open(path, writable=True)
        self.ino = ino  # a file put there since the stat is not the one held: reopened next time
        return self.ix

    def close(self) -> None:
        if self.ix is not None:
            self.ix.close()
            self.ix = None

    def _mark(self, state: Loaded) -> tuple[int, int, int, int, int] | None:
        """(journal inode, seq, offset, mark) of the journal ``state`` reflects, None if none."""
        if not state.journal_exists:
            return None
        fd = self.cursor.jfd
        if fd is not None:
            crc, width = journal_mark(fd, state.offset)
            return self.cursor.jino, state.seq, state.offset, crc, width
        fd = fsio.open_regular(self.cursor.files.journal, os.O_RDONLY)
        try:
            crc, width = journal_mark(fd, state.offset)
            return os.fstat(fd).st_ino, state.seq, state.offset, crc, width
        finally:
            os.close(fd)

    def after_commit(self, state: Loaded, before: tuple[int, int], events: Iterable[Event]) -> None:
        """``events`` were appended to the journal after the record (seq, offset) ``before``."""
        if self.gave_up:
            return
        self.commits += 1
        if self.pending is not None or self.commits > DEFER_AFTER:
            self._hold(state, before, events)
            return
        touched = touched_units(events)
        if touched is None:
            self.rebuild(state)
            return
        self._bring_up(state, touched, before)

    def _hold(self, state: Loaded, before: tuple[int, int], events: Iterable[Event]) -> None:
        """Note what ``events`` touch; the index is brought up to date once it lags enough."""
        if self.pending is None:
            self.pending = {}
            self.base = before
        elif before != self.until:
            self.foreign = True
        if touched_units(events, self.pending) is None:
            self.rebuild(state)
            return
        self.until = (state.seq, state.offset)
        if state.offset - self.base[1] >= DEFER_BYTES:
            self.catch_up(state)

    def catch_up(self, state: Loaded) -> None:
        """Bring an index held back (``after_commit``) up to ``state``; nothing if none is."""
        pending, base = self.pending, self.base
        if pending is None:
            return
        if self.foreign or (state.seq, state.offset) != self.until:
            base = (-1, -1)  # others' records too: the journal says what the index lacks
        self.pending = None
        self.foreign = False
        self._bring_up(state, pending, base)

    def _bring_up(self, state: Loaded, touched: dict[str, None], base: tuple[int, int]) -> None:
        """Make the index reflect ``state``: ``touched`` are the units changed since ``base`` (the
        (seq, offset) the index must be at for them to be all), else the journal says."""
        try:
            ix = self._index()
            if ix is None:
                if wanted(state):
                    self.rebuild(state)
                return
            try:
                h = ix.h
                if self.cursor.jfd is None or h.jino != self.cursor.jino:
                    self.rebuild(state)
                    return
                if (h.seq, h.jend) != base:
                    since = self._since(ix, state)
                    if since is None:
                        self.rebuild(state)
                        return
                    touched = since
                doc = state.doc
                assert doc is not None
                units = doc.get("units")
                if not isinstance(units, dict):
                    self.drop()
                    return
                mark = self._mark(state)
                assert mark is not None
                ix.commit({u: units[u] for u in touched if u in units}, index.head_of(doc), mark[1:])
                if ix.wasteful():
                    self.rebuild(state)
            except Full:
                self.rebuild(state)
        except (OSError, ValueError):
            self.drop()

    def _since(self, ix: Index, state: Loaded) -> dict[str, None] | None:
        """The units the journal records between the index's last one and ``state``'s change, or
        None when the index is not a little way behind on this very journal (then it is rebuilt)."""
        h, fd = ix.h, self.cursor.jfd
        if fd is None or not h.seq <= state.seq or not h.jend <= state.offset \
                or state.offset - h.jend > CATCH_UP_MAX or journal_mark(fd, h.jend) != (h.jcrc, h.jlen):
            return None
        tail = pread_all(fd, h.jend, state.offset - h.jend)
        try:
            scan = journal.scan(tail, base=h.jend, path=self.cursor.files.journal, after_seq=h.seq)
        except CorruptRunError:
            return None
        last = scan.records[-1][0] if scan.records else h.seq
        if scan.end != state.offset or last != state.seq:
            return None
        return touched_units(ev for _seq, ev in scan.records)

    def after_refresh(self, state: Loaded) -> None:
        """The snapshot was rewritten to match ``state``: the index notes it (or is rebuilt)."""
        if self.gave_up:
            return
        self.catch_up(state)
        try:
            ix = self._index()
            if ix is None:
                if wanted(state):
                    self.rebuild(state)
                return
            h = ix.h
            if (h.seq, h.jend) != (state.seq, state.offset) or self.cursor.jfd is None \
                    or h.jino != self.cursor.jino:
                self.rebuild(state)
            elif state.snap_stat is not None:
                ix.note_snapshot(state.snap_stat, state.snap_seq, self.cursor.snap_offset)
        except (OSError, ValueError):
            self.drop()

    def rebuild(self, state: Loaded) -> None:
        """A new index of the document ``state`` holds (or none, for a small or malformed run)."""
        self.pending = None
        self.foreign = False
        mark = self._mark(state)
        doc = state.doc
        path = self.cursor.files.index
        if mark is None or doc is None or not wanted(state):
            if os.path.lexists(path):
                self.drop()
            return
        snap_key = state.snap_stat if state.snap_stat is not None and state.snap_seq >= 0 else (0, 0, 0)
        snap_off = self.cursor.snap_offset if state.snap_seq >= 0 else 0
        try:
            from resumable.store.files import indexbuild  # a rebuild: amortised, rare

            indexbuild.build(path, doc, mark, (snap_key, max(state.snap_seq, 0), snap_off))
        except (OSError, ValueError, TypeError):
            self.drop()
            return
        self.close()
        self._index()  # held from now on: the next commit's look at it is one stat and one read

    def drop(self) -> None:
        self.pending = None
        self.close()
        try:
            from resumable.store.files import indexbuild

            indexbuild.remove(self.cursor.files.index)
        except OSError:
            # Not removable (a read-only directory): no writer here can keep it, and a reader
            # finds it behind the journal, which it checks, so it is never read as current.
            self.gave_up = True
