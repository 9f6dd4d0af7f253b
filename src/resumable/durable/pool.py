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
"""

from __future__ import annotations

import contextvars
import functools
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from resumable.durable import shipping, worker
from resumable.durable.attempts import StepFailed, as_failure
from resumable.durable.digest import Recorded
from resumable.durable.engine import Call
from resumable.durable.executors import Flight, default_limit, flight
from resumable.durable.progress import Bar, open_bar
from resumable.durable.records import Ticket, gc_paused
from resumable.durable.steps import Step
from resumable.errors import InvalidInputError

if TYPE_CHECKING:
    from collections import abc  # ``Mapping`` here is the map over items, below


class Mapping:
    """One ``run.map`` call: the items, their places in the result, and the bar."""

    def __init__(self, step: Step, items: list[tuple[Any, ...]], bar: Bar) -> None:
        self.step = step
        self.items = items
        self.bar = bar
        self.results: list[Any] = [None] * len(items)
        self.places: dict[str, list[int]] = {}  # unit id -> places of the items still to run
        self.args: dict[str, tuple[Any, ...]] = {}

    def settle(self, uid: str, value: Any, failed: bool) -> None:
        places = self.places.get(uid, [])
        for i in places:
            self.results[i] = value
        self.bar.advance(len(places), failed=len(places) if failed else 0)

    def look_up(self, chunk: int = 2048) -> None:
        """Answer every recorded item; group the rest by unit id (equal items run once). From a
        digest when this process has not loaded the run (``digest``), else in chunks under the
        records' lock: one lock, one look at the run and one tick of the bar per chunk."""
        digest = self.step.engine.records.take_digest()
        if digest is not None:
            self.look_up_in(digest.units, chunk)
            return
        step, records, items = self.step, self.step.engine.records, self.items
        for start in range(0, len(items), chunk):
            with records.lock:
                units = records.units()
                self.answer(range(start, min(start + chunk, len(items))), units,
                            functools.partial(answer_unit, step, units))

    def look_up_in(self, units: dict[str, Recorded], chunk: int) -> None:
        """``look_up`` from a digest's units, whose results are handed out as they are: to the
        first place of each; a repeated item gets its own copy."""
        step, given = self.step, set()

        def answer(uid: str) -> tuple[bool, Any]:
            fresh = uid not in given
            given.add(uid)
            return step.answer_recorded(uid, units.get(uid), copy=not fresh)

        for start in range(0, len(self.items), chunk):
            self.answer(range(start, min(start + chunk, len(self.items))), units, answer)

    def answer(self, places: range, units: abc.Mapping[str, object], answer: Callable[[str], tuple[bool, Any]]) -> None:
        step, items = self.step, self.items
        answered = failed = 0
        for i in places:
            args = items[i]
            uid = step.unit_id(args, {}, units)
            if uid in self.places:
                self.places[uid].append(i)
                continue
            try:
                found, value = answer(uid)
            except StepFailed as exc:
                found, value = True, exc
                failed += 1
            if found:
                self.results[i] = value
                answered += 1
            else:
                self.places[uid] = [i]
                self.args[uid] = args
        self.bar.advance(answered, failed=failed)


def answer_unit(step: Step, units: abc.Mapping[str, object], uid: str) -> tuple[bool, Any]:
    return step.answer(uid, units.get(uid))


def run_map(step: Step, wrapper: Any, iterables: tuple[Any, ...], *, jobs: int | None, executor: str | Executor,
            progress: bool | None, on_error: str) -> list[Any]:
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
    # Checked before anything is looked up or submitted: a step no worker could run is refused.
    payload = shipping.ship(step, wrapper, executor) if executor != "thread" else None
    with gc_paused():  # a tuple per item: by the hundred thousand, and no cycles
        items = [tuple(t) for t in zip(*iterables, strict=False)]
    bar = open_bar(step.name, len(items), progress)
    mapping = Mapping(step, items, bar)
    try:
        with gc_paused():  # answering many recorded items makes objects by the million, no cycles
            mapping.look_up()
        if mapping.places:
            step.engine.ensure_session()
            if executor == "thread":
                _threads(mapping, jobs or 8)
            elif executor == "process":
                _processes(mapping, payload, jobs or os.cpu_count() or 1)
            else:
                assert not isinstance(executor, str) and payload is not None
                flight(mapping, executor, payload, jobs or default_limit(executor)).run()
    finally:
        bar.close()
    if on_error == "raise":
        for r in mapping.results:
            if isinstance(r, StepFailed):
                raise r
    return mapping.results


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

    __slots__ = ("_left", "_lock", "all_ended", "errors")

    def __init__(self, n: int) -> None:
        self._left = n
        self._lock = threading.Lock()
        self.all_ended = threading.Event()
        self.errors: list[BaseException] = []  # what stopped an item from ending normally
        if n <= 0:
            self.all_ended.set()

    def ended(self, error: BaseException | None = None) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(error)
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


def _work(m: Mapping, tally: Countdown, uid: str, call: Call | None) -> None:
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
            run = functools.partial(step.run, uid)
        else:
            call.started, call.started_wall = time.monotonic(), time.time()  # it starts now
            run = functools.partial(step.execute, call)
        try:
            events, value, exc = run(m.args[uid], {})
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


def _threads(m: Mapping, jobs: int) -> None:
    engine = m.step.engine
    prepared: dict[str, Call | None] = {}
    reserved: set[str] = set()
    try:
        _prepare(m, prepared, reserved)
    except BaseException:
        for uid in reserved:
            engine.unreserve(uid)
        raise
    tally = Countdown(len(prepared))

    # Each thread takes the next item itself: one executor task per item would cost more than a
    # trivial item does. From a queue that takes no lock of Python's own: a lock passed by every
    # item would form a convoy of the threads (each pass a thread switch).
    todo: queue.SimpleQueue[tuple[str, Call | None]] = queue.SimpleQueue()
    for item in prepared.items():
        todo.put(item)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            _work(m, tally, *item)

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


def _processes(m: Mapping, payload: Any, jobs: int) -> None:
    """``executor="process"``: a pool of our own, started with ``spawn`` (nothing of this process, its
    lease included, is inherited), whose workers die with this process (``worker.die_with_parent``)."""
    import multiprocessing

    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=worker.die_with_parent, initargs=(os.getpid(),))
    try:
        Flight(m, pool, payload, 2 * jobs).run()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
