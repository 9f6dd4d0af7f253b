"""The embedded default store: runs in a runs directory (``Backend`` protocol, ``store.backend``)
and a run in one (``RunHandle``). One module for both: each module a low-level verb imports costs every
call a tenth of a millisecond or more.
"""

from __future__ import annotations

import os
import time

from resumable.core.model import is_head, refuse_unreadable, unreadable
from resumable.core.stamps import stamp
from resumable.errors import NewerFormatError, ResumableError, StoreError
from resumable.store.files import journal
from resumable.store.files.layout import (
    RunFiles,
    RunsDir,
    check_log_dir,
    files_for,
    missing_run,
    no_parent,
    resolve_run,
)
from resumable.store.files.loader import digest, load, read_journal
from resumable.store.files.lock import runner_holder
from resumable.store.files.writer import Writer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterator, Sequence
    from typing import Any, TypeVar

    Picked = TypeVar("Picked")

    from resumable.core.types import Event
    from resumable.store.backend import LeaseState
    from resumable.store.files.digests import DigestView
    from resumable.store.files.lease import FileRunnerLease
    from resumable.store.values import Doc, GcResult, Record, RunEntry


class FileBackend:
    def __init__(self, runs: RunsDir) -> None:
        self.runs = runs

    @property
    def description(self) -> str:
        return f"runs directory {self.runs.path} ({self.runs.how})"

    @property
    def root(self) -> str:
        return self.runs.path

    def open(self, run: str) -> FileRunHandle:
        return FileRunHandle(resolve_run(run, self.runs.path))

    def list_runs(self) -> list[RunEntry]:
        entries = [read_entry(path) for path in run_files(self.runs.path)]
        # Stable sort on the key, then the name, so ties print in a fixed order.
        entries.sort(key=lambda e: e.name)
        entries.sort(key=lambda e: e.sort_key, reverse=True)
        return entries

    def gc(self, keep_days: float, *, now: float | None = None) -> GcResult:
        from resumable.store.files import archive  # gc and delete: not on a low-level verb's path
        from resumable.store.values import GcResult

        moved, where = archive.gc(self.runs.path, keep_days, now=now)
        return GcResult(moved, where)

    def delete(self, run: str) -> list[str]:
        from resumable.store.files import archive

        return archive.delete_run(resolve_run(run, self.runs.path))

    def read_cache(self, name: str) -> bytes | None:
        from resumable.store.files import cache

        return cache.read(self.runs.path, name)

    def write_cache(self, name: str, data: bytes) -> None:
        from resumable.store.files import cache

        cache.write(self.runs.path, name, data)

    def lease(self, run_id: str) -> FileRunnerLease:
        from resumable.store.files.lease import FileRunnerLease  # the runner's, not the low-level verbs'

        return FileRunnerLease(resolve_run(run_id, self.runs.path).runner_lock, run_id)

    def runner_leases(self) -> list[LeaseState]:
        from resumable.store.files.survey import survey

        try:
            return survey(self.runs.path)
        except OSError as exc:
            raise StoreError(f"cannot list {self.runs.path}: {exc.strerror or exc} — check its permissions") from exc

    def close(self) -> None:
        pass


class FileRunHandle:
    """The handle every reader gets (``RunHandle``, ``store.backend``)."""

    __slots__ = ("files", "writer")

    def __init__(self, files: RunFiles) -> None:
        self.files = files
        self.writer = Writer(files)

    @property
    def run_id(self) -> str:
        return self.files.stem

    @property
    def location(self) -> str:
        return self.files.snapshot

    @property
    def warning(self) -> str | None:
        return self.writer.snapshot_error

    def exists(self) -> bool:
        return self.writer.exists()

    def load(self) -> Doc | None:
        """The document, refused in one line when a newer resumable wrote it or it is malformed
        (``refuse_unreadable``), never handed out to be misread. Writes refuse it on their own path
        (``shape_problem``)."""
        doc = self.writer.current().doc
        return None if doc is None else refuse_unreadable(doc, self.run_id, where_held(self.files))

    def load_digests(self) -> DigestView | None:
        """The run's head and every unit's digest through its index (``store.files.digests``), or
        None when only the whole document answers: no index it can vouch for, or this handle
        holds the document already (then ``load`` costs nothing)."""
        if self.writer.cursor.state is not None:
            return None
        from resumable.store.files import digests  # the counting readers', not a write's

        return digests.load(self.files)  # None for an unreadable document: its load says why

    def digest(self, pick: Callable[[str, Any], Picked]) -> tuple[Doc, dict[str, Picked]] | None:
        found = digest(self.files, pick)
        if found is None:
            return None
        head = found[0]
        if not is_head(head):
            unreadable({**head, "units": {}}, self.run_id, where_held(self.files))
        return head, found[1]

    def read(self) -> Doc:
        doc = self.load()
        if doc is None:
            if not self.files.by_id and not os.path.isdir(self.files.dir):
                raise no_parent(self.files)
            raise missing_run(self.files)
        return doc

    def commit(self, events: Sequence[Event], *, lazy_view: bool = False) -> list[Any]:
        return self.writer.commit(events, lazy_view=lazy_view)

    def runner_holder(self) -> dict[str, object] | None:
        """The live runner holding this run's lease, as its lease file describes it (pid, host,
        startedAt, secret), or None when no runner holds the run."""
        return runner_holder(self.files)

    def flush(self) -> None:
        self.writer.flush()

    def history(self, since: int = 0) -> Iterator[Record]:
        from resumable.store.values import Record  # `resumable log`'s, not a low-level verb's

        if not os.path.lexists(self.files.journal):
            return
        data = read_journal(self.files.journal, 0)
        scan = journal.scan(data, base=0, path=self.files.journal, after_seq=0)
        for seq, event in scan.records:
            if seq > since:
                # The record as this version writes it (a 0.1.0 line is shown in today's form).
                raw = journal.encode(seq, event).rstrip(b"\n").decode("utf-8", "surrogateescape")
                yield Record(seq, event, raw)

    def change_token(self) -> Hashable:
        out: list[int] = []
        for path in (self.files.snapshot, self.files.journal, self.files.events):
            try:
                st = os.stat(path, follow_symlinks=False)
                out += [st.st_ino, st.st_size, st.st_mtime_ns]
            except OSError:
                out += [-1, -1, -1]
        return tuple(out)

    def wait_for_change(self, token: Hashable, timeout: float) -> Hashable:
        deadline = time.monotonic() + timeout
        while True:
            current = self.change_token()
            left = deadline - time.monotonic()
            if current != token or left <= 0:
                return current
            time.sleep(min(left, 0.25))

    def log_dir(self) -> str:
        """``<run>/logs``, created if missing, its directories checked for planted links
        (``layout.check_log_dir``; the runner lease checks the logs in it as it is taken, and every
        log is opened without following a link anyway)."""
        return check_log_dir(self.files.dir, os.path.basename(self.files.data_dir), create=True, entries=False)

    def put_blob(self, data: bytes) -> str:
        from resumable.store.files import blobs  # hashlib's import is more than a low-level verb may spend

        return blobs.put(self.files, data)

    def get_blob(self, ref: str) -> bytes:
        from resumable.store.files import blobs

        return blobs.get(self.files, ref)

    def foreign(self, ref: str | None = None) -> str | None:
        from resumable.store.files import blobs

        return blobs.foreign(self.files, ref)

    def close(self) -> None:
        try:
            self.writer.flush()
        finally:
            self.writer.close()


def where_held(files: RunFiles) -> str:
    """The files a run's document comes from, for a message about the document."""
    return ", ".join(p for p in (files.snapshot, files.journal) if os.path.lexists(p)) or files.snapshot


def run_files(directory: str) -> list[str]:
    """Every ``*.json`` regular file directly in the runs directory (links are not followed; the
    archive and the runs' data directories are not runs)."""
    try:
        with os.scandir(directory) as entries:
            return sorted(e.path for e in entries if e.name.endswith(".json") and e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StoreError(f"cannot list {directory}: {exc.strerror or exc}") from exc


def _mtime_stamp(path: str) -> str:
    try:
        return stamp(os.stat(path, follow_symlinks=False).st_mtime)
    except OSError:
        return ""


def read_entry(path: str) -> RunEntry:
    """One run file as a listing shows it, never raising for a bad file."""
    # Here, not at the top: listings are not on a low-level verb's write path, and a module fewer to import
    # is a tenth of a millisecond off every `resumable unit` call.
    from resumable.store.values import RunEntry

    name = os.path.basename(path)
    files = files_for(path)
    try:
        raw = load(files).doc
        if raw is None:
            raise StoreError(f"{path}: no such run")
        doc = refuse_unreadable(raw, name.removesuffix(".json"), where_held(files))
    except ResumableError as exc:
        return RunEntry(name, path, None, str(exc), _mtime_stamp(path), newer=isinstance(exc, NewerFormatError))
    key = ""
    for k in ("updatedAt", "createdAt"):
        v = doc.get(k)
        if isinstance(v, str) and v:
            key = v
            break
    return RunEntry(name, path, doc, None, key or _mtime_stamp(path))
