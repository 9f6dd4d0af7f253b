"""The write path: the per-run lock and ``Writer.commit``.

Every write: take the lock, catch up on records other processes appended (and on a snapshot some
other program edited), apply the event (which may refuse), append the record and fsync, refresh
the snapshot when the policy says so, release. Reading is ``loader``; file names are ``runs``;
archiving and gc are ``archive``. The names of those modules are re-exported here, as the store's
one front door.
"""

from __future__ import annotations

import errno
import fcntl
import os
import zlib

from resumable import fsio
from resumable.core import jsonio
from resumable.core.events import apply
from resumable.core.model import LIVE_RUN_STATES, shape_problem, stamp
from resumable.errors import (
    CorruptRunError,
    InvalidInputError,
    RefusedError,
    StoreError,
)
from resumable.store.files import journal, snapshot
from resumable.store.files.layout import (
    RUNS_SUBDIR,
    RunFiles,
    files_for,
    missing_run,
    resolve_run,
    runs_dir,
    translate,
)
from resumable.store.files.loader import (
    Loaded,
    _pread_all,
    _read_journal,
    _read_range,
    _replay,
    _stat_key,
    load,
    read_doc,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    EventFactory = Callable[[dict[str, Any] | None], dict[str, Any]]

__all__ = [
    "EXACT_SNAPSHOT_BYTES", "RUNS_SUBDIR", "Loaded", "RunFiles", "Writer", "archive_run",
    "delete_run", "files_for", "gc", "load", "missing_run", "read_doc", "resolve_run",
    "runs_dir", "translate",
]

# A snapshot at most this big is rewritten on every write (exact, as the seed's file was); a larger
# one is refreshed once the journal has grown by its size since the last refresh, so snapshot bytes
# written over a run stay within the journal's bytes and a write costs O(1) amortised.
EXACT_SNAPSHOT_BYTES = 64 * 1024

# Journal padding (see ``journal``): when a record would run past the file's end, the write
# carries this many zero bytes after it (half the journal's size, within these bounds, rounded to
# whole 4 KiB blocks), so only about one write in a thousand grows the file.
PAD_MIN = 16 * 1024
PAD_MAX = 1024 * 1024

# TEST SEAM ONLY (reliability goal R6's negative control): with RESUMABLE_UNSAFE_NO_LOCK=1 writers
# skip the flock, so the concurrent-writer test can prove it is able to see lost writes. Never set
# it in production: concurrent writers then overwrite each other's journal records.
UNSAFE_NO_LOCK = os.environ.get("RESUMABLE_UNSAFE_NO_LOCK") == "1"


# --- writing ---------------------------------------------------------------------------------


class Writer:
    """The write side of one run, for one process. Keeps the document in memory between writes
    and catches up under the lock, so a write costs O(1) however many units the run has."""

    def __init__(self, files: RunFiles) -> None:
        self.files = files
        self._lock_fd: int | None = None
        self._jfd: int | None = None
        self._jino = 0
        self._jlink: str | None = None  # the kernel's name for the open journal (/proc/self/fd)
        self._jsize = 0  # the journal file's size, padding included, as last seen
        self._state: Loaded | None = None
        self._snap_offset = 0
        self._refreshes = 0
        self._lazy_view = False
        self.snapshot_error: str | None = None
        # Reads (Run.doc, Run.refresh) catch up without the lock, but what they read is only
        # trusted by a later write once checked under the lock: a record can be rolled back after
        # a failed fsync. These track what still needs that check.
        self._locked = False
        # (offset, length, crc32) of journal bytes applied without the lock, still to be checked.
        self._unverified: tuple[int, int, int] | None = None

    # -- lock --
    def _acquire(self, *, create_dir: bool) -> None:
        parent = self.files.dir
        if create_dir and not os.path.isdir(parent):
            try:
                fsio.mkdir(parent)
            except OSError as exc:
                raise translate(exc, f"cannot create {parent}") from exc
        if self._lock_fd is None:
            try:
                self._lock_fd = fsio.open_fd(
                    self.files.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644
                )
            except FileNotFoundError as exc:
                raise StoreError(
                    f"parent directory of {self.files.snapshot} does not exist — init creates it;"
                    " check the path"
                ) from exc
            except OSError as exc:
                raise translate(exc, f"cannot open lock {self.files.lock}") from exc
        if UNSAFE_NO_LOCK:
            return
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
                self._locked = True
                return
            except InterruptedError:
                continue

    def _release(self) -> None:
        self._locked = False
        if self._lock_fd is not None and not UNSAFE_NO_LOCK:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._jfd, self._lock_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._jfd = self._lock_fd = None
        self._state = None

    # -- catch up --
    def _open_journal(self) -> None:
        if self._jfd is not None:
            os.close(self._jfd)
            self._jfd = None
        existed = os.path.lexists(self.files.journal)
        try:
            self._jfd = fsio.open_fd(self.files.journal, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW)
        except OSError as exc:
            raise translate(exc, f"cannot open {self.files.journal}") from exc
        st = os.fstat(self._jfd)
        self._jino, self._jsize = st.st_ino, st.st_size
        try:
            self._jlink = os.readlink(f"/proc/self/fd/{self._jfd}")
        except OSError:
            self._jlink = None  # no /proc: stat() the path instead
        if not existed:
            try:
                # The new file's directory entry must be durable before any record is acknowledged.
                fsio.fsync_dir(self.files.dir)
            except OSError as exc:
                raise translate(exc, f"cannot create {self.files.journal}") from exc

    def _full_load(self) -> Loaded:
        if self._jfd is not None:
            os.close(self._jfd)
            self._jfd = None
        try:
            st = os.stat(self.files.journal, follow_symlinks=False)
            self._jino, self._jsize = st.st_ino, st.st_size
        except OSError:
            self._jino = self._jsize = 0
        self._state = None
        state = load(self.files)
        self._state = state
        self._unverified = state.applied if not self._locked and state.applied[1] else None
        self._snap_offset = state.snap_offset
        return state

    def _catch_up(self) -> Loaded:
        state = self._state
        if state is None:
            return self._full_load()
        if self._locked and self._unverified is not None:
            start, length, crc = self._unverified
            self._unverified = None
            seen = self._pread(start, length)
            if len(seen) != length or zlib.crc32(seen) != crc:
                return self._full_load()  # something read without the lock was rolled back
        try:
            ino, size = self._journal_identity()
        except FileNotFoundError:
            if state.journal_exists:
                return self._full_load()  # moved away (gc, re-init) by someone else
            ino = size = -1
        if ino >= 0 and (ino != self._jino or size < state.offset):
            return self._full_load()  # replaced (gc, re-init) or truncated by someone else
        if ino >= 0:
            self._jsize = size
        if size > state.offset:
            start = state.offset
            data = journal.read_to_padding(self._pread, start, size)
            try:
                scan = journal.scan(data, base=start, path=self.files.journal, after_seq=state.seq)
                state.doc = _replay(scan.records, state.doc, self.files.journal, lenient=False)
            except CorruptRunError:
                # Possibly a transient view (bytes of a rolled-back record): reload from scratch,
                # which reports the corruption for real if it is real.
                return self._full_load()
            if scan.records:
                state.seq = scan.records[-1][0]
                if not self._locked:
                    read = data[: scan.end - start]
                    if self._unverified is None:
                        self._unverified = (start, len(read), zlib.crc32(read))
                    else:  # contiguous with what was read before: extend the range and its CRC
                        s0, n0, c0 = self._unverified
                        self._unverified = (s0, n0 + len(read), zlib.crc32(read, c0))
            state.offset = scan.end
            state.torn = scan.torn
        try:
            snap_st = _stat_key(os.stat(self.files.snapshot, follow_symlinks=False))
        except FileNotFoundError:
            snap_st = None
        if snap_st != state.snap_stat:
            self._check_snapshot(state, snap_st)
        return state

    def _journal_identity(self) -> tuple[int, int]:
        """(inode, size) of the file at the journal's path; FileNotFoundError if there is none.

        A writer asks through its open descriptor: the kernel's name for it (/proc/self/fd) is
        still the journal's path unless the file was moved, replaced or removed, and seeking to
        its end gives the size. Not stat(): since Linux 6.13 asking for a file's timestamps makes
        the next write to it stamp a fine-grained mtime, which costs the following fdatasync a
        journal commit (a third more per write, measured); 16 writers each stat'ing the journal
        before every write paid it on every write."""
        fd, link = self._jfd, self._jlink
        if fd is not None and link is not None:
            try:
                if os.readlink(f"/proc/self/fd/{fd}") == link:
                    return self._jino, os.lseek(fd, 0, os.SEEK_END)
            except OSError:
                pass
        st = os.stat(self.files.journal, follow_symlinks=False)
        return st.st_ino, st.st_size

    def _pread(self, offset: int, length: int) -> bytes:
        """Journal bytes, through the open journal descriptor when there is one (the caller has
        checked it is still the file at the journal's path), else by opening the file."""
        fd = self._jfd
        if fd is None:
            return _read_range(self.files.journal, offset, length)
        return _pread_all(fd, offset, length)

    def _check_snapshot(self, state: Loaded, snap_st: tuple[int, int, int] | None) -> None:
        """The snapshot changed since we last saw it: another writer refreshed it (fine) or
        another program edited it (adopt it as the new base)."""
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
            self._snap_offset = marker.offset
            return
        try:
            decoded = snapshot.decode(data)
        except ValueError:
            state.snap_seq = -1  # unreadable view: rebuilt from the journal at the next refresh
            state.snap_size = 0
            return
        after = decoded.marker.seq if decoded.marker is not None else state.seq
        if after < state.seq:
            tail = journal.scan(
                _read_journal(self.files.journal, 0), base=0, path=self.files.journal, after_seq=0
            ).records
            state.doc = _replay([r for r in tail if r[0] > after], decoded.doc,
                                self.files.journal, lenient=True)
        else:
            state.doc = decoded.doc
        state.adopt = "external-edit"
        state.snap_seq = -1

    # -- commit --
    def commit(self, make_event: EventFactory, *, init: bool = False, lazy_view: bool = False) -> Any:
        """Apply the event ``make_event(current_doc)`` and make it durable. ``init`` allows
        starting a run (creating the directory, archiving a finished run's files). ``lazy_view``
        leaves even a small run's snapshot to the amortised budget for this write (the journal
        has it; every resumable reader sees it)."""
        self._lazy_view = lazy_view
        if not init and self._state is None and not (
            os.path.lexists(self.files.snapshot) or os.path.lexists(self.files.journal)
        ):
            # Checked before taking the lock, whose file would otherwise be left behind by a
            # write to a run that does not exist (bad input must change nothing on disk).
            if not os.path.isdir(self.files.dir) and not self.files.by_id:
                raise StoreError(
                    f"parent directory of {self.files.snapshot} does not exist — init creates it;"
                    " check the path"
                )
            raise missing_run(self.files)
        self._acquire(create_dir=init)
        try:
            return self._commit_locked(make_event, init=init)
        finally:
            self._release()

    def _commit_locked(self, make_event: EventFactory, *, init: bool) -> Any:
        state = self._catch_up()
        event = make_event(state.doc)
        if init:
            status = state.doc.get("status") if state.doc is not None else None
            # str check first: a hand-edited status may be a list (unhashable: TypeError).
            if isinstance(status, str) and status in LIVE_RUN_STATES:
                raise RefusedError(
                    f"{self.files.snapshot} is a LIVE checkpoint (status={status})."
                    " Resume it — do not re-init. Finalize it first if it is really over."
                )
            if state.doc is not None or state.journal_exists:
                return self._reinit(state, event)
        elif state.doc is None:
            if not os.path.isdir(self.files.dir):
                raise StoreError(
                    f"parent directory of {self.files.snapshot} does not exist — init creates it;"
                    " check the path"
                )
            raise missing_run(self.files)
        if not init and state.doc is not None:
            problem = shape_problem(state.doc)
            if problem is not None:
                raise InvalidInputError(
                    f"{self.files.snapshot}: {problem} — fix the document (or move it aside and"
                    " init afresh); nothing was written"
                )
        pending: list[dict[str, Any]] = []
        base_doc = state.doc  # after any archive above: None for a fresh init
        if state.adopt is not None and state.doc is not None:
            at = event.get("at") or stamp()
            # A copy: apply() below mutates the document in place, and the base record must hold
            # the document as adopted, not as it is after this event.
            adopted = jsonio.loads(jsonio.dumps(state.doc))
            pending.append({"t": "base", "at": at, "reason": state.adopt, "doc": adopted})
        try:
            # Refusals happen here, before anything is written.
            doc, output = apply(base_doc, event)
            pending.append(event)
            self._append(state, pending)
        except (RefusedError, InvalidInputError):
            if pending and pending[-1] is event:
                self._state = None  # raised encoding the record, after apply changed the cache
            raise
        except BaseException:
            # apply() mutates the cached document in place; if the record then never reaches the
            # journal (a value JSON cannot hold, an interrupt), the cache holds a change that was
            # never saved and the next write would put it in the snapshot. Forget the cache.
            self._state = None
            raise
        state.doc = doc
        state.adopt = None
        if event.get("t") == "finalize":
            self._trim_padding(state)
        # A finished run's view is made exact once; an adopted base gets a fresh marker at once.
        self._maybe_refresh(state, force=event.get("t") in ("finalize", "base"))
        return output

    def _append(self, state: Loaded, events: list[dict[str, Any]]) -> None:
        # Encode first: a value JSON cannot hold (e.g. undecodable argv bytes) must be refused
        # before the journal is created or touched; it left an empty journal behind.
        seq = state.seq
        chunks = []
        for ev in events:
            seq += 1
            chunks.append(journal.encode(seq, ev))
        data = b"".join(chunks)
        if self._jfd is None:
            self._open_journal()
        assert self._jfd is not None
        fd = self._jfd
        records = len(data)
        try:
            if state.torn:
                # A torn final fragment was never acknowledged (its fsync never returned).
                fsio.truncate(fd, state.offset, self.files.journal)
                state.torn = 0
                self._jsize = state.offset
            end = state.offset + records
            padded = data + bytes(_padding(end)) if end > self._jsize else data
            os.lseek(fd, state.offset, os.SEEK_SET)
            try:
                fsio.write_all(fd, padded, self.files.journal)
            except OSError as exc:
                if exc.errno != errno.ENOSPC or padded is data:
                    raise
                # The padding does not fit on a nearly full disk; the record alone may.
                fsio.truncate(fd, state.offset, self.files.journal)
                self._jsize = state.offset
                os.lseek(fd, state.offset, os.SEEK_SET)
                fsio.write_all(fd, data, self.files.journal)
                padded = data
            self._jsize = max(self._jsize, state.offset + len(padded))
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
        state.offset += records
        state.journal_exists = True

    def _trim_padding(self, state: Loaded) -> None:
        """A finished run rarely gets another write: give its padding back to the filesystem.
        Not fsynced and allowed to fail: padding that survives is harmless."""
        if self._jfd is None or self._jsize <= state.offset:
            return
        try:
            fsio.truncate(self._jfd, state.offset, self.files.journal)
        except OSError:
            return
        self._jsize = state.offset

    def _rollback(self, state: Loaded) -> bool:
        """After a failed append: cut the journal back to the last acknowledged record (never
        retry the fsync: after a failed fsync the kernel may have dropped the dirty pages, so a
        retry could report success for data that is gone). Then forget the in-memory state."""
        fd = self._jfd
        self._jfd = None
        self._state = None
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

    def _maybe_refresh(self, state: Loaded, *, force: bool) -> None:
        if state.snap_seq == state.seq:
            return
        # Until a snapshot exists its size is estimated, so that a large run does not write a
        # multi-megabyte view right after init only to replace it a few writes later.
        size = state.snap_size or _estimated_snapshot_bytes(state.doc)
        due = (
            force
            # -1 with a file on disk: that view is not known to be a prefix of this journal
            # (edited, or ahead of a journal whose tail was cut). Left in place, a stale view whose
            # marker happens to match the new records' end offset would be served as current.
            or (state.snap_seq < 0 and state.snap_stat is not None)
            or (size <= EXACT_SNAPSHOT_BYTES and not self._lazy_view)
            or state.offset - self._snap_offset >= size
        )
        if due:
            self.refresh_snapshot(state)

    def refresh_snapshot(self, state: Loaded | None = None) -> None:
        """Rewrite the snapshot view to match the journal. A failure here loses nothing (the
        journal already holds the write); it is remembered in ``snapshot_error``."""
        state = state or self._state
        if state is None or state.doc is None:
            return
        if self._refreshes == 0:
            self._sweep_temps()
        self._refreshes += 1
        try:
            # orjson for big documents, and for any process that refreshes more than once (the
            # runner, a long-lived API user): its import costs once what the standard library's
            # pure-Python indenting encoder costs on every refresh. A one-shot CLI call on a small
            # run keeps the cheap import.
            fast = state.snap_size > jsonio.BIG or self._refreshes > 1
            data = snapshot.encode(state.doc, state.seq, state.offset, big=fast)
        except (ValueError, TypeError) as exc:
            # The write this follows is already durable in the journal: never report it as failed.
            self.snapshot_error = f"cannot refresh {self.files.snapshot}: {exc}"
            return
        try:
            # No directory fsync once a journal exists: the journal already holds this state
            # durably, and a rename lost to a power cut leaves the previous snapshot, whose marker
            # makes the journal tail apply.
            fsio.atomic_write(self.files.snapshot, data, durable_rename=not state.journal_exists)
            state.snap_stat = _stat_key(os.stat(self.files.snapshot, follow_symlinks=False))
        except OSError as exc:
            self.snapshot_error = str(translate(exc, f"cannot refresh {self.files.snapshot}"))
            state.snap_stat = None
            state.snap_seq = -1
            return
        self.snapshot_error = None
        state.snap_seq = state.seq
        state.snap_size = len(data)
        self._snap_offset = state.offset

    def _sweep_temps(self) -> None:
        """Remove temp files a killed writer left next to this run's files. Called under the run's
        lock, when no other writer of this run can be between creating and renaming its temp."""
        prefixes = (f".{self.files.stem}.json.tmp.", f".{self.files.stem}.journal.jsonl.tmp.")
        try:
            with os.scandir(self.files.dir) as entries:
                stale = [e.path for e in entries if e.name.startswith(prefixes)]
        except OSError:
            return
        for path in stale:
            try:
                fsio.unlink(path)
            except OSError:
                pass

    def flush(self) -> None:
        """Bring the snapshot up to date with everything this process knows (e.g. at exit)."""
        # Nothing to flush while an adoption is pending (a seed file, v1 or not, that was only
        # read, or an external edit not yet journaled): the file on disk *is* the document, and
        # rewriting it would modify a file that reads must leave alone (and, for an edit, stamp
        # a marker claiming the journal holds it when it does not).
        if self._state is None or self._state.snap_seq == self._state.seq or self._state.adopt:
            return
        self._acquire(create_dir=False)
        try:
            state = self._catch_up()
            if state.doc is not None and state.snap_seq != state.seq and not state.adopt:
                self.refresh_snapshot(state)
        finally:
            self._release()

    def current(self) -> Loaded:
        """Catch up without writing and without the lock."""
        if self._state is None and not (
            os.path.lexists(self.files.snapshot) or os.path.lexists(self.files.journal)
        ):
            return self._full_load()
        return self._catch_up()

    def _reinit(self, state: Loaded, event: dict[str, Any]) -> Any:
        """Start a new run over a finished one, so that a crash at any point leaves either the old
        run or the new one (proof suite R2/R4: moving the old files away first and appending the
        init record afterwards left a window with no run at all).

        Order: hard-link the old files into the archive (the old run stays in place); remove the
        old snapshot (the old journal alone still loads as the old run), durably, so it can never
        be read as the view of the new journal; atomically replace the journal with one holding
        just the init record; then the snapshot is refreshed and the old logs moved aside."""
        doc, output = apply(None, event)  # refusals before anything is written
        record = journal.encode(1, event)
        files = self.files
        from resumable.store.files.archive import _archive_base

        archive, base = _archive_base(files)
        if self._jfd is not None:
            os.close(self._jfd)
            self._jfd = None
        self._state = None
        has_journal = os.path.lexists(files.journal)
        linked: list[tuple[str, str]] = []  # (archive link, live path)
        snap_unlinked = False
        try:
            fsio.mkdir(archive)
            if os.path.lexists(files.snapshot):
                fsio.link(files.snapshot, base + ".json")
                linked.append((base + ".json", files.snapshot))
            if has_journal:
                fsio.link(files.journal, base + ".journal.jsonl")
                linked.append((base + ".journal.jsonl", files.journal))
            fsio.fsync_dir(archive)
            fsio.fsync_dir(files.dir)
            if has_journal and os.path.lexists(files.snapshot):
                # Without a journal the old snapshot stays until the new one replaces it: an
                # unmarked snapshot next to a journal loads as the snapshot (old run).
                fsio.unlink(files.snapshot)
                snap_unlinked = True
                fsio.fsync_dir(files.dir)
            fsio.atomic_write(files.journal, record)
        except OSError as exc:
            err = translate(exc, f"cannot start a new run over {files.snapshot}")
            if not self._undo_reinit(linked, has_journal, snap_unlinked, archive):
                err = type(err)(f"{err} (and the old run could not be put back: the new run may"
                                " or may not have been started)")
            raise err from exc
        new = Loaded(doc, 1, len(record), 0, True, -1, 0, None, 0, None)
        self._state = new
        self._snap_offset = 0
        # An old seed snapshot still in place must be replaced now (unmarked next to the new
        # journal it would read as an edit); otherwise the usual policy applies.
        self._maybe_refresh(new, force=os.path.lexists(files.snapshot))
        if os.path.isdir(files.data_dir) and not os.path.islink(files.data_dir):
            # Old logs: not part of either run's state, so moving them last is safe.
            try:
                fsio.rename_noclobber_dir(files.data_dir, base + ".d")
                fsio.fsync_dir(archive)
            except OSError:
                pass
        return output

    def _undo_reinit(self, linked: list[tuple[str, str]], had_journal: bool, snap_unlinked: bool,
                     archive: str) -> bool:
        """A failed re-init (e.g. the directory fsync after the journal replace failed, so the new
        journal may be visible): put the old run's files back from their archive links, so the
        state is the last acknowledged one. False if that failed too."""
        files = self.files
        try:
            for link, live in linked:
                if live == files.snapshot and not snap_unlinked:
                    fsio.unlink(link)  # still in place: drop the archive copy
                elif os.path.lexists(live) and os.path.samefile(link, live):
                    fsio.unlink(link)  # the journal was never replaced
                else:
                    fsio.replace(link, live)  # the old file back (over the new journal)
            if not had_journal and os.path.lexists(files.journal):
                fsio.unlink(files.journal)
            fsio.fsync_dir(files.dir)
            fsio.fsync_dir(archive)
        except OSError:
            return False
        return True


def _padding(end: int) -> int:
    """Zero bytes to write after a record ending at ``end`` that would grow the journal."""
    pad = min(max(end // 2, PAD_MIN), PAD_MAX)
    return -(-(end + pad) // 4096) * 4096 - end


def _estimated_snapshot_bytes(doc: dict[str, Any] | None) -> int:
    """About what the pretty snapshot of ``doc`` will weigh (a fresh unit prints ~170 bytes)."""
    if doc is None:
        return 0
    units = doc.get("units")
    return 512 + 170 * (len(units) if isinstance(units, dict) else 0)


def archive_run(files: RunFiles) -> str:
    from resumable.store.files.archive import archive_run as _archive_run

    return _archive_run(files)


def gc(directory: str, keep_days: float, *, now: float | None = None) -> tuple[int, str]:
    from resumable.store.files.archive import gc as _gc

    return _gc(directory, keep_days, now=now)


def delete_run(files: RunFiles) -> list[str]:
    from resumable.store.files.archive import delete_run as _delete_run

    return _delete_run(files)
