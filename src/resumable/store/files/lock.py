"""The writers' lock of one run: an ``flock`` on ``<stem>.lock``, a file that is never unlinked.

Unlinking a lock file lets a waiter lock the orphaned inode while a newcomer locks a new one, so two
writers would both hold "the" lock. A dead holder's flock is released by the kernel; nothing is ever
taken over on a timer.
"""

from __future__ import annotations

import fcntl
import os

from resumable import fsio
from resumable.core import jsonio
from resumable.store.files.layout import RunFiles, create_runs_dir, no_parent, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass


class RunLock:
    __slots__ = ("fd", "files", "held")

    def __init__(self, files: RunFiles) -> None:
        self.files = files
        self.fd: int | None = None
        self.held = False

    def acquire(self, *, create_dir: bool = False) -> None:
        """Block until this process holds the run's lock; ``create_dir`` makes the directory first."""
        parent = self.files.dir
        if create_dir and not os.path.isdir(parent):
            create_runs_dir(parent)
        if self.fd is None:
            try:
                self.fd = fsio.open_regular(self.files.lock, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError as exc:
                raise no_parent(self.files) from exc
            except OSError as exc:
                raise translate(exc, f"cannot open lock {self.files.lock}") from exc
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                self.held = True
                return
            except InterruptedError:
                continue

    def release(self) -> None:
        self.held = False
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.held = False
        if self.fd is not None:
            try:
                os.close(self.fd)  # closing drops the flock too
            except OSError:
                pass
            self.fd = None


def held_lock(files: RunFiles) -> RunLock:
    """A lock already acquired (for whole-run operations: archive, delete); release and close it."""
    lock = RunLock(files)
    try:
        lock.acquire()
    except BaseException:
        lock.close()
        raise
    return lock



def runner_holder(files: RunFiles) -> dict[str, object] | None:
    """The live runner holding this run's lease (its lease file's content), or None. A probe cheap
    enough for every low-level verb's write: one access() that usually fails (no lease file), else an
    open and a non-blocking shared flock, and a read only when a runner holds the lease. Never follows a
    link, never blocks on a FIFO, never creates anything."""
    # access() first: it answers "no such file" without an exception, which costs a write to a run
    # no runner ever touched (nearly all) more than the system call. Any failure of either call
    # means the same: no runner we would trust.
    if not os.access(files.runner_lock, os.F_OK, follow_symlinks=False):
        return None
    try:
        fd = fsio.open_regular(files.runner_lock, os.O_RDONLY)
    except OSError:
        return None  # no lease file (no runner ever ran here), or not one we would trust
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held: read who holds it
        else:
            return None  # nobody holds it (our shared lock goes with the descriptor)
        try:
            value = jsonio.loads(os.pread(fd, 1 << 20, 0) or b"{}")
        except (OSError, ValueError):
            value = {}
        return value if isinstance(value, dict) else {}
    finally:
        os.close(fd)
