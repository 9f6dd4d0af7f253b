"""When and how the snapshot view is rewritten from the journal.

The snapshot (``S.json``) is what `cat`, `jq` and the ulpi tools read; the journal holds the truth.
A snapshot of at most ``EXACT_SNAPSHOT_BYTES`` is rewritten on every write (exact, as ulpi's status file
was); a larger one once the journal has grown by its size since the last refresh, so snapshot bytes
written over a run stay within the journal's bytes and a write costs O(1) amortised.
"""

from __future__ import annotations

import os

from resumable import fsio
from resumable.core import jsonio
from resumable.store.files import snapshot
from resumable.store.files.cursor import Cursor
from resumable.store.files.layout import translate
from resumable.store.files.loader import Loaded, stat_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

EXACT_SNAPSHOT_BYTES = 64 * 1024


class SnapshotView:
    __slots__ = ("cursor", "error", "refreshes")

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.refreshes = 0
        self.error: str | None = None  # why the last refresh failed (the write itself is durable)

    def after_write(self, state: Loaded, *, force: bool, lazy: bool) -> None:
        """Rewrite the view if the policy says it is due after a write."""
        if state.snap_seq == state.seq:
            return
        # Until a snapshot exists its size is estimated, so that a large run does not write a
        # multi-megabyte view right after init only to replace it a few writes later.
        size = state.snap_size or estimated_bytes(state.doc)
        due = (
            force
            # -1 with a file on disk: that view is not known to be a prefix of this journal
            # (edited, or ahead of a journal whose tail was cut). Left in place, a stale view whose
            # marker happens to match the new records' end offset would be served as current.
            or (state.snap_seq < 0 and state.snap_stat is not None)
            or (size <= EXACT_SNAPSHOT_BYTES and not lazy)
            or state.offset - self.cursor.snap_offset >= size
        )
        if due:
            self.refresh(state)

    def refresh(self, state: Loaded) -> None:
        """Rewrite the snapshot to match the journal. A failure loses nothing (the journal already
        holds the write); it is remembered in ``error``."""
        if state.doc is None:
            return
        files = self.cursor.files
        if self.refreshes == 0:
            sweep_temps(files.dir, files.stem)
        self.refreshes += 1
        # orjson for big documents (by the last snapshot or by the units now: the first refresh after
        # a large plan was recorded), and for any process that refreshes more than once (the runner,
        # a long-lived API user): its import costs once what the standard library's pure-Python
        # indenting encoder costs on every refresh. A one-shot CLI call on a small run keeps the
        # cheap import. A big document is written in pieces as it is encoded, never held whole.
        fast = max(state.snap_size, estimated_bytes(state.doc)) > jsonio.BIG or self.refreshes > 1
        try:
            data = snapshot.stream(state.doc, state.seq, state.offset, big=fast)
            # No directory fsync once a journal exists: the journal already holds this state
            # durably, and a rename lost to a power cut leaves the previous snapshot, whose marker
            # makes the journal tail apply.
            size = fsio.atomic_write(files.snapshot, data, durable_rename=not state.journal_exists)
            state.snap_stat = stat_key(os.stat(files.snapshot, follow_symlinks=False))
        except (ValueError, TypeError) as exc:
            # A value JSON cannot hold; the write this follows is durable in the journal already.
            self.error = f"cannot refresh {files.snapshot}: {exc}"
            return
        except OSError as exc:
            self.error = str(translate(exc, f"cannot refresh {files.snapshot}"))
            state.snap_stat = None
            state.snap_seq = -1
            return
        self.error = None
        state.snap_seq = state.seq
        state.snap_size = size
        self.cursor.snap_offset = state.offset
        if size > EXACT_SNAPSHOT_BYTES:  # a run large enough to keep an index
            from resumable.store.files import summary

            summary.keep(files, state.doc, state.seq)  # for the readers of a run at rest


def sweep_temps(directory: str, stem: str) -> None:
    """Remove temp files a killed writer left next to a run's files. Called under the run's lock,
    when no other writer of this run can be between creating and renaming its temp."""
    prefixes = (f".{stem}.json.tmp.", f".{stem}.journal.jsonl.tmp.", f".{stem}.index.tmp.")
    try:
        with os.scandir(directory) as entries:
            stale = [e.path for e in entries if e.name.startswith(prefixes)]
    except OSError:
        return
    for path in stale:
        try:
            fsio.unlink(path)
        except OSError:
            pass


def estimated_bytes(doc: Mapping[str, Any] | None) -> int:
    """About what the pretty snapshot of ``doc`` will weigh (a fresh unit prints ~170 bytes)."""
    if doc is None:
        return 0
    units = doc.get("units")
    return 512 + 170 * (len(units) if isinstance(units, dict) else 0)
