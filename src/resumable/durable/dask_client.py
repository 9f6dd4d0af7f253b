"""``run.map`` on a Dask cluster's own executor (``client.get_executor()``): through its client, in batches.

``ClientExecutor.submit`` sends one graph to the scheduler per item, and ``Future.result`` fetches
each result with a round trip of its own (client, scheduler, worker and back): on a small cluster
that shares its cores with the caller, those messages cost more than the map's own work. So the
items that fill the places one batch freed go in one ``client.map`` (one graph), and the results
that came back together are fetched with one ``client.gather``. Everything else is ``Flight``'s:
the same bound on the items in flight, claims, group commits, and what a failure or Ctrl-C does.

Each task's key is ``(<step>-<token>, <unit id>)``: the dashboard groups a map's tasks under the
step's name and shows which unit each one runs; the token, new for every map, keeps a task from
ever being mistaken for one of an earlier map that the cluster still holds (Dask answers a known
key with its result). What the executor was made with (``get_executor(retries=..., workers=...)``)
goes with every batch.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from concurrent.futures import CancelledError, Executor, Future
from typing import TYPE_CHECKING, Any

import distributed as _distributed

from resumable.durable import worker
from resumable.durable.executors import Flight, failed_future, fatal

if TYPE_CHECKING:
    from resumable.durable.attempts import Outcome
    from resumable.durable.engine import Call
    from resumable.durable.mapping import Mapping
    from resumable.durable.rate import Gate
    from resumable.durable.shipping import Work

distributed: Any = _distributed  # its functions are not annotated: used as Any, not as untyped calls
_AGAIN = 5  # waits for a result lost before it was fetched, before the item counts as lost
_PASSED_ON = ("workers", "resources", "allow_other_workers", "retries")  # of ClientExecutor's own options


class DaskFlight(Flight):
    batched = True

    def __init__(self, m: Mapping, executor: Executor, payload: bytes | Work, limit: int,
                 gate: Gate | None = None) -> None:
        super().__init__(m, executor, payload, limit, gate)
        self.client: Any = executor._client  # type: ignore[attr-defined]
        given: dict[str, object] = getattr(executor, "_kwargs", {})
        self.options = {k: v for k, v in given.items() if k in _PASSED_ON}
        self.prefix = f"{m.step.name}-{uuid.uuid4().hex}"
        self.completed = distributed.as_completed(loop=self.client.loop)
        self.refused: list[Future[Outcome]] = []  # items whose arguments could not be submitted
        self.values: dict[Any, Outcome] = {}  # results fetched, by key, not recorded yet
        self.again: Counter[Any] = Counter()  # times a key's result was lost before it was fetched

    def launch(self, calls: list[tuple[str, Call]]) -> None:
        args = self.m.args
        try:
            futures = self.client.map(worker.run_item, [self.payload] * len(calls),
                                      [args[uid] for uid, _ in calls], [{}] * len(calls),
                                      [call.n for _, call in calls], key=[(self.prefix, uid) for uid, _ in calls],
                                      pure=False, **self.options)
        except BaseException as exc:
            if fatal(exc):
                for uid, _ in calls:
                    self.m.step.engine.release(uid)
                raise
            if len(calls) > 1:  # the arguments of one item did not pickle: submit each on its own
                for one in calls:
                    self.launch([one])
                return
            # Its failure, as on any executor, saying what did not pickle (Dask's own message
            # names its graph, whose text hides the cause).
            cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
            unsent = TypeError(f"its arguments cannot be sent to the cluster: {type(cause).__name__}: {cause}")
            refused = failed_future(unsent)
            self.pending[refused] = calls[0]
            self.refused.append(refused)
            return
        for future, call in zip(futures, calls, strict=True):
            self.pending[future] = call
        self.completed.update(futures)

    def take(self) -> list[Any]:
        """The futures that ended: at least one (waits), and every other one already ended; the
        results of the finished ones fetched with one gather."""
        refused, self.refused = self.refused, []
        waiting = self.waiting()  # items wait for a rate limit: never block past their start
        block = not refused and not self.completed.is_empty() and not waiting
        ended = self.completed.next_batch(block=block)
        if not ended and not refused and waiting:
            time.sleep(min(0.05, self.wait_for()))
            return []
        self.fetch(ended)
        out: list[Any] = refused
        for f in ended:
            if f.key in self.values or f.status in ("error", "cancelled") or self.again[f.key] >= _AGAIN:
                out.append(f)
            else:  # its result went with its worker before it was fetched: Dask computes it again
                self.again[f.key] += 1
                self.completed.add(f)
        return out

    def fetch(self, futures: list[Any]) -> None:
        finished = {f.key: f for f in futures if isinstance(f, distributed.Future) and f.status == "finished"
                    and f.key not in self.values}
        if finished:
            self.values.update(self.client.gather(finished, errors="skip"))

    def resolve(self, batch: list[tuple[Any, str, Call]]) -> list[tuple[Future[Outcome], str, Call]]:
        """The outcomes of ``batch``, as ``take`` fetched them."""
        self.fetch([f for f, _, _ in batch])  # what an interrupted map takes from pending itself
        out: list[tuple[Future[Outcome], str, Call]] = []
        for f, uid, call in batch:
            if not isinstance(f, distributed.Future):
                out.append((f, uid, call))  # failed at submission
                continue
            resolved: Future[Outcome] = Future()
            value = self.values.pop(f.key, None)
            error = f.exception() if value is None and f.status == "error" else None
            if value is not None:
                resolved.set_result(value)
            elif error is not None:
                resolved.set_exception(error)  # the step's worker died too often (KilledWorker) & co.
            else:
                resolved.set_exception(CancelledError(f"task {f.key} was cancelled or its result lost"))
            out.append((resolved, uid, call))
        return out

    def uncancelled(self) -> list[Any]:
        running = [f for f in self.pending if isinstance(f, distributed.Future) and not f.cancelled()]
        if running:
            distributed.wait(running)
        return running
