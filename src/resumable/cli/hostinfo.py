"""What ``resumable doctor`` reads from the machine, without changing anything: the file system
holding a path (/proc/self/mounts), and which live processes carry a runner's secret
(/proc/<pid>/environ). What runner leases say is the store's to read (``store.backend.LeaseSurvey``).

Nothing here opens a file for writing, takes a lock or sends a signal.
"""

from __future__ import annotations

import os

from resumable.procfs import start_time

TOKEN_ENV = "RESUMABLE_RUNNER_TOKEN"  # runner.process: the runner's secret in its steps' environment


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


# --- leftovers: processes of runners that are gone ----------------------------------------------


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
