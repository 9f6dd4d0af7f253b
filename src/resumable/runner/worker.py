"""``resumable worker``: run the steps of submitted jobs, on any host, under leases.

A worker claims ready steps from its store (``WorkQueue``: the PostgreSQL store), runs each as the
local runner does (its own session and process group, output to a log file, timeout with TERM,
grace, KILL, artifacts and fingerprints checked on this host), renews its leases with heartbeats,
and records each outcome with the claim's fencing token. It sleeps on ``LISTEN`` until a step may
have become claimable, or until the next known deadline (a retry's backoff, another worker's
lease running out): never a tight polling loop.

Signals: the first SIGTERM/SIGINT/SIGHUP stops claiming; running steps may finish within
``drain_grace`` seconds, then they are stopped (TERM, grace, KILL) and handed back, recorded
``interrupted``, for another worker to take at once. A second signal hands them back at once.
The worker then exits 130. A worker killed outright (SIGKILL, a lost host) loses its claims when
its leases expire; another worker takes each step back exactly once.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from resumable.errors import ResumableError, StoreError
from resumable.runner import fingerprint as fp
from resumable.runner import process
from resumable.runner.attempt import FailedSpawn, enforce_timeout
from resumable.runner.stepspec import from_spec
from resumable.runner.worker_attempt import (
    Draining,
    Outcome,
    Running,
    fingerprint_differences,
    outcome_of,
)
from resumable.runner.workqueue import ClaimLike, ListenerLike, Sink, WorkQueue, is_queue

__all__ = ["DEFAULT_TTL", "Worker", "WorkerOptions", "install_signal_handlers", "is_queue"]

DEFAULT_TTL = 30.0
_MAX_IDLE = 30.0  # wake at least this often without a notification (one lost with a connection)
_TICK = 0.1


@dataclass
class WorkerOptions:
    runs: tuple[str, ...] | None = None  # None: every run; else exit once these runs have ended
    jobs: int = 1
    ttl: float = DEFAULT_TTL  # lease length; heartbeats every third of it
    drain_grace: float = 30.0  # after a stop signal: how long running steps may still finish
    logs_dir: str | None = None
    worker_id: str | None = None


@dataclass
class Worker:
    queue: WorkQueue
    opts: WorkerOptions
    sink: Sink
    spawner: process.Spawner = process.spawn
    clock: Callable[[], float] = time.monotonic
    wallclock: Callable[[], float] = time.time
    base_env: Mapping[str, str] | None = None
    signals: int = 0
    running: dict[tuple[str, str], Running] = field(default_factory=dict)
    draining: list[Draining] = field(default_factory=list)

    def __post_init__(self) -> None:
        import secrets

        self.worker_id = self.opts.worker_id or f"{os.uname().nodename}-{os.getpid()}-{secrets.token_hex(3)}"
        self.info = self.queue.worker_info(self.worker_id)
        self.secret = secrets.token_hex(16)
        self.env = dict(os.environ if self.base_env is None else self.base_env)
        self.jobs = self.opts.jobs if self.opts.jobs > 0 else (os.cpu_count() or 1)
        self._warned_missing = False
        self.stopping = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._warned: set[str] = set()

    def interrupt(self) -> None:
        """From a signal handler: the first stops claiming and drains; the second hands back now."""
        self.signals += 1
        try:
            os.write(self._wake_w, b"!")  # ends the current wait at once (poll is retried after a signal)
        except OSError:
            pass

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until the named runs have ended (0) or a signal stopped the worker (130)."""
        self.queue.register(self.info)
        listener = self.queue.work_listener()
        try:
            return self._loop(listener)
        finally:
            listener.close()
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            try:
                self.queue.unregister(self.info)
            except ResumableError:
                pass

    def _loop(self, listener: ListenerLike) -> int:
        beat_every = max(self.opts.ttl / 3.0, 0.05)
        next_beat = self.clock() + beat_every
        claim_at = self.clock()  # claim as soon as there is a free slot and this time has come
        handled = 0
        drain_until = 0.0
        while True:
            now = self.clock()
            if self.signals > handled:
                handled = self.signals
                if not self.stopping:
                    self.stopping = True
                    drain_until = now + self.opts.drain_grace
                else:
                    drain_until = now
            if self.stopping and now >= drain_until:
                for a in self.running.values():
                    if not a.handing_back:
                        a.handing_back = True
                        if a.kill_at is None:
                            a.handle.terminate()
                            a.kill_at = now + (0.0 if handled >= 2 else a.step.grace)
            freed = self._reap(now)
            if freed:
                claim_at = min(claim_at, now)
            if self._drain(now):
                claim_at = min(claim_at, now)  # idle again: look at the runs (they may have ended)
            if self.running and now >= next_beat:
                self._heartbeat(now)
                next_beat = now + beat_every
            elif not self.running:
                next_beat = now + beat_every
            if self.stopping:
                if not self.running and not self.draining:
                    return 130
            elif len(self.running) < self.jobs and now >= claim_at:
                claim_at = self._claim(now)
                if not self.running and not self.draining and self.opts.runs is not None and self._runs_ended():
                    return 0
            self._tidy()
            self.sink.tick()
            busy = self.running or self.draining
            wait = min(self._next_deadline(now), next_beat - now) if busy else _MAX_IDLE
            if not self.stopping and len(self.running) < self.jobs:
                wait = min(wait, claim_at - now)
            if self._wait(listener, max(wait, 0.0)):
                claim_at = min(claim_at, self.clock())

    def _runs_ended(self) -> bool:
        assert self.opts.runs is not None
        try:
            states = self.queue.run_states(self.opts.runs)
        except StoreError:
            return False
        missing = [r for r, st in states.items() if st is None]
        if missing and not self._warned_missing:
            self._warned_missing = True
            self.sink.warn(f"no run {', '.join(missing)} in the store yet; waiting for it to be submitted")
        return all(st is not None and st != "running" for st in states.values())

    def _claim(self, now: float) -> float:
        """Claim up to the free slots; returns when to look again without a notification."""
        try:
            claims, due = self.queue.claim(self.info, self.opts.runs, self.jobs - len(self.running), ttl=self.opts.ttl,
                                           log_path=self._log_path)
        except StoreError as exc:
            self._warn_once(f"cannot claim steps: {exc}; trying again every second")
            return now + 1.0
        self._warned.discard("cannot claim steps")
        for c in claims:
            self._start(c)
        if len(self.running) < self.jobs:
            return now + (_MAX_IDLE if due is None else min(max(due, 0.0) + 0.01, _MAX_IDLE))
        return now

    def _tidy(self) -> None:
        """The store's follow-ups of the last transactions, once their steps are started."""
        try:
            self.queue.tidy()
        except StoreError as exc:
            self._warn_once(f"cannot conclude or number a run's events: {exc}; trying again at the next claim")

    def _warn_once(self, message: str) -> None:
        """A store that cannot be reached is said once per kind of failure, not at every retry."""
        kind = message.split(":", 1)[0]
        if kind not in self._warned:
            self._warned.add(kind)
            self.sink.warn(message)

    def _log_path(self, run_id: str, step_id: str, n: int) -> str:
        base = os.path.abspath(self.opts.logs_dir or os.path.join(self.queue.local_dir(), run_id, "logs"))
        numbered = os.path.join(base, f"{step_id}.{n}.log")
        if self.opts.logs_dir:
            # As `resumable run --logs-dir`: DIR/<id>.log is the latest attempt's log.
            from resumable.runner import latestlog

            problem = latestlog.point(numbered, latestlog.latest_name(base, step_id))
            if problem is not None:
                self._warn_once(f"step logs: {problem}")
        return numbered

    def _heartbeat(self, now: float) -> None:
        mine = [a.claim for a in self.running.values() if not a.lost]
        try:
            lost = self.queue.renew(self.info, mine, self.opts.ttl)
        except StoreError as exc:
            self._warn_once(f"cannot renew the leases: {exc}; trying again at every heartbeat")
            return
        for c in lost:
            a = self.running.get((c.run_id, c.step))
            if a is None or a.lost:
                continue
            # Another worker took the step over: stop this attempt; its outcome will be fenced off.
            a.lost = True
            self.sink.warn(f"lost the lease of {c.run_id}/{c.step} (attempt {c.n}): another worker took it over;"
                           " stopping this attempt")
            if a.kill_at is None:
                a.handle.terminate()
                a.kill_at = now + a.step.grace

    # -- steps ----------------------------------------------------------------------------------

    def _start(self, c: ClaimLike) -> None:
        try:
            step = from_spec(c.spec)
        except ResumableError as exc:
            self.sink.warn(str(exc))
            self.queue.release(c, f"this worker cannot run it: {exc}")
            return
        # Input hashes are reused (same size and mtime) only from a fingerprint taken on this host:
        # another host's copy of a file may share both and still differ.
        prev = c.unit.get("fingerprint") if c.unit.get("fingerprintHost") == self.info.host else None
        fprint = fp.fingerprint(step, prev if isinstance(prev, Mapping) else None)
        if "upstream" in c.spec:  # what its needs made, as the store read them when it was claimed
            fprint["needs"] = c.spec["upstream"]
        differs = fingerprint_differences(c.spec.get("fingerprint"), fprint)
        env = dict(self.env)
        env.update(step.env)
        env.update({"RESUMABLE_RUN": c.run_id, "RESUMABLE_STEP": step.id, "RESUMABLE_ATTEMPT": str(c.n),
                    process.TOKEN_ENV: self.secret})
        log = step.log or c.log
        wall = self.wallclock()
        started = self.clock()
        handle: process.StepHandle
        try:
            handle = self.spawner(step.argv, step.cwd, env, log)
        except OSError as exc:
            handle = FailedSpawn(f"resumable: cannot start step {step.id!r}: {exc}\n", log)
        if differs:
            self.sink.warn(f"{c.run_id}/{step.id}: on this host ({self.info.host}) {', '.join(differs)} since the"
                           " job was submitted; running it as it is here")
        self.sink.started(c, step)
        deadline = started + step.timeout if step.timeout else None
        self.running[(c.run_id, c.step)] = Running(c, step, handle, started, wall, fprint, deadline)

    def _reap(self, now: float) -> bool:
        """Enforce timeouts and record the steps that ended; True when a slot was freed. Steps of
        one run that ended together are recorded in one transaction."""
        ended: list[tuple[Running, int]] = []
        for key, a in list(self.running.items()):
            code = a.handle.poll()
            if code is None:
                enforce_timeout(a, now, exempt=a.handing_back)
                continue
            del self.running[key]
            ended.append((a, code))
        by_run: dict[str, list[Outcome]] = {}
        for a, code in ended:
            out = outcome_of(a, code, now, self.wallclock(), self.info.host, self.worker_id)
            by_run.setdefault(a.claim.run_id, []).append(out)
            if a.handle.leftovers():
                self.draining.append(Draining(a.handle, a.kill_at or now + a.step.grace, termed=a.kill_at is not None))
            else:
                a.handle.close()
        for outs in by_run.values():
            self._record(outs)
        return bool(ended)

    def _drain(self, now: float) -> bool:
        """Stop what steps left behind; True when the last such group is gone."""
        had = bool(self.draining)
        for d in list(self.draining):
            if not d.handle.leftovers():
                self.draining.remove(d)
                d.handle.close()
            elif not d.termed:
                d.handle.terminate()
                d.termed = True
            elif now >= d.kill_at:
                d.handle.kill()
        return had and not self.draining

    def _record(self, outs: list[Outcome]) -> None:
        """Record the outcomes of one run's attempts; the worker's next claims on that run travel
        in the same transaction."""
        back = [o for o in outs if o.result["status"] == "interrupted"]
        rest = [o for o in outs if o.result["status"] != "interrupted"]
        recorded: dict[int, bool] = {}
        retry_in: dict[int, float | None] = {}
        follow: Sequence[ClaimLike] = ()
        for o in back:
            try:
                recorded[id(o)] = self.queue.release(o.run.claim, "its worker stopped and handed it back",
                                                     attempt=o.result["attempt"], exit_code=o.exit_code,
                                                     log=o.result["log"])
            except StoreError as exc:
                self._not_recorded(o, exc)
                recorded[id(o)] = False
        if rest:
            more = 0 if self.stopping else self.jobs - len(self.running)
            try:
                settled, follow = self.queue.complete([(o.run.claim, o.result, o.policy) for o in rest], more=more,
                                                      worker=self.info, ttl=self.opts.ttl, log_path=self._log_path)
                for o, got in zip(rest, settled, strict=True):
                    recorded[id(o)] = got is not None
                    retry_in[id(o)] = got.retry_in if got is not None else None
            except StoreError as exc:
                for o in rest:
                    self._not_recorded(o, exc)
                    recorded[id(o)] = False
        for o in outs:
            self.sink.finished(o.run.claim, o.run.step, o.result["status"], o.duration, o.exit_code,
                               retry_in.get(id(o)), recorded[id(o)])
        for nxt in follow:
            self._start(nxt)

    def _not_recorded(self, o: Outcome, exc: StoreError) -> None:
        c = o.run.claim
        self.sink.warn(f"could not record {c.run_id}/{c.step} (attempt {c.n}): {exc}; its lease will expire"
                       " and another worker will run it again")

    def _next_deadline(self, now: float) -> float:
        out = _TICK
        for a in self.running.values():
            if a.deadline is not None and not a.timed_out:
                out = min(out, a.deadline - now)
            if a.kill_at is not None and not a.killed:
                out = min(out, a.kill_at - now)
        if self.draining:
            out = min(out, 0.02)
        return max(out, 0.0)

    def _wait(self, listener: ListenerLike, timeout: float) -> bool:
        """Sleep until a step ends, a notification arrives or ``timeout``; True when notified."""
        poller = select.poll()
        fds = [a.handle.fileno() for a in self.running.values()]
        pollable = all(f is not None for f in fds)
        for f in fds:
            if f is not None:
                poller.register(f, select.POLLIN)
        lfd = listener.fileno()
        if lfd is not None:
            poller.register(lfd, select.POLLIN | select.POLLERR | select.POLLHUP)
        poller.register(self._wake_r, select.POLLIN)
        if self.running and not pollable:
            timeout = min(timeout, 0.01)
        if lfd is None:
            timeout = min(timeout, 1.0)  # the server is away: look again soon
        poller.poll(timeout * 1000.0)
        try:
            while os.read(self._wake_r, 64):
                pass
        except BlockingIOError:
            pass
        return bool(listener.drain())


def install_signal_handlers(worker: Worker) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP -> worker.interrupt(); returns a function restoring the old handlers."""
    return process.interrupt_on_signals(worker.interrupt)
