"""One invocation of a recurring job under OmniNode's cron-closeout protocol, with its flaws fixed:

1. take the lock without waiting; if another invocation holds it: ``SKIP: previous invocation still
   running (pid N, for 12m)``, exit 0;
2. read the state; ``--max-passes N`` (0: no cap) reached: ``SKIP``, exit 0;
3. circuit breaker: ``consecutive_failures >= --breaker`` (0: off): cron-closeout's ``HALT`` lines, record
   that the breaker tripped (state ``breaker_tripped_at`` and the history), exit 1;
4. count the pass (state and history) before its command starts, so a guard killed mid-pass never
   loses the pass and ``--max-passes`` is never overrun; run the command (its own session, output
   to the pass's log, holding a copy of the lock), decide the outcome, write the state atomically,
   append the history, exit with the command's exit status.

A pass that was counted but never recorded its outcome (its guard was killed; the lock is ours, so
its command is gone too) is recorded as a failure by the next invocation that holds the lock. The
outcome goes into the history before the state says the pass ended: a guard killed between the two
leaves a pass the state still calls unfinished, and the next invocation takes its outcome from the
history (written once, never twice); the other order lost the outcome (the state said the pass had
ended, so nothing recorded it).

``--dry-run`` goes through 1-3 and prints what it would run: it runs nothing (a generic guard cannot
make an arbitrary command harmless; cron-closeout's flag only asked its prompt to), and where a pass or
a halt would be recorded it records only ``dry_run: true`` and a ``dry-run`` history event: the
pass count, the failure count and the breaker stay as they were.
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
    """``$ONEX_STATE_DIR/pipeline_checkpoints`` (where OmniNode's cron-closeout state lives, so an
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
    """The guard's own lines, time-stamped as cron-closeout's log() did."""
    sys.stdout.write(f"[{stamp(utcnow())}] {escape(line)}\n")
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
        out(f"SKIP: previous invocation still running ({lock.holder().describe(utcnow())})")
        return 0
    try:
        recorded = state.read(paths.state, opts.name)
        _refuse_planted(paths.history)
        current = recorded or state.GuardState()
        if current.unfinished:
            current = _settle(paths, current, out, write=not opts.dry_run)
        if opts.max_passes > 0 and current.pass_count >= opts.max_passes:
            out(f"SKIP: max passes reached ({current.pass_count} >= {opts.max_passes})")
            return 0
        if opts.breaker > 0 and current.consecutive_failures >= opts.breaker:
            code, would = _halt(opts, paths, current, out), "halt"
        elif opts.dry_run:
            import shlex

            number = current.pass_count + 1
            out(f"DRY RUN: would start pass {number} (last: {current.last_status} at {current.last_run_at}): "
                f"{shlex.join(opts.command)}")
            code, would = 0, f"start pass {number}"
        else:
            return _pass(opts, paths, current, lock, out)
        if opts.dry_run:  # the state as it was read (a killed pass stays to be recorded), but dry_run
            state.write(paths.state, state.after_dry_run(recorded or current), opts.name)
            history.append(paths.history, {"event": "dry-run", "at": stamp(utcnow()), "would": would})
        return code
    finally:
        lock.release()


def _settle(paths: Paths, current: state.GuardState, out: Callable[[str], None], *, write: bool) -> state.GuardState:
    """The pass ``current`` counted never recorded its outcome: its guard was killed (we hold the
    lock, which its command held too, so the command is gone). Recorded as a failure, as a pass a
    SIGTERM stops is: nothing vouches for it, and a job that keeps being killed must trip the
    breaker. ``write`` False (a dry run): the state that would be recorded, not written."""
    number, began = current.pass_count, current.pass_started_at
    events = [e for e in history.read(paths.history) if e is not None and e.get("pass") == number]
    ended = _recorded_outcome(events, began)
    if ended is not None:  # killed after the history had the outcome, before the state did
        status, code, finished = ended
        settled = state.after_pass(current, status, code, finished)
        if write:
            state.write(paths.state, settled, paths.name)
        out(f"Pass {number} (started {began}) ended {status} (exit {code}), as its history says; its guard was "
            f"killed before the state said so: {'recorded' if write else 'it will be recorded'}")
        return settled
    settled = state.after_pass(current, "failure", None, stamp(utcnow()))
    if write:
        state.write(paths.state, settled, paths.name)
        logs = [e.get("log") for e in events if e.get("event") == "start"]
        history.append(paths.history, {"event": "pass", "pass": number, "started_at": began, "finished_at": None,
                                       "status": "failure", "exit_code": None, "log": logs[-1] if logs else None,
                                       "note": "its guard was killed before it recorded the outcome"})
    out(f"Pass {number} (started {began}) never recorded its outcome (its guard was killed): "
        f"{'recorded' if write else 'it will be recorded'} as a failure")
    return settled


def _recorded_outcome(events: list[dict[str, object]], began: str) -> tuple[str, int, str] | None:
    """(status, exit code, finished at) of the unfinished pass, if its guard appended its outcome to
    the history before it was killed: the pass event with the pass's number and start time, and
    well-formed (the history is informational: anything else is no outcome)."""
    for event in reversed(events):
        status, code, finished = event.get("status"), event.get("exit_code"), event.get("finished_at")
        if (event.get("event") == "pass" and event.get("started_at") == began
                and status in outcome.OUTCOMES and isinstance(code, int) and not isinstance(code, bool)
                and isinstance(finished, str)):
            return status, code, finished
    return None


def _halt(opts: Options, paths: Paths, current: state.GuardState, out: Callable[[str], None]) -> int:
    hint = state.reset_command(opts.name, paths.state_dir)
    out(f"HALT: {current.consecutive_failures} consecutive failures detected. Manual intervention required.")
    out(f"  Last status: {current.last_status}")
    out(f"  Last run: {current.last_run_at}")
    out(f"  Reset by deleting or editing: {paths.state}")
    out(f"  Or run: {hint}")
    if not opts.dry_run:
        now = stamp(utcnow())
        state.write(paths.state, state.after_halt(current, now), opts.name)
        history.append(paths.history, {"event": "halt", "at": now,
                                       "consecutive_failures": current.consecutive_failures,
                                       "breaker": opts.breaker})
    _stderr(f"{opts.name}: halted by the circuit breaker after {current.consecutive_failures} consecutive "
            f"failures ({hint})")
    return 1


def _begin(opts: Options, paths: Paths, current: state.GuardState, started: dt.datetime,
           log_path: str) -> state.GuardState:
    """Count the pass before its command starts (the state is the record: without it, no pass)."""
    begun = state.after_start(current, stamp(started))
    state.write(paths.state, begun, opts.name)
    try:
        history.append(paths.history, {"event": "start", "pass": begun.pass_count, "started_at": stamp(started),
                                       "log": log_path})
    except ResumableError as exc:  # the history is informational; the state already counts the pass
        _stderr(f"{opts.name}: warning: the start of pass {begun.pass_count} is not in the history: {exc}")
    return begun


def _pass(opts: Options, paths: Paths, current: state.GuardState, lock: GuardLock, out: Callable[[str], None]) -> int:
    number = current.pass_count + 1
    started = utcnow()
    _make_dir(paths.logs, ours=True)
    log_path, log_fd = passrun.open_log(os.path.join(paths.logs, f"pass-{number}-{started.strftime('%Y%m%dT%H%M%SZ')}"))
    error: ResumableError | None = None
    try:
        try:
            begun = _begin(opts, paths, current, started, log_path)
        except ResumableError:
            try:
                os.unlink(log_path)  # no pass: no log of one
            except OSError:
                pass
            raise
        env = dict(os.environ)
        env.update({"RESUMABLE_GUARD_NAME": opts.name, "RESUMABLE_GUARD_PASS": str(number),
                    "RESUMABLE_GUARD_LAST_STATUS": current.last_status,
                    "RESUMABLE_GUARD_LAST_RUN_AT": current.last_run_at,
                    "RESUMABLE_GUARD_CONSECUTIVE_FAILURES": str(current.consecutive_failures),
                    "RESUMABLE_GUARD_LOG": log_path, "RESUMABLE_GUARD_LOCK_FD": str(lock.fd)})
        out(f"Starting pass {number} (last: {current.last_status} at {current.last_run_at}); output: {log_path}")
        try:
            code = passrun.run(opts.command, log_fd, env, inherit=(lock.fd,), on_start=lock.note_command)
        except passrun.CommandNotStarted as exc:
            code, error = exc.code, exc
    finally:
        os.close(log_fd)
    output = passrun.iter_chunks(log_path) if opts.outcome_from_output and error is None else None
    status = outcome.outcome(code, output)
    finished = stamp(utcnow())
    try:
        # The history first (see the module docstring): killed after it, the outcome is not lost.
        try:
            history.append(paths.history, {"event": "pass", "pass": number, "started_at": stamp(started),
                                           "finished_at": finished, "status": status, "exit_code": code,
                                           "log": log_path})
        except ResumableError as exc:  # informational; the state is the record
            _stderr(f"{opts.name}: warning: the outcome of pass {number} is not in the history: {exc}")
        state.write(paths.state, state.after_pass(begun, status, code, finished), opts.name)
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


def _stderr(message: str) -> None:
    sys.stderr.write(f"resumable: {escape(message)}\n")


def escape(text: str) -> str:
    """Control characters from data escaped, newlines kept (the guard's lines and status)."""
    return "".join(ch if ch == "\n" or (0x20 <= ord(ch) != 0x7F and not 0x80 <= ord(ch) < 0xA0)
                   else f"\\x{ord(ch):02x}" for ch in text)


def reset(name: str, state_dir: str | None, everything: bool, out: Callable[[str], None] = say) -> int:
    """``guard reset``: clear the breaker (``everything``: the whole state). Refused while a pass
    runs; creates nothing for a NAME that has no state."""
    paths = paths_for(name, state_dir)
    if not os.path.isdir(paths.state_dir) or not os.path.lexists(paths.state):
        raise NoRunError(f"no guard state for {name} in {paths.state_dir}")
    lock = GuardLock(paths.lock, paths.lock_info)
    if not lock.try_acquire(stamp(utcnow())):
        raise RefusedError(f"{name} is running ({lock.holder().describe(utcnow())}); reset it when the pass has "
                           "ended")
    try:
        current = _readable_for_reset(paths, everything)
        if current is not None and current.unfinished:
            current = _settle(paths, current, out, write=True)
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


def _readable_for_reset(paths: Paths, everything: bool) -> state.GuardState | None:
    """The state to reset; with ``everything`` an unreadable one too (its message says to use
    ``--all``), but never a planted link or FIFO (a StoreError)."""
    try:
        current = state.read(paths.state, paths.name)
    except InvalidInputError:
        if not everything:
            raise
        return None
    if current is None:
        raise NoRunError(f"no guard state for {paths.name} in {paths.state_dir}")
    return current
