"""What ``resumable doctor`` reads from the machine, without changing anything: the file system
holding a path (/proc/self/mounts), which files an flock is held on (/proc/locks), what runner
lease files say, and which live processes carry a runner's secret (/proc/<pid>/environ).

Nothing here opens a file for writing, takes a lock or sends a signal. Whether a runner holds a
run is read from the kernel's lock table rather than by trying the lock: a reader holding a runner
lock even for an instant could turn away a runner starting at that moment.

The file names read here (``<id>.runner.lock``) and the lease file's keys are the file store's
(``store.files.layout`` and ``store.files.lease``); the lease file is information, never obeyed.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from resumable.procfs import start_time

TOKEN_ENV = "RESUMABLE_RUNNER_TOKEN"  # runner.process: the runner's secret in its steps' environment
LEASE_SUFFIX = ".runner.lock"
_MAX_LEASE = 1 << 20


def mount_of(path: str) -> tuple[str, str, str, set[str]] | None:
    """(fstype, device, mount point, options) of the file system holding ``path`` (or its nearest
    existing ancestor), from /proc/self/mounts; None where there is no such file."""
    real = os.path.realpath(path)
    while not os.path.exists(real) and real != os.path.dirname(real):
        real = os.path.dirname(real)
    best: tuple[str, str, str, set[str]] | None = None
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and (best is None or len(mnt) >= len(best[2])):
            best = (parts[2], parts[0], mnt, set(parts[3].split(",")))
    return best



# --- leftovers: runner leases and temp files -------------------------------------------------------


class Lease:
    """What a run's runner lease file says, and whether a runner holds it now."""

    __slots__ = ("held", "info", "run_id")

    def __init__(self, run_id: str, info: dict[str, Any], held: bool | None) -> None:
        self.run_id = run_id
        self.info = info
        self.held = held  # None: cannot tell from this host

    @property
    def newer(self) -> int | None:
        """The file's format when a newer resumable wrote it (its content is then not ours to
        interpret), else None."""
        from resumable.store.values import LEASE_FORMAT

        version = self.info.get("v")
        if isinstance(version, int) and not isinstance(version, bool) and version > LEASE_FORMAT:
            return version
        return None

    def secrets(self) -> set[str]:
        """The secrets of earlier runners whose processes may still run (pgid 0 included: every
        process of that runner, wherever its group)."""
        found = set()
        for key in ("groups", "leftovers"):
            for g in self.info.get(key) or []:
                if isinstance(g, dict) and isinstance(g.get("secret"), str) and g["secret"]:
                    found.add(g["secret"])
        for key in ("secret", "token"):
            if isinstance(self.info.get(key), str) and self.info[key]:
                found.add(self.info[key])
        return found


def locked_inodes() -> set[tuple[int, int, int]] | None:
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


def _read_lease(path: str) -> tuple[dict[str, Any], os.stat_result] | None:
    """(content, stat) of a lease file; the content is {} when it is not a JSON object (the file
    still tells, by its inode, whether a runner holds it). None for anything but a regular file:
    opened without following a link or waiting on a FIFO."""
    import json

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        try:
            value = json.loads(os.pread(fd, _MAX_LEASE, 0).decode("utf-8") or "{}")
        except ValueError:
            value = {}
    except OSError:
        return None
    finally:
        os.close(fd)
    return (value if isinstance(value, dict) else {}), st


def lease_files(root: str) -> dict[str, Lease]:
    """run id -> its lease, for every ``<id>.runner.lock`` in the runs directory."""
    import socket

    locks = locked_inodes()
    host = socket.gethostname()
    out = {}
    with os.scandir(root) as entries:
        names = [e.name for e in entries if e.name.endswith(LEASE_SUFFIX)]
    for name in names:
        got = _read_lease(os.path.join(root, name))
        if got is None:
            continue
        info, st = got
        if locks is not None and (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in locks:
            held: bool | None = True
        elif info.get("host", host) != host:
            held = None  # another host's runner: its locks are not in this kernel's table
        elif locks is not None:
            held = False
        else:  # no /proc/locks: is the recorded runner process alive (same start time)?
            start = start_time(info.get("pid"))
            held = start is not None and start == info.get("start")
        out[name[: -len(LEASE_SUFFIX)]] = Lease(name[: -len(LEASE_SUFFIX)], info, held)
    return out


def carriers(secrets: set[str]) -> dict[str, list[int]]:
    """Live processes (never this one) carrying each secret in their environment, from
    /proc/<pid>/environ (only the same user's, or root's, can be read)."""
    needles = {f"{TOKEN_ENV}={s}".encode(): s for s in secrets}
    found: dict[str, list[int]] = {}
    if not needles:
        return found
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != os.getpid()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                entries = f.read().split(b"\0")
        except OSError:
            continue
        for entry in entries:
            if entry in needles and start_time(pid) is not None:
                found.setdefault(needles[entry], []).append(pid)
    return found
