"""The store's I/O seam: every file operation of the store goes through this module.

Why one module: failure testing (the way SQLite and RocksDB test) needs to make the k-th I/O call
fail with ENOSPC or EIO, kill the process at the k-th call, or record what reached the disk so a
power loss can be simulated. Production code pays one attribute lookup per call for that.

A *fault hook* is a callable ``hook(op, path)`` invoked before each operation; it may raise an
``OSError`` (the operation then does not happen), kill the process, or record. ``op`` is one of
``open``, ``write``, ``fsync``, ``replace``, ``unlink``, ``fsync_dir``, ``truncate``, ``mkdir``,
``rename``. Reads are not hooked: a failing read changes nothing on disk.
"""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    FaultHook = Callable[[str, str], None]

# Paths are plain strings here: importing pathlib costs more than a whole small write.

_hook: FaultHook | None = None
# Counts every hooked call, so a test can ask "how many I/O calls did this command make?".
calls = 0


def set_fault_hook(hook: FaultHook | None) -> FaultHook | None:
    """Install (or clear, with None) the fault hook; returns the previous one."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def _before(op: str, path: str) -> None:
    global calls
    calls += 1
    if _hook is not None:
        _hook(op, path)


def install_from_env() -> None:
    """Let a child process inherit a fault plan: ``RESUMABLE_FAULT=op:k:errno[:persist]`` makes
    the k-th call of that op (``any`` for every op) raise; ``op:k:kill`` SIGKILLs the process."""
    spec = os.environ.get("RESUMABLE_FAULT")
    if not spec:
        return
    parts = spec.split(":")
    if len(parts) < 3:
        return
    want_op, k_text, action = parts[0], parts[1], parts[2]
    persist = len(parts) > 3 and parts[3] == "persist"
    try:
        k = int(k_text)
    except ValueError:
        return
    seen = 0

    def hook(op: str, path: str) -> None:
        nonlocal seen
        if want_op not in ("any", op):
            return
        seen += 1
        if seen == k or (persist and seen > k):
            if action == "kill":
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
            code = getattr(errno, action, errno.EIO)
            raise OSError(code, os.strerror(code), path)

    set_fault_hook(hook)


def open_fd(path: str, flags: int, mode: int = 0o644) -> int:
    if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC):
        _before("open", path)
    return os.open(path, flags | os.O_CLOEXEC, mode)


def write_all(fd: int, data: bytes, path: str) -> None:
    _before("write", path)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync(fd: int, path: str) -> None:
    """Make a file's data durable. fdatasync, as SQLite and PostgreSQL use on Linux: it flushes
    the data and the metadata needed to read it back (the size of an appended file), skipping
    only timestamps, which no reader of ours relies on."""
    _before("fsync", path)
    os.fdatasync(fd)


def truncate(fd: int, length: int, path: str) -> None:
    _before("truncate", path)
    os.ftruncate(fd, length)


def replace(src: str, dst: str) -> None:
    _before("replace", dst)
    os.replace(src, dst)


def rename_noclobber(src: str, dst: str) -> None:
    """Move without ever overwriting ``dst`` (hard link + unlink; EEXIST if it exists)."""
    _before("rename", dst)
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EXDEV) and not os.path.lexists(dst):
            # Filesystems without hard links: rename after the existence check (we hold the
            # run's lock, so no other resumable writer races us here).
            os.rename(src, dst)
            return
        raise
    os.unlink(src)


def link(src: str, dst: str) -> None:
    """Hard-link ``src`` as ``dst`` (never overwrites: EEXIST), copying on filesystems without
    hard links. Used to archive a run's files while they stay in place."""
    _before("link", dst)
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV) or os.path.lexists(dst):
            raise
        import shutil

        shutil.copyfile(src, dst, follow_symlinks=False)


def rename_noclobber_dir(src: str, dst: str) -> None:
    """Move a directory without replacing an existing ``dst`` (rename(2) would replace an empty
    directory; the caller holds the run's lock, so checking first leaves no race with us)."""
    _before("rename", dst)
    if os.path.lexists(dst):
        raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
    os.rename(src, dst)


def unlink(path: str) -> None:
    _before("unlink", path)
    os.unlink(path)


def mkdir(path: str) -> None:
    _before("mkdir", path)
    os.makedirs(path, exist_ok=True)


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename or a new file in it survives power loss."""
    _before("fsync_dir", path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_bytes(path: str, offset: int = 0) -> bytes:
    """Read a whole file from ``offset``; symlinks are refused (they could point outside the
    runs directory)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, durable_rename: bool = True) -> None:
    """Temp file in the same directory + fsync + os.replace + fsync of the directory.

    The temp file is removed if any step fails, so a failed write leaves nothing behind.
    ``durable_rename=False`` skips the directory fsync, for a file that is only a view of data
    already durable elsewhere (the snapshot of a journaled run): a power cut may undo the rename,
    leaving the previous complete file, which the journal brings up to date. The temp file is
    always fsynced first, so whatever name survives holds complete JSON for `cat` and `jq`.
    """
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.tmp.{os.getpid()}")
    fd = open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW)
    try:
        try:
            write_all(fd, data, tmp)
            fsync(fd, tmp)
        finally:
            os.close(fd)
        replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable_rename:
        fsync_dir(head or ".")


def write_output(path: str, data: bytes) -> None:
    """Write a file the user named (``report -o PATH``) safely: only ever a regular file, in a
    directory that exists, replaced atomically (a browser reloading it never sees half a page).
    Raises OSError: EEXIST-like ``ENOTSUP`` "not a regular file" for a path that exists and is not a
    regular file (a link, a device such as /dev/full, a FIFO, a directory), ENOENT for a missing
    parent directory (it is not created)."""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.ENOTSUP, "exists and is not a regular file", path)
    head = os.path.dirname(path) or "."
    if not os.path.isdir(head):
        raise OSError(errno.ENOENT, "no such directory", head)
    tmp = os.path.join(head, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        try:
            write_all(fd, data, tmp)
        finally:
            os.close(fd)
        replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
