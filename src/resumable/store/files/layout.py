"""Where runs live and what their files are called.

Files of a run with stem S (``<runs-dir>/<id>`` or a ``.json`` path given by the user, minus
``.json``):

    S.json            the snapshot view (pretty JSON + "_journal" marker; see snapshot.py)
    S.journal.jsonl   the journal: the source of truth and the run's whole history
    S.lock            flock lock file serialising writers; never unlinked, because unlinking a
                      lock file lets a waiter lock an orphaned inode while a newcomer locks a new one
    S/                per-run data (the runner's logs)

Paths are plain strings here and in the store: pathlib's import alone costs more than a small
write, and `resumable unit` is called from shell loops thousands of times. The API offers Paths.
"""

from __future__ import annotations

import errno
import os

from resumable import fsio
from resumable.core.model import check_run_id
from resumable.errors import DiskFullError, InvalidInputError, NoRunError, StoreError

RUNS_SUBDIR = os.path.join(".resumable", "runs")


# --- where runs live -------------------------------------------------------------------------


def runs_dir(explicit: str | os.PathLike[str] | None = None, *, create: bool = False) -> str:
    """``explicit`` (``--dir``), else ``$RESUMABLE_DIR``, else the nearest ``.resumable/runs``
    walking up from the current directory (as git finds ``.git``), else ``./.resumable/runs``."""
    if explicit is None:
        explicit = os.environ.get("RESUMABLE_DIR") or None
    if explicit is not None:
        found = os.fspath(explicit)
        if not found:
            raise InvalidInputError("--dir is empty: give the runs directory, or leave --dir out")
    else:
        cwd = os.getcwd()
        found = os.path.join(cwd, RUNS_SUBDIR)
        parent = cwd
        while True:
            candidate = os.path.join(parent, RUNS_SUBDIR)
            if os.path.isdir(candidate):
                found = candidate
                break
            up = os.path.dirname(parent)
            if up == parent:
                break
            parent = up
    if create:
        try:
            fsio.mkdir(found)
        except OSError as exc:
            raise translate(exc, f"cannot create runs directory {found}") from exc
    return found


class RunFiles:
    """The paths of one run's files (strings)."""

    __slots__ = ("by_id", "data_dir", "dir", "journal", "lock", "snapshot", "stem")

    def __init__(self, snapshot_path: str, *, by_id: bool = False) -> None:
        head, name = os.path.split(snapshot_path)
        self.stem = name[: -len(".json")]
        self.dir = head or "."
        self.snapshot = snapshot_path
        self.journal = os.path.join(head, f"{self.stem}.journal.jsonl")
        self.lock = os.path.join(head, f"{self.stem}.lock")
        self.data_dir = os.path.join(head, self.stem)  # runner logs and other per-run files
        self.by_id = by_id  # named by id (inside the runs dir), not by a .json path


def files_for(snapshot_path: str | os.PathLike[str], *, by_id: bool = False) -> RunFiles:
    return RunFiles(os.fspath(snapshot_path), by_id=by_id)


def resolve_run(run: str | os.PathLike[str], runs_dir: str) -> RunFiles:
    """A path ending in ``.json`` is used as given (the seed's form); anything else is a run id
    meaning ``<runs-dir>/<id>.json``."""
    text = os.fspath(run)
    if "\x00" in text:
        raise InvalidInputError("run argument contains a NUL byte")
    if text.endswith(".json"):
        if os.path.basename(text) == ".json":
            raise InvalidInputError(f"status file name {text!r} has no stem")
        return files_for(text)
    check_run_id(text)
    return files_for(os.path.join(runs_dir, f"{text}.json"), by_id=True)


# --- errors at the I/O boundary --------------------------------------------------------------


def translate(exc: OSError, what: str) -> StoreError:
    """One-line StoreError for an OSError, saying what to do."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(f"{what}: no space left on device — free some space and re-run")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StoreError(f"{what}: {exc.strerror} — check the directory's permissions")
    if exc.errno == errno.ELOOP:
        return StoreError(f"{what}: is a symbolic link; resumable does not follow links in runs")
    if exc.errno == errno.ENOENT:
        return StoreError(f"{what}: {exc.strerror} — check the path (init creates it)")
    return StoreError(f"{what}: {exc.strerror or exc}")


def missing_run(files: RunFiles) -> StoreError | NoRunError:
    """A run that does not exist: exit 3 when named by id (no run matches), exit 1 for a
    .json path, as the seed's `cannot read/parse` was."""
    message = (
        f"cannot read/parse {files.snapshot}: no such run — create it with `resumable init`"
    )
    return NoRunError(message) if files.by_id else StoreError(message)
