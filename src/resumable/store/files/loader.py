"""Loading a run without writing anything: the snapshot plus the journal records after it.

Readers take no lock. A final journal line without a newline is a write in flight (ignored); a
snapshot another program edited is detected by its marker and reported as such, for the writer to
adopt; a missing or unreadable snapshot is rebuilt in memory from the whole journal.
"""

from __future__ import annotations

import os
import zlib

from resumable import fsio
from resumable.core.events import apply
from resumable.errors import CorruptRunError, InvalidInputError, NoRunError, RefusedError
from resumable.store.files import journal, snapshot
from resumable.store.files.layout import RunFiles, files_for, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Loaded:
    """What a load found; the writer keeps it up to date between its writes."""

    __slots__ = ("adopt", "applied", "doc", "journal_exists", "offset", "seq", "snap_offset",
                 "snap_seq", "snap_size", "snap_stat", "torn")

    def __init__(
        self,
        doc: dict[str, Any] | None,
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
        self.adopt = adopt  # "import" (seed file, no journal) / "external-edit": base record due
        # (offset, length, crc32) of the journal bytes this load applied, so a writer can check
        # later, under the lock, that what a lock-free load read is still there.
        self.applied = applied


def stat_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def replay(
    records: list[tuple[int, dict[str, Any]]], doc: dict[str, Any] | None, path: str, *, lenient: bool
) -> dict[str, Any] | None:
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


def load(files: RunFiles) -> Loaded:
    """Snapshot + journal records after it, without writing anything."""
    snap_bytes: bytes | None = None
    snap_stat = None
    try:
        fd = os.open(files.snapshot, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise translate(exc, f"cannot read {files.snapshot}") from exc
    else:
        try:
            snap_stat = stat_key(os.fstat(fd))
            with os.fdopen(fd, "rb", closefd=False) as fh:
                snap_bytes = fh.read()
        except OSError as exc:
            raise translate(exc, f"cannot read {files.snapshot}") from exc
        finally:
            os.close(fd)

    decoded: snapshot.Decoded | None = None
    parse_error: str | None = None
    if snap_bytes is not None:
        try:
            decoded = snapshot.decode(snap_bytes)
        except ValueError as exc:
            parse_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    try:
        jdata_stat = os.stat(files.journal, follow_symlinks=False)
    except FileNotFoundError:
        jdata_stat = None
    except OSError as exc:
        raise translate(exc, f"cannot read {files.journal}") from exc
    snap_size = len(snap_bytes) if snap_bytes is not None else 0

    if jdata_stat is None:
        if parse_error is not None:
            raise CorruptRunError(
                f"cannot read/parse {files.snapshot}: {parse_error} — fix or move the file aside"
            )
        doc = decoded.doc if decoded is not None else None
        return Loaded(doc, 0, 0, 0, False, -1, snap_size, snap_stat, 0,
                      "import" if doc is not None else None, (0, 0, 0))

    if decoded is not None and decoded.marker is not None and decoded.intact:
        marker = decoded.marker
        if marker.offset <= jdata_stat.st_size:
            # The byte before the marker's offset must end a record: the file's size alone does
            # not show a journal cut back behind the view, as padding keeps the size.
            tail = read_journal(files.journal, max(marker.offset - 1, 0))
            behind = marker.offset > 0 and tail[:1] != b"\n"
            tail = tail[1:] if marker.offset > 0 else tail
            try:
                scan = None if behind else journal.scan(
                    tail, base=marker.offset, path=files.journal, after_seq=marker.seq)
            except CorruptRunError:
                scan = None  # re-checked below by a full replay, which names the real offset
            if scan is not None:
                doc = replay(scan.records, decoded.doc, files.journal, lenient=False)
                seq = scan.records[-1][0] if scan.records else marker.seq
                used = tail[: scan.end - marker.offset]
                return Loaded(doc, seq, scan.end, scan.torn, True, marker.seq, snap_size,
                              snap_stat, marker.offset, None,
                              (marker.offset, len(used), zlib.crc32(used)))

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
        return Loaded(doc, seq, scan.end, scan.torn, True, -1, snap_size, snap_stat, 0,
                      "external-edit", (0, scan.end, zlib.crc32(data[: scan.end])))
    if scan.records and scan.records[0][1].get("t") not in ("init", "base"):
        raise CorruptRunError(
            f"{files.journal}: the journal does not start with an init or base record;"
            " nothing was changed"
        )
    doc = replay(scan.records, None, files.journal, lenient=False)
    seq = scan.records[-1][0] if scan.records else 0
    return Loaded(doc, seq, scan.end, scan.torn, True, -1, snap_size, snap_stat, 0, None,
                  (0, scan.end, zlib.crc32(data[: scan.end])))


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


def read_range(path: str, offset: int, length: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
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


def read_doc(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The current document of the run whose snapshot is ``path``; never writes. Raises
    NoRunError when the run does not exist, CorruptRunError when it cannot be read."""
    files = files_for(path)
    loaded = load(files)
    if loaded.doc is None:
        raise NoRunError(f"no run at {files.snapshot}")
    return loaded.doc
