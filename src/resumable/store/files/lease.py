"""The runner lease of the file store: an flock on ``<stem>.runner.lock`` held for the runner's life.

The kernel drops the lock when the holder dies, however it dies, so a SIGKILLed runner leaves no
lock behind and nothing is ever taken over on a timer. The file is never unlinked (unlinking a lock
file lets two processes lock two different inodes).

The file's content (JSON) is information, never an instruction: it names the holder in a refusal
and lists the process groups of running steps with the runner's secret, so the next runner can stop
what a dead one left running. A process is only ever signalled when it is proven to carry that
secret in its environment (``runner.process``); a forged file can name any pid and cannot make a
process carry a secret. What dead runners left is kept as ``leftovers`` and only shrinks as groups
are proven gone, so a runner interrupted while reaping leaves the list for the next one.

A runner's secret is in the file from the moment it holds the lease, so whatever it starts is
covered from the first instant, tracked or not; when it releases the lease (or dies), the secret
becomes a leftover: the next runner makes sure nothing carrying it lives before it starts anything
(a step's daemon, or the grandchild of an interrupted step, may have left the step's group).

``holder`` (``status``, ``doctor``) reads the kernel's lock table and takes nothing (``survey``). A
low-level verb's write asking whether a runner owns the run, and ``holder`` where the table cannot tell,
probe the lease with a brief shared flock: a runner starting at that instant would find the lock
taken, so ``acquire`` tries again for ``PROBE_GRACE`` seconds unless the file proves a live runner
holds it.

The file carries its format (``v``): a file a newer resumable wrote is refused in one line
(``NewerFormatError``), never read with this format's meaning: its leftovers might not be found.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import socket
import stat
import time

from resumable.core import jsonio
from resumable.core.stamps import stamp
from resumable.errors import NewerFormatError, RefusedError
from resumable.procfs import stat_of
from resumable.store.files import survey
from resumable.store.files.layout import check_log_dir, create_runs_dir, translate
from resumable.store.values import LEASE_FORMAT, LeftoverGroup

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TypedDict

    from resumable.store.backend import LeaseHolder, WorkerPresence

    class LeaseRecord(TypedDict, total=False):
        """What a runner writes in its lease file (``FileRunnerLease._write``); read back, the file is
        any JSON a hand or an older resumable left, judged key by key."""

        v: int
        pid: int
        host: str
        startedAt: str
        start: str | None  # the runner's start time (``/proc/<pid>/stat``), against pid reuse
        secret: str  # until it releases the lease
        groups: list[dict[str, object]]  # ``LeftoverGroup.to_json``: the groups it runs now
        leftovers: list[dict[str, object]]  # and those dead runners left, not proven gone yet

FORMAT = LEASE_FORMAT
# How long a runner keeps trying for a lease held by something it cannot prove is a live runner:
# readers hold a shared flock for microseconds, so this is generous, and short enough to pass
# unnoticed in a refusal.
PROBE_GRACE = 0.2
SYNC_EVERY = 0.5  # seconds between rewrites of the running groups (``FileRunnerLease.sync``)
_PROBE_POLL = 0.005


def _proc_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/<pid>/stat), against pid reuse."""
    st = stat_of(pid)
    return st[2] if st is not None else None


def held_by_live_runner(info: Mapping[str, object]) -> bool:
    """Whether the lease content proves a live runner holds it: a runner on this host whose process
    is alive with the recorded start time, and which has not released the lease (its secret is
    still there). Anything else may be a reader's probe, or a runner that took the lock this
    instant and has not written itself in yet: both go away in far less than ``PROBE_GRACE``."""
    pid, start, secret = info.get("pid"), info.get("start"), info.get("secret")
    if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and isinstance(start, str)
            and isinstance(secret, str) and secret):
        return False
    return info.get("host") == socket.gethostname() and _proc_start(pid) == start


def newer_format(info: Mapping[str, object]) -> int | None:
    """The lease file's format when a newer resumable wrote it, else None."""
    version = info.get("v")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT:
        return version
    return None


def describe(info: Mapping[str, object]) -> str:
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {info.get('startedAt', '?')}"


def _open_regular(path: str, flags: int) -> int:
    """Open without following a link and without blocking on a FIFO; refuse anything but a file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def _read(fd: int) -> dict[str, object]:
    try:
        return survey.parse(os.pread(fd, survey.MAX_BYTES, 0))
    except OSError:
        return {}


def _groups(value: object, default_secret: object) -> list[LeftoverGroup]:
    """Group records from a lock file, of this format or of 0.1.0's (token per runner)."""
    out: list[LeftoverGroup] = []
    if not isinstance(value, list):
        return out
    for g in value:
        if not isinstance(g, dict):
            continue
        pgid = g.get("pgid")
        start = g.get("start", g.get("startToken"))
        secret = g.get("secret", default_secret)
        # pgid 0: a whole runner (``whole_runner``); no group is ever signalled as a group, only
        # processes proven to carry the secret, so a forged pgid names nothing.
        if isinstance(pgid, int) and not isinstance(pgid, bool) and (pgid == 0 or pgid > 1) \
                and isinstance(secret, str) and secret:
            out.append(LeftoverGroup(pgid, start if isinstance(start, str) else None, secret))
    return out


def check_not_loose(directory: str) -> None:
    """Refuse a runs directory other users may write to, as ssh refuses loose permissions: anyone who
    can write there could plant files that a runner reads."""
    try:
        st = os.stat(directory)
    except OSError as exc:
        raise translate(exc, f"cannot use runs directory {directory}") from exc
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RefusedError(
            f"runs directory {directory} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}):"
            f" run `chmod go-w {directory}` first")


class FileRunnerLease:
    """The lease file's content, rewritten in place (one pwrite, never a rename: the flock is on the
    inode). A runner records its secret before it starts anything, so whatever it starts is
    covered from the first instant: the next runner stops every process carrying it
    (``whole_runner``), tracked group or not, before anything else."""

    def __init__(self, path: str, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self.fd: int | None = None
        self._secret = secrets.token_hex(16)
        self._running: dict[int, LeftoverGroup] = {}
        self._leftovers: list[LeftoverGroup] = []
        self._size = 0  # bytes in the file: a shorter rewrite pads to it (see _write)
        self._tracked = False  # started a process group: it may leave processes behind
        self._dirty = False  # the running groups changed since the file was written
        self._synced = 0.0  # when it was (monotonic)
        self.info: LeaseRecord = {}

    @property
    def secret(self) -> str:
        return self._secret

    def acquire(self) -> None:
        directory = os.path.dirname(self.path) or "."
        create_runs_dir(directory)
        check_not_loose(directory)
        try:
            fd = _open_regular(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise translate(exc, f"cannot open runner lock {self.path}") from exc
        try:
            self._lock(fd)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        try:
            previous = _read(fd)
            version = newer_format(previous)
            if version is not None:
                # Its leftovers may be recorded in a way this version would not find: starting
                # steps could then run beside a newer runner's. Refused before anything is changed.
                raise NewerFormatError(
                    f"{self.path} was written by a newer resumable (runner lease format {version}, this"
                    f" one reads up to {FORMAT}): upgrade resumable to run {self.run_id}")
            st = os.fstat(fd)
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o600)  # it holds the secret: the owner's eyes only
            self._size = st.st_size
            # What dead runners left: their leftovers not yet proven gone, the groups the last one
            # was running and, if it died holding the lease, everything carrying its secret. All
            # kept in the file until proven gone (``reaped``).
            inherited = _groups(previous.get("leftovers"), None) + _groups(previous.get("groups"),
                                                                              previous.get("token"))
            dead = previous.get("secret")
            if isinstance(dead, str) and dead:
                inherited.append(whole_runner(dead))
            self._leftovers = list(dict.fromkeys(inherited))
            # A link planted for the step logs is refused now, before this runner writes anything.
            check_log_dir(directory, self.run_id, create=False)
            self.info = {
                "v": FORMAT,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "startedAt": stamp(),
                "start": _proc_start(os.getpid()),
                "secret": self._secret,
            }
            # Must reach the file before any step starts: it is what lets the next runner stop
            # this one's steps if it dies.
            self._write(strict=True)
        except BaseException as exc:
            self.fd = None
            os.close(fd)  # released as it was found: nothing of this runner was written yet
            if isinstance(exc, OSError):
                raise translate(exc, f"cannot record this runner in {self.path}") from exc
            raise

    def _lock(self, fd: int) -> None:
        """Take the flock on ``fd``; RefusedError naming the holder when a runner holds it. A holder
        not proven to be a live runner (``held_by_live_runner``) gets ``PROBE_GRACE`` to let go."""
        deadline: float | None = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                holder = _read(fd)
            now = time.monotonic()
            if deadline is None:
                deadline = now + PROBE_GRACE
            if held_by_live_runner(holder) or now >= deadline:
                raise RefusedError(
                    f"run {self.run_id!r} is already being run by {describe(holder)};"
                    " wait for it to finish or stop it (Ctrl-C / kill that pid)")
            time.sleep(_PROBE_POLL)

    def holder(self) -> LeaseHolder | None:
        """Read from the kernel's lock table (``survey``); a brief shared flock only where the table
        cannot tell: without /proc/locks, or for a lease written on another host."""
        try:
            fd = _open_regular(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            info = _read(fd)
            locks = survey.locked_inodes()
            held = survey.held(info, os.fstat(fd), locks) if locks is not None else None
            if held is None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    held = False
                except BlockingIOError:
                    held = True
        except OSError:
            return None
        finally:
            os.close(fd)
        if not held:
            return None
        found: LeaseHolder = {}
        if "pid" in info:
            found["pid"] = info["pid"]
        if "host" in info:
            found["host"] = info["host"]
        if "startedAt" in info:
            found["startedAt"] = info["startedAt"]
        return found or {"pid": "?"}

    def workers(self) -> list[WorkerPresence] | None:
        return None  # a runs directory's steps run under its runner, which holds this lease

    def leftovers(self) -> list[LeftoverGroup]:
        return list(self._leftovers)

    def reaped(self, groups: Sequence[LeftoverGroup]) -> None:
        gone = set(groups)
        self._leftovers = [g for g in self._leftovers if g not in gone]
        self._write()

    def track(self, group: LeftoverGroup) -> None:
        first = not self._tracked
        self._tracked = True
        self._running[group.pgid] = group
        self._dirty = True
        if first:
            self._write()
        else:
            self.sync()

    def untrack(self, pgid: int) -> None:
        if self._running.pop(pgid, None) is not None:
            self._dirty = True
            self.sync()

    def sync(self) -> None:
        """Rewrite the list of running groups if it changed, at most every ``SYNC_EVERY`` seconds.
        The list is information (``doctor`` names a dead runner's groups): what stops a dead
        runner's processes is its secret, in the file from the start, which every one of them
        carries. A step of a few milliseconds would otherwise cost two rewrites of this file."""
        if not self._dirty:
            return
        if time.monotonic() - self._synced >= SYNC_EVERY:
            self._write()

    def _write(self, *, strict: bool = False) -> None:
        # No fsync: the content matters only if this runner dies while the machine stays up, and
        # then the page cache has it (after a reboot no process of ours is left to stop). Failing
        # to write (disk full) must not stop the work either, except at acquire (``strict``).
        # One pwrite over the old content, padded with spaces (JSON whitespace) to its length,
        # then a truncate: the file holds a complete JSON document at every instant, so a runner
        # killed half way through never leaves the next one an unreadable file (which would read
        # as "nothing left running").
        if self.fd is None:
            return
        self._dirty, self._synced = False, time.monotonic()
        self.info["groups"] = [_started(g).to_json() for g in self._running.values()]
        self.info["leftovers"] = [g.to_json() for g in self._leftovers]
        data = jsonio.dumps(self.info)
        try:
            os.pwrite(self.fd, data.ljust(self._size), 0)
            if self._size > len(data):
                os.ftruncate(self.fd, len(data))
            self._size = len(data)
        except OSError:
            if strict:
                raise

    def release(self) -> None:
        if self.fd is not None:
            # Once a step was started, nothing proves that no process of ours is left: steps still
            # tracked (the runner is leaving through an error), or a process that left its step's
            # group (a daemon, or the grandchild of an interrupted step). The next runner checks,
            # before it starts anything, that nothing carrying our secret lives, stopping what does.
            # (A holder that started nothing, such as --reset, leaves nothing to check.)
            ours = [whole_runner(self._secret)] if self._tracked or self._running else []
            self._leftovers = list(dict.fromkeys([*self._leftovers, *self._running.values(), *ours]))
            self._running.clear()
            self.info.pop("secret", None)
            self._write()
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None


def _started(group: LeftoverGroup) -> LeftoverGroup:
    """The group with its leader's start time, looked up now if the runner left it to the lease
    (it is read only for groups still tracked, whose leader is not reaped yet)."""
    if group.start is None and group.pgid > 0:
        group.start = _proc_start(group.pgid)
    return group


def whole_runner(secret: str) -> LeftoverGroup:
    """Every process carrying an earlier runner's secret, whatever its group (pgid 0): a step
    started just before its runner died, not yet tracked, or a process that left its step's group."""
    return LeftoverGroup(0, None, secret)
