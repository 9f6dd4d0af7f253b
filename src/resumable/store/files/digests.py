"""Reading a large run through its index without decoding any unit whole: the document's head and
every unit's digest (``index.digest``: status, needs, removal, a reconciled note), which is all that
``get --summary``, ``resume`` and the status view count and walk; and the whole value of the few
units a view details.

Lock-free, as every read: the index's header is checked against the journal (the same inode, the
bytes it ends at still there) and against the snapshot (one edited by another program is the
document now: the whole-document load adopts it), and the journal records past the header are
applied. Regions below the header's ends are never rewritten, so what one header names stays
readable while writers commit; a rebuilt index is a new file, the old one merely falls behind.
Whenever the index cannot vouch for the run, None: the caller loads the whole document.
"""

from __future__ import annotations

import os

from resumable import fsio
from resumable.core.model import is_document
from resumable.errors import CorruptRunError, InvalidInputError, RefusedError
from resumable.store.files import journal
from resumable.store.files.index import Index
from resumable.store.files.keeper import journal_mark
from resumable.store.files.loader import pread_all, replay
from resumable.store.files.pointwrite import POINT_KINDS, TAIL_MAX, snapshot_key, unit_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from resumable.core.types import Event, Unit
    from resumable.store.files.layout import RunFiles
    from resumable.store.values import Doc


class DigestView:
    """A run's document with digests for units, and the whole value of any of its units on demand
    (``units``), both as of the same journal record."""

    __slots__ = ("doc", "files", "header", "tail")

    def __init__(self, files: RunFiles, doc: Doc, header: bytes, tail: list[Event]) -> None:
        self.files = files
        self.doc = doc
        self.header = header  # the index header page this view was read through
        self.tail = tail  # the journal records past it, applied to ``doc``

    def units(self, ids: Iterable[str]) -> dict[str, Unit] | None:
        """The whole values of the units ``ids`` (those the run has), as of this view; None when the
        index moved on meanwhile (then read the whole document)."""
        wanted = [uid for uid in dict.fromkeys(ids) if uid in self.doc.get("units", {})]
        ix = Index.open(self.files.index)
        if ix is None:
            return None
        try:
            if ix.page != self.header:
                return None
            doc = ix.head()
            units: dict[str, Unit] = {}
            for uid in wanted:
                _, slot = ix.find(uid)
                if slot is not None:
                    units[uid] = ix.unit(slot)
            if ix.raw_header() != self.header:
                return None  # a slot read may be newer than this view
        except (OSError, ValueError):
            return None
        finally:
            ix.close()
        doc["units"] = units
        chosen = set(wanted)
        mine = [(0, ev) for ev in self.tail if (name := unit_of(ev)) is None or name in chosen]
        try:
            replay(mine, doc, self.files.journal, lenient=False)
        except CorruptRunError:
            return None
        return {uid: units[uid] for uid in wanted if uid in units}


def load(files: RunFiles) -> DigestView | None:
    """The run through its index, or None when it has none it can vouch for."""
    if os.path.lexists(files.events):
        return None
    from resumable.store.files import summary

    kept = summary.read(files)  # a run at rest, as the writer of its snapshot summed it up
    if kept is not None:
        return kept
    for _ in range(3):
        ix = Index.open(files.index)
        if ix is None:
            return None
        try:
            return _read(files, ix)
        except _Moved:
            continue
        except (OSError, ValueError, CorruptRunError, InvalidInputError, RefusedError):
            return None
        finally:
            ix.close()
    return None


def copy_unit(unit: Any) -> Any:
    if not isinstance(unit, dict):
        return unit
    out = dict(unit)
    if isinstance(out.get("dependsOn"), list):
        out["dependsOn"] = list(out["dependsOn"])
    return out


class _Moved(Exception):
    """A writer committed while the index was read: read again."""


def _read(files: RunFiles, ix: Index) -> DigestView | None:
    """The view, or None when the index cannot vouch for the run."""
    h = ix.h
    header = ix.page
    if snapshot_key(files.snapshot) != h.snap_key():
        return None
    try:
        fd = fsio.open_regular(files.journal, os.O_RDONLY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_ino != h.jino or st.st_size < h.jend or st.st_size - h.jend > TAIL_MAX:
            return None
        if journal_mark(fd, h.jend) != (h.jcrc, h.jlen):
            return None
        tail = pread_all(fd, h.jend, st.st_size - h.jend)
    finally:
        os.close(fd)
    scan = journal.scan(tail, base=h.jend, path=files.journal, after_seq=h.seq)
    events = [ev for _s, ev in scan.records]
    if any(ev.get("t") not in POINT_KINDS for ev in events):
        return None
    doc = ix.head()
    units = doc["units"] = ix.digest_units()
    if ix.raw_header() != header:
        raise _Moved
    for ev in events:  # equal digests are one object: a unit the tail changes gets its own
        uid = unit_of(ev)
        if uid is not None and uid in units:
            units[uid] = copy_unit(units[uid])
    out = replay(scan.records, doc, files.journal, lenient=False)
    if out is None or not is_document(out):
        return None  # the whole document's load judges it (and refuses an unreadable one in one line)
    return DigestView(files, out, header, events)
