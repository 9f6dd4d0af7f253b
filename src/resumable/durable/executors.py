"""``run.map`` on a ``concurrent.futures.Executor``: a Dask cluster (``client.get_executor()``), loky,
a ``ProcessPoolExecutor``, an MPI pool, and ``executor="process"`` (a process pool of our own).

The calling process keeps the run: it holds the lease, looks items up, submits the rest and records
each result as it comes back (group commit: the results that came back together share one commit).
The workers get only the step and an item's arguments (``shipping``); they need no access to the
runs directory or the database. A Dask cluster's own executor is driven through its client, in
batches (``dask_client``); any other through ``submit``.

**Backpressure.** At most ``limit`` items are in flight (submitted, not yet recorded): twice what
the executor runs at once by default, so that a worker that finishes finds its next item already
queued while the caller records the last one; a million items never become a million futures.
A freed place is refilled before the results that freed it are committed, so the executor works
while the caller writes.

**Failures.** An item whose step raised is recorded failed, as are items whose arguments or result
did not pickle and items the engine gave up on (Dask's ``KilledWorker``): the others go on. An item
lost with a worker that died is resubmitted by the engine (Dask does); an executor that breaks
(``BrokenExecutor``) or cancels items ends the map with its error once every result that came back
is recorded: the items not recorded run on the next call. Ctrl-C cancels what has not started; what
the executor cannot cancel (running in a local pool) ends and is recorded before the map stops.
Execution is at least once (an item running when its worker or the caller dies runs again),
recording exactly once (one record per result that came back). A result that cannot travel back
from its worker (it does not pickle) is that item's failure: the worker pickles it itself
(``worker.run_item``) and sends the bytes, or the failure, never an object the executor then fails
to send.

**Rate limits** (``rate.Gate``): an item is submitted only when the limits let it start, without
blocking what comes back meanwhile (a freed place waits for the next start that is due). Its
retries are then run from here, one attempt per submission, so that they pass the limits too: the
workers make one attempt, the caller records a failure it retries, waits the backoff and submits
the item again.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import os
import pickle
import queue
import time
from concurrent.futures import BrokenExecutor, CancelledError, Executor, Future, wait
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.durable import worker
from resumable.durable.attempts import Outcome, StepFailed, as_failure, failed_attempt
from resumable.durable.codec import error_line
from resumable.durable.shipping import Unloadable
from resumable.errors import InvalidInputError

if TYPE_CHECKING:
    from resumable.core.types import Event
    from resumable.durable.attempts import Policy
    from resumable.durable.engine import Call
    from resumable.durable.mapping import Mapping
    from resumable.durable.rate import Gate
    from resumable.durable.shipping import Work

POLL = 0.5  # seconds between looks at Ctrl-C while waiting for results


def capacity(executor: Executor) -> int | None:
    """How many items ``executor`` runs at once, when it says: the workers of a thread or process
    pool (``_max_workers`` in CPython's and loky's), the threads of a Dask cluster."""
    workers = getattr(executor, "_max_workers", None)
    if isinstance(workers, int) and not isinstance(workers, bool) and workers > 0:
        return workers
    if type(executor).__module__.startswith("distributed."):
        client = getattr(executor, "_client", None)
        try:
            threads = sum(client.nthreads().values()) if client is not None else 0
        except Exception:
            threads = 0
        return threads or None  # a cluster with no worker yet (adaptive): unknown
    return None


def default_limit(executor: Executor) -> int:
    return 2 * (capacity(executor) or os.cpu_count() or 1)


class Flight:
    """The items of one map in flight on an executor."""

    batched = False  # whether the items that fill the free places are launched together

    def __init__(self, m: Mapping, executor: Executor, payload: bytes | Work, limit: int,
                 gate: Gate | None = None) -> None:
        self.m = m
        self.executor = executor
        self.payload = payload
        self.limit = limit
        self.gate = gate
        # With a gate, retries are run from here (the payload makes one attempt): the step's own policy.
        self.policy: Policy | None = m.step.policy if gate else None
        self.todo = collections.deque(m.places)
        self.ready: collections.deque[tuple[str, Call]] = collections.deque()  # claimed, waiting for the gate
        self.retries: list[tuple[float, int, str, Call]] = []  # (due, order, item): a heap, claims held
        self.order = itertools.count()
        self.tries: collections.Counter[str] = collections.Counter()  # attempts made in this map
        self.due: float | None = None  # when the gate lets the next item start
        self.pending: dict[Any, tuple[str, Call]] = {}  # future -> its item
        self.ended: queue.SimpleQueue[Future[Outcome]] = queue.SimpleQueue()
        self.lost: BaseException | None = None  # why some items came back with no result

    def run(self) -> None:
        batch: list[tuple[Any, str, Call]] = []  # taken out of pending, not recorded yet
        try:
            self.fill()
            while self.pending or self.waiting():
                batch = [(future, *self.pending.pop(future)) for future in self.take()]
                self.fill()  # before the commit: the executor works while this batch is recorded
                ended, batch = batch, []
                if ended:
                    self.record(ended)
        except BaseException:
            self.stop(batch)
            raise
        if self.lost is not None:
            raise self.lost

    def waiting(self) -> bool:
        """Whether items wait for the gate (or a retry for its backoff) with none in flight."""
        return self.lost is None and bool(self.retries or self.ready or (self.todo and self.gate))

    def wait_for(self) -> float:
        """How long ``take`` may wait for a result before the next start or retry is due."""
        due = [d for d in (self.due, self.retries[0][0] if self.retries else None) if d is not None]
        return max(0.0, min(due) - time.monotonic()) if due else POLL

    def fill(self) -> None:
        """Submit items until ``limit`` are in flight (or none is left, or the gate says wait)."""
        calls: list[tuple[str, Call]] = []
        try:
            while len(self.pending) + len(calls) < self.limit and self.lost is None:
                item = self.next_item()
                if item is None:
                    break
                calls.append(item)
                if not self.batched:
                    self.launch(calls)  # at once: a local pool starts its workers as items come
                    calls = []
        except BaseException:
            for uid, _ in calls:
                self.m.step.engine.release(uid)
            raise
        if calls:
            self.launch(calls)

    def next_item(self) -> tuple[str, Call] | None:
        """The next item to submit, claimed, once the gate lets it start: a retry whose backoff is
        over, else the next item not recorded meanwhile; None when there is none or the gate says wait."""
        now = time.monotonic()
        if not self.ready:
            if self.retries and self.retries[0][0] <= now:
                _, _, uid, call = heapq.heappop(self.retries)
                self.ready.append((uid, call))
            else:
                found = self.claim_next()
                if found is None:
                    return None
                self.ready.append(found)
        if self.gate:
            left = self.gate.poll()
            if left > 0:
                self.due = now + left
                return None
            self.due = None
        uid, call = self.ready.popleft()
        self.tries[uid] += 1
        return uid, call

    def claim_next(self) -> tuple[str, Call] | None:
        step, m = self.m.step, self.m
        while self.todo:
            uid = self.todo.popleft()
            try:
                found, value = step.acquire(uid)  # waits while a thread of ours runs the same call
            except StepFailed as failure:  # failed meanwhile, and the step does not retry failures
                m.settle(uid, failure, True)
                continue
            if found:
                m.settle(uid, value, False)
                continue
            try:
                return uid, step.begin_call(uid)
            except BaseException:
                step.engine.release(uid)
                raise
        return None

    def launch(self, calls: list[tuple[str, Call]]) -> None:
        """Submit ``calls`` (their claims held) and put them in ``pending``; raise, with the claims
        of those not submitted released, when the executor is broken or shut down."""
        for k, (uid, call) in enumerate(calls):
            try:
                future = self.executor.submit(worker.run_item, self.payload, self.m.args[uid], {}, call.n)
            except BaseException as exc:
                if fatal(exc):
                    for left, _ in calls[k:]:
                        self.m.step.engine.release(left)
                    raise
                future = failed_future(exc)  # this item's arguments could not be submitted: its failure
            self.pending[future] = (uid, call)
            future.add_done_callback(self.ended.put)

    def take(self) -> list[Any]:
        """The futures that ended: at least one (waits) unless a start or a retry falls due first,
        and every other one already ended."""
        while True:
            wait_s = min(POLL, self.wait_for())  # a timeout, so that Ctrl-C is seen at once
            try:
                first = self.ended.get(timeout=wait_s) if wait_s > 0 else self.ended.get_nowait()
                break
            except queue.Empty:
                if self.waiting() and self.wait_for() <= 0:
                    return []
                continue
        batch = [first]
        while True:
            try:
                batch.append(self.ended.get_nowait())
            except queue.Empty:
                return batch

    def outcome(self, future: Future[Outcome], call: Call) -> Outcome | None:
        """What ``future`` brought back; None when it brought nothing (``lost`` says why)."""
        step = self.m.step
        try:
            out = future.result()
            if out.packed is not None:  # pickled by the worker (``worker.run_item``)
                out.value, out.packed = pickle.loads(out.packed), None
            return out
        except (CancelledError, BrokenExecutor) as exc:
            self.lost = self.lost or exc  # no result: the item runs on the next call
        except Unloadable as exc:
            self.lost = self.lost or InvalidInputError(
                f"the executor's workers cannot load step {step.name} ({exc}): install what it needs"
                " where they run, or define it where they can import it")
        except Exception as exc:  # its arguments or result did not travel; the engine gave up on it
            out = Outcome()
            out.attempts.append(failed_attempt(call.n, exc, time.time(), time.monotonic()))
            out.exc = exc
            return out
        except BaseException as exc:  # the worker was stopped (SystemExit, KeyboardInterrupt)
            self.lost = self.lost or exc
        return None

    def retry(self, uid: str, call: Call, out: Outcome) -> list[Event] | None:
        """A failed attempt this map runs again (rate-limited maps run their retries here): its
        record, and the item queued for its backoff; None when it is not retried."""
        policy = self.policy
        tries = self.tries[uid]
        if policy is None or out.ok or not out.retryable or tries > policy.retries or self.lost is not None:
            return None
        fields = self.m.step.fields()
        events: list[Event] = [verbs.unit(uid, "failed", attempt=a, fields=fields,
                                          note=error_line(a.get("error") or {})) for a in out.attempts]
        call.n = max(a["n"] for a in out.attempts) + 1
        heapq.heappush(self.retries, (time.monotonic() + policy.wait(tries), next(self.order), uid, call))
        return events

    def record(self, batch: list[tuple[Any, str, Call]]) -> None:
        """Commit the outcomes of ``batch`` (taken out of ``pending``) and answer their items."""
        step, engine = self.m.step, self.m.step.engine
        events: list[Event] = []
        settled: list[tuple[str, Any, BaseException | None]] = []
        kept: set[str] = set()  # items queued for a retry: their claims stay held
        try:
            ended = self.resolve(batch)
        except BaseException:
            for _, uid, _ in batch:
                engine.release(uid)
            raise
        for future, uid, call in ended:
            out = self.outcome(future, call)
            if out is None:
                continue
            again = self.retry(uid, call, out)
            if again is not None:
                events += again
                kept.add(uid)
                continue
            evs, value, error = step.settle(call, out, earlier=True)
            events += evs
            settled.append((uid, value, error))
        try:
            engine.records.commit(events)  # one commit for the items that ended together
        finally:
            for _, uid, _ in batch:
                if uid not in kept:
                    engine.release(uid)
        for uid, value, error in settled:
            self.m.settle(uid, as_failure(uid, error) if error is not None else value, error is not None)

    def resolve(self, batch: list[tuple[Any, str, Call]]) -> list[tuple[Future[Outcome], str, Call]]:
        """``batch`` with each future as one whose ``result()`` answers at once (they have ended)."""
        return batch

    def stop(self, ended: list[tuple[Any, str, Call]]) -> None:
        """Interrupted or failed: cancel what has not started; record what had ended and what could
        not be cancelled (running in a local pool) once it ends."""
        self.policy = None  # nothing is retried any more: what ends is recorded as it ended
        for future in list(self.pending):
            future.cancel()
        try:
            running = self.uncancelled()
            taken, ended = [*ended, *((f, *self.pending.pop(f)) for f in running)], []
            self.record(taken)  # releases their claims, whatever happens
        except Exception:
            pass  # the map is already failing with the error that stopped it
        finally:
            uids = [uid for _, uid, _ in ended] + [uid for uid, _ in self.pending.values()]
            uids += [uid for uid, _ in self.ready] + [uid for _, _, uid, _ in self.retries]
            for uid in uids:
                self.m.step.engine.release(uid)  # of each item not recorded: it runs on the next call
            self.pending.clear()
            self.ready.clear()
            self.retries.clear()

    def uncancelled(self) -> list[Any]:
        """The futures in ``pending`` that could not be cancelled, once they have ended."""
        running = [f for f in self.pending if not f.cancelled()]
        wait(running)
        return running


def fatal(exc: BaseException) -> bool:
    """Whether a submission's error ends the map (a broken or shut-down executor, Ctrl-C), rather
    than failing only its item (its arguments did not pickle)."""
    return not isinstance(exc, Exception) or isinstance(exc, BrokenExecutor) or type(exc) is RuntimeError


def failed_future(exc: BaseException) -> Future[Outcome]:
    future: Future[Outcome] = Future()
    future.set_exception(exc)
    return future
