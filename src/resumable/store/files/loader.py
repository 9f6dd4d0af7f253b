"""Loading a run without writing anything: the snapshot plus the journal records after it.

Readers take no lock. A final journal line without a newline is a write in flight (ignored); a
snapshot another program edited is detected by its marker and reported as such, for the writer to
adopt; a missing or unreadable snapshot is rebuilt in memory from the whole journal; a ulpi event
log ahead of all that is replayed and marked for adoption (ulpi_adoption).
"""

from __future__ import annotations

import errno
import os
import stat
import zlib

from resumable import fsio
from resumable.core.events import apply
from resumable.errors import CorruptRunError, InvalidInputError, NoRunError, RefusedError
from resumable.store.files import journal, snapshot
from resumable.store.files.layout import RunFiles, files_for, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from resumable.core.types import Event
    from resumable.core.types import RunDocument as Doc

    Picked = TypeVar("Picked")


class Loaded:
    """What a load found; the writer keeps it up to date between its writes."""

    __slots__ = ("adopt", "applied", "doc", "events_stat", "journal_exists", "offset", "seq",
                 "shape_checked", "snap_offset", "snap_seq", "snap_size", "snap_stat", "torn")

    def __init__(
        self,
        doc: Doc | None,
        seq: int,
        offset: int,
        torn: int,
        journal_exists: bool,
        snap_seq: int,
        snap_size: int,
        snap_stat: tuple[int, int, int] | None,
        snap_offset: int,
        adopt: str | None,
        applied: tuple[int, int, int] = (0, 0, 0),
    ) -> None:
        self.doc = doc
        self.seq = seq  # last journal sequence number applied (0: none)
        self.offset = offset  # journal offset just past that record
        self.torn = torn  # bytes of a torn final fragment (readers ignore, writers truncate)
        self.journal_exists = journal_exists
        self.snap_seq = snap_seq  # sequence number the snapshot on disk reflects (-1: unknown)
        self.snap_size = snap_size
        self.snap_stat = snap_stat  # (ino, size, mtime_ns) of the snapshot we last saw
        self.snap_offset = snap_offset  # journal offset the snapshot reflects (0: unknown)
        # "import" (a ulpi status file, no journal) / "external-edit" / "adopted <log>: ...": base record due
        self.adopt = adopt
        # (offset, length, crc32) of the journal bytes this load applied, so a writer can check
        # later, under the lock, that what a lock-free load read is still there.
        self.applied = applied
        # (ino, size, mtime_ns) of ulpi's event log when this state was compared with it
        # (None: there was none); a catch-up that finds it changed loads afresh.
        self.events_stat: tuple[int, int, int] | None = None
        # The document object a writer last found fit to write to (``model.shape_problem``), held
        # (not its id(), which a new object may reuse) so that any other object, a document
        # loaded, adopted or replaced by a caught-up base record, is checked again.
        self.shape_checked: Doc | None = None


def stat_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def replay(
    records: list[tuple[int, Event]], doc: Doc | None, path: str, *, lenient: bool
) -> Doc | None:
    for seq, event in records:
        try:
            doc, _ = apply(doc, event)
        # TypeError & co.: a record with a valid checksum but a malformed body (written by some
        # other tool: {"t": "resolve", "ids": null}) is corruption, not a traceback.
        except (RefusedError, InvalidInputError, TypeError, ValueError, KeyError, AttributeError) as exc:
            if lenient:
                # Re-applying history on top of an externally edited base: an event that no longer
                # fits the edited document is skipped rather than fabricated.
                continue
            raise CorruptRunError(
                f"{path}: journal record {seq} does not apply ({exc}); nothing was changed"
            ) from exc
    return doc


def events_key(files: RunFiles, *, dir_searchable: bool = False) -> tuple[int, int, int] | None:
    """ulpi's event log's identity, or None when there is none: one lstat (or access), the whole
    cost of a run without a log (nearly every run). ``dir_searchable``: see ``lstat_unless_absent``."""
    try:
        st = lstat_unless_absent(files.events, dir_searchable)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise translate(exc, f"cannot read {files.events}") from exc
    return None if st is None else stat_key(st)


def lstat_unless_absent(path: str, dir_searchable: bool) -> os.stat_result | None:
    """``os.lstat(path)``, raising what it raises; but None, without that call, when ``path`` is
    absent and its directory was just found searchable (``searchable()``, asked once by the caller
    for all the files it probes). A writer probes on every write for files that are usually not
    there (ulpi's event log; a large run's snapshot before its first refresh), and the
    exception a failed lstat() raises costs more than the system call. access() answers without
    one, but it also fails where lstat() fails for another reason: only in a searchable directory
    does its "no" mean "no such file" (the names' lengths were checked by the run's load)."""
    if dir_searchable and not os.access(path, os.F_OK, follow_symlinks=False):
        return None
    return os.lstat(path)


def searchable(directory: str) -> bool:
    """Whether this process may look names up in ``directory`` (see ``lstat_unless_absent``). The
    trailing separator makes anything but a directory fail (an executable file passes X_OK)."""
    return os.access(directory + os.sep, os.X_OK, effective_ids=True)


def load(files: RunFiles) -> Loaded:
    """Snapshot + journal records after it, without writing anything; when ulpi's event log
    is ahead of that, its document, marked for adoption by the next write (ulpi_adoption)."""
    events = events_key(files)
    loaded = _load(files)
    if events is not None:
        from resumable.store.files import ulpi_adoption  # hashlib & co.: only for runs with a log

        adoption = ulpi_adoption.consider(files, loaded.doc)
        if adoption is not None:
            loaded.doc = adoption.doc
            loaded.adopt = adoption.reason
        loaded.events_stat = events
    return loaded


class _Snapshot:
    """What reading the snapshot file found."""

    __slots__ = ("decoded", "error", "size", "stat")

    def __init__(self) -> None:
        self.decoded: snapshot.Decoded | None = None
        self.error: str | None = None  # why it does not parse
        self.size = 0
        self.stat: tuple[int, int, int] | None = None  # None: there is no snapshot


def _read_snapshot(files: RunFiles) -> _Snapshot:
    found = _Snapshot()
    try:
        # Without following a link and without blocking on a FIFO (fsio.open_regular).
        fd = fsio.open_regular(files.snapshot, os.O_RDONLY)
    except FileNotFoundError:
        return found
    except OSError as exc:
        raise translate(exc, f"cannot read {files.snapshot}") from exc
    try:
        found.stat = stat_key(os.fstat(fd))
        # A large snapshot is decoded as it is read, never held whole.
        chunked = snapshot.decode_chunked(lambda offset, size: os.pread(fd, size, offset)) \
            if found.stat[1] >= snapshot.CHUNKED_MIN else None
        if chunked is not None:
            found.decoded, found.size = chunked
            return found
        data = pread_all(fd, 0, found.stat[1]) if found.stat[1] else b""
        more = os.pread(fd, 1 << 16, len(data))
        while more:  # grew while we read: read to its end
            data += more
            more = os.pread(fd, 1 << 16, len(data))
    except OSError as exc:
        raise translate(exc, f"cannot read {files.snapshot}") from exc
    finally:
        os.close(fd)
    found.size = len(data)
    try:
        found.decoded = snapshot.decode(data)
    except ValueError as exc:
        found.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return found  # the bytes go with this frame: a large run's file is as big as its document


def _journal_stat(files: RunFiles) -> os.stat_result | None:
    try:
        st = os.stat(files.journal, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise translate(exc, f"cannot read {files.journal}") from exc
    if not stat.S_ISREG(st.st_mode):
        # A link or a FIFO in the journal's place: refused (never followed, never waited on).
        error = OSError(errno.ELOOP, "is a symbolic link") if stat.S_ISLNK(st.st_mode) \
            else fsio.not_regular(files.journal)
        raise translate(error, f"cannot read {files.journal}")
    return st


def _load(files: RunFiles) -> Loaded:
    snap = _read_snapshot(files)
    decoded = snap.decoded
    jdata_stat = _journal_stat(files)
    if jdata_stat is None:
        if snap.error is not None:
            raise CorruptRunError(
                f"cannot read/parse {files.snapshot}: {snap.error} — fix or move the file aside"
            )
        doc = decoded.doc if decoded is not None else None
        return Loaded(doc, 0, 0, 0, False, -1, snap.size, snap.stat, 0,
                      "import" if doc is not None else None, (0, 0, 0))
    if decoded is not None and decoded.marker is not None and decoded.intact:
        loaded = _after_marker(files, snap, decoded, decoded.marker, jdata_stat.st_size)
        if loaded is not None:
            return loaded
    data = read_journal(files.journal, 0)
    scan = journal.scan(data, base=0, path=files.journal, after_seq=0)
    if decoded is not None and not (decoded.marker is not None and decoded.intact):
        # The snapshot parses but is not the one we wrote: another program edited it. Its
        # content becomes the new base; history after the seq it was edited from is re-applied.
        after = decoded.marker.seq if decoded.marker is not None else (
            scan.records[-1][0] if scan.records else 0)
        doc = replay([r for r in scan.records if r[0] > after], decoded.doc, files.journal,
                      lenient=True)
        seq = scan.records[-1][0] if scan.records else 0
        return Loaded(doc, seq, scan.end, scan.torn, True, -1, snap.size, snap.stat, 0,
                      "external-edit", (0, scan.end, zlib.crc32(data[: scan.end])))
    if scan.records and scan.records[0][1].get("t") not in ("init", "base"):
        raise CorruptRunError(
            f"{files.journal}: the journal does not start with an init or base record;"
            " nothing was changed"
        )
    doc = replay(scan.records, None, files.journal, lenient=False)
    seq = scan.records[-1][0] if scan.records else 0
    return Loaded(doc, seq, scan.end, scan.torn, True, -1, snap.size, snap.stat, 0, None,
                  (0, scan.end, zlib.crc32(data[: scan.end])))


def _after_marker(files: RunFiles, snap: _Snapshot, decoded: snapshot.Decoded, marker: snapshot.Marker,
                  journal_size: int) -> Loaded | None:
    """The intact snapshot plus the journal records after its marker; None when those do not
    scan (the caller's full replay names the real damage)."""
    # The journal must still hold what the snapshot acknowledged: the record that ends at the
    # marker's offset, whole, with the marker's sequence number. A journal cut back behind
    # the view, or whose acknowledged last record was damaged (a flipped newline reads like
    # a torn write), is corruption, never a torn tail to cut off.
    if marker.offset > journal_size:
        raise _lost(files, marker, f"the journal ends at byte {journal_size}")
    head = max(marker.offset - _LAST_RECORD_WINDOW, 0)
    data = read_journal(files.journal, head)
    if marker.offset > head + len(data):
        raise _lost(files, marker, f"the journal ends at byte {head + len(data)}")
    if marker.offset > 0:
        head, data = _check_last_record(files, marker, head, data)
    tail = data[marker.offset - head :]
    try:
        scan = journal.scan(tail, base=marker.offset, path=files.journal, after_seq=marker.seq)
    except CorruptRunError:
        return None
    doc = replay(scan.records, decoded.doc, files.journal, lenient=False)
    seq = scan.records[-1][0] if scan.records else marker.seq
    used = tail[: scan.end - marker.offset]
    return Loaded(doc, seq, scan.end, scan.torn, True, marker.seq, snap.size, snap.stat, marker.offset, None,
                  (marker.offset, len(used), zlib.crc32(used)))


# Bytes read before a snapshot's marker offset, to check the record that ends there (a record is
# typically a few hundred bytes); a longer one is read further back, up to _LAST_RECORD_MAX, past
# which (a base record holding a whole large document) only its end is checked, so that a load
# stays O(1) in the run's size.
_LAST_RECORD_WINDOW = 4096
_LAST_RECORD_MAX = 1 << 20


def _check_last_record(files: RunFiles, marker: snapshot.Marker, head: int,
                       data: bytes) -> tuple[int, bytes]:
    """Raise CorruptRunError unless the record ending at ``marker.offset`` is intact and is record
    ``marker.seq``. ``data`` holds the journal from byte ``head``; returns (head, data), read
    further back when the record starts before ``head``."""
    end = marker.offset - head
    if data[end - 1 : end] != b"\n":
        raise _lost(files, marker, f"byte {marker.offset - 1} does not end a record")
    while True:
        start = data.rfind(b"\n", 0, end - 1) + 1
        if start > 0 or head == 0:
            break
        if end > _LAST_RECORD_MAX:
            # Too long to check whole on every load: its end, at least, must be a record's end.
            if not data[:end - 1].endswith(b"}"):
                raise _lost(files, marker, f"byte {marker.offset - 2} does not end a record")
            return head, data
        new_head = max(head - max(len(data), _LAST_RECORD_WINDOW), 0)
        data = read_journal_range(files.journal, new_head, head - new_head) + data
        end += head - new_head
        head = new_head
    decoded = journal.decode_line(data[start : end - 1])
    if decoded is None or decoded[0] != marker.seq:
        raise _lost(files, marker, f"its record at byte offset {head + start} is damaged")
    return head, data


def _lost(files: RunFiles, marker: snapshot.Marker, what: str) -> CorruptRunError:
    return CorruptRunError(
        f"{files.journal}: {what}, but the snapshot {files.snapshot} acknowledges records up to"
        f" {marker.seq} (byte offset {marker.offset}): nothing was changed; restore the journal from a"
        " backup, or move it aside to fall back to the snapshot")


def digest(files: RunFiles, pick: Callable[[str, Any], Picked]) -> tuple[Doc, dict[str, Picked]] | None:
    """(the document without its units, {unit id: pick(unit id, unit)}) of a run whose snapshot is
    current (the journal ends at its marker), decoded a piece at a time so that only what ``pick``
    keeps of each unit is held; None for any other run (``load`` reads it)."""
    if events_key(files) is not None:
        return None  # a ulpi event log may be ahead: load() decides
    try:
        fd = fsio.open_regular(files.snapshot, os.O_RDONLY)
    except OSError:
        return None
    try:
        decoded = snapshot.decode_chunked(lambda offset, size: os.pread(fd, size, offset), pick=pick)
    except OSError:
        return None
    finally:
        os.close(fd)
    if decoded is None or decoded[0].marker is None or not decoded[0].intact:
        return None  # not the snapshot resumable wrote (edited by another program): load() adopts it
    marker = decoded[0].marker
    try:
        st = os.stat(files.journal, follow_symlinks=False)
    except OSError:
        return None
    # Read after the snapshot: a journal that still ends at the marker had no record after it then.
    if not stat.S_ISREG(st.st_mode) or st.st_size != marker.offset:
        return None
    if marker.offset > 0:
        head = max(marker.offset - _LAST_RECORD_WINDOW, 0)
        _check_last_record(files, marker, head, read_journal_range(files.journal, head, marker.offset - head))
    doc: Any = decoded[0].doc  # handed out as a head: the document without its units
    units = doc.pop("units")
    return doc, units


def pread_all(fd: int, offset: int, length: int) -> bytes:
    """Up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def read_journal_range(path: str, offset: int, length: int) -> bytes:
    try:
        fd = fsio.open_regular(path, os.O_RDONLY)
        try:
            return pread_all(fd, offset, length)
        finally:
            os.close(fd)
    except OSError as exc:
        raise translate(exc, f"cannot read {path}") from exc


def read_range(path: str, offset: int, length: int) -> bytes:
    try:
        fd = fsio.open_regular(path, os.O_RDONLY)
    except OSError:
        return b""
    try:
        return pread_all(fd, offset, length)
    except OSError:
        return b""
    finally:
        os.close(fd)


def read_journal(path: str, offset: int) -> bytes:
    try:
        return fsio.read_bytes(path, offset)
    except OSError as exc:
        raise translate(exc, f"cannot read {path}") from exc


def read_doc(path: str | os.PathLike[str]) -> Doc:
    """The current document of the run whose snapshot is ``path``; never writes. Raises
    NoRunError when the run does not exist, CorruptRunError when it cannot be read."""
    files = files_for(path)
    loaded = load(files)
    if loaded.doc is None:
        raise NoRunError(f"no run at {files.snapshot}")
    return loaded.doc
