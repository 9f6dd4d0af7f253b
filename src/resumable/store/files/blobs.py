"""Content-addressed files beside a run (``<stem>/blobs/ab/abcdef...``): large values a record
refers to by ``sha256:<hex>`` instead of holding them (durable step results over 64 KiB).

A blob is written before the record that names it (temp file + fsync + rename + directory fsync),
so a record never names bytes that a crash could lose; its name is its hash, so a damaged or
missing blob is detected on read, never returned.
"""

from __future__ import annotations

import hashlib
import os

from resumable import fsio
from resumable.errors import CorruptRunError, InvalidInputError
from resumable.store.files.layout import RunFiles, translate

_HEX = frozenset("0123456789abcdef")


def _path(files: RunFiles, digest: str) -> str:
    return os.path.join(files.data_dir, "blobs", digest[:2], digest)


def _digest(ref: str) -> str:
    kind, _, digest = ref.partition(":")
    if kind != "sha256" or len(digest) != 64 or not _HEX.issuperset(digest):
        raise InvalidInputError(f"not a blob reference: {ref[:80]!r} (expected sha256:<64 hex>)")
    return digest


def put(files: RunFiles, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = _path(files, digest)
    try:
        fd = fsio.open_dirs(files.dir, [os.path.basename(files.data_dir), "blobs", digest[:2]], create=True)
        try:
            try:
                os.close(fsio.open_regular(path, os.O_RDONLY, dir_fd=fd))
                return f"sha256:{digest}"  # stored before (a damaged copy is caught on read)
            except FileNotFoundError:
                pass
            fsio.atomic_write(path, data, dir_fd=fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise translate(exc, f"cannot store a value of {len(data)} bytes for {files.snapshot}") from exc
    return f"sha256:{digest}"


def get(files: RunFiles, ref: str) -> bytes:
    digest = _digest(ref)
    path = _path(files, digest)
    try:
        fd = fsio.open_dirs(files.dir, [os.path.basename(files.data_dir), "blobs", digest[:2]])
        try:
            data = fsio.read_bytes(path, dir_fd=fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise CorruptRunError(f"{path}: stored value {ref} cannot be read ({exc.strerror or exc}):"
                              " restore it from a backup, or re-run the step that produced it") from exc
    if hashlib.sha256(data).hexdigest() != digest:
        raise CorruptRunError(f"{path}: stored value {ref} is damaged (its content no longer matches"
                              " its hash): restore it from a backup, or re-run the step that produced it")
    return data


def foreign(files: RunFiles, ref: str | None) -> str | None:
    """Why bytes of this run (its journal and snapshot, and the blob ``ref``) may have been written by
    another user, or None: every directory from the runs directory down, and every file, must belong
    to this user and be writable by nobody else (a directory only this user can write to holds only
    what this user put there, so no file in it can have been planted or swapped)."""
    import stat

    me = os.geteuid()
    paths = [(files.dir, "runs directory"), (files.journal, "journal"), (files.snapshot, "status file")]
    if ref is not None:
        digest = _digest(ref)
        blobs_dir = os.path.join(files.data_dir, "blobs")
        paths += [(files.data_dir, "directory"), (blobs_dir, "directory"),
                  (os.path.join(blobs_dir, digest[:2]), "directory"), (_path(files, digest), "stored value")]
    for path, what in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # a run without a snapshot yet; a missing blob is reported when it is read
        except OSError as exc:
            return f"its {what} {path} cannot be checked ({exc.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return f"its {what} {path} is a symbolic link"
        if st.st_uid != me:
            return f"its {what} {path} belongs to another user (uid {st.st_uid})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return (f"its {what} {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}):"
                    f" run `chmod go-w {path}` if only you write there")
    return None

