"""Keeping a large run's unit index (``index.py``) exact as the writer that holds the whole document
commits: record by record when the index is in step with the journal, rebuilt from the document
when it is not (missing, behind, a whole-document record, out of room). Index failures never fail a
write: the journal already holds it, and an index left behind is caught up or rebuilt by the next
writer (an index that cannot be rebuilt is removed, never left claiming what it does not hold).
"""

from __future__ import annotations

import os
import zlib

from resumable import fsio
from resumable.store.files import index, refresh
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


def touched_units(events: Iterable[Event]) -> set[str] | None:
    """The units some events change, or None when one of them replaces the whole document."""
    out: set[str] = set()
    for ev in events:
        if ev["t"] == "init" or ev["t"] == "base":
            return None
        if ev["t"] == "unit" or ev["t"] == "invalidate":
            uid = ev.get("unit")
            if isinstance(uid, str):
                out.add(uid)
    return out


class Keeper:
    __slots__ = ("cursor", "gave_up", "ino", "ix")

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.gave_up = False  # the index could not be written here: leave it to other processes
        self.ix: Index | None = None  # kept open between commits, as the journal is
        self.ino = 0

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
        try:
            ix = self._index()
            if ix is None:
                if wanted(state):
                    self.rebuild(state)
                return
            try:
                touched = touched_units(events)
                h = ix.h
                in_step = touched is not None and self.cursor.jfd is not None \
                    and h.jino == self.cursor.jino and (h.seq, h.jend) == before
                mark = self._mark(state) if in_step else None
                if mark is None or touched is None:
                    self.rebuild(state)
                    return
                doc = state.doc
                assert doc is not None
                units = doc.get("units")
                if not isinstance(units, dict):
                    self.drop()
                    return
                ix.commit({u: units[u] for u in touched if u in units}, index.head_of(doc), mark[1:])
                if ix.wasteful():
                    self.rebuild(state)
            except Full:
                self.rebuild(state)
        except (OSError, ValueError):
            self.drop()

    def after_refresh(self, state: Loaded) -> None:
        """The snapshot was rewritten to match ``state``: the index notes it (or is rebuilt)."""
        if self.gave_up:
            return
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
        self.close()
        try:
            from resumable.store.files import indexbuild

            indexbuild.remove(self.cursor.files.index)
        except OSError:
            # Not removable (a read-only directory): no writer here can keep it, and a reader
            # finds it behind the journal, which it checks, so it is never read as current.
            self.gave_up = True
