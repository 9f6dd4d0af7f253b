"""Step processes: each step in its own session, output to a log file, whole-group termination.

Hazards guarded against (each one a weakness of checkpoint-run):
- killing only the shell leaves grandchildren running: every step gets its own session
  (``start_new_session``), and signals go to the process group;
- a grandchild holding stdout open makes a pipe reader hang after the kill: output goes to a file,
  never a pipe, so nothing waits on EOF;
- a reused pid, or any process a forged lock file names, must never be killed: a dead runner's
  leftovers are only signalled when they carry that runner's secret in their environment;
- a log planted as a link would have a step's output overwrite its target: logs are opened
  without following links, as regular files only;
- PID 1 in containers may not reap orphans: zombies are not counted as live group members.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from resumable import fsio
from resumable.procfs import stat_of
from resumable.runner import libcspawn
from resumable.store.values import LeftoverGroup

TOKEN_ENV = "RESUMABLE_RUNNER_TOKEN"


def start_token(pid: int) -> str | None:
    """An identity for a pid that a reused pid cannot share (kernel start time in ticks)."""
    st = stat_of(pid)
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
        st = stat_of(int(name))
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


class BaseEnv:
    """The environment every step of a run shares, encoded for C once rather than at every start
    (``libcspawn``): the encoding of a few dozen variables would cost as much as the start."""

    __slots__ = ("_encoded", "_without", "vars")

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.vars = dict(variables)
        self._encoded: dict[str, bytes] | None = None
        # The encoded entries but those a step sets itself, per set of names it sets (the same few
        # for every step of a run).
        self._without: dict[tuple[str, ...], list[bytes]] = {}

    def encoded_without(self, names: tuple[str, ...]) -> list[bytes]:
        got = self._without.get(names)
        if got is None:
            if self._encoded is None:
                from resumable.runner.libcspawn import env_entry

                self._encoded = {k: env_entry(k, v) for k, v in self.vars.items()}
            skip = set(names)
            got = self._without[names] = [e for k, e in self._encoded.items() if k not in skip]
        return got


class StepEnv(Mapping[str, str]):
    """One step's environment: the shared ``base`` with the step's own variables over it."""

    __slots__ = ("base", "extra")

    def __init__(self, base: BaseEnv, extra: dict[str, str]) -> None:
        self.base = base
        self.extra = extra

    def __getitem__(self, key: str) -> str:
        extra = self.extra
        return extra[key] if key in extra else self.base.vars[key]

    def __iter__(self) -> Iterator[str]:
        extra = self.extra
        yield from (k for k in self.base.vars if k not in extra)
        yield from extra

    def __len__(self) -> int:
        return len(self.base.vars) + sum(1 for k in self.extra if k not in self.base.vars)

    def encoded(self) -> list[bytes]:
        from resumable.runner.libcspawn import env_entry

        extra = self.extra
        out = list(self.base.encoded_without(tuple(extra)))
        out.extend(env_entry(k, v) for k, v in extra.items())
        return out


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


_LOG_DIRS: set[str] = set()  # log directories known to exist: one mkdir per directory, not per step


def open_log(log_path: str) -> int:
    """The step's log, truncated, as a descriptor. Never through a link, and only a regular file
    (``fsio.open_regular``): truncating through a link planted at a log's name would destroy the
    link's target, and a FIFO there would block the runner. The run's own log directory was
    checked the same way (``RunHandle.log_dir``); a log path the user chose gets its missing
    directories made."""
    directory = os.path.dirname(log_path) or "."
    if directory not in _LOG_DIRS:
        os.makedirs(directory, exist_ok=True)
        _LOG_DIRS.add(directory)
    try:
        return fsio.open_regular(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except FileNotFoundError:
        # The directory went away since it was made (a cleanup while the run goes on): make it again.
        os.makedirs(directory, exist_ok=True)
        return fsio.open_regular(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def spawn(argv: list[str], cwd: str, env: Mapping[str, str], log_path: str) -> StepHandle:
    """Start a step in its own session with stdout+stderr to ``log_path`` (truncated). A step this
    runner started before (a retry) first has its earlier attempts' strays stopped."""
    key = (env.get(TOKEN_ENV), env.get("RESUMABLE_RUN"), env.get("RESUMABLE_STEP"))
    if key[0] and key[1] is not None and key[2] is not None:
        started = (key[0], key[1], key[2])
        if started in _started:
            stop_earlier_attempts(*started)
        _started.add(started)
    log = open_log(log_path)
    try:
        if _spawnable(cwd):
            pid = _posix_spawn(argv, env, log)
            if pid is not None:
                return SpawnedStep(pid)
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
    finally:
        os.close(log)
    return StepProcess(popen)


# -- the short way to start a step: posix_spawn ------------------------------------------------------
#
# subprocess.Popen spends about 0.1 ms of Python per start (its pipe to the child, the environment
# encoded entry by entry, a search of PATH per start); os.posix_spawn does the same in C, with the
# program found once per name. It cannot change directory or close descriptors, so it is used only
# for a step that runs in the runner's own directory while no descriptor beyond 0-2 would be
# inherited (Python opens every descriptor non-inheritable, PEP 446; one inherited from the
# runner's parent, or made inheritable by the program embedding the runner, sends every step
# through Popen, which closes them all).

_PROGRAMS: dict[tuple[str, str], str] = {}  # (name, PATH) -> the executable it found
_FDS_CHECKED = [-1.0, 0.0]  # (monotonic time of the last look at /proc/self/fd, 1.0 if one is inheritable)
_DEVNULL: list[int] = []
# Python ignores SIGPIPE (and SIGXFSZ) for itself; a program expects them at their default, as
# Popen's restore_signals gives them.
_DEFAULT_SIGNALS = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, n))


def _spawnable(cwd: str) -> bool:
    if not hasattr(os, "posix_spawn"):
        return False
    try:
        if cwd != os.getcwd():
            return False
    except OSError:
        return False
    import time

    now = time.monotonic()
    if now - _FDS_CHECKED[0] >= 1.0:  # at most once a second: a scan costs as much as a start
        _FDS_CHECKED[0], _FDS_CHECKED[1] = now, float(_inheritable_fds())
    return not _FDS_CHECKED[1]


def _inheritable_fds() -> bool:
    """Whether a descriptor above 2 of this process would be inherited by a program it starts."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return True  # cannot tell: Popen closes them
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    return True
            except OSError:
                continue  # the listing's own descriptor, closed by now
    return False


def seal_inherited_fds() -> None:
    """Make every descriptor above 2 that this process inherited close on exec: steps get only
    stdin, stdout and stderr, as Popen's ``close_fds`` gives them, and can start the short way.
    For the command line only: a program embedding the runner keeps its descriptors as it made them."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                continue  # the listing's own descriptor, closed by now
    _FDS_CHECKED[0] = -1.0


def _program(name: str, path: str) -> str | None:
    """The executable ``name`` names, found on ``path`` as execvp would (a name with a slash is
    taken as it is); only finds are remembered: a program a step builds may appear later."""
    if "/" in name:
        return name
    found = _PROGRAMS.get((name, path))
    if found is None:
        import shutil

        found = shutil.which(name, path=path)
        if found is not None:
            _PROGRAMS[(name, path)] = found
    return found


def _posix_spawn(argv: list[str], env: Mapping[str, str], log: int) -> int | None:
    """The pid of ``argv`` started in a new session with its output to ``log``; None when it is
    better left to Popen (a program not found, whose error Popen words)."""
    if not argv:
        return None
    path = env.get("PATH", os.defpath)
    program = _program(argv[0], path)
    if program is None:
        return None
    if not _DEVNULL:
        _DEVNULL.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
    try:
        if libcspawn.available(_DEFAULT_SIGNALS):
            # Without the GIL: the runner's other threads go on while the child execs.
            entries = env.encoded() if isinstance(env, StepEnv) else [
                libcspawn.env_entry(k, v) for k, v in env.items()]
            return libcspawn.spawn(program, argv, entries, ((_DEVNULL[0], 0), (log, 1), (log, 2)),
                                   _DEFAULT_SIGNALS)
        actions = [(os.POSIX_SPAWN_DUP2, _DEVNULL[0], 0), (os.POSIX_SPAWN_DUP2, log, 1),
                   (os.POSIX_SPAWN_DUP2, log, 2)]
        return os.posix_spawn(program, argv, env, file_actions=actions, setsid=True,
                              setsigdef=_DEFAULT_SIGNALS)
    except OSError:
        # Gone or changed since it was found: look again, and let Popen word an error.
        _PROGRAMS.pop((argv[0], path), None)
        return None


class SpawnedStep:
    """A step started by posix_spawn: its pid, reaped with waitpid."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.pgid = pid  # setsid: the leader's pid is the session and group id
        self.token: str | None = None  # looked up by whoever records the group (the lease)
        self.returncode: int | None = None
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler of the embedding program)
                self.returncode = 255
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def terminate(self) -> None:
        signal_group(self.pgid, signal.SIGTERM)

    def kill(self) -> None:
        signal_group(self.pgid, signal.SIGKILL)

    def leftovers(self) -> bool:
        return group_alive(self.pgid)

    def fileno(self) -> int | None:
        return self._pidfd

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _environments() -> Iterable[tuple[int, set[bytes]]]:
    """(pid, environment entries) of every process whose environment this one may read (the same
    user's, or all for root), never this process."""
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                yield int(name), set(f.read().split(b"\0"))
        except OSError:
            continue  # gone, or another user's (then it cannot carry our secret)


def carriers(secrets: Iterable[str]) -> dict[str, list[int]]:
    """Live processes (never this one) carrying each secret as ``RESUMABLE_RUNNER_TOKEN`` in their
    environment, from /proc/<pid>/environ, which only the same user (or root) can read."""
    needles = {f"{TOKEN_ENV}={s}".encode(): s for s in secrets}
    found: dict[str, list[int]] = {s: [] for s in needles.values()}
    if not needles:
        return found
    for pid, entries in _environments():
        for needle in entries.intersection(needles):
            if _alive(pid):
                found[needles[needle]].append(pid)
    return found


def _stop(find: Callable[[], set[int]], grace: float, sleep: Callable[[float], None],
          clock: Callable[[], float]) -> tuple[set[int], set[int]]:
    """SIGTERM to every process ``find`` returns, up to ``grace`` seconds, then SIGKILL, asking
    ``find`` again each round (a process forked meanwhile is caught too); (signalled, alive)."""
    signalled: set[int] = set()
    pids: set[int] = set()
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):  # SIGKILL is not instant
        deadline = clock() + wait
        sent: set[int] = set()
        while True:
            pids = find()
            for pid in pids - sent if sig == signal.SIGTERM else pids:
                _kill_checked(pid, sig)
            sent |= pids
            signalled |= pids
            if not pids or clock() >= deadline:
                break
            sleep(0.05)
        if not pids:
            break
    return signalled, find()


def reap(
    groups: Iterable[LeftoverGroup],
    *,
    grace: float = 2.0,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
    stopped: list[int] | None = None,
) -> tuple[list[LeftoverGroup], list[int]]:
    """Stop what earlier runners' steps left running: (groups proven gone, pids still alive).

    A process is signalled only when it is proven ours: it carries the recording runner's secret in
    its environment (/proc/<pid>/environ, readable only by the same user or root), wherever it is
    (its step's group, a group it made for itself, a step started just before its runner died and
    never tracked). A forged lock file can name any group and cannot make a process carry the
    secret; a pid reused by another program does not carry it either. The recorded pgid and start
    time are never trusted for a signal. SIGTERM, up to ``grace`` seconds, then SIGKILL. A group is
    gone once no process carries its secret. ``stopped`` collects the pids signalled."""
    import time

    groups = list(groups)
    secrets = {g.secret for g in groups}

    def live() -> set[int]:
        return {pid for pids in carriers(secrets).values() for pid in pids}

    signalled, _ = _stop(live, grace, sleep or time.sleep, clock or time.monotonic)
    found = carriers(secrets)
    gone = [g for g in groups if not found.get(g.secret)]
    alive = sorted({p for pids in found.values() for p in pids})
    if stopped is not None:
        stopped.extend(sorted(signalled))
    return gone, alive


# Steps this process started, as (secret, run, step): a step started again by the same runner (a
# retry) first has what its earlier attempt left outside its group stopped (see spawn).
_started: set[tuple[str, str, str]] = set()


def forget_started(secret: str, run: str, step: str) -> None:
    """The step is over for this runner (done): it will not be started again, nothing to remember."""
    _started.discard((secret, run, step))


def stop_earlier_attempts(secret: str, run: str, step: str, *, grace: float = 2.0) -> None:
    """Stop processes of earlier attempts of ``step`` that this runner started and that left the
    step's process group (so the group's termination missed them): every process carrying this
    runner's secret and the step's run and id in its environment. OSError (EBUSY) when some
    cannot be stopped: the attempt must not start while they live."""
    import errno
    import time

    needles = {f"{TOKEN_ENV}={secret}".encode(), f"RESUMABLE_RUN={run}".encode(),
               f"RESUMABLE_STEP={step}".encode()}

    def live() -> set[int]:
        return {pid for pid, entries in _environments() if needles <= entries and _alive(pid)}

    if not live():
        return
    _signalled, alive = _stop(live, grace, time.sleep, time.monotonic)
    if alive:
        raise OSError(errno.EBUSY, f"processes of an earlier attempt are still alive (pids {sorted(alive)})")


def _alive(pid: int) -> bool:
    st = stat_of(pid)
    return st is not None and st[0] not in ("Z", "X")


def _kill_checked(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def interrupt_on_signals(interrupt: Callable[[], None]) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP -> ``interrupt()``; returns a function restoring the old handlers.
    SIGHUP too: a dropped SSH session is the commonest way a long job gets interrupted."""
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def handler(signum: int, frame: object) -> None:
        interrupt()

    for sig in old:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore
