"""The embedded default store: runs in a runs directory (``Backend`` protocol, ``store.backend``)."""

from __future__ import annotations

import os

from resumable.core.model import refuse_newer
from resumable.core.stamps import stamp
from resumable.errors import NewerFormatError, ResumableError, StoreError
from resumable.store.files.handle import FileRunHandle
from resumable.store.files.layout import RunsDir, files_for, resolve_run
from resumable.store.files.loader import load

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from resumable.store.files.lease import FileRunnerLease
    from resumable.store.values import GcResult, RunEntry


class FileBackend:
    def __init__(self, runs: RunsDir) -> None:
        self.runs = runs

    @property
    def description(self) -> str:
        return f"runs directory {self.runs.path} ({self.runs.how})"

    @property
    def root(self) -> str:
        return self.runs.path

    def open(self, run: str) -> CheckedRunHandle:
        return CheckedRunHandle(resolve_run(run, self.runs.path))

    def list_runs(self) -> list[RunEntry]:
        entries = [read_entry(path) for path in run_files(self.runs.path)]
        # Stable sort on the key, then the name, so ties print in a fixed order.
        entries.sort(key=lambda e: e.name)
        entries.sort(key=lambda e: e.sort_key, reverse=True)
        return entries

    def gc(self, keep_days: float, *, now: float | None = None) -> GcResult:
        from resumable.store.files import archive  # gc and delete: not on a seed verb's path
        from resumable.store.values import GcResult

        moved, where = archive.gc(self.runs.path, keep_days, now=now)
        return GcResult(moved, where)

    def delete(self, run: str) -> list[str]:
        from resumable.store.files import archive

        return archive.delete_run(resolve_run(run, self.runs.path))

    def lease(self, run_id: str) -> FileRunnerLease:
        from resumable.store.files.lease import FileRunnerLease  # the runner's, not the seed verbs'

        return FileRunnerLease(resolve_run(run_id, self.runs.path).runner_lock, run_id)

    def close(self) -> None:
        pass


class CheckedRunHandle(FileRunHandle):
    """The handle every reader gets: a document a newer resumable wrote is refused in one line
    (``NewerFormatError``), never handed out to be misread. Writes refuse it on their own path
    (``shape_problem``)."""

    __slots__ = ()

    def load(self) -> dict[str, Any] | None:
        doc = super().load()
        if doc is not None:
            refuse_newer(doc, self.run_id)
        return doc


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
    # Here, not at the top: listings are not on a seed write's path, and a module fewer to import
    # is a tenth of a millisecond off every `resumable unit` call.
    from resumable.store.values import RunEntry

    name = os.path.basename(path)
    try:
        doc = load(files_for(path)).doc
        if doc is None:
            raise StoreError(f"{path}: no such run")
        refuse_newer(doc, name.removesuffix(".json"))
    except ResumableError as exc:
        return RunEntry(name, path, None, str(exc), _mtime_stamp(path), newer=isinstance(exc, NewerFormatError))
    key = ""
    for k in ("updatedAt", "createdAt"):
        v = doc.get(k)
        if isinstance(v, str) and v:
            key = v
            break
    return RunEntry(name, path, doc, None, key or _mtime_stamp(path))
