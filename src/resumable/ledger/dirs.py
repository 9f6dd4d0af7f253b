"""Opening the ledger's directories and files without following anything planted in them.

Ticket and run directories are opened relative to their parent's descriptor with O_NOFOLLOW, so a
symlink swapped in for a directory is refused, not followed out of the checkpoint root (OmniNode's
resolved paths and compared prefixes, which a swap between check and use defeats). Files are opened
O_NOFOLLOW | O_NONBLOCK and checked with fstat, so a planted FIFO never blocks a reader. The base
directory itself is the user's choice and may be a link.
"""

from __future__ import annotations

import errno
import os
import stat

from resumable.errors import DiskFullError, StoreError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | os.O_NOFOLLOW | os.O_NONBLOCK
# O_NOCTTY: a terminal device planted under a checkpoint's name must not become our controlling tty.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def translate(exc: OSError, what: str) -> StoreError:
    """One-line StoreError for an OSError met while doing ``what``."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(f"{what}: no space left on device; free some space and retry")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StoreError(f"{what}: {exc.strerror}; check the directory's permissions")
    return StoreError(f"{what}: {exc.strerror or exc}")


def kind_of(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a regular file"


class Planted(StoreError):
    """Where resumable expects a directory or a checkpoint file, something else (a link, a FIFO...)."""

    def __init__(self, path: str, mode: int, expected: str) -> None:
        self.kind = kind_of(mode)
        super().__init__(f"refused: {path} is {self.kind}, not {expected}; resumable does not follow or read "
                         "what it did not write (remove it)")


def planted_problem(kind: str, expected: str) -> str:
    """What a reader that skips a planted entry says about it."""
    return f"{kind}, not {expected}: not followed or read (remove it)"


def open_base(base: str, *, create: bool) -> int | None:
    """A descriptor of the checkpoint root, or None when it does not exist (and ``create`` is false)."""
    try:
        if create:
            os.makedirs(base, exist_ok=True)
        return os.open(base, _DIR_FLAGS)
    except FileNotFoundError:
        if create:
            raise StoreError(f"cannot create checkpoint directory {base}") from None
        return None
    except OSError as exc:
        raise translate(exc, f"cannot open checkpoint directory {base}") from exc


def open_child(parent: int, name: str, path: str, *, create: bool) -> int | None:
    """A descriptor of directory ``name`` inside ``parent`` (None when missing and not ``create``).
    A directory created here is made durable (fsync of the parent)."""
    created = False
    if create:
        try:
            os.mkdir(name, 0o777, dir_fd=parent)
            created = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise translate(exc, f"cannot create {path}") from exc
    try:
        fd = os.open(name, _NOFOLLOW_DIR, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Planted(path, _lstat_mode(parent, name), "a directory") from exc
        raise translate(exc, f"cannot open {path}") from exc
    if created:
        try:
            os.fsync(parent)
        except OSError as exc:
            os.close(fd)
            raise translate(exc, f"cannot make {path} durable") from exc
    return fd


def open_regular(parent: int, name: str, path: str) -> int:
    """A read descriptor of regular file ``name``; anything else is refused without blocking."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Planted(path, stat.S_IFLNK, "a checkpoint file") from exc
        raise translate(exc, f"cannot read {path}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Planted(path, mode, "a checkpoint file")
    return fd


def read_fd(fd: int, limit: int) -> bytes | None:
    """The whole file behind ``fd``, or None when it is larger than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def _lstat_mode(parent: int, name: str) -> int:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        return stat.S_IFLNK
