"""Running the guarded command for one pass.

The command runs in its own session (its own process group), with stdin from /dev/null and
stdout+stderr into the pass's log file (opened O_EXCL | O_NOFOLLOW: a planted file or link is never
written through). SIGTERM, SIGINT and SIGHUP sent to the guard are passed on to the command's whole
process group, so a service manager stopping the guard stops the pass, grandchildren included;
the guard then waits for the command and records its exit like any other. The descriptors in
``inherit`` (the pass lock) stay open in the command; every other one is closed.

Exit status as a shell reports it: the command's code, or 128 + N when signal N ended it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType

from resumable.errors import InvalidInputError
from resumable.guard.state import refuse_or_translate

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class CommandNotStarted(InvalidInputError):
    """The command could not be executed (exit 127: not found, 126: not executable)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def open_log(stem: str) -> tuple[str, int]:
    """A new log file ``<stem>.log`` (``<stem>-<pid>.log`` if that exists): (path, descriptor)."""
    for path in (f"{stem}.log", f"{stem}-{os.getpid()}.log"):
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        except OSError as exc:
            raise refuse_or_translate(exc, path) from exc
    raise refuse_or_translate(OSError(17, "log file exists"), f"{stem}.log")


def run(argv: Sequence[str], log_fd: int, env: Mapping[str, str], *, inherit: Sequence[int] = (),
        on_start: Callable[[int], None] | None = None) -> int:
    """Run ``argv`` to its end; ``on_start`` is told its pid once it runs."""
    proc: subprocess.Popen[bytes] | None = None
    pending: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if proc is None:
            pending.append(signum)
            return
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=dict(env), close_fds=True, pass_fds=tuple(inherit))
        except FileNotFoundError as exc:
            raise CommandNotStarted(f"cannot run {argv[0]!r}: command not found", 127) from exc
        except PermissionError as exc:
            raise CommandNotStarted(f"cannot run {argv[0]!r}: permission denied", 126) from exc
        except OSError as exc:
            raise CommandNotStarted(f"cannot run {argv[0]!r}: {exc.strerror or exc}", 126) from exc
        for signum in pending:  # a signal that came while the command was being started
            forward(signum, None)
        if on_start is not None:
            on_start(proc.pid)
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


def iter_chunks(path: str, size: int = 1 << 20) -> Iterator[bytes]:
    """The log, chunk by chunk (for the outcome scan; nothing when it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        while chunk := os.read(fd, size):
            yield chunk
    finally:
        os.close(fd)
