"""The scheduler's loop, one method per phase of a pass: interrupts, reap, drain, retries due,
start. Its state (which steps wait, run, drain or back off) lives here; what each phase does to the
run (records, reports, processes) is the scheduler's (``runner.scheduler``).

A pass costs O(running + transitions), never O(steps): a step enters the ready heap when its last
need finishes, a retry when its backoff is due.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from resumable.core import policy
from resumable.core.policy import RetryPolicy
from resumable.runner.attempt import Attempt, Draining, Outcome, enforce_timeout, next_attempt_number

if TYPE_CHECKING:
    from resumable.runner.scheduler import Scheduler

# Steps are recorded ahead (``Scheduler``) only as far as the slots are expected to start them
# within this long: ``status`` then counts no step in progress for longer than that before it starts.
AHEAD_HORIZON = 0.05


class Loop:
    def __init__(self, sched: Scheduler, jobs: int) -> None:
        self.s = sched
        self.jobs = jobs
        self.state: dict[str, str] = {}
        for step in sched.job.steps:
            self.state[step.id] = "waiting" if sched.decisions[step.id].run else "skipped"
        sched.out.states = self.state
        # Needs not yet satisfied, per waiting step, and who waits on whom: a finished step
        # releases its dependents in O(dependents).
        self.unmet: dict[str, int] = {}
        self.ready: list[tuple[int, str]] = []  # a heap in job order: declaration order among ready steps
        sched.dependents = {}
        for step in sched.job.steps:
            if self.state[step.id] != "waiting":
                continue
            n = 0
            for d in set(step.needs):
                sched.dependents.setdefault(d, []).append(step.id)
                if self.state.get(d) not in ("done", "skipped"):
                    n += 1
            if n:
                self.unmet[step.id] = n
            else:
                self.ready.append((sched.order[step.id], step.id))
        heapq.heapify(self.ready)
        sched.blocked_root = {}
        self.next_n: dict[str, int] = {}  # attempt numbers, kept only for steps that will try again
        self.tries: dict[str, int] = {}
        self.backoff: list[tuple[float, int, str]] = []  # (due, order, id): retries waiting out a delay
        self.running: dict[str, Attempt] = {}
        self.ahead: deque[Attempt] = deque()  # recorded ahead, in start order: not started yet
        self.pace = 1.0  # a moving mean of the steps' durations, in seconds (for the ahead depth)
        self.draining: list[Draining] = []
        self.stopping = False
        self.handled = 0  # interrupts acted on

    def run(self) -> Outcome:
        s = self.s
        while True:
            s.collect()  # durable batches: report them, start their steps
            now = s.clock()
            self.interrupts(now)
            self.reap(now)
            self.drain(now)
            if not self.stopping:
                self.retries_due(now)
                self.start()
            elif self.ahead:
                self.cancel_ahead()
            # One durable batch for the whole pass (or, while one is in flight, for everything
            # since), then act on it.
            s.commit(idle=not self.running)
            if self.over():
                break
            s.reporter.tick()
            if s.groups is not None:
                s.groups.sync()
            s.wait(self.running, self.draining, self.backoff, s.clock())
        for sid, st in self.state.items():
            if st in ("waiting", "backoff"):
                self.state[sid] = "pending"
        return s.out

    def over(self) -> bool:
        """Nothing runs, nothing drains, nothing is left to make durable, and no retry is due:
        either all is finished or nothing else can start (stopped, or waiting steps need something
        not done)."""
        return not self.running and not self.draining and not self.ahead and not self.s.in_flight() and (
            self.stopping or (not self.backoff and not self.ready))

    # -- the phases ---------------------------------------------------------------------------

    def interrupts(self, now: float) -> None:
        """A new Ctrl-C (or SIGTERM): the first stops every step gracefully, the second kills."""
        s = self.s
        if s.interrupts <= self.handled:
            return
        self.handled = s.handled_interrupts = s.interrupts
        self.stopping = True
        s.out.interrupted = True
        live = len(self.running) + len(self.draining)
        kill = self.handled >= 2
        if live:
            s.reporter.notice(f"killing {_steps(live)} now" if kill else
                              f"stopping {_steps(live)} (Ctrl-C again to kill now)")
        for a in self.running.values():
            a.interrupted = True
            if kill:
                a.handle.kill()
            elif a.kill_at is None:
                a.handle.terminate()
                a.kill_at = now + a.step.grace
        for d in self.draining:
            if kill:
                d.handle.kill()
        self.backoff.clear()

    def reap(self, now: float) -> None:
        """Finished processes recorded (their outcomes in the pass's batch), timeouts enforced."""
        for sid, a in list(self.running.items()):
            if a.launching:
                continue
            code = a.handle.poll()
            if code is None:
                enforce_timeout(a, now, exempt=a.interrupted)
                continue
            del self.running[sid]
            self.pace += (now - a.started - self.pace) * 0.1
            status = self.s.finish(a, code, now)
            if a.handle.leftovers():
                # The leader is gone but its group lives on (background jobs, a grandchild holding
                # the log open): stop it too, or a "finished" step keeps running. A group already
                # sent SIGTERM keeps its deadline: the grace is not restarted.
                self.draining.append(Draining(a.handle, a.kill_at or now + a.step.grace,
                                              termed=a.kill_at is not None))
            else:
                self.s.release(a.handle)
            if status == "done":
                self.state[sid] = "done"
                self.release(sid)
            else:
                self.settle(a, status, now)

    def settle(self, a: Attempt, status: str, now: float) -> None:
        """What an attempt that did not succeed leads to: a retry after its backoff, or a final
        state, with its dependents blocked and the run stopped as the policy says."""
        s, sid = self.s, a.step.id
        self.tries[sid] = self.tries.get(sid, 0) + 1
        self.next_n[sid] = a.n + 1
        decision = policy.decide(
            sid, status, failures=self.tries[sid], retry=RetryPolicy(a.step.retries, a.step.backoff, a.step.jitter),
            rules=s.rules, stopping=self.stopping, failed_steps=len(s.out.failed), dependents=s.dependents,
            needs=s.needs, states=self.state, now=now, rand=s.rand, roots=s.blocked_root)
        settled = decision.settled
        exit_code = s.out.last_exit.get(sid)
        if settled.due is not None:
            heapq.heappush(self.backoff, (settled.due, s.order[sid], sid))
            self.state[sid] = "backoff"
            s.later(s.reporter.step_finished, a.step, a.n, status, now - a.started, exit_code, a.log,
                    settled.retry_in)
            return
        self.state[sid] = status
        s.later(s.reporter.step_finished, a.step, a.n, status, now - a.started, exit_code, a.log, None)
        if status == "interrupted":
            return
        s.out.failed.append(sid)
        s.blocked(decision.blocked, self.state)
        self.stopping = decision.stop

    def release(self, sid: str) -> None:
        """``sid`` is done: its dependents whose last need it was become ready (or, cut off early,
        stay done and release their own)."""
        s, state, unmet = self.s, self.state, self.unmet
        done = [sid]  # a stack, not recursion: a step cut off early releases its own dependents
        while done:
            for child in s.dependents.get(done.pop(), ()):
                if state[child] == "waiting":
                    unmet[child] -= 1
                    if unmet[child] == 0:
                        kept = s.cut.keeps_done(s.steps[child])
                        if kept is not None:
                            state[child] = "skipped"
                            s.later(s.reporter.step_skipped, s.steps[child], kept)
                            done.append(child)
                        else:
                            heapq.heappush(self.ready, (s.order[child], child))

    def drain(self, now: float) -> None:
        """Groups that outlived their leader: SIGTERM, then SIGKILL after the grace."""
        for d in list(self.draining):
            if not d.handle.leftovers():
                self.draining.remove(d)
                self.s.release(d.handle)
            elif not d.termed:
                d.handle.terminate()
                d.termed = True
            elif now >= d.kill_at:
                d.handle.kill()

    def retries_due(self, now: float) -> None:
        while self.backoff and self.backoff[0][0] <= now:
            _, order, sid = heapq.heappop(self.backoff)
            self.state[sid] = "waiting"
            heapq.heappush(self.ready, (order, sid))

    def start(self) -> None:
        """Steps recorded ahead whose records are durable start in the free slots at once; then
        ready steps up to ``-j``, prepared: their ``in_progress`` records join the pass's batch,
        and each process starts once its record is durable; then up to ``record_ahead`` more are
        recorded, to start when a slot frees."""
        s, ahead = self.s, self.ahead
        while ahead and ahead[0].durable and len(self.running) < self.jobs:
            a = ahead.popleft()
            self.running[a.step.id] = a
            s.launch(a)
        depth, low = self.ahead_depth()
        refill = len(ahead) <= low  # recorded in bursts: one batch records several
        while self.ready:
            if len(self.running) < self.jobs and not ahead:
                launch = True
            elif refill and len(ahead) < depth:
                launch = False
            else:
                break
            _, sid = heapq.heappop(self.ready)
            n = self.next_n.pop(sid, None) or next_attempt_number(s.units.get(sid))
            self.state[sid] = "running"
            a = s.prepare(s.steps[sid], n, launch=launch)
            if launch:
                self.running[sid] = a  # counts towards -j from now; started once durable
            else:
                ahead.append(a)  # started by a later pass, in a slot that frees
            if s.launcher is not None and launch:
                # Its log made on a launcher while its record is flushed; one recorded ahead has
                # its record durable long before it starts, and its spawn makes the log itself.
                s.launcher.prepare(a.log)

    def ahead_depth(self) -> tuple[int, int]:
        """(how many steps to keep recorded ahead, how few before recording more): as many as the
        slots start within ``AHEAD_HORIZON`` at the pace steps finish, at least one per slot, at
        most ``record_ahead``; recorded again once a quarter of them is left."""
        top = self.s.record_ahead
        if top <= 0:
            return 0, -1
        depth = max(min(self.jobs, top), min(top, int(AHEAD_HORIZON * self.jobs / max(self.pace, 1e-6))))
        return depth, depth // 4 if depth > self.jobs else depth - 1

    def cancel_ahead(self) -> None:
        """The run stops: the steps recorded ahead will not start; their records are closed and
        they count as not run (pending) in this session."""
        while self.ahead:
            a = self.ahead.popleft()
            self.s.cancel(a)
            self.state[a.step.id] = "waiting"


def _steps(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"
