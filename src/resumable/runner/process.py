"""Step processes: each step in its own session, output to a log file, whole-group termination.

Hazards guarded against (seed weakness 3.6(1)):
- killing only the shell leaves grandchildren running: every step gets its own session
  (``start_new_session``), and signals go to the process group;
- a grandchild holding stdout open makes a pipe reader hang after the kill: output goes to a file,
  never a pipe, so nothing waits on EOF;
- a reused pid must never be killed: a process is identified by (pid, start time from
  ``/proc/<pid>/stat``), and leftovers of a dead runner also carry the runner's token in their
  environment;
- PID 1 in containers may not reap orphans: zombies are not counted as live group members.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

TOKEN_ENV = "RESUMABLE_RUNNER_TOKEN"


def _read_stat(pid: int) -> tuple[str, int, str] | None:
    """(state, pgrp, starttime) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and ')': split after the last ')'.
    rest = data[data.rfind(")") + 2:].split()
    try:
        return rest[0], int(rest[2]), rest[19]
    except (IndexError, ValueError):
        return None


def start_token(pid: int) -> str | None:
    """An identity for a pid that a reused pid cannot share (kernel start time in ticks)."""
    st = _read_stat(pid)
    return st[2] if st else None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        st = _read_stat(int(name))
        if st and st[1] == pgid and st[0] not in ("Z", "X"):
            out.append(int(name))
    return out


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg counts zombies; only a /proc look can tell whether anything would still run.
    return bool(group_members(pgid))


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class StepHandle(Protocol):
    """What the scheduler needs from a running step (the real one and test fakes)."""

    pid: int
    pgid: int
    token: str | None

    def poll(self) -> int | None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def leftovers(self) -> bool: ...
    def fileno(self) -> int | None: ...
    def close(self) -> None: ...


class Spawner(Protocol):
    def __call__(self, argv: list[str], cwd: str, env: Mapping[str, str], log_path: str) -> StepHandle:
        ...


class StepProcess:
    """A spawned step: the session leader's Popen plus its group id."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the leader's pid is the session and group id
        self.token = start_token(popen.pid)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):
            self._pidfd = None  # pre-5.3 kernels or other OSes: the scheduler polls instead

    def poll(self) -> int | None:
        return self.popen.poll()

    def terminate(self) -> None:
        signal_group(self.pgid, signal.SIGTERM)

    def kill(self) -> None:
        signal_group(self.pgid, signal.SIGKILL)

    def leftovers(self) -> bool:
        """Whether processes of the step's group outlive its leader (only once it was reaped:
        until then the pgid cannot be reused, and afterwards the kernel keeps it reserved while
        any member lives)."""
        return group_alive(self.pgid)

    def fileno(self) -> int | None:
        return self._pidfd

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def spawn(argv: list[str], cwd: str, env: Mapping[str, str], log_path: str) -> StepHandle:
    """Start a step in its own session with stdout+stderr to ``log_path`` (truncated)."""
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return StepProcess(popen)


@dataclass(frozen=True)
class GroupRecord:
    """A running step's group as written to the runner lock, for reaping after a crash."""

    pgid: int
    token: str | None  # start token of the leader (pid == pgid)

    def to_json(self) -> dict[str, object]:
        return {"pgid": self.pgid, "startToken": self.token}


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def reap_leftovers(
    groups: Iterable[GroupRecord],
    runner_token: str | None,
    *,
    grace: float = 2.0,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> list[int]:
    """Stop what a dead runner's steps left running. A process is stopped only when it is in a
    recorded group and provably ours: it is that group's leader with the recorded start token, or
    it carries the dead runner's token in its environment. Returns the pids signalled."""
    import time

    sleep = sleep or time.sleep
    clock = clock or time.monotonic
    needle = f"{TOKEN_ENV}={runner_token}".encode() if runner_token else None
    victims: list[int] = []
    for g in groups:
        for pid in group_members(g.pgid):
            leader_ok = pid == g.pgid and g.token is not None and start_token(pid) == g.token
            if leader_ok or (needle is not None and _environ_has(pid, needle)):
                victims.append(pid)
    if not victims:
        return []
    for pid in victims:
        _kill_checked(pid, signal.SIGTERM)
    deadline = clock() + grace
    while clock() < deadline and any(_alive(p) for p in victims):
        sleep(0.02)
    for pid in victims:
        if _alive(pid):
            _kill_checked(pid, signal.SIGKILL)
    return victims


def _alive(pid: int) -> bool:
    st = _read_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _kill_checked(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
