"""The DAG scheduler: starts ready steps up to ``-j``, enforces timeouts, retries, stop rules.

It receives everything with side effects (the store writer, the monotonic clock, sleep, the process
spawner, the random source, the reporter), so tests can drive it with fakes. Outcomes are data:
a failed step is a recorded result, never an exception.

What an outcome leads to (a retry after its backoff, dependents dep_blocked, the run stopping) is
decided by ``core.policy``, the rules the PostgreSQL workers apply too.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from resumable.core import policy, verbs
from resumable.core.policy import JobRules
from resumable.core.stamps import stamp
from resumable.runner import fingerprint as fp
from resumable.runner import process
from resumable.runner.attempt import (
    NOT_STARTED,
    Attempt,
    Draining,
    FailedSpawn,
    Outcome,
    finished_attempt,
)
from resumable.runner.cutoff import Cutoff
from resumable.runner.explain import Decision
from resumable.runner.flusher import Flusher
from resumable.runner.jobfile import Job, Step
from resumable.runner.launcher import Launcher
from resumable.runner.process import TOKEN_ENV, Spawner, StepHandle
from resumable.runner.writer import SafeWriter
from resumable.store.values import LeftoverGroup

if TYPE_CHECKING:
    from resumable.core.types import Event

_MAX_WAIT = 0.1  # an interrupt or a display tick is noticed within this long
# How long an outcome nobody waits for may wait for the next batch (see ``Scheduler.commit``).
_DEFER_MAX = 0.05


class Reporter(Protocol):
    def start(self, job: Job, decisions: Mapping[str, Decision], estimates: Mapping[str, float]) -> None: ...
    def step_started(self, step: Step, attempt: int) -> None: ...
    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None: ...
    def step_blocked(self, step: Step, root: str) -> None: ...
    def step_skipped(self, step: Step, reason: str) -> None: ...
    def warn(self, message: str) -> None: ...
    def notice(self, message: str) -> None: ...
    def tick(self) -> None: ...


class GroupTracker(Protocol):
    """Where running process groups are recorded so a later runner can reap them (the lease)."""

    @property
    def secret(self) -> str: ...
    def track(self, group: LeftoverGroup) -> None: ...
    def untrack(self, pgid: int) -> None: ...
    def sync(self) -> None: ...


@dataclass
class Options:
    jobs: int = 1
    keep_going: bool = False
    max_failures: int | None = None
    force: bool = False


class Scheduler:
    """Event-driven: a step enters the ready queue when its last need finishes, so a pass over the
    loop costs O(running + transitions), never O(steps).

    Group commit: the transitions of one pass (outcomes of finished steps, blocked dependents, the
    ``in_progress`` records of the steps about to start) are committed as ONE batch, with one
    flush, before any of them is acted on. So a step's ``in_progress`` record is durable before its
    process starts, and a step's outcome is durable before it is reported or a dependent starts,
    while a busy runner pays one flush per pass instead of two per step.

    Recorded ahead (``record_ahead``): while every slot is busy, the next ready steps get their
    ``in_progress`` record in the batch already, so a slot that frees starts its next step at once
    instead of waiting for a flush. They are recorded a few at a time (one batch for several), and
    only as many as the slots are expected to start within ``loop.AHEAD_HORIZON`` at the pace steps
    finish (at least one per slot): for steps of milliseconds that makes a flush per several steps
    instead of one per step; for long steps, one step per slot is recorded ahead.

    The rule stays the same (no process starts before its record is durable), and so does what a
    record means after a crash: ``in_progress`` says "this attempt may have started", and the next
    runner closes it as interrupted and runs the step again with a new attempt number, whether its
    process had started or not. A step recorded ahead that does not start because the run stops
    (Ctrl-C, a failure without ``--keep-going``) is made ``pending`` again at once, its attempt
    closed as interrupted. The record's ``startedAt`` is when it was recorded; the outcome's
    attempt record has when the process started. So ``status`` may count a few steps in progress
    that start within ``AHEAD_HORIZON``.

    Held back: a batch of outcomes nobody waits for (steps done that no step needs) waits, while
    the slots are busy, for the next batch that is needed, at most ``_DEFER_MAX``; a failure, a
    step others need, and any start record go out at once (``commit``).
    """

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
        launch_threads: int = 0,
        flush_thread: bool | None = None,
        record_ahead: int = 0,
    ) -> None:
        """``launch_threads`` > 0 starts processes on that many worker threads (``launcher``);
        0 starts them inline, deterministic for fake spawners and clocks. ``flush_thread``
        commits on a thread of its own (``flusher``); by default when there are launch threads.
        ``record_ahead``: at most how many ready steps beyond the free slots get their
        ``in_progress`` record while the slots are busy (see the class's docstring)."""
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
        self.base_env = process.BaseEnv(os.environ if base_env is None else base_env)
        self.steps = {s.id: s for s in job.steps}
        self.order = {s.id: i for i, s in enumerate(job.steps)}
        self.needs = {s.id: s.needs for s in job.steps}
        self.rules = JobRules(options.keep_going, options.max_failures)
        self.cut = Cutoff(decisions, units)
        self.interrupts = 0
        # Set by the loop (runner.loop) when it starts: who waits on whom, and the failed step
        # that blocked each dep_blocked one.
        self.dependents: dict[str, list[str]] = {}
        self.blocked_root: dict[str, str] = {}
        self.out = Outcome()
        self.handled_interrupts = 0
        self.launcher: Launcher | None = None
        self.flusher: Flusher | None = None
        self.record_ahead = max(0, record_ahead)
        if launch_threads > 0:
            from resumable.runner.launcher import Launcher

            self.launcher = Launcher(spawner, launch_threads)
        if flush_thread or (flush_thread is None and launch_threads > 0):
            from resumable.runner.flusher import Flusher

            self.flusher = Flusher(lambda label, events, lazy: self.w.write(label, events, lazy=lazy))
        # The pass's batch: events to commit, then what to do once they are durable.
        self._events: list[Event] = []
        self._what: list[str] = []
        self._after: list[Callable[[], None]] = []
        self._urgent = False  # the batch holds a record something waits on
        self._since = 0.0  # when its first record was made

    # -- signals ------------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Called from a SIGINT/SIGTERM handler: the first stops gracefully, the second kills."""
        self.interrupts += 1

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> Outcome:
        from resumable.runner.loop import Loop

        jobs = self.opt.jobs if self.opt.jobs > 0 else (os.cpu_count() or 1)
        try:
            return Loop(self, jobs).run()
        finally:
            if self.flusher is not None:
                self.flusher.close()
            if self.launcher is not None:
                self.launcher.close()

    def collect(self) -> None:
        """Act on what finished off the loop's thread: batches now durable (their reports, their
        steps' starts) and launches done."""
        if self.flusher is not None:
            for fn in self.flusher.finished() or ():
                fn()
        if self.launcher is not None and self.launcher.pending:
            for a, result in self.launcher.completed():
                self._launched(a, result)

    def in_flight(self) -> bool:
        """Whether records are still to be made durable (collected, or being flushed)."""
        return bool(self._events) or (self.flusher is not None and self.flusher.busy)

    # -- the batch ------------------------------------------------------------------------------

    def _record(self, what: str, event: Event, *, urgent: bool = True) -> None:
        if not self._events:
            self._since = self.clock()
        self._events.append(event)
        self._what.append(what)
        self._urgent = self._urgent or urgent

    def later(self, fn: Callable[..., None], *args: Any) -> None:
        self._after.append(lambda: fn(*args))

    def commit(self, *, idle: bool = False) -> None:
        """The pass's batch made durable (on the flusher's thread when there is one), then acted
        on. With steps recorded ahead, a batch of outcomes nobody waits for (steps done, no
        dependent) is held back while the slots are busy, for at most ``_DEFER_MAX``: it goes out
        with the next batch that is needed, and a busy runner flushes once per few steps. ``idle``:
        nothing runs, so nothing else will come to share the flush."""
        if self.flusher is not None and self.flusher.busy:
            return  # collected meanwhile: goes out as the next batch
        if self._events and not self._urgent and not idle and self.clock() - self._since < _DEFER_MAX:
            return
        events, what, after = self._events, self._what, self._after
        self._events, self._what, self._after = [], [], []
        self._urgent = False
        if not events:
            for fn in after:
                fn()
            return
        # A batch that only starts steps is journaled without a rewrite of the snapshot file;
        # one with an outcome may refresh it (the store's policy decides).
        lazy = all(e.get("state") == "in_progress" for e in events)
        label = ", ".join(what[:5]) + (f" and {len(what) - 5} more" if len(what) > 5 else "")
        if self.flusher is not None:
            self.flusher.submit(label, events, lazy, after)
            return
        self.w.write(label, events, lazy=lazy)
        for fn in after:
            fn()

    def blocked(self, blocked: policy.Blocked, state: dict[str, str]) -> None:
        """keep-going: the steps a final failure blocks, recorded in the pass's batch."""
        for event, (child, root) in zip(blocked.events, blocked.steps.items(), strict=True):
            state[child] = "dep_blocked"
            self.blocked_root[child] = root
            if self.cut.is_pending(child):
                continue  # still done in the run (it may yet be cut off): not demoted, not reported
            self._record(f"{child} -> dep_blocked", event)
            self.later(self.reporter.step_blocked, self.steps[child], root)

    # -- pieces ---------------------------------------------------------------------------------

    def wait(self, running: Mapping[str, Attempt], draining: list[Draining],
              backoff: list[tuple[float, int, str]], now: float) -> None:
        timeout = _MAX_WAIT
        for a in running.values():
            if a.deadline is not None and not a.timed_out:
                timeout = min(timeout, a.deadline - now)
            if a.kill_at is not None and not a.killed:
                timeout = min(timeout, a.kill_at - now)
        if backoff:
            timeout = min(timeout, backoff[0][0] - now)
        if draining:
            timeout = min(timeout, 0.02)
        if self._events and not (self.flusher is not None and self.flusher.busy):
            timeout = min(timeout, self._since + _DEFER_MAX - now)  # a batch held back goes out
        timeout = max(timeout, 0.0)
        fds: list[int | None] = [a.handle.fileno() for a in running.values() if not a.launching]
        if self.launcher is not None and self.launcher.pending > 0:
            fds.append(self.launcher.fileno())
        if self.flusher is not None and self.flusher.busy:
            fds.append(self.flusher.fileno())
        if fds and all(f is not None for f in fds):
            # pidfds become readable when the process exits, the launcher's pipe when a launch is
            # done: no polling latency per step.
            poller = select.poll()
            for f in fds:
                assert f is not None
                poller.register(f, select.POLLIN)
            poller.poll(timeout * 1000.0)
        elif timeout > 0:
            self.sleep(min(timeout, 0.01) if running else timeout)

    def _env(self, step: Step, n: int) -> process.StepEnv:
        # Over the shared base, not a copy of it: the base is encoded for the start once per run.
        env = dict(step.env)
        env["RESUMABLE_RUN"] = self.job.name
        env["RESUMABLE_STEP"] = step.id
        env["RESUMABLE_ATTEMPT"] = str(n)
        if self.groups is not None:
            # Lets a later runner prove that a leftover process is ours before killing it.
            env[TOKEN_ENV] = self.groups.secret
        return process.StepEnv(self.base_env, env)

    def prepare(self, step: Step, n: int, *, launch: bool = True) -> Attempt:
        """The attempt, with its ``in_progress`` record in the pass's batch; started by ``launch``
        once the batch is durable, or (``launch`` False, recorded ahead) only marked durable then,
        for the loop to start when a slot is free."""
        log = self.log_path(step, n)
        unit = self.units.get(step.id)
        prev_fp = unit.get("fingerprint") if isinstance(unit, Mapping) else None
        # Taken before the process starts: an input edited while the step runs must re-run it.
        fprint = fp.fingerprint(step, prev_fp if isinstance(prev_fp, Mapping) else None)
        if self.cut.applies(step):
            fprint["needs"] = policy.upstream_record(self.cut.upstream(step))  # for early cutoff next time
        why = self.cut.invalidations.pop(step.id, None)
        if why is not None:  # a done step that was not cut off after all
            self._record(f"{step.id} -> invalidated", verbs.invalidate(step.id, why))
        wall = self.wallclock()
        # Dependencies and the command only when they changed (a new unit has them from the start).
        known = unit if isinstance(unit, dict) else {}
        deps = list(step.needs) if known.get("dependsOn") != list(step.needs) else None
        command = step.command_text
        self._record(f"{step.id} -> in_progress", verbs.unit(
            step.id, "in_progress", deps=deps,
            attempt={"n": n, "status": "running", "startedAt": stamp(wall, ms=True), "log": log},
            fields={"command": command} if known.get("command") != command else None, shallow=True))
        attempt = Attempt(step, n, NOT_STARTED, 0.0, wall, log, fprint, None, launching=True)
        self.later(self.launch if launch else _mark_durable, attempt)  # once the record is durable
        return attempt

    def cancel(self, a: Attempt) -> None:
        """A step recorded ahead that will not start (the run stops): pending again, its attempt
        closed as interrupted (its number is not reused: the next attempt's log is a new file)."""
        self._record(f"{a.step.id} -> pending", verbs.unit(
            a.step.id, "pending", note="not started: the run stopped",
            attempt={"n": a.n, "status": "interrupted", "startedAt": stamp(a.started_wall, ms=True),
                     "finishedAt": stamp(self.wallclock(), ms=True), "log": a.log}, shallow=True))

    def launch(self, a: Attempt) -> None:
        step = a.step
        a.durable = True
        a.started = self.clock()
        a.started_wall = self.wallclock()  # a step recorded ahead starts later than its record
        if self.launcher is not None:
            self.launcher.submit(a, step.argv, step.cwd, self._env(step, a.n), a.log)
            return
        try:
            handle: StepHandle | BaseException = self.spawn(step.argv, step.cwd, self._env(step, a.n), a.log)
        except OSError as exc:
            handle = exc
        self._launched(a, handle)

    def _launched(self, a: Attempt, result: StepHandle | BaseException) -> None:
        """The process of ``a`` started (or could not): track it, report it, and if the run was
        interrupted meanwhile, stop it at once."""
        step = a.step
        a.launching = False
        if isinstance(result, OSError):
            result = FailedSpawn(f"resumable: cannot start step {step.id!r}: {result}\n", a.log)
        elif isinstance(result, BaseException):
            raise result
        a.handle = result
        if self.groups is not None and result.pgid > 0:
            self.groups.track(LeftoverGroup(result.pgid, result.token, self.groups.secret))
        self.reporter.step_started(step, a.n)
        a.deadline = a.started + step.timeout if step.timeout else None
        if a.interrupted:
            if self.handled_interrupts >= 2:
                result.kill()
                a.killed = True
            else:
                result.terminate()

    def release(self, handle: StepHandle) -> None:
        handle.close()
        if self.groups is not None and handle.pgid > 0:
            self.groups.untrack(handle.pgid)

    def finish(self, a: Attempt, code: int, now: float) -> str:
        """The attempt's outcome, recorded in the pass's batch (reported once it is durable)."""
        step = a.step
        status, exit_code, event = finished_attempt(a, code, now, self.wallclock())
        # Waited on: a failure (it decides what runs next), a done step that others need.
        self._record(f"{step.id} -> {status}", event, urgent=not self.record_ahead or status != "done"
                     or step.id in self.dependents)
        if status != "done":  # what the conclusion needs, for the steps that did not finish
            self.out.attempts[step.id] = self.out.attempts.get(step.id, 0) + 1
            self.out.last_exit[step.id] = exit_code
            self.out.logs[step.id] = a.log
        else:
            self.cut.finished(step.id, event.get("fields", {}).get("artifacts"))
            if self.groups is not None:
                process.forget_started(self.groups.secret, self.job.name, step.id)
            self.later(self.reporter.step_finished, step, a.n, status, round(now - a.started, 3), exit_code,
                        a.log, None)
        return status


def _mark_durable(a: Attempt) -> None:
    a.durable = True


def install_signal_handlers(scheduler: Scheduler) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP -> scheduler.interrupt(); returns a function restoring the old handlers."""
    return process.interrupt_on_signals(scheduler.interrupt)
