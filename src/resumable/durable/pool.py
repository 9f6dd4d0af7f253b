"""``run.map(step, items, jobs=8)``: a step over many items, on a pool, each item recorded as it ends.

Items already recorded are answered first, in the calling thread, without touching the pool. The rest
run on ``jobs`` threads (``executor="thread"``, the default), on worker processes of our own
(``executor="process"``) or on any ``concurrent.futures.Executor`` (``executors``: a Dask cluster,
loky, a process pool). Records are group-committed: the items that ended while the previous commit
was being flushed go in the next ``handle.commit`` together, one fsync for all of them; with threads
a worker hands its record over and takes its next item without waiting for the flush.

A failing item does not stop the others: its failure is recorded and its place in the returned list
holds a ``StepFailed`` (``on_error="raise"`` raises the first one instead, once every item has
ended). Ctrl-C stops starting new items; the ones running finish and are recorded.

**The true total.** Before the first item runs, the map records how many units its step will have
once it ends (one ``map`` record per map, whatever its size): ``status`` shows ``191/400`` for a map
stopped half way, not ``191/191``. **Rate limits** (``rate="50/min"``, and the step's own) are
passed by every attempt, on threads in the worker threads, on an executor by the caller.
"""

from __future__ import annotations

import contextvars
import functools
import os
import queue
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from resumable.core import verbs
from resumable.durable import shipping, worker
from resumable.durable.attempts import NotStarted, StepFailed, as_failure
from resumable.durable.engine import Call
from resumable.durable.executors import Flight, capacity, default_limit
from resumable.durable.mapping import Mapping
from resumable.durable.progress import open_bar
from resumable.durable.rate import Gate, Limiter
from resumable.durable.records import Ticket, gc_paused
from resumable.durable.steps import Step
from resumable.errors import InvalidInputError


def run_map(step: Step, wrapper: Any, iterables: tuple[Any, ...], *, jobs: int | None, executor: str | Executor,
            progress: bool | None, on_error: str, rate: object = None, bound: tuple[Any, ...] = ()) -> list[Any]:
    """``bound``: arguments every item starts with (the instance of a method step)."""
    if step.is_async:
        raise InvalidInputError(f"run.map runs plain functions; step {step.name} is async: use"
                                " asyncio.gather(*(step(x) for x in items))")
    executor = _executor(executor)
    if on_error not in ("return", "raise"):
        raise InvalidInputError(f"on_error={on_error!r}: use 'return' or 'raise'")
    if not iterables:
        raise InvalidInputError("run.map needs at least one iterable of items")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InvalidInputError("jobs= takes an integer >= 1")
    limiter = step.engine.map_limiter(step.name, rate) if rate is not None else None
    gate = step.gate(limiter)
    # Checked before anything is looked up or submitted: a step no worker could run is refused. With
    # a rate limit the workers make one attempt per item; the caller runs the retries through it.
    payload = shipping.ship(step, wrapper, executor, one_attempt=gate is not None) if executor != "thread" else None
    with gc_paused():  # a tuple per item: by the hundred thousand, and no cycles
        items = [(*bound, *t) if bound else tuple(t) for t in zip(*iterables, strict=False)]
    bar = open_bar(step.name, len(items), progress)
    mapping = Mapping(step, items, bar)
    try:
        with gc_paused():  # answering many recorded items makes objects by the million, no cycles
            mapping.look_up()
        if mapping.places:
            step.engine.ensure_session()
            record_total(mapping, limiter)
            if executor == "thread":
                _threads(mapping, jobs or 8, gate)
            elif executor == "process":
                _processes(mapping, payload, jobs or os.cpu_count() or 1, gate)
            else:
                assert not isinstance(executor, str) and payload is not None
                # Rate-limited: no more in flight than the executor runs at once, so that an item
                # submitted when the limit allows it starts then, not later in a queue behind others.
                limit = jobs or (capacity(executor) or os.cpu_count() or 1 if gate else default_limit(executor))
                flight(mapping, executor, payload, limit, gate).run()
    finally:
        bar.close()
    if on_error == "raise":
        for r in mapping.results:
            if isinstance(r, StepFailed):
                raise r
    return mapping.results


def record_total(m: Mapping, limiter: Limiter | None) -> None:
    """The map's ``map`` record: its step's unit count once it ends, and how many are done now."""
    records = m.step.engine.records
    with records.lock:  # the run's units, which another thread's commit may change meanwhile
        units, done = m.totals
    rate = (limiter.text, limiter.interval) if limiter is not None else None
    records.commit([verbs.map_started(m.step.name, units, done, rate)])


def flight(m: Mapping, executor: Executor, payload: bytes | shipping.Work, limit: int, gate: Gate | None) -> Flight:
    """The flight of ``m``'s items on ``executor``: through its client for a Dask cluster's own
    executor (``dask_client``), else through ``submit``."""
    kind = type(executor)
    if kind.__name__ == "ClientExecutor" and kind.__module__ == "distributed.cfexecutor":
        from resumable.durable.dask_client import DaskFlight

        return DaskFlight(m, executor, payload, limit, gate)
    return Flight(m, executor, payload, limit, gate)


def _executor(executor: object) -> str | Executor:
    if isinstance(executor, Executor):
        return executor
    if executor == "thread" or executor == "process":
        return str(executor)
    if type(executor).__module__.startswith("distributed.") and callable(getattr(executor, "get_executor", None)):
        made: Executor = executor.get_executor()  # type: ignore[attr-defined]  # a dask Client
        return made
    raise InvalidInputError(f"executor={executor!r}: use 'thread', 'process' or a concurrent.futures.Executor"
                            " (a dask Client's get_executor(), loky's, a ProcessPoolExecutor)")


class Countdown:
    """Items still to end; ``wait`` returns when none is left. One event for the whole map: a
    future per item (and ``concurrent.futures.wait`` on all of them) costs microseconds per item."""

    __slots__ = ("_left", "_lock", "all_ended", "errors", "stop")

    def __init__(self, n: int, stop: threading.Event | None = None) -> None:
        self._left = n
        self._lock = threading.Lock()
        self.all_ended = threading.Event()
        self.errors: list[BaseException] = []  # what stopped an item from ending normally
        self.stop = stop  # set by such an error: no item starts after it (nor waits for its rate)
        if n <= 0:
            self.all_ended.set()

    def ended(self, error: BaseException | None = None) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(error)
                if self.stop is not None:
                    self.stop.set()
            self._left -= 1
            last = self._left == 0
        if last:
            self.all_ended.set()


def _prepare(m: Mapping, prepared: dict[str, Call | None], reserved: set[str]) -> None:
    """Reserve every item still to run and begin its call, in one pass under the records' lock
    (the session is on: no other process executes steps now). A worker then starts its item with
    no look-up of its own, so that workers do not queue for that lock behind the commits. An item
    another thread of this process holds maps to None: its worker waits for it as a step call
    would. ``reserved``: the reservations made (the caller drops those of items it never starts)."""
    step, engine = m.step, m.step.engine
    with engine.records.lock:
        for uid in list(m.places):
            if not engine.reserve(uid):
                prepared[uid] = None
                continue
            reserved.add(uid)
            try:
                found, value = step.lookup(uid)
            except StepFailed as failure:
                found, value = True, failure
            if found:  # it ended before the session began
                reserved.discard(uid)
                engine.unreserve(uid)
                m.settle(uid, value, isinstance(value, StepFailed))
                continue
            prepared[uid] = step.begin_call(uid)


def _work(m: Mapping, tally: Countdown, uid: str, call: Call | None, gate: Gate | None) -> None:
    """Run one item in a pool thread, settle it once recorded, and count it ended on ``tally``."""
    step, engine = m.step, m.step.engine
    ended = False  # whether this item was counted (or its ticket's callback took it over)
    try:
        # A reserved item another thread took over meanwhile (its step called with the same
        # arguments) is waited for, as a step call would.
        if call is None or not engine.start(uid):
            try:
                found, value = step.acquire(uid)
            except StepFailed as failure:  # failed meanwhile, and the step does not retry failures
                m.settle(uid, failure, True)
                ended = True
                tally.ended()
                return
            if found:
                m.settle(uid, value, False)
                ended = True
                tally.ended()
                return
            run = functools.partial(step.run, uid, gate=gate)
        else:
            call.started, call.started_wall = time.monotonic(), time.time()  # it starts now
            run = functools.partial(step.execute, call, gate=gate)
        try:
            events, value, exc = run(m.args[uid], {})
        except NotStarted:  # the map stopped while this item waited for its rate limit
            engine.release(uid)
            ended = True
            tally.ended()
            return
        except BaseException:
            engine.release(uid)
            raise

        def recorded(ticket: Ticket) -> None:
            nonlocal ended
            ended = True
            engine.release(uid)
            error = ticket.error or exc
            m.settle(uid, as_failure(uid, error) if error is not None else value, error is not None)
            tally.ended()

        engine.records.submit(events, recorded)
    except BaseException as exc:
        if not ended:
            tally.ended(exc)


def _threads(m: Mapping, jobs: int, gate: Gate | None) -> None:
    engine = m.step.engine
    prepared: dict[str, Call | None] = {}
    reserved: set[str] = set()
    try:
        _prepare(m, prepared, reserved)
    except BaseException:
        for uid in reserved:
            engine.unreserve(uid)
        raise
    stop = threading.Event()
    tally = Countdown(len(prepared), stop)

    # Each thread takes the next item itself: one executor task per item would cost more than a
    # trivial item does. From a queue that takes no lock of Python's own: a lock passed by every
    # item would form a convoy of the threads (each pass a thread switch).
    todo: queue.SimpleQueue[tuple[str, Call | None]] = queue.SimpleQueue()
    for item in prepared.items():
        todo.put(item)
    if gate is not None:
        gate.cancel = stop  # a wait for the rate limit ends when the map stops

    def loop() -> None:
        while True:
            try:
                uid, call = todo.get_nowait()
            except queue.Empty:
                return
            if stop.is_set():  # an item failed past recording, or Ctrl-C: the rest never start
                if call is not None:
                    engine.unreserve(uid)
                tally.ended()
                continue
            _work(m, tally, uid, call, gate)

    pool = ThreadPoolExecutor(jobs, thread_name_prefix="resumable-map")
    try:
        for _ in range(min(jobs, len(prepared))):
            pool.submit(contextvars.copy_context().run, loop)
        tally.all_ended.wait()
    finally:
        # Ctrl-C: no new item starts; running ones end and are recorded before this returns.
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        while not todo.empty():  # never started: their reservations go
            uid, call = todo.get_nowait()
            if call is not None:
                engine.unreserve(uid)
    if tally.errors:
        raise tally.errors[0]


def _processes(m: Mapping, payload: Any, jobs: int, gate: Gate | None) -> None:
    """``executor="process"``: a pool of our own, started with ``spawn`` (nothing of this process, its
    lease included, is inherited), whose workers die with this process (``worker.die_with_parent``)."""
    import multiprocessing

    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=worker.die_with_parent, initargs=(os.getpid(),))
    try:
        Flight(m, pool, payload, jobs if gate else 2 * jobs, gate).run()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
