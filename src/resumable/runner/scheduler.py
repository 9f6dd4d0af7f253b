"""The DAG scheduler: starts ready steps up to ``-j``, enforces timeouts, retries, stop rules.

It receives everything with side effects (the store writer, the monotonic clock, sleep, the process
spawner, the random source, the reporter), so tests can drive it with fakes. Outcomes are data:
a failed step is a recorded result, never an exception.

Stop rules (make's): on a final failure no new step starts and running ones finish; with
``keep_going`` every step that does not depend on a failure still runs and dependents are
``dep_blocked`` on the root failure; ``max_failures`` stops once that many steps have failed.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from resumable import fsio
from resumable.core.stamps import stamp
from resumable.runner import fingerprint as fp
from resumable.runner.explain import Decision
from resumable.runner.jobfile import Job, Step
from resumable.runner.process import TOKEN_ENV, Spawner, StepHandle
from resumable.runner.retry import RetryPolicy
from resumable.runner.writer import SafeWriter
from resumable.store.values import LeftoverGroup

MISSING_ARTIFACT_EXIT = -2  # the seed's code for "exited 0 but the artifact is missing"
_MAX_WAIT = 0.1  # an interrupt or a display tick is noticed within this long


class Reporter(Protocol):
    def start(self, job: Job, decisions: Mapping[str, Decision], estimates: Mapping[str, float]) -> None: ...
    def step_started(self, step: Step, attempt: int) -> None: ...
    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None: ...
    def step_blocked(self, step: Step, root: str) -> None: ...
    def warn(self, message: str) -> None: ...
    def tick(self) -> None: ...


class GroupTracker(Protocol):
    """Where running process groups are recorded so a later runner can reap them (the lease)."""

    @property
    def secret(self) -> str: ...
    def track(self, group: LeftoverGroup) -> None: ...
    def untrack(self, pgid: int) -> None: ...


@dataclass
class Options:
    jobs: int = 1
    keep_going: bool = False
    max_failures: int | None = None
    force: bool = False


@dataclass
class _Attempt:
    step: Step
    n: int
    handle: StepHandle
    started: float
    started_wall: float
    log: str
    fingerprint: dict[str, Any]
    deadline: float | None
    kill_at: float | None = None
    killed: bool = False
    timed_out: bool = False
    interrupted: bool = False


@dataclass
class _Draining:
    handle: StepHandle
    kill_at: float
    termed: bool = False


@dataclass
class Outcome:
    states: dict[str, str] = field(default_factory=dict)  # final state per step in this run
    failed: list[str] = field(default_factory=list)
    interrupted: bool = False
    attempts: dict[str, int] = field(default_factory=dict)  # attempts made in this run
    last_exit: dict[str, int | None] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)

    @property
    def all_done(self) -> bool:
        return not self.interrupted and all(s in ("done", "skipped") for s in self.states.values())


def next_attempt_number(unit: object) -> int:
    if not isinstance(unit, Mapping):
        return 1
    attempts = unit.get("attempts")
    ns = [a.get("n") for a in attempts if isinstance(a, Mapping)] if isinstance(attempts, list) else []
    return max([n for n in ns if isinstance(n, int)], default=0) + 1


class Scheduler:
    def __init__(
        self,
        job: Job,
        writer: SafeWriter,
        units: Mapping[str, Any],
        decisions: Mapping[str, Decision],
        options: Options,
        *,
        spawner: Spawner,
        reporter: Reporter,
        log_path: Callable[[Step, int], str],
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] | None = None,
        groups: GroupTracker | None = None,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        import random

        self.job = job
        self.w = writer
        self.units = units
        self.decisions = decisions
        self.opt = options
        self.spawn = spawner
        self.reporter = reporter
        self.log_path = log_path
        self.clock = clock
        self.wallclock = wallclock
        self.sleep = sleep
        self.rand = rand or random.random
        self.groups = groups
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.steps = {s.id: s for s in job.steps}
        self.order = {s.id: i for i, s in enumerate(job.steps)}
        self.interrupts = 0
        self.out = Outcome()

    # -- signals ------------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Called from a SIGINT/SIGTERM handler: the first stops gracefully, the second kills."""
        self.interrupts += 1

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> Outcome:
        state: dict[str, str] = {}
        for s in self.job.steps:
            if self.decisions[s.id].run:
                state[s.id] = "waiting"
            else:
                state[s.id] = "skipped"
        self.out.states = state
        next_n = {sid: next_attempt_number(self.units.get(sid)) for sid in state}
        tries: dict[str, int] = {}
        ready_at: dict[str, float] = {}  # steps waiting out a retry backoff
        running: dict[str, _Attempt] = {}
        draining: list[_Draining] = []
        blocked_root: dict[str, str] = {}
        stopping = False
        jobs = self.opt.jobs if self.opt.jobs > 0 else (os.cpu_count() or 1)
        handled_interrupts = 0

        while True:
            now = self.clock()
            if self.interrupts > handled_interrupts:
                handled_interrupts = self.interrupts
                stopping = True
                self.out.interrupted = True
                for a in running.values():
                    a.interrupted = True
                    if handled_interrupts >= 2:
                        a.handle.kill()
                    elif a.kill_at is None:
                        a.handle.terminate()
                        a.kill_at = now + a.step.grace
                for d in draining:
                    if handled_interrupts >= 2:
                        d.handle.kill()
                ready_at.clear()

            # Finished processes and timeouts.
            for sid, a in list(running.items()):
                code = a.handle.poll()
                if code is None:
                    if a.deadline is not None and not a.timed_out and not a.interrupted \
                            and now >= a.deadline:
                        a.timed_out = True
                        a.handle.terminate()
                        a.kill_at = now + a.step.grace
                    elif a.kill_at is not None and not a.killed and now >= a.kill_at:
                        a.handle.kill()
                        a.killed = True
                    continue
                del running[sid]
                status = self._finish(a, code, now)
                if a.handle.leftovers():
                    # The leader is gone but its group lives on (background jobs, a grandchild
                    # holding the log open): stop it too, or a "finished" step keeps running.
                    # A group already sent SIGTERM keeps its deadline: the grace is not restarted.
                    draining.append(_Draining(a.handle, a.kill_at or now + a.step.grace,
                                              termed=a.kill_at is not None))
                else:
                    self._release(a.handle)
                if status == "done":
                    state[sid] = "done"
                    continue
                tries[sid] = tries.get(sid, 0) + 1
                policy = RetryPolicy(a.step.retries, a.step.backoff, a.step.jitter)
                if status != "interrupted" and not stopping and policy.should_retry(tries[sid]):
                    delay = policy.delay(tries[sid], self.rand)
                    ready_at[sid] = now + delay
                    state[sid] = "backoff"
                    self.reporter.step_finished(a.step, a.n, status, now - a.started,
                                                self.out.last_exit.get(sid), a.log, delay)
                    continue
                state[sid] = status
                self.reporter.step_finished(a.step, a.n, status, now - a.started,
                                            self.out.last_exit.get(sid), a.log, None)
                if status == "interrupted":
                    continue
                self.out.failed.append(sid)
                cap = self.opt.max_failures
                if not self.opt.keep_going or (cap is not None and len(self.out.failed) >= cap):
                    stopping = True

            for d in list(draining):
                if not d.handle.leftovers():
                    draining.remove(d)
                    self._release(d.handle)
                elif not d.termed:
                    d.handle.terminate()
                    d.termed = True
                elif now >= d.kill_at:
                    d.handle.kill()

            # Propagate failures to dependents (keep-going) before choosing what to start.
            if self.opt.keep_going:
                for s in self.job.steps:
                    if state[s.id] != "waiting":
                        continue
                    for dep in s.needs:
                        ds = state.get(dep)
                        if ds in ("failed", "timeout", "dep_blocked"):
                            root = blocked_root.get(dep, dep)
                            blocked_root[s.id] = root
                            state[s.id] = "dep_blocked"
                            self.w.unit(s.id, "dep_blocked", note=f"blocked by {root}",
                                        deps=list(s.needs), fields={"blockedBy": root})
                            self.reporter.step_blocked(s, root)
                            break

            if not stopping:
                for sid, t in list(ready_at.items()):
                    if now >= t:
                        del ready_at[sid]
                        state[sid] = "waiting"
                for s in self.job.steps:
                    if len(running) >= jobs:
                        break
                    if state[s.id] != "waiting":
                        continue
                    if all(state.get(d) in ("done", "skipped") for d in s.needs):
                        running[s.id] = self._start(s, next_n[s.id])
                        next_n[s.id] += 1
                        state[s.id] = "running"
                        now = self.clock()

            # Nothing runs, nothing drains, and no retry is due: either all is finished or nothing
            # else can start (stopped, or waiting steps need something not done).
            if not running and not draining and (stopping or not ready_at) and (
                    stopping or not any(st == "waiting" and all(
                        state.get(d) in ("done", "skipped") for d in self.steps[sid].needs)
                        for sid, st in state.items())):
                break

            self.reporter.tick()
            self._wait(running, draining, ready_at, now)

        for sid, st in state.items():
            if st in ("waiting", "backoff"):
                state[sid] = "pending"
        return self.out

    # -- pieces ---------------------------------------------------------------------------------

    def _wait(self, running: Mapping[str, _Attempt], draining: list[_Draining],
              ready_at: Mapping[str, float], now: float) -> None:
        timeout = _MAX_WAIT
        for a in running.values():
            if a.deadline is not None and not a.timed_out:
                timeout = min(timeout, a.deadline - now)
            if a.kill_at is not None and not a.killed:
                timeout = min(timeout, a.kill_at - now)
        for t in ready_at.values():
            timeout = min(timeout, t - now)
        if draining:
            timeout = min(timeout, 0.02)
        timeout = max(timeout, 0.0)
        fds = [a.handle.fileno() for a in running.values()]
        if running and all(f is not None for f in fds):
            # pidfds become readable when the process exits: no polling latency per step.
            poller = select.poll()
            for f in fds:
                assert f is not None
                poller.register(f, select.POLLIN)
            poller.poll(timeout * 1000.0)
        elif timeout > 0:
            self.sleep(min(timeout, 0.01) if running else timeout)

    def _env(self, step: Step, n: int) -> dict[str, str]:
        env = dict(self.base_env)
        env.update(step.env)
        env["RESUMABLE_RUN"] = self.job.name
        env["RESUMABLE_STEP"] = step.id
        env["RESUMABLE_ATTEMPT"] = str(n)
        if self.groups is not None:
            # Lets a later runner prove that a leftover process is ours before killing it.
            env[TOKEN_ENV] = self.groups.secret
        return env

    def _start(self, step: Step, n: int) -> _Attempt:
        log = self.log_path(step, n)
        unit = self.units.get(step.id)
        prev_fp = unit.get("fingerprint") if isinstance(unit, Mapping) else None
        # Taken before the process starts: an input edited while the step runs must re-run it.
        fprint = fp.fingerprint(step, prev_fp if isinstance(prev_fp, Mapping) else None)
        wall = self.wallclock()
        self.w.unit(step.id, "in_progress", deps=list(step.needs),
                    attempt={"n": n, "status": "running", "startedAt": stamp(wall, ms=True), "log": log},
                    fields={"command": step.command_text, "log": log})
        started = self.clock()
        try:
            handle = self.spawn(step.argv, step.cwd, self._env(step, n), log)
        except OSError as exc:
            handle = _FailedSpawn(f"resumable: cannot start step {step.id!r}: {exc}\n", log)
        if self.groups is not None and handle.pgid > 0:
            self.groups.track(LeftoverGroup(handle.pgid, handle.token, self.groups.secret))
        self.reporter.step_started(step, n)
        deadline = started + step.timeout if step.timeout else None
        return _Attempt(step, n, handle, started, wall, log, fprint, deadline)

    def _release(self, handle: StepHandle) -> None:
        handle.close()
        if self.groups is not None and handle.pgid > 0:
            self.groups.untrack(handle.pgid)

    def _finish(self, a: _Attempt, code: int, now: float) -> str:
        step = a.step
        duration = round(now - a.started, 3)
        exit_code = 128 - code if code < 0 else code  # signals as the shell shows them
        reason = ""
        artifacts: dict[str, Any] = {}
        if a.interrupted:
            status = "interrupted"
        elif a.timed_out:
            status = "timeout"
        elif code != 0:
            status = "failed"
        else:
            artifacts = fp.artifact_records(step)
            missing = [p for p, rec in artifacts.items() if rec is None]
            if missing:
                status, exit_code = "failed", MISSING_ARTIFACT_EXIT
                reason = f"exited 0 but artifact missing: {', '.join(missing)}"
                _append_log(a.log, f"\nresumable: {reason}\n")
            else:
                status = "done"
        attempt: dict[str, Any] = {
            "n": a.n, "status": status, "startedAt": stamp(a.started_wall, ms=True),
            "finishedAt": stamp(self.wallclock(), ms=True), "exitCode": exit_code, "duration": duration,
            "log": a.log,
        }
        if code < 0:
            attempt["signal"] = -code
        if reason:
            attempt["reason"] = reason
        fields: dict[str, Any] = {"command": step.command_text, "lastExitCode": exit_code,
                                  "log": a.log}
        if status == "done":
            fields["fingerprint"] = a.fingerprint
            fields["artifacts"] = artifacts
        note = reason or ("" if status == "done" else f"{status} (exit {exit_code})")
        self.w.unit(step.id, status, note=note, attempt=attempt, fields=fields)
        self.out.attempts[step.id] = self.out.attempts.get(step.id, 0) + 1
        self.out.last_exit[step.id] = exit_code
        self.out.logs[step.id] = a.log
        self.out.durations[step.id] = duration
        if status == "done":
            self.reporter.step_finished(step, a.n, status, duration, exit_code, a.log, None)
        return status


def _append_log(path: str, text: str) -> None:
    try:
        # Never through a planted link, never blocking on a FIFO (see process.open_log).
        with os.fdopen(fsio.open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        pass


class _FailedSpawn:
    """Stands in for a process that could not start (bad cwd, missing program): exit 127."""

    pid = 0
    pgid = 0
    token: str | None = None

    def __init__(self, message: str, log: str) -> None:
        _append_log(log, message)

    def poll(self) -> int | None:
        return 127

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass

    def leftovers(self) -> bool:
        return False

    def fileno(self) -> int | None:
        return None

    def close(self) -> None:
        pass


def install_signal_handlers(scheduler: Scheduler) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP -> scheduler.interrupt(); returns a function restoring the old handlers."""
    # SIGHUP too: a dropped SSH session is the commonest way a long job gets interrupted.
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def handler(signum: int, frame: object) -> None:
        scheduler.interrupt()

    for sig in old:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore
