"""Starting a new run over a finished one (``init`` over a done or aborted run), crash-safely.

A crash at any point leaves either the old run or the new one (proof suite R2/R4: moving the old
files away first and appending the init record afterwards left a window with no run at all).

Order: hard-link the old files into the archive (the old run stays in place); remove the old
snapshot (the old journal alone still loads as the old run), durably, so it can never be read as
the view of the new journal; atomically replace the journal with one holding just the init record;
then the caller refreshes the snapshot, and the old logs are moved aside last.
"""

from __future__ import annotations

import os

from resumable import fsio
from resumable.store.files.archive import archive_base, is_real_dir, open_archive
from resumable.store.files.layout import RunFiles, translate


def replace_run(files: RunFiles, record: bytes) -> str:
    """Archive the old run's files and make ``record`` (an init record) the whole journal; returns
    the archive base name. On failure the old run is put back and a StoreError raised."""
    try:
        archive, afd = open_archive(files)
    except OSError as exc:
        raise translate(exc, f"cannot start a new run over {files.snapshot}") from exc
    try:
        return _replace(files, record, archive, afd)
    finally:
        os.close(afd)


def _replace(files: RunFiles, record: bytes, archive: str, afd: int) -> str:
    base = archive_base(files, archive, afd)
    has_journal = os.path.lexists(files.journal)
    linked: list[tuple[str, str]] = []  # (archive link, live path)
    snap_unlinked = False
    try:
        if os.path.lexists(files.snapshot):
            fsio.link(files.snapshot, base + ".json", dst_dir_fd=afd)
            linked.append((base + ".json", files.snapshot))
        if has_journal:
            fsio.link(files.journal, base + ".journal.jsonl", dst_dir_fd=afd)
            linked.append((base + ".journal.jsonl", files.journal))
        fsio.fsync_fd(afd, archive)
        fsio.fsync_dir(files.dir)
        if has_journal and os.path.lexists(files.snapshot):
            # Without a journal the old snapshot stays until the new one replaces it: an unmarked
            # snapshot next to a journal loads as the snapshot (old run).
            fsio.unlink(files.snapshot)
            snap_unlinked = True
            fsio.fsync_dir(files.dir)
        fsio.atomic_write(files.journal, record)
    except OSError as exc:
        err = translate(exc, f"cannot start a new run over {files.snapshot}")
        if not _undo(files, linked, has_journal, snap_unlinked, archive, afd):
            err = type(err)(f"{err} (and the old run could not be put back: the new run may"
                            " or may not have been started)")
        raise err from exc
    return base


def move_old_logs(files: RunFiles, base: str) -> None:
    """Old logs (the step logs, ulpi's event log of the old run) are part of neither run's
    state, so they move last, and failing to is harmless (the new run's document is in no state
    of the old event log's chain, so it is never adopted from it)."""
    data_dir = is_real_dir(files.data_dir)  # False: none, or a link planted in its place: left alone
    events = os.path.lexists(files.events)
    if not data_dir and not events:
        return
    try:
        archive, afd = open_archive(files)
    except OSError:
        return
    try:
        if data_dir:
            fsio.rename_noclobber_dir(files.data_dir, base + ".d", dst_dir_fd=afd)
        if events:
            fsio.rename_noclobber(files.events, base + ".events.jsonl", dst_dir_fd=afd)
        fsio.fsync_fd(afd, archive)
    except OSError:
        pass
    finally:
        os.close(afd)


def _undo(files: RunFiles, linked: list[tuple[str, str]], had_journal: bool, snap_unlinked: bool,
          archive: str, afd: int) -> bool:
    """Put the old run's files back from their archive links, so the state is the last
    acknowledged one (e.g. after the directory fsync that follows the journal replace failed, when
    the new journal may be visible). False if that failed too."""
    try:
        for link, live in linked:
            name = os.path.basename(link)
            if live == files.snapshot and not snap_unlinked:
                fsio.unlink(link, dir_fd=afd)  # still in place: drop the archive copy
                continue
            try:
                same = os.path.samestat(os.stat(name, dir_fd=afd, follow_symlinks=False),
                                        os.stat(live, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            if same:
                fsio.unlink(link, dir_fd=afd)  # the journal was never replaced
            else:
                fsio.replace(link, live, src_dir_fd=afd)  # the old file back (over the new journal)
        if not had_journal and os.path.lexists(files.journal):
            fsio.unlink(files.journal)
        fsio.fsync_dir(files.dir)
        fsio.fsync_fd(afd, archive)
    except OSError:
        return False
    return True
