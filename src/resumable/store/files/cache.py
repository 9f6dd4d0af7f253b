"""Derived data kept beside the runs (``<runs-dir>/.cache/<name>``): what a program can always make
again from its sources (a parsed job file), kept so it need not.

Nothing here is trusted for more than it can prove: the directory and its files are opened without
following links (a link planted there is refused, never followed), only regular files are read, and
a file is returned only when its checksum (SHA-256 over the payload, in its first line) holds, so a
torn, truncated or edited file reads as absent and is written again. Writes go to a temp file
renamed into place without fsync: a cache lost to a power cut is only made again.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat

from resumable import fsio

DIR = ".cache"
MAGIC = b"resumable-cache 1 "
MAX_BYTES = 512 * 1024 * 1024
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}\.[0-9a-f]{16,64}$")


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ValueError(f"bad cache name {name!r}")


def _open_dir(root: str, *, create: bool) -> int | None:
    """The cache directory, opened without following a link; None when it does not exist."""
    path = os.path.join(root, DIR)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return None
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    return os.open(path, flags)


def read(root: str, name: str) -> bytes | None:
    """The payload last written under ``name``, or None (absent, planted, torn or corrupt)."""
    _check_name(name)
    try:
        dfd = _open_dir(root, create=False)
    except OSError:
        return None  # a link, or unreadable: as if absent
    if dfd is None:
        return None
    try:
        fd = fsio.open_regular(name, os.O_RDONLY, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_size > MAX_BYTES:
            return None  # not ours alone: not read
        chunks = []
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _verified(data)


def _verified(data: bytes) -> bytes | None:
    head, sep, payload = data.partition(b"\n")
    if not sep or not head.startswith(MAGIC):
        return None
    if head[len(MAGIC):] != hashlib.sha256(payload).hexdigest().encode():
        return None
    return payload


def write(root: str, name: str, payload: bytes) -> None:
    """Keep ``payload`` under ``name`` (best effort: OSError when it cannot be written)."""
    _check_name(name)
    data = MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    dfd = _open_dir(root, create=True)
    assert dfd is not None
    try:
        if not stat.S_ISDIR(os.fstat(dfd).st_mode):
            raise OSError(errno.ENOTDIR, "not a directory", os.path.join(root, DIR))
        fsio.atomic_write(name, data, durable_rename=False, dir_fd=dfd)
    finally:
        os.close(dfd)
