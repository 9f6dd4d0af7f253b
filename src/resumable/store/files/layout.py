"""Where runs live and what their files are called.

Files of a run with stem S (``<runs-dir>/<id>``, or a ``.json`` path given by the user minus
``.json``):

    S.json            the snapshot view (pretty JSON + "_journal" marker; see snapshot.py)
    S.journal.jsonl   the journal: the source of truth and the run's whole history
    S.lock            flock lock file serialising writers; never unlinked (see lock.py)
    S.index           a large run's unit index, derived from the journal (see index.py)
    S.runner.lock     the runner lease (see lease.py)
    S/                per-run data (the runner's logs)
    S.events.jsonl    ulpi's opt-in event log: read, adopted when ahead, never written
                      (see ulpi_adoption.py)

Paths are plain strings here and in the store: pathlib's import alone costs more than a small
write, and `resumable unit` is called from shell loops thousands of times.
"""

from __future__ import annotations

import errno
import os
import time

from resumable import fsio
from resumable.core.model import check_run_id
from resumable.errors import DiskFullError, InvalidInputError, NoRunError, StoreError

RUNS_SUBDIR = os.path.join(".resumable", "runs")
ULPI_RUNS_SUBDIR = os.path.join(".ulpi", "runs")  # the ulpi tools' runs directory
NAME_MAX = 255  # bytes in one path component on the filesystems we run on
# The longest name a run's files take is its journal's temp file while it is rewritten,
# ``.<stem>.journal.jsonl.tmp.<pid>`` (a pid has at most 7 digits): a stem past this would have its
# snapshot, index or journal refused by the file system at a later write, not up front.
MAX_STEM = NAME_MAX - len("..journal.jsonl.tmp.") - 7


class RunsDir:
    """A runs directory and how it was found (``status`` says which, for a ulpi user's sake)."""

    __slots__ = ("how", "path")

    def __init__(self, path: str, how: str) -> None:
        self.path = path
        self.how = how


def expand(path: str, what: str) -> str:
    """One rule for ``~`` wherever a directory comes from (flag, environment, job file): expanded,
    as a shell would for an unquoted word, then made absolute. Components longer than a file name
    may be are refused here, in one line, rather than as an OS error halfway through a write."""
    if not path:
        raise InvalidInputError(f"{what} is empty: give a directory, or leave it out")
    if "\x00" in path:
        raise InvalidInputError(f"{what} contains a NUL byte")
    full = os.path.abspath(os.path.expanduser(path))
    for part in full.split(os.sep):
        if len(os.fsencode(part)) > NAME_MAX:
            raise InvalidInputError(
                f"{what} has a path component of {len(os.fsencode(part))} bytes; the limit is {NAME_MAX}")
    return full


def find_runs_dir(explicit: str | os.PathLike[str] | None = None, *, start: str | None = None) -> RunsDir:
    """``explicit`` (``--dir``), else ``$RESUMABLE_DIR``, else ``$ULPI_RUNS_DIR`` (absolute only, as
    ulpi), else the nearest ``.resumable/runs`` or ``.ulpi/runs`` walking up from ``start`` (the
    current directory, or a job file's directory) as git finds ``.git``, else
    ``<start>/.resumable/runs``. Never creates anything."""
    if explicit is not None:
        return RunsDir(expand(os.fspath(explicit), "--dir"), "given with --dir")
    env = os.environ.get("RESUMABLE_DIR")
    if env:
        return RunsDir(expand(env, "RESUMABLE_DIR"), "from RESUMABLE_DIR")
    ulpi_env = os.environ.get("ULPI_RUNS_DIR")
    if ulpi_env and os.path.isabs(ulpi_env):
        return RunsDir(expand(ulpi_env, "ULPI_RUNS_DIR"), "from ULPI_RUNS_DIR")
    origin = os.path.abspath(start) if start is not None else os.getcwd()
    parent = origin
    while True:
        for sub in (RUNS_SUBDIR, ULPI_RUNS_SUBDIR):
            candidate = os.path.join(parent, sub)
            if os.path.isdir(candidate):
                return RunsDir(candidate, f"found walking up from {origin}")
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    return RunsDir(os.path.join(origin, RUNS_SUBDIR), f"none found walking up from {origin}: the default")


GITIGNORE = b"# Created by resumable: the runs kept here stay out of version control.\n*\n"


def create_runs_dir(path: str) -> None:
    """Create a runs directory (and its parents) that does not exist yet, with a ``.gitignore`` that
    ignores everything in it, as pytest does for its cache: a run started inside a git repository
    leaves nothing for `git status` to list. A directory that exists is left as it is."""
    if os.path.isdir(path):
        return
    try:
        fsio.mkdir(path)
    except OSError as exc:
        raise translate(exc, f"cannot create runs directory {path}") from exc
    try:
        fd = fsio.open_regular(os.path.join(path, ".gitignore"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError:
        return  # another process created it first, or it cannot be written: a convenience only
    try:
        os.write(fd, GITIGNORE)
    except OSError:
        pass
    finally:
        os.close(fd)


class RunFiles:
    """The paths of one run's files (strings)."""

    __slots__ = ("by_id", "data_dir", "dir", "events", "index", "journal", "lock", "runner_lock", "snapshot",
                 "stem")

    def __init__(self, snapshot_path: str, *, by_id: bool = False) -> None:
        head, name = os.path.split(snapshot_path)
        self.stem = name[: -len(".json")]
        self.dir = head or "."
        self.snapshot = snapshot_path
        self.journal = os.path.join(head, f"{self.stem}.journal.jsonl")
        self.lock = os.path.join(head, f"{self.stem}.lock")
        self.index = os.path.join(head, f"{self.stem}.index")  # a large run's unit index (index.py)
        self.runner_lock = os.path.join(head, f"{self.stem}.runner.lock")
        self.data_dir = os.path.join(head, self.stem)  # runner logs and other per-run files
        self.events = os.path.join(head, f"{self.stem}.events.jsonl")  # ulpi's eventLogPath
        self.by_id = by_id  # named by id (inside the runs dir), not by a .json path


def files_for(snapshot_path: str | os.PathLike[str], *, by_id: bool = False) -> RunFiles:
    return RunFiles(os.fspath(snapshot_path), by_id=by_id)


def check_status_path(text: str) -> str:
    """``text``, a run's ``.json`` status file, if every file of the run can be named beside it."""
    name = os.path.basename(text)
    if name == ".json":
        raise InvalidInputError(f"status file name {text!r} has no stem")
    if len(os.fsencode(name)) > MAX_STEM + len(".json"):
        raise InvalidInputError(f"status file name is {len(os.fsencode(name))} bytes; too long (the limit is"
                                f" {MAX_STEM + len('.json')}, for its journal's and temp files' names to fit)")
    return text


def resolve_run(run: str | os.PathLike[str], runs_dir: str) -> RunFiles:
    """A path ending in ``.json`` is used as given (ulpi's form); anything else is a run id
    meaning ``<runs-dir>/<id>.json``."""
    text = os.fspath(run)
    if "\x00" in text:
        raise InvalidInputError("run argument contains a NUL byte")
    if text.endswith(".json"):
        return files_for(check_status_path(text))
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
    if exc.errno == errno.ENAMETOOLONG:
        return StoreError(f"{what}: file name too long — use a shorter name")
    return StoreError(f"{what}: {exc.strerror or exc}")


def check_log_dir(directory: str, stem: str, *, create: bool, entries: bool = True) -> str:
    """``<directory>/<stem>/logs`` (a run's step logs), checked as directories opened without
    following links and, with ``entries``, holding no link or other non-regular file: a step's
    output truncates its log, and a link planted there (at a directory, or at a log a step will
    write) would have it overwrite the link's target. Created when missing and ``create``; a
    missing one is fine otherwise. Raises StoreError (one line) for anything planted."""
    logs = os.path.join(directory, stem, "logs")
    try:
        fd = fsio.open_dirs(directory, [stem, "logs"], create=create)
    except FileNotFoundError:
        if create:
            raise
        return logs
    except OSError as exc:
        raise translate(exc, f"cannot write step logs: {exc.filename or logs}") from exc
    if not entries:
        os.close(fd)
        return logs
    try:
        key = _scan_key(fd)
        if _scanned_clean(directory, stem, key):
            return logs
        with os.scandir(fd) as found:
            for e in found:
                if e.is_symlink():
                    raise translate(OSError(errno.ELOOP, "is a symbolic link"),
                                    f"cannot write step logs: {os.path.join(logs, e.name)}")
                if not e.is_file(follow_symlinks=False) and not e.is_dir(follow_symlinks=False):
                    raise translate(fsio.not_regular(os.path.join(logs, e.name)),
                                    f"cannot write step logs: {os.path.join(logs, e.name)}")
    except OSError as exc:
        raise translate(exc, f"cannot write step logs: {logs}") from exc
    finally:
        os.close(fd)
    _remember_clean(directory, stem, key)
    return logs


# A run of 100,000 steps leaves 100,000 logs, and every runner that takes the lease would list them
# all. A directory's entries change only with its mtime and ctime (creating, removing or renaming
# an entry sets both; ctime cannot be set back, not even by utime), so a listing found clean is
# kept in the runs directory's cache (``cache``, the owner's alone) under the directory's identity
# and those times, and not made again while they hold. Never for a directory changed in the last
# seconds: an entry made within the same timestamp tick as the last change would leave them equal.
_SETTLED_NS = 2_000_000_000


def _scan_key(fd: int) -> bytes | None:
    st = os.fstat(fd)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) <= _SETTLED_NS:
        return None
    return b"%d %d %d %d" % (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _scan_name(stem: str) -> str:
    import hashlib

    return "logscan." + hashlib.sha256(stem.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _scanned_clean(directory: str, stem: str, key: bytes | None) -> bool:
    if key is None:
        return False
    from resumable.store.files import cache

    return cache.read(directory, _scan_name(stem)) == key


def _remember_clean(directory: str, stem: str, key: bytes | None) -> None:
    """Best effort, and only in a runs directory that has a cache already (never a new directory
    beside a run named by its .json path)."""
    from resumable.store.files import cache

    if key is None or not os.path.isdir(os.path.join(directory, cache.DIR)):
        return
    try:
        cache.write(directory, _scan_name(stem), key)
    except (OSError, ValueError):
        pass


def missing_run(files: RunFiles) -> StoreError | NoRunError:
    """A run that does not exist: exit 3 when named by id (no run matches), exit 1 for a
    .json path, as checkpoint.mjs's `cannot read/parse` was."""
    message = (
        f"cannot read/parse {files.snapshot}: no such run — create it with `resumable init`"
    )
    return NoRunError(message) if files.by_id else StoreError(message)


def no_parent(files: RunFiles) -> StoreError:
    return StoreError(
        f"parent directory of {files.snapshot} does not exist — init creates it; check the path")
