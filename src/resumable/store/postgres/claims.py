"""Claims: workers on any host take ready steps, hold them under leases, and lose them.

A claim takes steps that are ready (every need done or skipped, not leased, past any retry
backoff) with ``FOR UPDATE SKIP LOCKED``, in the job's order: up to the worker's free slots, in
one transaction. Each claim bumps the step's ``epoch``: the fencing token the claim carries. A
lease lives in the server's clock (``lease_expires``), renewed by the worker's heartbeats (one
statement for all its claims); once it has expired, the next claim on the run takes the step back
(the attempt is recorded ``interrupted``, "lease expired") and bumps the epoch again, so a
completion arriving later from the worker that lost it (paused, cut off) no longer matches
(``outcomes``): a step is done exactly once, and every attempt is on record.

A claim locks the step rows it takes and nothing else until its last statement: the run's row
only for the events' sequence numbers, with the COMMIT (``append``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from resumable.core import policy, verbs
from resumable.core.stamps import stamp
from resumable.store.postgres import append
from resumable.store.postgres.queries import Q

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from psycopg import Cursor

    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place



class WorkerInfo:
    __slots__ = ("host", "id", "pid")

    def __init__(self, worker_id: str, host: str, pid: int) -> None:
        self.id = worker_id
        self.host = host
        self.pid = pid


class Claim:
    """A step a worker holds: what to run, which attempt this is, and the fencing token."""

    __slots__ = ("epoch", "log", "n", "needs", "run_id", "run_pk", "spec", "step", "unit")

    def __init__(self, run_id: str, run_pk: int, step: str, n: int, epoch: int, spec: dict[str, Any],
                 unit: dict[str, Any], log: str, needs: Sequence[str] = ()) -> None:
        self.run_id = run_id
        self.run_pk = run_pk
        self.step = step
        self.n = n  # the attempt number
        self.epoch = epoch  # the fencing token
        self.spec = spec  # how to run the step (runner.stepspec)
        self.unit = unit  # what the worker needs of the unit: its last fingerprint and where it was taken
        self.log = log  # where this host writes the attempt's output
        self.needs = list(needs)  # the step's needs (its attempt's event records them)


class ClaimRequest:
    """What a claim asks for: how many steps for free slots (``limit``) and how many more ahead of
    them (``ahead``: only steps no waiting step comes before, see ``first_waiting``), for whom, for
    how long, and where their logs go."""

    __slots__ = ("ahead", "limit", "log_path", "ttl", "worker")

    def __init__(self, worker: WorkerInfo, limit: int, ttl: float, log_path: Callable[[str, str, int], str],
                 ahead: int = 0) -> None:
        self.worker = worker
        self.limit = limit
        self.ttl = ttl
        self.log_path = log_path
        self.ahead = ahead

    @property
    def most(self) -> int:
        return self.limit + self.ahead

    @property
    def bound(self) -> int:
        """How many ready steps are worth counting (``first_waiting``): enough to tell whether the
        claims ahead leave as many to others."""
        return self.limit + 2 * self.ahead


class Start:
    """An attempt a worker started on a claim it holds: when (the worker's clock), to record."""

    __slots__ = ("at", "claim")

    def __init__(self, claim: Claim, at: float) -> None:
        self.claim = claim
        self.at = at


# --- workers ---------------------------------------------------------------------------------


def register(place: Place, worker: WorkerInfo) -> None:
    def put(conn: Connection) -> None:
        conn.execute(Q.register_worker, (worker.id, worker.host, worker.pid))

    place.write(put, what="register the worker")


def unregister(place: Place, worker: WorkerInfo) -> None:
    append.number_written(place)

    def put(conn: Connection) -> None:
        conn.execute(Q.unregister_worker, (worker.id,))

    place.write(put, what="unregister the worker")


# --- claim -----------------------------------------------------------------------------------


def candidates(place: Place) -> list[str]:
    """Runs with something to claim or to take back (an expired lease), oldest first."""
    def look(conn: Connection) -> list[str]:
        return [r[0] for r in conn.execute(Q.candidates)]

    return place.read(look, what="look for work", patience=0)


def claim(place: Place, request: ClaimRequest, runs: Sequence[str] | None) -> tuple[list[Claim], float | None]:
    """Up to ``request.most`` ready steps of ``runs`` (every run when None); expired leases of
    those runs are taken back first. Returns the claims and, when fewer than asked were found, how
    many seconds until something becomes due without a notification (a backoff ends, a lease expires)."""
    append.tidy(place)
    out: list[Claim] = []
    wake: float | None = None
    for run_id in (candidates(place) if runs is None else runs):
        left = request.most - len(out)
        if left <= 0:
            break
        slots = max(request.limit - len(out), 0)
        part = ClaimRequest(request.worker, slots, request.ttl, request.log_path, left - slots)
        batches: list[append.Batch] = []

        def txn(conn: Connection, run_id: str = run_id, part: ClaimRequest = part,
                batches: list[append.Batch] = batches) -> tuple[Any, ...]:
            return claim_in(conn, part, run_id, batches)

        def probe(conn: Connection, batches: list[append.Batch] = batches) -> bool:
            return bool(batches) and append.saved(conn, batches[-1])

        got, due, pk, over = place.write(txn, what=f"claim steps of run {run_id}", probe=probe, patience=0,
                                         pipeline=True)
        if pk is None:
            raise place.handle(run_id).missing()  # a run named that is not there (a worker's --run)
        append.follow_up(place, run_id, pk, over=over)
        out += got
        if due is not None and len(got) < left:
            wake = due if wake is None else min(wake, due)
    return out, wake


def claim_in(conn: Connection, request: ClaimRequest, run_id: str, batches: list[append.Batch]) -> tuple[Any, ...]:
    """A claim's transaction: ready steps, expired leases, the first waiting step and the next due
    time asked for in one round trip; the steps taken, the leases swept and the events sent with
    the COMMIT."""
    ready = conn.execute(Q.ready_steps, {"pk": None, "run": run_id, "limit": request.most})
    expired = conn.execute(Q.expired_leases, {"run": run_id})
    waiting = conn.execute(Q.first_waiting, {"pk": None, "run": run_id, "bound": request.bound}) \
        if request.ahead else None
    due_cursor = conn.execute(Q.next_due, {"run": run_id, "worker": request.worker.id})
    over_cursor = conn.execute(Q.run_over, {"pk": None, "run": run_id})
    rows = ready.fetchall()
    lapsed = expired.fetchall()
    view = first_waiting(waiting)
    got = due_cursor.fetchone()
    due = float(got[0]) if got and got[0] is not None else None
    run = over_cursor.fetchone()
    if run is None:
        return [], due, None, False
    pk, over = int(run[0]), bool(run[1])
    if not rows and not lapsed:
        return [], due, pk, over
    batch = append.Batch(pk, run_id)
    batches.append(batch)
    sweep(conn, batch, [r[1:] for r in lapsed])
    claims = take(conn, batch, request, run_id, pick([(r[9], r[1:9]) for r in rows], request, view))
    batch.send(conn)
    return claims, due, pk, False


def first_waiting(cursor: Cursor[Any] | None) -> tuple[float | None, int]:
    """(the job's order of the run's first waiting step, None when none waits; how many steps are
    ready, up to the request's bound), from ``first_waiting``."""
    row = cursor.fetchone() if cursor is not None else None
    if row is None:
        return None, 0
    return (float(row[0]) if row[0] is not None else None), int(row[1] or 0)


def pick(rows: Sequence[tuple[Any, Sequence[Any]]], request: ClaimRequest,
         view: tuple[float | None, int]) -> list[Sequence[Any]]:
    """Of the ready ``rows`` (job order, row), in the job's order: as many as the free slots, then
    up to ``request.ahead`` more, from the ready steps beyond the free slots, leaving as many to
    other workers, and only of those before every waiting step (``view``: ``first_waiting``): a
    step claimed ahead never starts before a step the local runner would have started first."""
    first, ready = view
    most = request.limit + min(request.ahead, max(0, (ready - request.limit) // 2))
    out: list[Sequence[Any]] = []
    for ord_, row in sorted(rows, key=lambda pair: pair[0]):
        if len(out) >= most or (len(out) >= request.limit and first is not None and ord_ > first):
            break
        out.append(row)
    return out


def take(conn: Connection, batch: append.Batch, request: ClaimRequest, run_id: str,
         rows: Sequence[Sequence[Any]], *, send: bool = True) -> list[Claim]:
    """Claim the locked ready ``rows`` (step, spec, attempt, epoch, needs, fingerprint, upstream,
    reran). A done step submitted to wait for its needs (early cutoff) is decided first by
    ``core.policy``'s rule: kept done (its dependents one need closer), or invalidated and run. A
    claim records no attempt: ``start`` does, once the worker has started the step. ``send``: the
    claims are taken here (``take_steps``); else the caller's last statement takes them."""
    if not rows:
        return []
    worker = request.worker
    claims = []
    kept = []
    for step, spec, attempt, epoch, needs, fingerprint, upstream_rows, reran in rows:
        known = dict(fingerprint or {})
        made: Mapping[str, Any] = upstream_rows or {}
        upstream = policy.upstream_digests(needs, made.get)
        if spec.get("cutoff"):
            why = _reruns(spec, known.get("fingerprint"), needs, upstream, list(reran or ()))
            if why is None:
                kept.append(step)  # its needs made what they had made: it stays done
                continue
            batch.add(verbs.invalidate(step, why))
        if needs:  # what its needs made, for the fingerprint the worker records (early cutoff)
            spec = {**spec, "upstream": policy.upstream_record(upstream)}
        n = int(attempt) + 1
        log = request.log_path(run_id, step, n)
        claims.append(Claim(run_id, batch.pk, step, n, int(epoch) + 1, spec, known, log, needs))
    if kept:
        conn.execute(Q.mark_done, {"pk": batch.pk, "steps": kept})
        batch.notify_work = True  # its dependents may be ready now: the next claim (any worker's) takes them
    if claims and send:
        conn.execute(Q.take_steps, {"pk": batch.pk, "worker": worker.id, "ttl": request.ttl,
                                    "steps": [c.step for c in claims], "epochs": [c.epoch for c in claims]})
    return claims


def start(conn: Connection, pk: int, worker: WorkerInfo, starts: Sequence[Start]) -> Cursor[Any] | None:
    """Record the attempts started (fenced by each claim's epoch); the cursor names the steps
    whose claim held. Read it, then ``started`` adds their events."""
    if not starts:
        return None
    return conn.execute(Q.start_attempts, {
        "pk": pk, "worker": worker.id, "host": worker.host, "pid": worker.pid,
        "steps": [s.claim.step for s in starts], "epochs": [s.claim.epoch for s in starts],
        "ns": [s.claim.n for s in starts], "ats": [s.at for s in starts], "logs": [s.claim.log for s in starts]})


def started(batch: append.Batch, worker: WorkerInfo, starts: Sequence[Start], cursor: Cursor[Any] | None) -> set[str]:
    """The steps whose start was recorded (their ``in_progress`` event added), from ``start``'s cursor."""
    held = {r[0] for r in cursor.fetchall()} if cursor is not None else set()
    for s in starts:
        c = s.claim
        if c.step in held:
            batch.add(verbs.unit(c.step, "in_progress", deps=list(c.needs),
                                 attempt={"n": c.n, "status": "running", "startedAt": stamp(s.at, ms=True),
                                          "log": c.log, "host": worker.host, "worker": worker.id},
                                 fields={"command": c.spec.get("command_text", "")}))
    return held


def _reruns(spec: Mapping[str, Any], stored: object, needs: Sequence[str], upstream: Mapping[str, str | None],
            reran: list[str]) -> str | None:
    """Why a done step submitted to wait for its needs (``cutoff``) runs after all, or None when
    it stays done: the scheduling policy's rule (``policy.keeps_done``), as the local runner's.
    ``reran``: its needs attempted since the job was submitted."""
    if policy.keeps_done(bool(spec.get("artifacts") or spec.get("inputs")), stored, upstream, reran):
        return None
    changed = policy.upstream_changes(stored, upstream) or reran or list(needs)
    return f"upstream re-ran: {', '.join(changed)}"


def sweep(conn: Connection, batch: append.Batch, rows: Sequence[Sequence[Any]]) -> None:
    """Take back steps whose lease expired (``rows``: step, attempt, worker, started; locked): a
    started attempt ends ``interrupted`` (lease expired), and the epoch moves on, fencing off the
    worker that held them. A claim whose step had not started leaves no attempt."""
    if not rows:
        return
    at = stamp(time.time(), ms=True)
    ran = [r for r in rows if r[3]]
    for step, n, holder, _ in ran:
        reason = f"lease expired: worker {holder} stopped renewing it"
        batch.add(verbs.unit(step, "interrupted", note=reason,
                             attempt={"n": int(n), "status": "interrupted", "finishedAt": at, "reason": reason}))
    conn.execute(Q.take_back, {"pk": batch.pk, "steps": [r[0] for r in rows]})
    if ran:
        conn.execute(Q.expire_attempts, {"pk": batch.pk, "steps": [r[0] for r in ran], "ns": [int(r[1]) for r in ran],
                                         "workers": [r[2] or "?" for r in ran]})
    batch.notify_work = True  # steps claimable again: an idle worker may take them


# --- heartbeats ------------------------------------------------------------------------------


def renew(place: Place, worker: WorkerInfo, claims: Sequence[Claim], ttl: float) -> list[Claim]:
    """Extend the leases of ``claims`` in one statement; returns those that were lost (taken back
    after expiring)."""
    def beat(conn: Connection) -> Cursor[Any]:
        # Read after the commit: the statement and the COMMIT travel together (a worker stopped
        # between them would hold its steps' rows, and no one could take them back).
        return conn.execute(Q.renew_leases, {
            "ttl": ttl, "worker": worker.id, "pks": [c.run_pk for c in claims], "steps": [c.step for c in claims],
            "epochs": [c.epoch for c in claims]})

    cursor = place.write(beat, what="renew the leases", patience=0, pipeline=True)
    kept = {(int(r[0]), r[1]) for r in cursor.fetchall()}
    return [c for c in claims if (c.run_pk, c.step) not in kept]
