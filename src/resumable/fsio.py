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
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

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


def open_fd(path: str, flags: int, mode: int = 0o644) -> int:
    if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC):
        _before("open", path)
    return os.open(path, flags | os.O_CLOEXEC, mode)


# --- opening without obeying anything planted -------------------------------------------------
#
# Everything resumable creates or writes under a runs directory is opened without following a
# link, and only ever as a regular file: a link planted there would redirect a write (truncating
# or overwriting any file the user can write), and a FIFO would block a reader forever. Files are
# opened with O_NOFOLLOW | O_NONBLOCK (a FIFO then opens, or fails with ENXIO, without waiting for
# a peer) and their type is checked on the open descriptor, so there is no window between the
# check and the use. Directories below the runs directory are opened the same way and used as
# directory descriptors (``dir_fd``).

NOT_REGULAR = "not a regular file (a FIFO, device, socket or directory); resumable only uses regular files here"


def not_regular(path: str) -> OSError:
    return OSError(errno.EINVAL, NOT_REGULAR, path)


def _link_error(path: str, dir_fd: int | None = None) -> OSError | None:
    """ELOOP for a path that is a symbolic link (for a clear message where the kernel says ENOTDIR
    or ENXIO), else None."""
    try:
        st = os.stat(os.path.basename(path) if dir_fd is not None else path, dir_fd=dir_fd,
                     follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return OSError(errno.ELOOP, "is a symbolic link", path)
    return None


def open_regular(path: str, flags: int, mode: int = 0o644, *, dir_fd: int | None = None,
                 follow: bool = False) -> int:
    """Open a regular file without following a link at its last component and without blocking on
    a FIFO. Raises OSError: ELOOP for a link, EINVAL (``NOT_REGULAR``) for anything but a regular
    file. With ``dir_fd``, ``path`` is displayed in errors and its last component is opened in
    that directory. ``follow`` lets a link lead to the file (a file the user named, such as a job
    file, never one under a runs directory); what it leads to must still be a regular file."""
    if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC):
        _before("open", path)
    name = os.path.basename(path) if dir_fd is not None else path
    want = flags | (0 if follow else os.O_NOFOLLOW) | os.O_NONBLOCK | os.O_CLOEXEC
    # O_TRUNC waits for the type check: truncating a device or a FIFO is never right.
    try:
        fd = os.open(name, want & ~os.O_TRUNC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO without a reader, a socket
            raise not_regular(path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path)
        if flags & os.O_TRUNC and st.st_size:  # a new (empty) file needs no truncate
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path: str, *, create: bool = False, dir_fd: int | None = None) -> int:
    """A directory's descriptor, opened without following a link at its last component; created
    (mode 0755) when missing and ``create``. Raises OSError: ELOOP for a link, ENOTDIR for
    anything else that is not a directory. With ``dir_fd``, the last component of ``path`` is
    opened in that directory (``path`` is for messages and fault hooks)."""
    name = os.path.basename(path) if dir_fd is not None else path
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(2):
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
        except NotADirectoryError:
            raise _link_error(path, dir_fd) or OSError(errno.ENOTDIR, "not a directory", path) from None
        _before("mkdir", path)
        try:
            os.mkdir(name, 0o755, dir_fd=dir_fd)  # never follows a link (EEXIST if one is there)
        except FileExistsError:
            pass  # made meanwhile, or a link: the next open tells which
    return os.open(name, flags, dir_fd=dir_fd)


def open_dirs(base: str, names: list[str], *, create: bool = False) -> int:
    """The directory ``base/names[0]/names[1]/...``: ``base`` is opened as given (the runs
    directory, which the user chose), every component below it without following a link. New
    directories are made durable in their parent. Returns the last directory's descriptor."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    path = base
    try:
        for name in names:
            path = os.path.join(path, name)
            try:
                sub = open_dir(path, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                sub = open_dir(path, dir_fd=fd, create=True)
                fsync_fd(fd, os.path.dirname(path))
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_fd(dir_fd: int, path: str) -> None:
    """fsync an open directory (``path`` names it for fault hooks)."""
    _before("fsync_dir", path)
    os.fsync(dir_fd)


def write_all(fd: int, data: bytes, path: str) -> None:
    _before("write", path)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def pwrite_all(fd: int, data: bytes, offset: int, path: str) -> None:
    """``data`` written at ``offset``, whatever the descriptor's position (one system call fewer
    than seeking first, on the path every journal append takes)."""
    _before("write", path)
    n = os.pwrite(fd, data, offset)
    if n < len(data):  # a short write (rare: a signal, a full disk): the rest, piece by piece
        view = memoryview(data)[n:]
        offset += n
        while view:
            n = os.pwrite(fd, view, offset)
            view = view[n:]
            offset += n


def fsync(fd: int, path: str) -> None:
    """Make a file's data durable. fdatasync, as SQLite and PostgreSQL use on Linux: it flushes
    the data and the metadata needed to read it back (the size of an appended file), skipping
    only timestamps, which no reader of ours relies on."""
    _before("fsync", path)
    os.fdatasync(fd)


def truncate(fd: int, length: int, path: str) -> None:
    _before("truncate", path)
    os.ftruncate(fd, length)


def replace(src: str, dst: str, *, src_dir_fd: int | None = None) -> None:
    _before("replace", dst)
    os.replace(_at(src, src_dir_fd), dst, src_dir_fd=src_dir_fd)


def _at(path: str, dir_fd: int | None) -> str:
    """The name to pass with ``dir_fd``: the last component (the whole path without one)."""
    return os.path.basename(path) if dir_fd is not None else path


def _lexists(path: str, dir_fd: int | None) -> bool:
    try:
        os.stat(_at(path, dir_fd), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def rename_noclobber(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
    """Move without ever overwriting ``dst`` (hard link + unlink; EEXIST if it exists). With dir
    fds, each path's last component is taken in its directory descriptor."""
    _before("rename", dst)
    s, d = _at(src, src_dir_fd), _at(dst, dst_dir_fd)
    try:
        os.link(s, d, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EXDEV) and not _lexists(dst, dst_dir_fd):
            # Filesystems without hard links: rename after the existence check (we hold the
            # run's lock, so no other resumable writer races us here).
            os.rename(s, d, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            return
        raise
    os.unlink(s, dir_fd=src_dir_fd)


def link(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
    """Hard-link ``src`` as ``dst`` (never overwrites: EEXIST), copying on filesystems without
    hard links. Used to archive a run's files while they stay in place."""
    _before("link", dst)
    s, d = _at(src, src_dir_fd), _at(dst, dst_dir_fd)
    try:
        os.link(s, d, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV) or _lexists(dst, dst_dir_fd):
            raise
        fd_in = open_regular(src, os.O_RDONLY, dir_fd=src_dir_fd)
        try:
            fd_out = os.open(d, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=dst_dir_fd)
            try:
                while chunk := os.read(fd_in, 1 << 20):
                    write_all(fd_out, chunk, dst)
            finally:
                os.close(fd_out)
        finally:
            os.close(fd_in)


def rename_noclobber_dir(src: str, dst: str, *, src_dir_fd: int | None = None,
                         dst_dir_fd: int | None = None) -> None:
    """Move a directory without replacing an existing ``dst`` (rename(2) would replace an empty
    directory; the caller holds the run's lock, so checking first leaves no race with us)."""
    _before("rename", dst)
    if _lexists(dst, dst_dir_fd):
        raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
    os.rename(_at(src, src_dir_fd), _at(dst, dst_dir_fd), src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


def unlink(path: str, *, dir_fd: int | None = None) -> None:
    _before("unlink", path)
    os.unlink(_at(path, dir_fd), dir_fd=dir_fd)


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


def read_bytes(path: str, offset: int = 0, *, dir_fd: int | None = None, follow: bool = False) -> bytes:
    """Read a whole file from ``offset``; links (they could point outside the runs directory) and
    anything but a regular file (a FIFO would block) are refused (``open_regular``)."""
    fd = open_regular(path, os.O_RDONLY, dir_fd=dir_fd, follow=follow)
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


def atomic_write(path: str, data: bytes | Iterable[bytes], *, durable_rename: bool = True,
                 dir_fd: int | None = None) -> int:
    """Temp file in the same directory + fsync + os.replace + fsync of the directory; returns the
    bytes written. ``data`` may come in pieces (written as they come: a 100-MB snapshot is never
    held whole).

    The temp file is removed if any step fails, so a failed write leaves nothing behind.
    ``durable_rename=False`` skips the directory fsync, for a file that is only a view of data
    already durable elsewhere (the snapshot of a journaled run): a power cut may undo the rename,
    leaving the previous complete file, which the journal brings up to date. The temp file is
    always fsynced first, so whatever name survives holds complete JSON for `cat` and `jq`.
    The temp file is created exclusively (O_EXCL never opens a planted link or FIFO); rename(2)
    replaces a link at ``path`` itself, never its target. With ``dir_fd`` (a directory opened
    without following links) both names live in that directory.
    """
    head, name = os.path.split(path)
    tmp_name = f".{name}.tmp.{os.getpid()}"
    tmp = os.path.join(head, tmp_name)
    own_fd = dir_fd is None
    dfd = os.open(head or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if dir_fd is None else dir_fd
    try:
        _before("open", tmp)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp_name, flags, 0o644, dir_fd=dfd)
        except FileExistsError:
            # Left by a killed process that had our pid: nobody is writing it.
            os.unlink(tmp_name, dir_fd=dfd)
            fd = os.open(tmp_name, flags, 0o644, dir_fd=dfd)
        size = 0
        try:
            try:
                for piece in (data,) if isinstance(data, bytes) else data:
                    write_all(fd, piece, tmp)
                    size += len(piece)
                fsync(fd, tmp)
            finally:
                os.close(fd)
            _before("replace", path)
            os.replace(tmp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp_name, dir_fd=dfd)
            except OSError:
                pass
            raise
        if durable_rename:
            fsync_fd(dfd, head or ".")
    finally:
        if own_fd:
            os.close(dfd)
    return size


def write_output(path: str, data: bytes) -> None:
    """Write a file the user named (``report -o PATH``) safely: only ever a regular file, in a
    directory that exists, replaced atomically (a browser reloading it never sees half a page).
    Raises OSError: EEXIST-like ``ENOTSUP`` "not a regular file" for a path that exists and is not a
    regular file (a link, a device such as /dev/full, a FIFO, a directory), ENOENT for a missing
    parent directory (it is not created)."""
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
