"""One live runner per run: an flock on ``<runs-dir>/<id>.runner.lock`` held for the runner's life.

The kernel drops the lock when the holder dies, however it dies, so a SIGKILLed runner leaves no
lock behind and nothing is ever "stolen" on a timer. The file's content (JSON: pid, host, start
time, start token, the process groups of running steps) is only information: it names the holder
in the refusal message, and tells the next runner which leftover groups of a dead runner to reap.
The file is never unlinked: unlinking a lock file lets two processes lock two different inodes.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from resumable.errors import RefusedError, StoreError
from resumable.runner.process import GroupRecord, start_token


def lock_path(runs_dir: Path, run_id: str) -> Path:
    return runs_dir / f"{run_id}.runner.lock"


def _describe(info: dict[str, Any]) -> str:
    pid = info.get("pid", "?")
    host = info.get("host", "?")
    started = info.get("startedAt", "?")
    return f"pid {pid} on {host}, started {started}"


def read_holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunnerLock:
    """Held from :meth:`acquire` to :meth:`release` (or process death)."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self.fd: int | None = None
        self.previous: dict[str, Any] = {}  # what the last (dead) holder left in the file
        self.token = f"{os.getpid()}-{start_token(os.getpid()) or int(time.time() * 1e6)}"
        self.info: dict[str, Any] = {}
        self._groups: dict[int, GroupRecord] = {}

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open runner lock {self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(self.path)
            os.close(fd)
            raise RefusedError(
                f"run {self.run_id!r} is already being run by {_describe(holder)}; "
                "wait for it to finish or stop it (Ctrl-C / kill that pid)"
            ) from None
        self.fd = fd
        self.previous = read_holder(self.path)
        self.info = {
            "v": 1,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "startToken": start_token(os.getpid()),
            "token": self.token,
            "groups": [],
        }
        self._write()

    def previous_groups(self) -> list[GroupRecord]:
        """Groups the previous holder recorded as running when it last wrote the file."""
        out: list[GroupRecord] = []
        for g in self.previous.get("groups") or []:
            if isinstance(g, dict) and isinstance(g.get("pgid"), int) and g["pgid"] > 1:
                tok = g.get("startToken")
                out.append(GroupRecord(g["pgid"], tok if isinstance(tok, str) else None))
        return out

    def previous_token(self) -> str | None:
        tok = self.previous.get("token")
        return tok if isinstance(tok, str) else None

    def set_groups(self, groups: Iterable[GroupRecord]) -> None:
        self._groups = {g.pgid: g for g in groups}
        self._write()

    def add_group(self, group: GroupRecord) -> None:
        self._groups[group.pgid] = group
        self._write()

    def remove_group(self, pgid: int) -> None:
        if self._groups.pop(pgid, None) is not None:
            self._write()

    def _write(self) -> None:
        # No fsync: the content matters only if this runner dies while the machine stays up, and
        # then the page cache has it. Failure to write (disk full) must not stop the work either.
        if self.fd is None:
            return
        self.info["groups"] = [g.to_json() for g in self._groups.values()]
        data = json.dumps(self.info, separators=(",", ":")).encode()
        try:
            os.pwrite(self.fd, data, 0)
            os.ftruncate(self.fd, len(data))
        except OSError:
            pass

    def release(self) -> None:
        if self.fd is not None:
            self._groups.clear()
            self._write()
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None


def is_live(runs_dir: Path, run_id: str) -> dict[str, Any] | None:
    """Holder info when a live runner holds the run, else None (probes with a non-blocking lock)."""
    path = lock_path(runs_dir, run_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_holder(path) or {"pid": "?"}
    finally:
        os.close(fd)
    return None


def describe_holder(info: dict[str, Any]) -> str:
    return _describe(info)
