"""One process's durable-step machinery for one run: claims, the session, and long calls' start records.

**At most one execution in flight per step id.** Across processes, by the run's runner lease (the same
one ``resumable run`` holds): a process takes it before its first step execution (cache hits need
nothing) and keeps it until ``run.finish()`` or its exit. The lease is an flock in the file store (an
advisory lock in PostgreSQL), so the kernel drops it when its holder dies, however it dies: nothing
is taken over on a timer and no heartbeat is written. Another process that wants to execute a step
meanwhile is refused (``RefusedError`` naming the holder's pid, host and start time). Within the
process, by an in-memory claim per unit id: a second thread calling the same step with the same
arguments waits for the first call and then returns its recorded result.

Why not a claim record per step in the run: it would cost a second fsync per executed step (a miss
must cost at most 1.5 x one append + fsync), and a claimer's liveness across hosts needs heartbeats.

**The session.** Taking the lease starts a session: a ``begin`` record (status running, launch
descriptor), and every step unit left ``in_progress`` by a process that died is recorded
``interrupted`` (it runs again when called).

**Start records.** A step's start is recorded (``in_progress``, attempt running, pid) only once it
has run for ``record_start_after`` seconds (1 s by default): a quick step is recorded once, when it
ends, which is what keeps a miss at one fsync; a long one shows as running in ``resumable status``
and, if its process dies, is recorded ``interrupted`` by the next session. A quick step whose process
is killed leaves no trace and simply runs again.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from resumable.core import verbs
from resumable.core.model import units_of
from resumable.core.stamps import parse_stamp, stamp
from resumable.durable.rate import Limiter
from resumable.durable.records import Records
from resumable.errors import NoRunError, ResumableError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.core.types import Event, Launch
    from resumable.store.backend import RunHandle, RunnerLease

START_RECORD_AFTER = 1.0


_FREE = object()  # not in the claims
_RESERVED = object()  # reserved by a pool, not started: the first caller takes it over


class Call:
    """An execution in flight, as the start record needs it."""

    __slots__ = ("finished", "lock", "n", "pre", "start_recorded", "started", "started_wall", "step", "uid")

    def __init__(self, uid: str, step: str, n: int, pre: list[Event]) -> None:
        self.uid = uid
        self.step = step
        self.n = n
        self.pre = pre  # records that must precede this call's next one (invalidation, failed attempts)
        self.lock = threading.Lock()  # orders a start record before the final one (see Engine.track)
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.start_recorded = False
        self.finished = False


class Engine:
    def __init__(self, location: str, handle: RunHandle, open_lease: Callable[[], RunnerLease],
                 launch: Launch | None) -> None:
        self.location = location
        self.records = Records(handle)
        self._open_lease = open_lease
        self.launch = launch
        self.lease: RunnerLease | None = None
        self._session_lock = threading.Lock()
        # unit id -> None (held), its waiters' event (held, waited for) or _RESERVED
        self._claims: dict[str, object] = {}
        self._claims_lock = threading.Lock()
        self._cv = threading.Lock()  # guards starting the watch of the calls in flight
        self._running: dict[int, Call] = {}  # calls in flight (changed without a lock: atomic)
        self._watchdog: threading.Thread | None = None
        self.record_start_after = START_RECORD_AFTER
        self.closed = False
        self.steps: dict[str, tuple[str, str]] = {}  # step name -> (module, qualname) defining it
        self._limiters: dict[tuple[str, str], Limiter] = {}  # (step, rate) -> the maps' limit
        self.interrupted = False  # Ctrl-C came while open_run opened the run (``interrupts``)

    def recorded(self) -> int:
        """Calls whose outcome this process's session recorded, as the run says: step units done or
        failed since the session began (0 when this process executed nothing). Read from the run,
        not counted as records are written: an interrupt can land after a commit and before any
        count of it."""
        if self.lease is None:
            return 0
        doc = self.records.doc()
        began = doc.get("sessionStartedAt") if doc is not None else None
        if doc is None or not isinstance(began, str):
            return 0
        n = 0
        for unit in units_of(doc).values():
            if isinstance(unit, dict) and unit.get("kind") == "step" and unit.get("status") in ("done", "failed"):
                ended = unit.get("finishedAt")
                # Stamps of one format compare as text; any other is parsed.
                if isinstance(ended, str) and (ended >= began if len(ended) == len(began)
                                               else (parse_stamp(ended) or 0) >= (parse_stamp(began) or 0)):
                    n += 1
        return n

    def map_limiter(self, step: str, rate: object) -> Limiter:
        """The limit of ``run.map(step, ..., rate=rate)`` in this process: one per step and rate, so
        that maps of one step made one after another (or at once, in threads) share it."""
        key = (step, str(rate))
        with self._claims_lock:
            found = self._limiters.get(key)
        if found is None:
            made = Limiter.of(rate)
            assert made is not None
            with self._claims_lock:
                found = self._limiters.setdefault(key, made)
        return found

    # -- claims (this process) --
    def claim(self, uid: str) -> threading.Event | None:
        """None when this thread now holds the claim on ``uid``; else an event set when it ends.
        The event is made only when a second thread comes to wait: an uncontended call creates
        no synchronisation object. A unit only reserved (``reserve``) is taken over at once."""
        with self._claims_lock:
            held = self._claims.get(uid, _FREE)
            if held is _FREE or held is _RESERVED:
                self._claims[uid] = None
                return None
            if isinstance(held, threading.Event):
                return held
            ended = threading.Event()
            self._claims[uid] = ended
            return ended

    def reserve(self, uid: str) -> bool:
        """Mark ``uid`` as due to run soon in this process (a pool's queued item), if nobody holds
        it. A reservation is no claim: a thread that calls the step first takes it over (so a step
        that calls another item of its own map never waits for a worker that is not coming); the
        reserver runs the item only if ``start`` finds the reservation still there."""
        with self._claims_lock:
            if uid in self._claims:
                return False
            self._claims[uid] = _RESERVED
            return True

    def start(self, uid: str) -> bool:
        """Turn this process's reservation of ``uid`` into a claim held by this thread; False when
        another thread took the unit over meanwhile."""
        with self._claims_lock:
            if self._claims.get(uid, _FREE) is not _RESERVED:
                return False
            self._claims[uid] = None
            return True

    def unreserve(self, uid: str) -> None:
        """Drop a reservation that was never started (a claim taken over from it stays)."""
        with self._claims_lock:
            if self._claims.get(uid, _FREE) is _RESERVED:
                del self._claims[uid]

    def release(self, uid: str) -> None:
        with self._claims_lock:
            ended = self._claims.pop(uid, None)
        if isinstance(ended, threading.Event):
            ended.set()

    def in_flight(self) -> int:
        with self._claims_lock:
            return len(self._claims)

    # -- the session (the runner lease) --
    def ensure_session(self, *, begin: bool = True) -> None:
        """Hold the run's lease (RefusedError if another process holds it) and start the session."""
        if self.lease is not None:
            return
        with self._session_lock:
            if self.lease is not None:
                return
            lease = self._open_lease()
            lease.acquire()
            try:
                doc = self.records.doc()
                if doc is None:
                    raise NoRunError(f"no run at {self.location}: open it with resumable.open_run(RUN,"
                                     " task='what it does'), which creates it")
                events: list[Event] = [verbs.begin(self.launch)] if begin else []
                events += interrupted_leftovers(doc)
                if events:
                    self.records.commit_now(events, lazy_view=True)
            except BaseException:
                lease.release()
                raise
            self.lease = lease

    def close(self) -> None:
        """End the session and release the handle (the process is exiting, or a test ends)."""
        self.closed = True
        try:
            self.end_session()
        finally:
            with self.records.lock:
                self.records.handle.close()

    def end_session(self) -> None:
        """Bring the snapshot view up to date and hand the lease back."""
        with self._session_lock:
            lease, self.lease = self.lease, None
            try:
                with self.records.lock:
                    self.records.handle.flush()
            except (ResumableError, OSError):
                pass  # the journal has every record; the view is rebuilt by the next writer
            finally:
                if lease is not None:
                    lease.release()

    # -- calls in flight and their start records --
    def track(self, call: Call) -> None:
        # No lock shared by all calls on this path: with many threads, one would form a convoy
        # (each call passing it twice, each pass a thread switch). Each call has its own lock,
        # which only the watch ever contends for; the dict's own operations are atomic.
        self._running[id(call)] = call
        if self._watchdog is None:
            with self._cv:
                if self._watchdog is None:
                    self._watchdog = threading.Thread(target=self._watch, name="resumable-start-records",
                                                      daemon=True)
                    self._watchdog.start()

    def take_pre(self, call: Call, final: list[Event] | None) -> list[Event]:
        """The records to commit next for ``call``: what had to precede it, then ``final``; with a
        final record the call leaves the watch (after this its start record is never written)."""
        with call.lock:
            out, call.pre = call.pre, []
            if final is not None:
                call.finished = True
                self._running.pop(id(call), None)
                out += final
            return out

    def add_pre(self, call: Call, events: list[Event]) -> None:
        with call.lock:
            call.pre += events

    def _watch(self) -> None:
        # Polls rather than being woken by every call: a wake-up per call would cost every miss a
        # thread switch, while a start record may come up to half the threshold late.
        while not self.closed:
            time.sleep(max(0.01, self.record_start_after / 2))
            now = time.monotonic()
            queued = False
            for call in list(self._running.values()):
                if call.start_recorded or call.finished or now - call.started < self.record_start_after:
                    continue
                with call.lock:
                    if call.start_recorded or call.finished:
                        continue
                    call.start_recorded = True
                    events = [*call.pre, start_event(call)]
                    call.pre = []
                    # Queued under the lock that orders it before the call's final record.
                    self.records.submit(events, None, enqueue_only=True)
                    queued = True
            if queued:
                self.records.lead_if_idle()


def start_event(call: Call) -> Event:
    attempt = {"n": call.n, "status": "running", "startedAt": stamp(call.started_wall, ms=True),
               "pid": os.getpid()}
    return verbs.unit(call.uid, "in_progress", attempt=attempt, fields={"kind": "step", "step": call.step})


def interrupted_leftovers(doc: Mapping[str, Any]) -> list[Event]:
    """Step units a dead process left in_progress (the caller holds the lease: no live process is
    running them), recorded interrupted; their running attempt is closed as interrupted."""
    units = doc.get("units")
    if not isinstance(units, dict):
        return []
    now = stamp(time.time(), ms=True)
    out: list[Event] = []
    for uid, unit in units.items():
        if not (isinstance(unit, dict) and unit.get("status") == "in_progress" and unit.get("kind") == "step"):
            continue
        attempts = unit.get("attempts")
        last = attempts[-1] if isinstance(attempts, list) and attempts else None
        attempt = None
        if isinstance(last, dict) and isinstance(last.get("n"), int) and last.get("status") == "running":
            attempt = {"n": last["n"], "status": "interrupted", "finishedAt": now}
        out.append(verbs.unit(uid, "interrupted", attempt=attempt,
                              note="its process stopped before the step ended"))
    return out


# -- one engine per run per process --------------------------------------------------------------

_ENGINES: dict[str, Engine] = {}
_REGISTRY = threading.Lock()


def engine_for(location: str, make: Callable[[], Engine]) -> Engine:
    """The process's engine for the run at ``location``: a notebook that runs ``open_run`` again
    gets the same one (and the lease it holds), instead of being refused by its own lease."""
    with _REGISTRY:
        engine = _ENGINES.get(location)
        if engine is None:
            if not _ENGINES:
                atexit.register(_close_all)
            engine = _ENGINES[location] = make()
        return engine


def open_engine(location: str) -> Engine | None:
    """This process's engine for the run at ``location``, if it has one."""
    with _REGISTRY:
        return _ENGINES.get(location)


def _close_all() -> None:
    with _REGISTRY:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        try:
            engine.close()
        except Exception:
            pass
