"""Moving runs aside: archiving (gc, and init over a finished run) and deleting (--reset).

Each operation holds the run's writer lock, so no writer is half way through a write, and never
overwrites an earlier archive.
"""

from __future__ import annotations

import os
import stat
import time

from resumable import fsio
from resumable.core.model import newer_version
from resumable.core.stamps import parse_stamp
from resumable.errors import NoRunError, StoreError
from resumable.store.files.layout import RunFiles, files_for, translate
from resumable.store.files.loader import load
from resumable.store.files.lock import held_lock

_SUFFIXES = (".json", ".journal.jsonl", ".d", ".events.jsonl")


def delete_run(files: RunFiles) -> list[str]:
    """Delete a run's snapshot, journal and data directory (logs) under the run's lock; the lock
    file itself stays (it is never unlinked). ulpi's event log, a file resumable did not write,
    is moved into the archive rather than deleted (left in place, it would bring the run back).
    Returns the names of what was deleted or moved."""
    removed: list[str] = []
    if not os.path.isdir(files.dir):
        return removed
    lock = held_lock(files)
    try:
        for path in (files.snapshot, files.journal, files.index):
            if os.path.lexists(path):
                try:
                    fsio.unlink(path)
                except OSError as exc:
                    raise translate(exc, f"cannot delete {path}") from exc
                removed.append(os.path.basename(path))
        if is_real_dir(files.data_dir):
            import shutil

            shutil.rmtree(files.data_dir, ignore_errors=True)
            removed.append(os.path.basename(files.data_dir) + "/")
        if os.path.lexists(files.events):
            moved = park_event_log(files)
            removed.append(f"{os.path.basename(files.events)} (moved to {moved})")
        try:
            fsio.fsync_dir(files.dir)
        except OSError as exc:
            raise translate(exc, f"cannot delete the files of {files.snapshot}") from exc
    finally:
        lock.close()
    return removed


def open_archive(files: RunFiles) -> tuple[str, int]:
    """(path, descriptor) of ``<dir>/archive``, created if missing, opened without following a
    link: a link planted there would move runs out of the runs directory."""
    archive = os.path.join(files.dir, "archive")
    return archive, fsio.open_dirs(files.dir, ["archive"], create=True)


def archive_base(files: RunFiles, archive: str, archive_fd: int) -> str:
    """A base path in the archive with one free name for every file of this run (snapshot,
    journal, data dir): ``archive/<stem>`` as ulpi names it, with a time suffix only when that
    name is taken, so files stay recognisably together and nothing archived is overwritten."""

    def taken(base: str) -> bool:
        for sfx in _SUFFIXES:
            try:
                os.stat(os.path.basename(base) + sfx, dir_fd=archive_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            return True
        return False

    base = os.path.join(archive, files.stem)
    if not taken(base):
        return base
    tag = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = os.path.join(archive, f"{files.stem}.{tag}")
    n = 0
    while taken(base):
        n += 1
        base = os.path.join(archive, f"{files.stem}.{tag}.{n}")
    return base


def is_real_dir(path: str) -> bool:
    """A directory that is not a link (a link in place of a run's data directory stays put)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def archive_run(files: RunFiles) -> str:
    """Move a run's snapshot, journal and data dir into ``<dir>/archive/`` under names that never
    overwrite an earlier archive. The caller holds the run's lock."""
    try:
        archive, afd = open_archive(files)
    except OSError as exc:
        raise translate(exc, f"cannot archive {files.snapshot}: {os.path.join(files.dir, 'archive')}") from exc
    try:
        base = archive_base(files, archive, afd)
        if os.path.lexists(files.index):
            fsio.unlink(files.index)  # derived from the journal: not worth keeping in an archive
        if os.path.lexists(files.snapshot):
            fsio.rename_noclobber(files.snapshot, base + ".json", dst_dir_fd=afd)
        if os.path.lexists(files.journal):
            fsio.rename_noclobber(files.journal, base + ".journal.jsonl", dst_dir_fd=afd)
        if is_real_dir(files.data_dir):
            fsio.rename_noclobber_dir(files.data_dir, base + ".d", dst_dir_fd=afd)
        if os.path.lexists(files.events):  # moved, never rewritten: its bytes stay ulpi's
            fsio.rename_noclobber(files.events, base + ".events.jsonl", dst_dir_fd=afd)
        fsio.fsync_fd(afd, archive)
        fsio.fsync_dir(files.dir)
    except OSError as exc:
        raise translate(exc, f"cannot archive {files.snapshot}") from exc
    finally:
        os.close(afd)
    return base


def park_event_log(files: RunFiles) -> str:
    """Move ulpi's event log of a run into ``<dir>/archive`` (never overwriting anything there);
    returns where it went. Raises StoreError."""
    try:
        archive, afd = open_archive(files)
    except OSError as exc:
        raise translate(exc, f"cannot move {files.events} into {os.path.join(files.dir, 'archive')}") from exc
    try:
        target = archive_base(files, archive, afd) + ".events.jsonl"
        fsio.rename_noclobber(files.events, target, dst_dir_fd=afd)
        fsio.fsync_fd(afd, archive)
        fsio.fsync_dir(files.dir)
    except OSError as exc:
        raise translate(exc, f"cannot move {files.events} into {archive}") from exc
    finally:
        os.close(afd)
    return target


# --- gc --------------------------------------------------------------------------------------


def gc(directory: str, keep_days: float, *, now: float | None = None) -> tuple[int, str]:
    """Archive terminal (done/aborted) runs last updated more than ``keep_days`` ago. Each run is
    examined under its own lock; live runs and unreadable files are never touched."""
    archive = os.path.join(directory, "archive")
    if not os.path.isdir(directory):
        return -1, archive
    now = time.time() if now is None else now
    cutoff = now - keep_days * 86400
    moved = 0
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.endswith(".json") or os.path.islink(path) or not os.path.isfile(path):
            continue
        files = files_for(path)
        try:
            lock = held_lock(files)
        except StoreError:
            continue
        try:
            try:
                doc = load(files).doc
            except (StoreError, NoRunError):
                continue
            if doc is not None and newer_version(doc) is not None:
                continue  # a newer resumable's run: what its status means is not ours to judge
            status = doc.get("status") if doc is not None else None
            # Only done/aborted (needs_attention is live to init, so it is live here too); checked
            # as a str first (a hand-edited list status is unhashable).
            if doc is None or not isinstance(status, str) or status not in ("done", "aborted"):
                continue
            updated = parse_stamp(doc.get("updatedAt"))
            if updated is None:
                # No usable stamp: the file's own age stands in (ulpi archived these blindly).
                try:
                    updated = os.stat(path).st_mtime
                except OSError:
                    continue
            if updated > cutoff:
                continue
            archive_run(files)
            moved += 1
        finally:
            lock.close()
    return moved, archive
