"""What one process knows of a run between its writes, and how it catches up with the others.

A writer keeps the document in memory and, before each write (under the run's lock), reads only
the journal records other processes appended since, so a write costs O(1) however many units the
run has. It also notices a snapshot that another program edited (adopted as a new base by the
writer) and a journal that was replaced or cut back (gc, re-init: then it loads afresh).

Reads (``Run.doc``) catch up without the lock; what they read is trusted by a later write only once
checked under the lock, because a record can be rolled back after a failed fsync.
"""

from __future__ import annotations

import os
import zlib

from resumable import fsio
from resumable.errors import CorruptRunError
from resumable.store.files import journal, snapshot
from resumable.store.files.layout import RunFiles, translate
from resumable.store.files.loader import (
    Loaded,
    events_key,
    load,
    lstat_unless_absent,
    pread_all,
    read_journal,
    read_range,
    replay,
    searchable,
    stat_key,
)


class Cursor:
    __slots__ = ("files", "jfd", "jino", "jlink", "jsize", "locked", "snap_offset", "state", "unverified")

    def __init__(self, files: RunFiles) -> None:
        self.files = files
        self.state: Loaded | None = None
        self.jfd: int | None = None  # the journal, open for writing once this process wrote
        self.jino = 0
        self.jlink: str | None = None  # the kernel's name for the open journal (/proc/self/fd)
        self.jsize = 0  # the journal file's size as last seen
        self.snap_offset = 0  # the journal offset the snapshot on disk reflects
        self.locked = False  # set by the writer while it holds the run's lock
        # (offset, length, crc32) of journal bytes applied without the lock, still to be checked.
        self.unverified: tuple[int, int, int] | None = None

    def forget(self) -> None:
        """Drop the cached state: the next catch-up loads from scratch."""
        self.state = None

    def close_journal(self) -> None:
        if self.jfd is not None:
            try:
                os.close(self.jfd)
            except OSError:
                pass
            self.jfd = None

    def open_journal(self) -> int:
        """The journal open for writing (created, durably, if missing)."""
        self.close_journal()
        existed = os.path.lexists(self.files.journal)
        try:
            self.jfd = fsio.open_regular(self.files.journal, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise translate(exc, f"cannot open {self.files.journal}") from exc
        st = os.fstat(self.jfd)
        self.jino, self.jsize = st.st_ino, st.st_size
        try:
            self.jlink = os.readlink(f"/proc/self/fd/{self.jfd}")
        except OSError:
            self.jlink = None  # no /proc: stat() the path instead
        if not existed:
            try:
                # The new file's directory entry must be durable before any record is acknowledged.
                fsio.fsync_dir(self.files.dir)
            except OSError as exc:
                raise translate(exc, f"cannot create {self.files.journal}") from exc
        return self.jfd

    def full_load(self) -> Loaded:
        self.close_journal()
        try:
            st = os.stat(self.files.journal, follow_symlinks=False)
            self.jino, self.jsize = st.st_ino, st.st_size
        except OSError:
            self.jino = self.jsize = 0
        self.state = None
        state = load(self.files)
        self.state = state
        self.unverified = state.applied if not self.locked and state.applied[1] else None
        self.snap_offset = state.snap_offset
        return state

    def catch_up(self) -> Loaded:
        """The current state: the cached one plus what others appended, or a fresh load."""
        state = self.state
        if state is None:
            return self.full_load()
        # One look at the directory, so that the probes below answer "absent" without an exception.
        dir_ok = searchable(self.files.dir)
        if events_key(self.files, dir_searchable=dir_ok) != state.events_stat:
            # ulpi's event log appeared or grew (or went): what it holds is judged against the
            # run afresh (ulpi_adoption), as a fresh load would.
            return self.full_load()
        if self.locked and self.unverified is not None:
            start, length, crc = self.unverified
            self.unverified = None
            seen = self.pread(start, length)
            if len(seen) != length or zlib.crc32(seen) != crc:
                return self.full_load()  # something read without the lock was rolled back
        try:
            ino, size = self.identity()
        except FileNotFoundError:
            if state.journal_exists:
                return self.full_load()  # moved away (gc, re-init) by someone else
            ino = size = -1
        if ino >= 0 and ino == self.jino and size < state.offset and self.locked:
            # Under the lock, everything this process knows was written or checked by it: a
            # journal now shorter lost acknowledged records (cut by another program).
            raise CorruptRunError(
                f"{self.files.journal}: the journal is {size} bytes, shorter than the {state.offset}"
                f" bytes of records up to {state.seq} already acknowledged: nothing was changed;"
                " restore the journal from a backup")
        if ino >= 0 and (ino != self.jino or size < state.offset):
            return self.full_load()  # replaced (gc, re-init) or truncated by someone else
        if ino >= 0:
            self.jsize = size
        if size > state.offset:
            start = state.offset
            data = self.pread(start, size - start)
            try:
                scan = journal.scan(data, base=start, path=self.files.journal, after_seq=state.seq)
                state.doc = replay(scan.records, state.doc, self.files.journal, lenient=False)
            except CorruptRunError:
                # Possibly a transient view (bytes of a rolled-back record): reload from scratch,
                # which reports the corruption for real if it is real.
                return self.full_load()
            if state.adopt is not None and any(ev.get("t") == "base" for _, ev in scan.records):
                # Another process adopted a base meanwhile: this one's pending adoption was judged
                # against a document that is no longer the run's. Judge again from scratch.
                return self.full_load()
            if scan.records:
                state.seq = scan.records[-1][0]
                if not self.locked:
                    self._note_unverified(start, data[: scan.end - start])
            state.offset = scan.end
            state.torn = scan.torn
        try:
            found = lstat_unless_absent(self.files.snapshot, dir_ok)
        except FileNotFoundError:
            found = None
        snap_st = None if found is None else stat_key(found)
        if snap_st != state.snap_stat:
            self._check_snapshot(state, snap_st)
        return state

    def _note_unverified(self, start: int, read: bytes) -> None:
        if self.unverified is None:
            self.unverified = (start, len(read), zlib.crc32(read))
        else:  # contiguous with what was read before: extend the range and its CRC
            s0, n0, c0 = self.unverified
            self.unverified = (s0, n0 + len(read), zlib.crc32(read, c0))

    def identity(self) -> tuple[int, int]:
        """(inode, size) of the file at the journal's path; FileNotFoundError if there is none.

        Asked through the open descriptor when there is one: the kernel's name for it
        (/proc/self/fd) is still the journal's path unless the file was moved, replaced or
        removed, and seeking to its end gives the size. Not stat(): since Linux 6.13 asking for a
        file's timestamps makes the next write to it stamp a fine-grained mtime, which costs the
        following fdatasync a filesystem-journal commit (a third more per write, measured)."""
        fd, link = self.jfd, self.jlink
        if fd is not None and link is not None:
            try:
                if os.readlink(f"/proc/self/fd/{fd}") == link:
                    return self.jino, os.lseek(fd, 0, os.SEEK_END)
            except OSError:
                pass
        st = os.stat(self.files.journal, follow_symlinks=False)
        return st.st_ino, st.st_size

    def pread(self, offset: int, length: int) -> bytes:
        """Journal bytes, through the open descriptor when there is one (the caller has checked it
        is still the file at the journal's path), else by opening the file."""
        fd = self.jfd
        if fd is None:
            return read_range(self.files.journal, offset, length)
        return pread_all(fd, offset, length)

    def _check_snapshot(self, state: Loaded, snap_st: tuple[int, int, int] | None) -> None:
        """The snapshot changed since we last saw it: another writer refreshed it (fine) or
        another program edited it (to be adopted as the new base by the next write)."""
        state.snap_stat = snap_st
        if snap_st is None:
            state.snap_seq = -1
            state.snap_size = 0  # a missing view is rebuilt at the next write, whatever its size
            return
        try:
            data = fsio.read_bytes(self.files.snapshot)
        except OSError as exc:
            raise translate(exc, f"cannot read {self.files.snapshot}") from exc
        state.snap_size = len(data)
        marker = snapshot.peek(data)
        if marker is not None:
            # Another writer's refresh: intact, so the document need not be parsed at all.
            state.snap_seq = marker.seq
            self.snap_offset = marker.offset
            return
        try:
            decoded = snapshot.decode(data)
        except ValueError:
            state.snap_seq = -1  # unreadable view: rebuilt from the journal at the next refresh
            state.snap_size = 0
            return
        after = decoded.marker.seq if decoded.marker is not None else state.seq
        if after < state.seq:
            tail = journal.scan(read_journal(self.files.journal, 0), base=0, path=self.files.journal,
                                after_seq=0).records
            state.doc = replay([r for r in tail if r[0] > after], decoded.doc, self.files.journal,
                               lenient=True)
        else:
            state.doc = decoded.doc
        state.adopt = "external-edit"
        state.snap_seq = -1
