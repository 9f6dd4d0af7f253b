"""A run in a runs directory, behind the ``RunHandle`` protocol (``store.backend``)."""

from __future__ import annotations

import os
import time

from resumable.store.files import journal
from resumable.store.files.layout import RunFiles, check_log_dir, missing_run, no_parent
from resumable.store.files.loader import read_journal
from resumable.store.files.lock import runner_holder
from resumable.store.files.writer import Writer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Hashable, Iterator, Sequence
    from typing import Any

    from resumable.store.values import Record


class FileRunHandle:
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

    def load(self) -> dict[str, Any] | None:
        return self.writer.current().doc

    def read(self) -> dict[str, Any]:
        doc = self.load()
        if doc is None:
            if not self.files.by_id and not os.path.isdir(self.files.dir):
                raise no_parent(self.files)
            raise missing_run(self.files)
        return doc

    def commit(self, events: Sequence[dict[str, Any]], *, lazy_view: bool = False) -> list[Any]:
        return self.writer.commit(events, lazy_view=lazy_view)

    def runner_holder(self) -> dict[str, Any] | None:
        """The live runner holding this run's lease, as its lease file describes it (pid, host,
        startedAt, secret), or None when no runner holds the run."""
        return runner_holder(self.files)

    def flush(self) -> None:
        self.writer.flush()

    def history(self, since: int = 0) -> Iterator[Record]:
        from resumable.store.values import Record  # `resumable log`'s, not a seed verb's

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
        from resumable.store.files import blobs  # hashlib's import is more than a seed verb may spend

        return blobs.put(self.files, data)

    def get_blob(self, ref: str) -> bytes:
        from resumable.store.files import blobs

        return blobs.get(self.files, ref)

    def close(self) -> None:
        try:
            self.writer.flush()
        finally:
            self.writer.close()
