"""One pass at a time: a kernel lock (``flock``) on ``<NAME>.lock``, plus ``<NAME>.lock-info``
(pid and start time) for the message a skipped invocation prints.

OmniNode's cron-closeout checked for a lock file and then created it (two invocations could both pass the check),
judged it stale by its age (a legitimately long pass lost its lock after 45 minutes), and removed
it on exit (so the older pass's exit removed the newer pass's lock). Here the kernel holds the lock
for exactly as long as the holding process lives: it is never stale and never stolen, the lock file
is never unlinked, and only the holder writes or removes the info file, while holding the lock.
If something else removes or replaces the lock file while we wait, the lock taken is on the new
file (checked by inode), so two holders can never each lock a different file.

The pass's command inherits a copy of the locked descriptor (``fd``): an flock belongs to the open
file, not to a process, so the lock lasts as long as the guard or the command holds it. A guard
SIGKILLed mid-pass leaves its command holding the lock, and the next invocation SKIPs until that
command (and whatever it started that kept the descriptor) has exited.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import os
import stat
from dataclasses import dataclass

from resumable.guard.state import refuse_or_translate, refused


@dataclass(frozen=True)
class LockInfo:
    pid: int | None
    started_at: str | None
    command_pid: int | None = None  # the pass's command, which holds the lock too

    def describe(self, now: dt.datetime) -> str:
        """Who holds the lock, for a SKIP or a status line: the guard, or a command that outlived it."""
        from resumable.procfs import start_time

        pid = self.pid if self.pid is not None else "unknown"
        if self.command_pid is not None and self.pid is not None and start_time(self.pid) is None:
            return f"its command, pid {self.command_pid}, outlived its guard, pid {pid}; for {self.age(now)}"
        return f"pid {pid}, for {self.age(now)}"

    def age(self, now: dt.datetime) -> str:
        if self.started_at is None:
            return "a while"
        try:
            started = dt.datetime.strptime(self.started_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            return "a while"
        return human_duration(max(0, int((now - started).total_seconds())))


def human_duration(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class GuardLock:
    def __init__(self, lock_path: str, info_path: str) -> None:
        self.lock_path = lock_path
        self.info_path = info_path
        self._fd: int | None = None
        self._started_at = ""

    def try_acquire(self, started_at: str) -> bool:
        """Take the lock without waiting; False when another invocation holds it."""
        for _ in range(100):
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except OSError as exc:
                os.close(fd)
                raise refuse_or_translate(exc, self.lock_path) from exc
            try:
                current = os.stat(self.lock_path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            if current is not None and current.st_ino == os.fstat(fd).st_ino and stat.S_ISREG(current.st_mode):
                self._fd = fd
                self._write_info(started_at)
                return True
            os.close(fd)  # the file we locked is no longer the lock file: lock the one that is
        raise refuse_or_translate(OSError(errno.EAGAIN, "the lock file keeps being replaced"), self.lock_path)

    def _open(self) -> int:
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise refuse_or_translate(exc, self.lock_path) from exc
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise refused(self.lock_path, mode)
        return fd

    def _write_info(self, started_at: str, command_pid: int | None = None) -> None:
        from resumable import fsio

        self._started_at = started_at
        command = "" if command_pid is None else f"command_pid={command_pid}\n"
        try:
            fsio.atomic_write(self.info_path, f"pid={os.getpid()}\nstarted_at={started_at}\n{command}".encode(),
                              durable_rename=False)
        except OSError:
            pass  # the info only feeds a message; the lock itself is held

    def note_command(self, pid: int) -> None:
        """Say in the info file that ``pid``, the pass's command, holds the lock too."""
        if self._fd is not None:
            self._write_info(self._started_at, pid)

    @property
    def fd(self) -> int:
        """The locked descriptor, for the pass's command to inherit (see the module docstring)."""
        assert self._fd is not None, "the lock is not held"
        return self._fd

    def holder(self) -> LockInfo:
        """Who holds the lock, as its info file says (unknown fields are None)."""
        try:
            fd = os.open(self.info_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return LockInfo(None, None)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return LockInfo(None, None)
            text = os.read(fd, 4096).decode("utf-8", "replace")
        finally:
            os.close(fd)
        fields = dict(line.partition("=")[::2] for line in text.splitlines())
        return LockInfo(_number(fields.get("pid")), fields.get("started_at") or None,
                        _number(fields.get("command_pid")))

    def held_elsewhere(self) -> bool:
        """Whether some process holds the lock now (a probe: takes a shared lock and drops it)."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise refuse_or_translate(exc, self.lock_path) from exc
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise refused(self.lock_path, mode)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
        return False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.info_path)  # ours: only the holder writes it, and we still hold the lock
        except OSError:
            pass
        os.close(self._fd)  # releases the flock; the lock file stays, so no one can lock a stale copy
        self._fd = None


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isascii() and text.isdigit() else None
