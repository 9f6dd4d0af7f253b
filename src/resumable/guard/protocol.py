"""One invocation of a recurring job under the seed's cron-closeout protocol, fixed (§2.9-2.10):

1. take the lock without waiting; if another invocation holds it: ``SKIP: previous invocation still
   running (pid N, for 12m)``, exit 0;
2. read the state; ``--max-passes N`` (0: no cap) reached: ``SKIP``, exit 0;
3. circuit breaker: ``consecutive_failures >= --breaker`` (0: off): the seed's ``HALT`` lines, record
   that the breaker tripped (state ``breaker_tripped_at`` and the history), exit 1;
4. run the command (its own session, output to the pass's log), decide the outcome, write the state
   atomically, append the history, exit with the command's exit status.

``--dry-run`` goes through 1-3 and prints what it would run: it runs nothing and writes nothing
(a generic guard cannot make an arbitrary command harmless; the seed's flag only asked its prompt to).
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass

from resumable.errors import InvalidInputError, NoRunError, RefusedError, ResumableError, StoreError
from resumable.guard import history, outcome, passrun, state
from resumable.guard.lock import GuardLock


def default_state_dir() -> str:
    """``$ONEX_STATE_DIR/pipeline_checkpoints`` (where the seed's cron-closeout state lives, so an
    existing ``cron-closeout-state.yaml`` is picked up), else ``$XDG_STATE_HOME/resumable/guard``,
    else ``~/.local/state/resumable/guard``."""
    onex = os.environ.get("ONEX_STATE_DIR")
    if onex:
        return os.path.join(onex, "pipeline_checkpoints")
    xdg = os.environ.get("XDG_STATE_HOME")
    if not xdg or not os.path.isabs(xdg):
        home = os.path.expanduser("~")
        if home == "~":
            raise InvalidInputError("cannot find the home directory (HOME is not set); pass --state-dir")
        xdg = os.path.join(home, ".local", "state")
    return os.path.join(xdg, "resumable", "guard")


@dataclass(frozen=True)
class Paths:
    state_dir: str
    name: str

    @property
    def state(self) -> str:
        return os.path.join(self.state_dir, f"{self.name}-state.yaml")

    @property
    def lock(self) -> str:
        return os.path.join(self.state_dir, f"{self.name}.lock")

    @property
    def lock_info(self) -> str:
        return os.path.join(self.state_dir, f"{self.name}.lock-info")

    @property
    def history(self) -> str:
        return os.path.join(self.state_dir, f"{self.name}-history.jsonl")

    @property
    def logs(self) -> str:
        return os.path.join(self.state_dir, f"{self.name}-logs")


def paths_for(name: str, state_dir: str | None) -> Paths:
    # NAME becomes part of file names: one component, nothing a path join could read as more.
    # (The ledger checks ticket ids by the same rule; the guard does not import the ledger: the two
    # are independent siblings.)
    import re

    if re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name) is None or name in (".", ".."):
        raise InvalidInputError(f"Invalid guard name {name!r}: use 1-64 characters of A-Z a-z 0-9 . _ - "
                                "(not '.' or '..')")
    directory = os.path.abspath(state_dir) if state_dir else default_state_dir()
    return Paths(directory, name)


def stamp(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def say(line: str) -> None:
    """The guard's own lines, time-stamped as the seed's log() did."""
    sys.stdout.write(f"[{stamp(utcnow())}] {_escape(line)}\n")
    sys.stdout.flush()


@dataclass(frozen=True)
class Options:
    name: str
    command: tuple[str, ...]
    state_dir: str | None = None
    max_passes: int = 0
    breaker: int = 3
    dry_run: bool = False
    outcome_from_output: bool = False


def run_guarded(opts: Options, out: Callable[[str], None] = say) -> int:
    """One invocation; returns the exit code (see the module docstring)."""
    if not opts.command:
        raise InvalidInputError("no command given: resumable guard NAME [options] -- CMD [ARGS...]")
    paths = paths_for(opts.name, opts.state_dir)
    _make_dir(paths.state_dir)
    started = utcnow()
    lock = GuardLock(paths.lock, paths.lock_info)
    if not lock.try_acquire(stamp(started)):
        holder = lock.holder()
        pid = holder.pid if holder.pid is not None else "unknown"
        out(f"SKIP: previous invocation still running (pid {pid}, for {holder.age(utcnow())})")
        return 0
    try:
        current = state.read(paths.state, opts.name) or state.GuardState()
        _refuse_planted(paths.history)
        if opts.max_passes > 0 and current.pass_count >= opts.max_passes:
            out(f"SKIP: max passes reached ({current.pass_count} >= {opts.max_passes})")
            return 0
        if opts.breaker > 0 and current.consecutive_failures >= opts.breaker:
            return _halt(opts, paths, current, out)
        number = current.pass_count + 1
        if opts.dry_run:
            import shlex

            out(f"DRY RUN: would start pass {number} (last: {current.last_status} at {current.last_run_at}): "
                f"{shlex.join(opts.command)}")
            return 0
        return _pass(opts, paths, current, number, out)
    finally:
        lock.release()


def _halt(opts: Options, paths: Paths, current: state.GuardState, out: Callable[[str], None]) -> int:
    out(f"HALT: {current.consecutive_failures} consecutive failures detected. Manual intervention required.")
    out(f"  Last status: {current.last_status}")
    out(f"  Last run: {current.last_run_at}")
    out(f"  Reset by deleting or editing: {paths.state}")
    out(f"  Or run: resumable guard reset {opts.name}")
    if not opts.dry_run:
        now = stamp(utcnow())
        state.write(paths.state, state.after_halt(current, now), opts.name)
        history.append(paths.history, {"event": "halt", "at": now,
                                       "consecutive_failures": current.consecutive_failures,
                                       "breaker": opts.breaker})
    _stderr(f"{opts.name}: halted by the circuit breaker after {current.consecutive_failures} consecutive "
            f"failures (resumable guard reset {opts.name})")
    return 1


def _pass(opts: Options, paths: Paths, current: state.GuardState, number: int, out: Callable[[str], None]) -> int:
    started = utcnow()
    _make_dir(paths.logs, ours=True)
    log_path, log_fd = passrun.open_log(os.path.join(paths.logs, f"pass-{number}-{started.strftime('%Y%m%dT%H%M%SZ')}"))
    env = dict(os.environ)
    env.update({"RESUMABLE_GUARD_NAME": opts.name, "RESUMABLE_GUARD_PASS": str(number),
                "RESUMABLE_GUARD_LAST_STATUS": current.last_status,
                "RESUMABLE_GUARD_LAST_RUN_AT": current.last_run_at,
                "RESUMABLE_GUARD_CONSECUTIVE_FAILURES": str(current.consecutive_failures),
                "RESUMABLE_GUARD_LOG": log_path})
    out(f"Starting pass {number} (last: {current.last_status} at {current.last_run_at}); output: {log_path}")
    error: ResumableError | None = None
    try:
        code = passrun.run(opts.command, log_fd, env)
    except passrun.CommandNotStarted as exc:
        code, error = exc.code, exc
    finally:
        os.close(log_fd)
    output = passrun.iter_chunks(log_path) if opts.outcome_from_output and error is None else None
    status = outcome.outcome(code, output)
    finished = stamp(utcnow())
    try:
        state.write(paths.state, state.after_pass(current, status, code, finished), opts.name)
        history.append(paths.history, {"event": "pass", "pass": number, "started_at": stamp(started),
                                       "finished_at": finished, "status": status, "exit_code": code,
                                       "log": log_path})
    except ResumableError as exc:
        # The pass ran; say plainly what could not be recorded, and never report it as a success.
        _stderr(f"{opts.name}: pass {number} ended {status} (exit {code}) but it could not be recorded: {exc}")
        return code or 1
    out(f"Pass {number} completed: {status} (exit {code})")
    if error is not None:
        _stderr(str(error))
    return code


def _refuse_planted(path: str) -> None:
    """Refuse before the pass, not after it, a file the guard will write that is not a plain file."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise state.refused(path, mode)


def _make_dir(path: str, *, ours: bool = False) -> None:
    """Create ``path``; a directory the guard names itself (``ours``, e.g. the log directory) must not
    be a planted link (the state directory the user names may be one)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from exc
    mode = os.lstat(path).st_mode
    if ours and not stat.S_ISDIR(mode):
        raise state.refused(path, mode)
    if not os.path.isdir(path):
        raise StoreError(f"{path} is not a directory")


def status_text(name: str, state_dir: str | None, with_history: bool) -> str:
    """``guard status``: the state, whether a pass is running, and with ``with_history`` every event."""
    paths = paths_for(name, state_dir)
    current = state.read(paths.state, name)
    events = history.read(paths.history) if with_history else []
    if current is None and not events and not os.path.exists(paths.lock):
        raise NoRunError(f"no guard state for {name} in {paths.state_dir}")
    current = current or state.GuardState()
    lock = GuardLock(paths.lock, paths.lock_info)
    running = "no"
    if lock.held_elsewhere():
        holder = lock.holder()
        running = f"yes (pid {holder.pid if holder.pid is not None else 'unknown'}, for {holder.age(utcnow())})"
    code = "-" if current.last_exit_code is None else str(current.last_exit_code)
    breaker = "not tripped" if current.breaker_tripped_at == "never" else f"TRIPPED at {current.breaker_tripped_at}"
    lines = [f"guard {name}  (state {paths.state})",
             f"  running:              {running}",
             f"  passes:               {current.pass_count}",
             f"  last status:          {current.last_status} (exit {code}) at {current.last_run_at}",
             f"  consecutive failures: {current.consecutive_failures}",
             f"  breaker:              {breaker}"]
    if with_history:
        lines.append("")
        lines.append("  PASS  STARTED               FINISHED              STATUS   EXIT  LOG")
        for event in events:
            lines.append("  " + _history_line(event))
    return _escape("\n".join(lines)) + "\n"


def _history_line(event: dict[str, object] | None) -> str:
    if event is None:
        return "(unreadable line)"
    kind = event.get("event")
    if kind == "pass":
        started, finished = event.get("started_at", ""), event.get("finished_at", "")
        return (f"{event.get('pass', '?')!s:<5} {started!s:<21} {finished!s:<21} "
                f"{event.get('status', '')!s:<8} {event.get('exit_code', '')!s:<5} {event.get('log', '')}")
    if kind == "halt":
        return (f"{'-':<5} {event.get('at', '')!s:<21} {'':<21} {'HALT':<8} {'':<5} "
                f"breaker {event.get('breaker', '?')}, {event.get('consecutive_failures', '?')} consecutive failures")
    if kind == "reset":
        return f"{'-':<5} {event.get('at', '')!s:<21} {'':<21} {'reset':<8} {'':<5} {event.get('what', '')}"
    return f"(unknown event {kind!r})"


def _stderr(message: str) -> None:
    sys.stderr.write(f"resumable: {_escape(message)}\n")


def _escape(text: str) -> str:
    return "".join(ch if ch == "\n" or (0x20 <= ord(ch) != 0x7F and not 0x80 <= ord(ch) < 0xA0)
                   else f"\\x{ord(ch):02x}" for ch in text)


def reset(name: str, state_dir: str | None, everything: bool, out: Callable[[str], None] = say) -> int:
    """``guard reset``: clear the breaker (``everything``: the whole state). Refused while a pass runs."""
    paths = paths_for(name, state_dir)
    if not os.path.isdir(paths.state_dir):
        raise NoRunError(f"no guard state for {name} in {paths.state_dir}")
    lock = GuardLock(paths.lock, paths.lock_info)
    if not lock.try_acquire(stamp(utcnow())):
        holder = lock.holder()
        raise RefusedError(f"{name} is running (pid {holder.pid if holder.pid is not None else 'unknown'}, for "
                           f"{holder.age(utcnow())}); reset it when the pass has ended")
    try:
        current = state.read(paths.state, name)
        if current is None and not everything:
            raise NoRunError(f"no guard state for {name} in {paths.state_dir}")
        if everything:
            fresh = state.GuardState()
            what = "everything (pass count, status, breaker)"
        else:
            assert current is not None
            from dataclasses import replace

            fresh = replace(current, consecutive_failures=0, breaker_tripped_at="never")
            what = f"breaker (consecutive failures were {current.consecutive_failures})"
        state.write(paths.state, fresh, name)
        history.append(paths.history, {"event": "reset", "at": stamp(utcnow()), "what": what})
        out(f"Reset {name}: {what}")
        return 0
    finally:
        lock.release()
