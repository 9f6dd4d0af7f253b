"""A write to a few units of a large run through its index, in O(1) of the run's size.

A process with nothing of the run in memory (a ``resumable unit`` call) would otherwise load the
whole document to change one unit. Under the run's lock, this path reads the index's header, checks
it against the journal (the same inode, the bytes it ends at still there) and against the snapshot
(the one it last saw: an edited snapshot is adopted by the whole-document path), applies the
journal records the index does not hold yet, then applies the events to a document made of the
head and only the units they name: the checkpoint rules of ``apply`` need nothing else (a unit's
own state, its needs, the head). The records are appended and fsynced exactly as the whole-document
path does, then the index is brought up to them. Anything this path cannot vouch for (no index, a
whole-document event, a ulpi event log, a snapshot changed under it) returns None before anything is
written, and the caller takes the whole-document path.
"""

from __future__ import annotations

import os

from resumable.core.events import apply
from resumable.core.model import shape_problem
from resumable.errors import CorruptRunError, InvalidInputError
from resumable.store.files import journal, refresh
from resumable.store.files.index import Full, Index, head_of
from resumable.store.files.keeper import journal_mark
from resumable.store.files.loader import Loaded, pread_all, replay, stat_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from resumable.core.types import Event, Unit
    from resumable.store.files.writer import Writer

POINT_KINDS = frozenset({"unit", "invalidate", "phase", "item", "resolve", "validation", "begin", "map"})
# Journal bytes past the index worth catching up here; more (writers that kept no index) is left
# to the whole-document path, which rebuilds it.
TAIL_MAX = 1 << 20


def eligible(events: Sequence[Event]) -> bool:
    return all(ev.get("t") in POINT_KINDS for ev in events)


def snapshot_key(path: str) -> tuple[int, int, int]:
    try:
        return stat_key(os.lstat(path))
    except FileNotFoundError:
        return (0, 0, 0)


class Mini:
    """The head of the document and the units read so far, as one document ``apply`` works on."""

    __slots__ = ("doc", "ix", "units")

    def __init__(self, ix: Index) -> None:
        self.ix = ix
        self.doc = ix.head()
        self.units: dict[str, Unit] = {}
        self.doc["units"] = self.units

    def need(self, event: Event) -> None:
        uid = unit_of(event)
        if uid is not None and uid not in self.units:
            _, slot = self.ix.find(uid)
            if slot is not None:
                self.units[uid] = self.ix.unit(slot)


def unit_of(event: Event) -> str | None:
    """The unit an event changes, if it changes one."""
    if event["t"] == "unit" or event["t"] == "invalidate":
        uid = event.get("unit")
        return uid if isinstance(uid, str) else None
    return None


def commit(writer: Writer, events: Sequence[Event], lazy_view: bool) -> list[Any] | None:
    """The outputs of ``events``, committed through the index; None when the caller must take the
    whole-document path (nothing was written). The caller holds the run's lock."""
    files = writer.files
    ix = Index.open(files.index, writable=True)
    if ix is None:
        return None
    try:
        return _commit(writer, ix, events, lazy_view)
    finally:
        ix.close()


def _caught_up(writer: Writer, ix: Index) -> tuple[Mini, Loaded, list[Event]] | None:
    """The index's document with the journal records past it applied, and the journal's state."""
    files, h, cursor = writer.files, ix.h, writer.cursor
    if os.path.lexists(files.events) or snapshot_key(files.snapshot) != h.snap_key() \
            or not os.path.lexists(files.journal):
        return None
    fd = cursor.jfd if cursor.jfd is not None else cursor.open_journal()
    try:
        ino, size = cursor.identity()  # through the descriptor: no stat of the journal between writes
    except OSError:
        return None  # gone meanwhile (moved by gc): the whole-document path says what there is
    if ino != h.jino or size < h.jend or size - h.jend > TAIL_MAX:
        return None
    if journal_mark(fd, h.jend) != (h.jcrc, h.jlen):
        return None
    tail = pread_all(fd, h.jend, size - h.jend)
    try:
        scan = journal.scan(tail, base=h.jend, path=files.journal, after_seq=h.seq)
    except CorruptRunError:
        return None  # the whole-document path names the damage
    mini = Mini(ix)
    for _seq, ev in scan.records:
        if ev.get("t") not in POINT_KINDS:
            return None
        mini.need(ev)
    try:
        replay(scan.records, mini.doc, files.journal, lenient=False)
    except CorruptRunError:
        return None
    seq = scan.records[-1][0] if scan.records else h.seq
    state = Loaded(None, seq, scan.end, scan.torn, True, h.snap_seq, h.snap_size, h.snap_key(), h.snap_off, None)
    return mini, state, [ev for _s, ev in scan.records]


def _commit(writer: Writer, ix: Index, events: Sequence[Event], lazy_view: bool) -> list[Any] | None:
    found = _caught_up(writer, ix)
    if found is None:
        return None
    mini, state, caught = found
    problem = shape_problem(mini.doc)
    if problem is not None:
        raise InvalidInputError(
            f"{writer.files.snapshot}: {problem} — fix the document (or move it aside and init afresh);"
            " nothing was written")
    outputs: list[Any] = []
    doc = mini.doc
    for event in events:
        mini.need(event)
        doc, out = apply(doc, event)
        outputs.append(out)
    h = ix.h
    writer.cursor.snap_offset = h.snap_off
    writer.append(state, list(events))
    changed = {}
    for ev in (*caught, *events):
        uid = unit_of(ev)
        if uid is not None and uid in mini.units:
            changed[uid] = mini.units[uid]
    fd = writer.cursor.jfd
    assert fd is not None
    try:
        ix.commit(changed, head_of(doc), (state.seq, state.offset, *journal_mark(fd, state.offset)))
        rebuild = ix.wasteful()
    except Full:
        rebuild = True
    except (OSError, ValueError):
        writer.keeper.drop()
        rebuild = False
    size = h.snap_size or 512 + 170 * h.count
    # The whole-document path's policy (refresh.SnapshotView.after_write), a large run's first
    # view included (no snapshot yet: its size estimated, its offset 0).
    due = state.offset - h.snap_off >= size or (size <= refresh.EXACT_SNAPSHOT_BYTES and not lazy_view)
    if due or rebuild:
        writer.refresh_whole(rebuild=rebuild)
    return outputs
