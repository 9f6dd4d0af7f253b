"""``resumable worker``: run the steps of submitted jobs, on any host, under leases.

A worker claims ready steps from its store (``WorkQueue``: the PostgreSQL store), runs each as the
local runner does (its own session and process group, output to a log file, timeout with TERM,
grace, KILL, artifacts and fingerprints checked on this host), renews its leases with heartbeats,
and records each outcome with the claim's fencing token.

Two threads. This one runs processes and never waits on the store: a slot that frees starts its
next step at once, from the claims held ahead of the free slots. The recorder
(``worker_recorder``) does every transaction: the attempts started, the outcomes (a step is
reported finished only once its outcome is recorded), the claims handed back, the next claims,
the heartbeats; it sleeps on ``LISTEN`` until a step may have become claimable, or until the next
known deadline: never a tight polling loop.

A claim held ahead is started only while its lease surely holds, and never while an outcome of
its run that may stop it (a failure) is not recorded yet: such claims go back unstarted (no
attempt is recorded), and the claims that follow are chosen again by the scheduling policy.

Signals: the first SIGTERM/SIGINT/SIGHUP stops claiming and gives back the claims not started;
running steps may finish within ``drain_grace`` seconds, then they are stopped (TERM, grace,
KILL) and handed back, recorded ``interrupted``, for another worker to take at once. A second
signal hands them back at once. The worker then exits 130. A worker killed outright (SIGKILL, a
lost host) loses its claims when its leases expire; another worker takes each step back exactly once.
"""

from __future__ import annotations

import os
import select
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from resumable.core.policy import RetryPolicy
from resumable.core.stamps import stamp
from resumable.errors import NoRunError, ResumableError
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
from resumable.runner.worker_recorder import MAX_IDLE, Ended, Recorder, Reply, Supply, key_of
from resumable.runner.workqueue import ClaimLike, Sink, WorkQueue, is_queue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.store.backend import StepOutcome

__all__ = ["DEFAULT_TTL", "Worker", "WorkerOptions", "install_signal_handlers", "is_queue"]

DEFAULT_TTL = 30.0
AHEAD_MAX = 32  # claims held beyond the free slots, at most (the rest is left to other workers)
_TICK = 0.1
_LEASE_MARGIN = 0.5  # a claim held ahead is started only this long before its lease may run out


@dataclass
class WorkerOptions:
    runs: tuple[str, ...] | None = None  # None: every run; else exit once these runs have ended
    jobs: int = 1
    ttl: float = DEFAULT_TTL  # lease length; heartbeats every third of it
    drain_grace: float = 30.0  # after a stop signal: how long running steps may still finish
    logs_dir: str | None = None
    worker_id: str | None = None
    ahead: int | None = None  # claims held beyond the free slots (None: what covers a transaction, see Supply)
    wait: float = 0.0  # how long to wait for the named runs to be submitted


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
        # Shared by every step, encoded for the start once (``process.BaseEnv``), not copied per step.
        self.env = process.BaseEnv(os.environ if self.base_env is None else self.base_env)
        self.jobs = self.opts.jobs if self.opts.jobs > 0 else (os.cpu_count() or 1)
        self.stopping = False
        self.queued: deque[ClaimLike] = deque()  # claims held, not started
        self.blocked: dict[str, int] = {}  # runs with a failure not recorded yet: nothing of them starts
        self.awaiting = 0  # outcomes handed to the recorder, not recorded yet
        self.ended = False
        self._outbox: tuple[list[tuple[ClaimLike, float]], list[Ended], list[ClaimLike]] = ([], [], [])
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        supply = Supply(self.jobs, self.opts.ahead, self.opts.ttl, self.opts.runs, max(AHEAD_MAX, self.jobs))
        self.recorder = Recorder(self.queue, self.info, supply, self._log_path, self._poke, self.clock)

    def interrupt(self) -> None:
        """From a signal handler: the first stops claiming and drains; the second hands back now."""
        self.signals += 1
        self._poke()

    def _poke(self) -> None:
        try:
            os.write(self._wake_w, b"!")  # ends the current wait at once (poll is retried after a signal)
        except OSError:
            pass

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until the named runs have ended (0) or a signal stopped the worker (130)."""
        self.queue.register(self.info)
        try:
            if not self._await_runs():
                return 130
            self.recorder.start()
            try:
                return self._loop()
            finally:
                self.recorder.close()
                self._write_stats()
        finally:
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            try:
                self.queue.unregister(self.info)
            except ResumableError:
                pass

    def _write_stats(self) -> None:
        """What the worker did, for a benchmark (``RESUMABLE_WORKER_STATS=FILE``: one JSON line
        appended): transactions by kind, starts and outcomes recorded, CPU seconds of each thread."""
        path = os.environ.get("RESUMABLE_WORKER_STATS")
        if not path:
            return
        from resumable.core import jsonio

        stats = dict(self.recorder.stats, main_cpu=time.thread_time(), process_cpu=time.process_time())
        try:
            with open(path, "ab") as f:
                f.write(jsonio.dumps(stats) + b"\n")
        except OSError:
            pass

    def _await_runs(self) -> bool:
        """Wait (up to ``opts.wait``) for the named runs to be submitted; False when a signal came first."""
        if not self.opts.runs or self.opts.wait <= 0:
            return True
        deadline = self.clock() + self.opts.wait
        listener = self.queue.work_listener()
        try:
            while True:
                states = self.queue.run_states(self.opts.runs)
                missing = [r for r, st in states.items() if st is None]
                if not missing:
                    return True
                if self.signals:
                    return False
                left = deadline - self.clock()
                if left <= 0:
                    raise NoRunError(f"no run {', '.join(missing)} was submitted within {self.opts.wait:g}s:"
                                     " submit it (`resumable submit JOB`), or give the worker a longer --wait")
                poller = select.poll()
                poller.register(self._wake_r, select.POLLIN)
                fd = listener.fileno()
                if fd is not None:
                    poller.register(fd, select.POLLIN)
                poller.poll(min(left, 1.0) * 1000.0)  # a submit notifies; a lost notification costs a second
                listener.drain()
        finally:
            listener.close()

    def _loop(self) -> int:
        handled = 0
        drain_until = 0.0
        while True:
            now = self.clock()
            if self.signals > handled:
                handled = self.signals
                if not self.stopping:
                    self.stopping = True
                    drain_until = now + self.opts.drain_grace
                    self.recorder.stop_claiming()
                    self._give_back(list(self.queued))
                else:
                    drain_until = now
            if self.stopping and now >= drain_until:
                for a in self.running.values():
                    if not a.handing_back:
                        a.handing_back = True
                        if a.kill_at is None:
                            a.handle.terminate()
                            a.kill_at = now + (0.0 if handled >= 2 else a.step.grace)
            self._reap(now)
            self._drain(now)
            self._hear(now)
            self._fill()
            self._flush()
            if not (self.running or self.draining or self.awaiting or self.queued):
                if self.stopping:
                    return 130
                if self.ended:
                    return 0
            self.sink.tick()
            self._wait(self._next_deadline(now) if self.running or self.draining else MAX_IDLE)

    def _hear(self, now: float) -> None:
        """What the recorder did: outcomes recorded, claims taken or lost, runs that stopped."""
        for reply in self.recorder.take():
            self._heard(reply, now)

    def _heard(self, reply: Reply, now: float) -> None:
        if reply.fatal is not None:
            raise reply.fatal
        for message in reply.warnings:
            self.sink.warn(message)
        for ended, recorded, retry_in in reply.settled:
            self.awaiting -= 1
            run_id = ended.claim.run_id
            if run_id in self.blocked and ended.result["status"] in ("failed", "timeout"):
                self.blocked[run_id] -= 1
                if not self.blocked[run_id]:
                    del self.blocked[run_id]
            o = ended.token
            if isinstance(o, Outcome):
                self.sink.finished(o.run.claim, o.run.step, o.result["status"], o.duration, o.exit_code, retry_in,
                                   recorded)
        for c in reply.lost:
            self._lost(c, now)
        for run_id in reply.stopping:
            self._give_back([c for c in self.queued if c.run_id == run_id])
        self.queued.extend(reply.claimed)
        if self.stopping:
            self._give_back(list(self.queued))
        self.ended = self.ended or reply.ended

    def _lost(self, c: ClaimLike, now: float) -> None:
        """Another worker took the step over: stop its attempt here (its outcome will be fenced
        off), or forget the claim if its step had not started."""
        a = self.running.get(key_of(c))
        if a is None or a.claim.epoch != c.epoch:
            if c in self.queued:
                self.queued.remove(c)
            return
        if a.lost:
            return
        a.lost = True
        self.sink.warn(f"lost the lease of {c.run_id}/{c.step} (attempt {c.n}): another worker took it over;"
                       " stopping this attempt")
        if a.kill_at is None:
            a.handle.terminate()
            a.kill_at = now + a.step.grace

    def _give_back(self, claims: list[ClaimLike]) -> None:
        """Claims not started go back to the store, unstarted: no attempt is recorded."""
        for c in claims:
            self.queued.remove(c)
        self._post(unstarted=claims)

    def _fill(self) -> None:
        """Start held claims in the free slots: a run with a failure not recorded yet starts
        nothing (the policy may stop it), and a claim whose lease may have run out goes back."""
        back = []
        while len(self.running) < self.jobs and self.queued:
            c = self.queued.popleft()
            if c.run_id in self.blocked or self.clock() >= self.recorder.valid_until(c) - _LEASE_MARGIN:
                back.append(c)
                continue
            self._start(c)
        for c in list(self.queued):
            if c.run_id in self.blocked:
                back.append(c)
                self.queued.remove(c)
        self._post(unstarted=back)

    def _post(self, *, started: Sequence[tuple[ClaimLike, float]] = (), ended: Sequence[Ended] = (),
              unstarted: Sequence[ClaimLike] = ()) -> None:
        """For the recorder, handed over once per turn of the loop (``_flush``): what happened
        together is recorded together."""
        self._outbox[0].extend(started)
        self._outbox[1].extend(ended)
        self._outbox[2].extend(unstarted)

    def _flush(self) -> None:
        started, ended, unstarted = self._outbox
        if started or ended or unstarted:
            self._outbox = ([], [], [])
            self.recorder.post(started=started, ended=ended, unstarted=unstarted)

    def _log_path(self, run_id: str, step_id: str, n: int) -> str:
        base = os.path.abspath(self.opts.logs_dir or os.path.join(self.queue.local_dir(), run_id, "logs"))
        numbered = os.path.join(base, f"{step_id}.{n}.log")
        if self.opts.logs_dir:
            # As `resumable run --logs-dir`: DIR/<id>.log is the latest attempt's log.
            from resumable.runner import latestlog

            problem = latestlog.point(numbered, latestlog.latest_name(base, step_id))
            if problem is not None:
                self.sink.warn(f"step logs: {problem}")
        return numbered

    # -- steps ----------------------------------------------------------------------------------

    def _start(self, c: ClaimLike) -> None:
        try:
            step = from_spec(c.spec)
        except ResumableError as exc:
            self.sink.warn(str(exc))
            self._cannot_run(c, f"this worker cannot run it: {exc}")
            return
        # Input hashes are reused (same size and mtime) only from a fingerprint taken on this host:
        # another host's copy of a file may share both and still differ.
        prev = c.unit.get("fingerprint") if c.unit.get("fingerprintHost") == self.info.host else None
        fprint = fp.fingerprint(step, prev if isinstance(prev, Mapping) else None)
        if "upstream" in c.spec:  # what its needs made, as the store read them when it was claimed
            fprint["needs"] = c.spec["upstream"]
        differs = fingerprint_differences(c.spec.get("fingerprint"), fprint)
        own = dict(step.env)
        own.update({"RESUMABLE_RUN": c.run_id, "RESUMABLE_STEP": step.id, "RESUMABLE_ATTEMPT": str(c.n),
                    process.TOKEN_ENV: self.secret})
        env = process.StepEnv(self.env, own)
        log = step.log or c.log
        wall = self.wallclock()
        started = self.clock()
        handle: process.StepHandle
        try:
            handle = self.spawner(step.argv, step.cwd, env, log)
        except OSError as exc:
            handle = FailedSpawn(f"resumable: cannot start step {step.id!r}: {exc}\n", log)
        self._post(started=[(c, wall)])
        if differs:
            self.sink.warn(f"{c.run_id}/{step.id}: on this host ({self.info.host}) {', '.join(differs)} since the"
                           " job was submitted; running it as it is here")
        self.sink.started(c, step)
        deadline = started + step.timeout if step.timeout else None
        self.running[(c.run_id, c.step)] = Running(c, step, handle, started, wall, fprint, deadline)

    def _cannot_run(self, c: ClaimLike, reason: str) -> None:
        """A claim this worker cannot run: its attempt is recorded interrupted, with the reason."""
        at = self.wallclock()
        result: StepOutcome = {
            "status": "interrupted", "note": reason, "exit_code": None, "reason": reason, "log": None, "fields": {},
            "attempt": {"n": c.n, "status": "interrupted", "finishedAt": stamp(at, ms=True), "reason": reason}}
        self.awaiting += 1
        self._post(started=[(c, at)], ended=[Ended(c, result, RetryPolicy())])

    def _reap(self, now: float) -> None:
        """Enforce timeouts; hand the outcomes of the steps that ended to the recorder. A failure
        holds back its run's claims not started until the policy has said what follows from it."""
        ended: list[Ended] = []
        for key, a in list(self.running.items()):
            code = a.handle.poll()
            if code is None:
                enforce_timeout(a, now, exempt=a.handing_back)
                continue
            del self.running[key]
            out = outcome_of(a, code, now, self.wallclock(), self.info.host, self.worker_id)
            ended.append(Ended(a.claim, out.result, out.policy, out))
            if out.result["status"] in ("failed", "timeout"):
                self.blocked[a.claim.run_id] = self.blocked.get(a.claim.run_id, 0) + 1
            if a.handle.leftovers():
                self.draining.append(Draining(a.handle, a.kill_at or now + a.step.grace, termed=a.kill_at is not None))
            else:
                a.handle.close()
        if ended:
            self.awaiting += len(ended)
            back = [c for c in self.queued if c.run_id in self.blocked]
            for c in back:
                self.queued.remove(c)
            self._post(ended=ended, unstarted=back)

    def _drain(self, now: float) -> None:
        """Stop what steps left behind."""
        for d in list(self.draining):
            if not d.handle.leftovers():
                self.draining.remove(d)
                d.handle.close()
            elif not d.termed:
                d.handle.terminate()
                d.termed = True
            elif now >= d.kill_at:
                d.handle.kill()

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

    def _wait(self, timeout: float) -> None:
        """Sleep until a step ends, the recorder or a signal wakes this thread, or ``timeout``."""
        poller = select.poll()
        fds = [a.handle.fileno() for a in self.running.values()]
        pollable = all(f is not None for f in fds)
        for f in fds:
            if f is not None:
                poller.register(f, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        if self.running and not pollable:
            timeout = min(timeout, 0.01)
        poller.poll(timeout * 1000.0)
        try:
            while os.read(self._wake_r, 64):
                pass
        except BlockingIOError:
            pass


def install_signal_handlers(worker: Worker) -> Callable[[], None]:
    """SIGINT/SIGTERM/SIGHUP -> worker.interrupt(); returns a function restoring the old handlers."""
    return process.interrupt_on_signals(worker.interrupt)
