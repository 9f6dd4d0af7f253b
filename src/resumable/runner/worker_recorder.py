"""A worker's store traffic, on a thread of its own (the ``Recorder``): what the worker's steps
did is recorded off their slots' critical path, and the next steps are claimed ahead of need.

The worker's main thread only runs processes. It hands the recorder the attempts it started, the
outcomes of those that ended and the claims it gives back unstarted (``post``); the recorder
sends whatever has gathered meanwhile in one transaction per run (``WorkQueue.record``: starts,
outcomes, hand-backs and the next claims together), so steps that end while a commit is in
flight are recorded together by the next one. It keeps the worker supplied with claims: as many
as its free slots, and up to ``ahead`` more, so a slot that frees starts its next step at once.
It renews every claim it holds in one statement (the heartbeat), numbers and concludes runs
(``tidy``), and sleeps on ``LISTEN`` when there is nothing to do.

What the main thread hears back (``take``): claims to start, each outcome as recorded (only then
is a step reported finished: its completion is durable before anyone is told, and before a step
needing it can be claimed), claims lost, runs that stopped (their unstarted claims go back), and
warnings. The store (a psycopg connection pool, the place's caches) is used by this thread only.
"""

from __future__ import annotations

import math
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from resumable.core.policy import RetryPolicy
from resumable.errors import ResumableError, StoreError
from resumable.runner.workqueue import ClaimLike, ListenerLike, WorkQueue

if TYPE_CHECKING:
    from resumable.store.backend import StepOutcome

MAX_IDLE = 30.0  # look again at least this often without a notification (one lost with a connection)
# What was posted waits this long for more to record with it, unless it is needed at once (a slot
# waits for a claim, a failure holds its run back, the worker stops): fewer, larger transactions.
LINGER = 0.01
# ... and up to this long while the claims held beyond the slots last longer (at the rate steps
# end, two transactions' time to spare) and every lease holds: a worker whose store is far away
# commits once per several steps. Bounded, because a step's dependents (perhaps another worker's
# next steps) are claimable only once its outcome is recorded, and the worker is not told which
# steps have dependents: a dependent waits at most this much longer.
GATHER = 0.1
BATCH = 64  # outcomes that are sent at once, however long the claims last

Key = tuple[str, str]


def key_of(claim: ClaimLike) -> Key:
    return claim.run_id, claim.step


@dataclass
class Ended:
    """An attempt's outcome to record; ``token`` is the main thread's own record of it."""

    claim: ClaimLike
    result: StepOutcome
    policy: RetryPolicy
    token: object = None


@dataclass
class Reply:
    """What the recorder tells the main thread, in the order it happened."""

    claimed: list[ClaimLike] = field(default_factory=list)
    settled: list[tuple[Ended, bool, float | None]] = field(default_factory=list)  # (outcome, recorded, retry_in)
    lost: list[ClaimLike] = field(default_factory=list)
    stopping: list[str] = field(default_factory=list)  # runs that start nothing new
    warnings: list[str] = field(default_factory=list)
    ended: bool = False  # the named runs have ended
    fatal: BaseException | None = None


@dataclass
class Supply:
    """How many claims the worker wants: ``jobs`` slots, ``ahead`` more beyond them (None: as
    many as cover the time a transaction takes at the rate steps end, between ``jobs`` and
    ``most``: a slot never waits for the store, and little is held away from other workers)."""

    jobs: int
    ahead: int | None
    ttl: float
    runs: tuple[str, ...] | None
    most: int = 32


class Pace:
    """How fast steps end and how long a transaction takes, lately (what ``Supply`` covers)."""

    WINDOW = 1.0  # seconds of outcomes the rate is taken over

    def __init__(self) -> None:
        self.ends: deque[tuple[float, int]] = deque()
        self.latency = 0.0  # seconds, a moving average
        self.first: float | None = None  # when the first outcome came

    def ended(self, now: float, n: int) -> None:
        if self.first is None:
            self.first = now
        self.ends.append((now, n))
        while self.ends and self.ends[0][0] < now - self.WINDOW:
            self.ends.popleft()

    def took(self, seconds: float) -> None:  # under the recorder's lock, as every use of the pace
        self.latency = seconds if not self.latency else 0.7 * self.latency + 0.3 * seconds

    def rate(self) -> float:
        """Steps ended per second, lately: over the ``WINDOW``, or over the time since the first
        outcome while that is shorter (else a worker's first second, its steps ending at full
        speed, would count a fraction of its rate and hold too few claims ahead)."""
        if not self.ends or self.first is None:
            return 0.0
        span = min(self.WINDOW, max(self.ends[-1][0] - self.first, 0.05))
        return sum(n for _, n in self.ends) / span

    def cover(self, jobs: int) -> int:
        """Claims that end, at the recent rate, within the ``LINGER`` an outcome always waits for
        company and two transactions' time (until the transaction it travels with has landed with
        the next claims), and within ``GATHER`` (up to one more per slot): no slot waits."""
        rate = self.rate()
        return math.ceil(rate * (LINGER + 2.0 * self.latency)) + min(math.ceil(rate * GATHER), jobs)


class Recorder:
    """The worker's store traffic on a thread of its own (see the module docstring)."""

    def __init__(self, queue: WorkQueue, info: Any, supply: Supply, log_path: Callable[[str, str, int], str],
                 wake: Callable[[], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.queue = queue
        self.info = info
        self.supply = supply
        self.log_path = log_path
        self.wake_main = wake
        self.clock = clock
        self._lock = threading.Lock()
        self._starts: list[tuple[ClaimLike, float]] = []
        self._ended: list[Ended] = []
        self._unstarted: list[ClaimLike] = []
        self._replies: list[Reply] = []
        self.held: dict[Key, ClaimLike] = {}  # every claim the worker holds (started or not)
        self._valid: dict[Key, float] = {}  # until when each claim's lease surely holds (this clock)
        self._claiming = True
        self._closing = False
        self._since = 0.0  # when what is posted began to gather
        self._said_ended = False
        self._warned: set[str] = set()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._main, name="resumable-recorder", daemon=True)
        self.pace = Pace()
        self.stats: dict[str, float] = {}  # what the recorder did (RESUMABLE_WORKER_STATS: written at exit)

    # -- the main thread's side ------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def post(self, *, started: Sequence[tuple[ClaimLike, float]] = (), ended: Sequence[Ended] = (),
             unstarted: Sequence[ClaimLike] = ()) -> None:
        """Attempts started (claim, wall-clock time), outcomes, claims given back unstarted."""
        if not (started or ended or unstarted):
            return
        with self._lock:
            first = not (self._starts or self._ended or self._unstarted)
            if first:
                self._since = self.clock()
            self._starts += started
            self._ended += ended
            self._unstarted += unstarted
            for c in [*(e.claim for e in ended), *unstarted]:
                self.held.pop(key_of(c), None)  # its slot is free for the next claim
            if ended:
                self.pace.ended(self.clock(), len(ended))
            # The recorder sleeps until what was posted first is due (``_due``): it is woken for
            # the first, and again only when what is posted now may make it due sooner. (Woken at
            # every post, it would wake about once a step, for nothing, on the GIL steps need.)
            sooner = first or bool(unstarted) or len(self._ended) >= BATCH or any(
                e.result["status"] != "done" for e in ended) or len(self.held) < 2 * self.supply.jobs or any(
                self._valid.get(k, 0.0) - 2.0 * self.pace.latency - 0.5 <= self._since + GATHER
                for k in [*(key_of(e.claim) for e in ended), *(key_of(c) for c, _ in started)])
        if sooner:
            self._poke()

    def take(self) -> list[Reply]:
        with self._lock:
            out, self._replies = self._replies, []
        return out

    def valid_until(self, claim: ClaimLike) -> float:
        """Until when (this clock) the claim's lease surely holds: a step is started only before."""
        with self._lock:
            return self._valid.get(key_of(claim), 0.0)

    def stop_claiming(self) -> None:
        with self._lock:
            self._claiming = False
        self._poke()

    def close(self) -> None:
        """Record what is left, then end the thread."""
        with self._lock:
            self._closing = True
        self._poke()
        if self._thread.is_alive():
            self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def _poke(self) -> None:
        try:
            os.write(self._wake_w, b"!")
        except (BlockingIOError, OSError):
            pass  # a full pipe wakes the thread all the same

    # -- the recorder's thread -------------------------------------------------------------------

    def _main(self) -> None:
        try:
            listener = self.queue.work_listener()
        except BaseException as exc:  # said by the main thread, which ends the worker with it
            self._reply(Reply(fatal=exc))
            return
        try:
            self._loop(listener)
        except BaseException as exc:
            self._reply(Reply(fatal=exc))
        finally:
            listener.close()
            self.stats["cpu"] = time.thread_time()

    def _loop(self, listener: ListenerLike) -> None:
        beat_every = max(self.supply.ttl / 3.0, 0.05)
        next_beat = self.clock() + beat_every
        claim_at = self.clock()
        while True:
            due = self._due()
            with self._lock:
                closing, claiming = self._closing, self._claiming and not self._closing
                starts: list[tuple[ClaimLike, float]] = []
                ended: list[Ended] = []
                unstarted: list[ClaimLike] = []
                if due <= self.clock():
                    starts, self._starts = self._starts, []
                    ended, self._ended = self._ended, []
                    unstarted, self._unstarted = self._unstarted, []
            if starts or ended or unstarted:
                self._record(starts, ended, unstarted, claiming)
            elif closing and due == math.inf:
                return
            now = self.clock()
            # What was posted meanwhile goes first: its transaction claims what is wanted.
            if claiming and not self._posted() and any(self._wanted()) and now >= claim_at:
                claim_at = self._claim(now)
            if self.held and now >= next_beat:
                self._beat()
                next_beat = now + beat_every
            elif not self.held:
                next_beat = now + beat_every
            self._tidy()
            posted = self._due()  # what is posted claims for the worker when it is recorded
            claims_due = claim_at if claiming and posted == math.inf and any(self._wanted()) else math.inf
            wait = min(next_beat - now if self.held else MAX_IDLE, claims_due - now, posted - now, MAX_IDLE)
            if self._wait(listener, max(wait, 0.0)):
                claim_at = min(claim_at, self.clock())

    def _due(self) -> float:
        """When what was posted is to be recorded (inf: nothing is): at once when a slot waits for
        a claim, a failure holds its run's claims back, the worker stops or ``BATCH`` outcomes
        wait; else ``LINGER`` after the first of it was posted, or later while the claims held
        ahead last (``GATHER`` at most, and well before a lease may run out)."""
        with self._lock:
            if not (self._starts or self._ended or self._unstarted):
                return math.inf
            if self._closing or not self._claiming or len(self.held) < self.supply.jobs or len(
                    self._ended) >= BATCH or any(e.result["status"] != "done" for e in self._ended):
                return 0.0
            soon = self._since + LINGER
            rate, spare = self.pace.rate(), len(self.held) - self.supply.jobs
            lasts = self.clock() + spare / rate if rate > 0 else math.inf
            lease = self._lease_due()
            if lease <= soon:
                return lease
            return max(soon, min(self._since + GATHER, lasts - 2.0 * self.pace.latency, lease))

    def _lease_due(self) -> float:
        """When the outcomes and starts posted must be sent for their leases to surely hold when
        the transaction lands (under the lock)."""
        keys = [key_of(e.claim) for e in self._ended] + [key_of(c) for c, _ in self._starts]
        margin = 2.0 * self.pace.latency + 0.5
        return min((self._valid.get(k, 0.0) for k in keys), default=math.inf) - margin

    def _posted(self) -> bool:
        with self._lock:
            return bool(self._starts or self._ended or self._unstarted or self._closing)

    def _wanted(self) -> tuple[int, int]:
        """(claims for free slots, claims ahead of them) the worker would take now."""
        with self._lock:  # the main thread counts outcomes into the pace as it posts them
            held = len(self.held)
            cover = self.pace.cover(self.supply.jobs)
        want = self.supply.ahead
        if want is None:
            want = min(max(cover, self.supply.jobs), self.supply.most)
        slots = max(self.supply.jobs - held, 0)
        ahead = max(self.supply.jobs + want - held - slots, 0)
        return (slots, ahead) if slots or ahead else (0, 0)

    def _record(self, starts: list[tuple[ClaimLike, float]], ended: list[Ended], unstarted: list[ClaimLike],
                claiming: bool) -> None:
        """One transaction per run for what was posted; the next claims travel with the first."""
        runs: dict[str, tuple[list[tuple[ClaimLike, float]], list[Ended], list[ClaimLike]]] = {}
        for c, at in starts:
            runs.setdefault(c.run_id, ([], [], []))[0].append((c, at))
        for e in ended:
            runs.setdefault(e.claim.run_id, ([], [], []))[1].append(e)
        for c in unstarted:
            runs.setdefault(c.run_id, ([], [], []))[2].append(c)
        for run_id, (run_starts, run_ended, run_back) in runs.items():
            slots, ahead = self._wanted() if claiming else (0, 0)
            sent = self.clock()
            self._count("records", starts=len(run_starts), outcomes=len(run_ended), back=len(run_back))
            try:
                got = self.queue.record(self.info, starts=run_starts,
                                        items=[(e.claim, e.result, e.policy) for e in run_ended],
                                        unstarted=run_back, slots=slots, ahead=ahead, ttl=self.supply.ttl,
                                        log_path=self.log_path)
            except StoreError as exc:
                self._not_recorded(run_starts, run_ended, run_back, exc)
                continue
            with self._lock:
                self.pace.took(self.clock() - sent)
            reply = Reply(settled=[(e, s is not None, s.retry_in if s is not None else None)
                                   for e, s in zip(run_ended, got.settled, strict=True)],
                          lost=list(got.lost), stopping=[run_id] if got.stopping else [])
            with self._lock:
                for c in got.lost:
                    self.held.pop(key_of(c), None)
            self._hold(got.claims, sent, reply)

    def _count(self, what: str, **more: int) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1
        for k, v in more.items():
            self.stats[k] = self.stats.get(k, 0) + v

    def _not_recorded(self, starts: list[tuple[ClaimLike, float]], ended: list[Ended], back: list[ClaimLike],
                      exc: StoreError) -> None:
        """A transaction that failed: its outcomes are said not recorded (their leases will
        expire and another worker runs them again); starts and hand-backs are tried again."""
        reply = Reply(settled=[(e, False, None) for e in ended])
        for e in ended:
            c = e.claim
            reply.warnings.append(f"could not record {c.run_id}/{c.step} (attempt {c.n}): {exc}; its lease will"
                                  " expire and another worker will run it again")
        done = {key_of(e.claim) for e in ended}
        with self._lock:
            if not self._closing:  # a worker on its way out tries once: the leases will expire
                self._starts[:0] = [(c, at) for c, at in starts if key_of(c) not in done]
                self._unstarted[:0] = back
        if not ended:
            self._warn_once(reply, f"cannot record the steps started: {exc}; trying again")
            time.sleep(0.5)  # the store is away: do not spin
        self._reply(reply)

    def _hold(self, claims: Sequence[ClaimLike], sent: float, reply: Reply) -> None:
        """Claims taken: held (their lease holds ``ttl`` after the request was sent), to be started."""
        with self._lock:
            for c in claims:
                self.held[key_of(c)] = c
                self._valid[key_of(c)] = sent + self.supply.ttl
        reply.claimed = list(claims)
        if claims or reply.settled or reply.lost or reply.stopping or reply.warnings:
            self._reply(reply)

    def _claim(self, now: float) -> float:
        """Claim for the free slots and ahead of them; returns when to look again without a notification."""
        slots, ahead = self._wanted()
        self._count("claims")
        try:
            got, due = self.queue.claim(self.info, self.supply.runs, slots, ttl=self.supply.ttl,
                                        log_path=self.log_path, ahead=ahead)
        except StoreError as exc:
            reply = Reply()
            self._warn_once(reply, f"cannot claim steps: {exc}; trying again every second")
            self._reply(reply)
            return now + 1.0
        self._warned.discard("cannot claim steps")
        self._hold(got, now, Reply())
        if not got and self.supply.runs is not None:
            self._check_ended()
        if len(got) < slots + ahead:
            return now + (MAX_IDLE if due is None else min(max(due, 0.0) + 0.01, MAX_IDLE))
        return now

    def _check_ended(self) -> None:
        """Whether the named runs have ended (said once; the worker exits when it holds nothing)."""
        with self._lock:
            busy = bool(self.held or self._starts or self._ended or self._unstarted)
        if busy or self._said_ended:
            return
        assert self.supply.runs is not None
        try:
            states = self.queue.run_states(self.supply.runs)
        except StoreError:
            return
        reply = Reply()
        missing = [r for r, st in states.items() if st is None]
        if missing:
            self._warn_once(reply, f"no run {', '.join(missing)} in the store now; waiting for it to be submitted")
        if all(st is not None and st != "running" for st in states.values()):
            self._said_ended = reply.ended = True
        self._reply(reply)

    def _beat(self) -> None:
        with self._lock:
            mine = list(self.held.values())
        sent = self.clock()
        self._count("beats")
        try:
            lost = self.queue.renew(self.info, mine, self.supply.ttl)
        except StoreError as exc:
            reply = Reply()
            self._warn_once(reply, f"cannot renew the leases: {exc}; trying again at every heartbeat")
            self._reply(reply)
            return
        self._warned.discard("cannot renew the leases")
        gone = {key_of(c) for c in lost}
        with self._lock:
            for c in mine:
                k = key_of(c)
                if k in gone:
                    self.held.pop(k, None)
                    self._valid.pop(k, None)
                elif k in self.held:
                    self._valid[k] = sent + self.supply.ttl
        if lost:
            self._reply(Reply(lost=list(lost)))

    def _tidy(self) -> None:
        t0 = time.perf_counter()
        try:
            self.queue.tidy()
            took = time.perf_counter() - t0
            self.stats["tidy_max"] = max(self.stats.get("tidy_max", 0.0), took)
        except StoreError as exc:
            reply = Reply()
            self._warn_once(reply, f"cannot conclude or number a run's events: {exc}; trying again at the next"
                                   " claim")
            self._reply(reply)

    def _warn_once(self, reply: Reply, message: str) -> None:
        """A store that cannot be reached is said once per kind of failure, not at every retry."""
        kind = message.split(":", 1)[0]
        if kind not in self._warned:
            self._warned.add(kind)
            reply.warnings.append(message)

    def _reply(self, reply: Reply) -> None:
        with self._lock:
            self._replies.append(reply)
        self.wake_main()

    def _wait(self, listener: ListenerLike, timeout: float) -> bool:
        """Sleep until posted to, notified, or ``timeout``; True when notified."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        lfd = listener.fileno()
        if lfd is not None:
            poller.register(lfd, select.POLLIN | select.POLLERR | select.POLLHUP)
        else:
            timeout = min(timeout, 1.0)  # the server is away: look again soon
        poller.poll(max(timeout, 0.0) * 1000.0)
        try:
            while os.read(self._wake_r, 64):
                pass
        except BlockingIOError:
            pass
        try:
            return bool(listener.drain())
        except ResumableError:
            return False
