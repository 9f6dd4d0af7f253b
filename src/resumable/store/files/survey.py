"""Runner leases read without taking them: which lease files an flock is held on (the kernel's
lock table, /proc/locks), and what each file says (``store.files.lease`` writes them).

A reader that took a runner's lock, even for an instant, could turn away a runner starting at that
moment, so whether a runner holds a run is read from the kernel's table. Only where the table
cannot answer (no /proc/locks, or a lease written on another host, whose lock is in that host's
kernel) does ``FileRunnerLease.holder`` fall back to a brief shared flock, which ``acquire``
tolerates (``PROBE_GRACE``). A lease file is information, never obeyed; a link, a FIFO or anything
but a regular file is not read at all.
"""

from __future__ import annotations

import os
import socket

from resumable import fsio
from resumable.core import jsonio
from resumable.procfs import start_time
from resumable.store.backend import LeaseState
from resumable.store.values import LEASE_FORMAT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

LEASE_SUFFIX = ".runner.lock"  # layout.RunFiles.runner_lock
MAX_BYTES = 1 << 20  # a lease file is a few hundred bytes; anything larger is not ours

Inode = tuple[int, int, int]


def locked_inodes() -> set[Inode] | None:
    """(major, minor, inode) of every file an flock is held on, from /proc/locks (None without it)."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out = set()
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":  # "->": a waiter, not a holder
            continue
        try:
            major, minor, ino = parts[5].split(":")
            out.add((int(major, 16), int(minor, 16), int(ino)))
        except ValueError:
            continue
    return out


def inode_of(st: os.stat_result) -> Inode:
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


def parse(data: bytes) -> dict[str, object]:
    """A lease file's content; {} when it is not a JSON object (the file still tells, by its inode,
    whether a runner holds it)."""
    try:
        value = jsonio.loads(data or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def read_lease(path: str) -> tuple[dict[str, object], os.stat_result] | None:
    """(content, stat) of a lease file; None for anything but a regular file, opened without
    following a link or waiting on a FIFO."""
    try:
        fd = fsio.open_regular(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return parse(os.pread(fd, MAX_BYTES, 0)), os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def held(info: Mapping[str, object], st: os.stat_result, locks: set[Inode] | None) -> bool | None:
    """Whether a runner holds the lease now; None when this host cannot tell (a runner on another
    host: its lock is in that host's kernel)."""
    if locks is not None and inode_of(st) in locks:
        return True
    if info.get("host", socket.gethostname()) != socket.gethostname():
        return None
    if locks is not None:
        return False
    # No /proc/locks: is the recorded runner process alive (same start time) and not released?
    start = start_time(info.get("pid"))
    return start is not None and start == info.get("start") and bool(info.get("secret"))


def newer_format(info: Mapping[str, object]) -> int | None:
    """The file's format when a newer resumable wrote it (its content is then not ours to read)."""
    version = info.get("v")
    if isinstance(version, int) and not isinstance(version, bool) and version > LEASE_FORMAT:
        return version
    return None


def secrets_of(info: Mapping[str, object]) -> frozenset[str]:
    """The secrets of the runners this file names (the holder's, and those whose groups were left
    running); pgid 0 included: every process of that runner, wherever its group."""
    found = set()
    for key in ("groups", "leftovers"):
        groups = info.get(key)
        for g in groups if isinstance(groups, list) else ():
            if isinstance(g, dict) and isinstance(g.get("secret"), str) and g["secret"]:
                found.add(g["secret"])
    for key in ("secret", "token"):  # "token": 0.1.0's name for the runner's secret
        secret = info.get(key)
        if isinstance(secret, str) and secret:
            found.add(secret)
    return frozenset(found)


def survey(root: str) -> list[LeaseState]:
    """Every ``<id>.runner.lock`` in the runs directory, by run id; OSError when it cannot be listed
    (a runs directory that does not exist has none)."""
    try:
        with os.scandir(root) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(LEASE_SUFFIX))
    except FileNotFoundError:
        return []
    locks = locked_inodes()
    out = []
    for name in names:
        path = os.path.join(root, name)
        got = read_lease(path)
        if got is None:
            continue
        info, st = got
        version = newer_format(info)
        out.append(LeaseState(name[: -len(LEASE_SUFFIX)], path, held(info, st, locks), version,
                              frozenset() if version is not None else secrets_of(info)))
    return out
