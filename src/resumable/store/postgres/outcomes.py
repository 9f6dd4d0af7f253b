"""Outcomes: a worker records what its claim's attempt did, if the claim still holds.

The claim holds while the step's epoch is still the claim's (nobody took the step back after its
lease expired). Then the unit's event, the attempt, and what follows are written in one
transaction: dependents one need closer to ready, a retry after its backoff, a failure that stops
the run (make's rule) or blocks its dependents (keep-going), the run's conclusion, and, in the
same transaction, the worker's next claims on the run. A stale claim's outcome is kept with its
attempt only (``stale``), never applied to the run's document.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from resumable.core import policy, verbs
from resumable.core.model import unit_status, units_of
from resumable.core.policy import RetryPolicy
from resumable.core.stamps import stamp
from resumable.store.postgres import conclude
from resumable.store.postgres.claims import READY, RUN_PK, Asked, Claim, mark_done, notify, take_steps

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from resumable.store.postgres.backend import PgBackend
    from resumable.store.postgres.handle import PgRunHandle

    Item = tuple[Claim, Mapping[str, Any], RetryPolicy]
    Answer = tuple[list[policy.Settled | None], list[Claim]]  # per item: what was recorded (None: stale)
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.runstate import RunWriter


def complete(backend: PgBackend, items: Sequence[Item], more: Asked | None = None) -> Answer:
    """Record the outcomes of attempts of one run, in one transaction; (for each, whether it was
    recorded, the claims taken with them).

    Each item is (claim, result, retry policy). ``result``: ``status`` (done failed timeout
    interrupted), ``note``, ``attempt`` (the unit's attempt record), ``fields``, ``exit_code``,
    ``reason``, ``log`` (bytes). What the policy made of each recorded outcome is returned (None:
    stale). ``more``: claim up to that many ready steps of the run in the same transaction."""
    if not items:
        return [], []
    run_id = items[0][0].run_id
    handle = backend.handle(run_id)
    limit = more.limit if more is not None else 0
    if len(items) == 1 and items[0][1]["status"] == "done":
        return _done_alone(handle, items[0], more, limit)

    def step_rows(conn: Connection) -> Any:
        return conn.execute(f"SELECT step, state, epoch, failures FROM resumable_steps WHERE run_pk = {RUN_PK}"
                            " AND step = ANY(%s) ORDER BY ord FOR UPDATE", (run_id, [c.step for c, _, _ in items]))

    def txn(w: RunWriter) -> Answer:
        rows = {r[0]: r for r in w.prefetched.fetchall()}
        recorded: list[policy.Settled | None] = []
        for claim, result, retry in items:
            row = rows.get(claim.step) if w.row.pk == claim.run_pk else None
            if row is None or int(row[2]) != claim.epoch or row[1] != "running":
                _stale(w.conn, claim, result, row[1:] if row else None)
                recorded.append(None)
                continue
            recorded.append(_record(w, claim, result, retry, int(row[3])))
        conclude.conclude(w)
        claims: list[Claim] = []
        if limit > 0 and any(recorded) and not w.row.stopping and w.doc.get("status") == "running":
            ready = w.conn.execute(f"SELECT step, spec, attempt, epoch, needs FROM resumable_steps WHERE run_pk = %s"
                                   f" AND {READY} ORDER BY ord LIMIT %s FOR UPDATE SKIP LOCKED",
                                   (w.row.pk, limit)).fetchall()
            claims = _follow(w, more, run_id, ready)
        notify(w.conn, run_id)
        w.save()
        return recorded, claims

    out: Answer = handle.write(txn, also=step_rows,
                                                       what=f"record {len(items)} outcome(s) of run {run_id}")
    return out


def _done_alone(handle: PgRunHandle, item: Item, more: Asked | None, limit: int) -> Answer:
    """One step done, in two round trips: the fenced update of the step (it matches only while the
    claim's epoch is current) and the next ready steps travel with the run's lock."""
    claim, result, retry = item

    def done_first(conn: Connection) -> tuple[Any, Any]:
        matched = conn.execute(
            "WITH d AS (UPDATE resumable_steps SET state = 'done', worker = NULL, lease_expires = NULL,"
            " not_before = NULL, epoch = epoch + 1 WHERE run_pk = %(pk)s AND step = %(step)s"
            " AND epoch = %(epoch)s AND state = 'running' RETURNING step),"
            " r AS (UPDATE resumable_steps SET remaining = remaining - 1 WHERE run_pk = %(pk)s"
            " AND needs @> ARRAY[%(step)s]::text[] AND EXISTS (SELECT 1 FROM d))"
            " SELECT count(*) FROM d", {"pk": claim.run_pk, "step": claim.step, "epoch": claim.epoch})
        ready = conn.execute(f"SELECT step, spec, attempt, epoch, needs FROM resumable_steps WHERE run_pk = %s"
                             f" AND {READY} ORDER BY ord LIMIT %s FOR UPDATE SKIP LOCKED",
                             (claim.run_pk, limit)) if limit > 0 else None
        return matched, ready

    def txn(w: RunWriter) -> Answer:
        matched, ready = w.prefetched
        got = matched.fetchone()
        rows = ready.fetchall() if ready is not None else []
        if not got or got[0] != 1 or w.row.pk != claim.run_pk:
            row = w.conn.execute("SELECT state, epoch FROM resumable_steps WHERE run_pk = %s AND step = %s",
                                 (w.row.pk, claim.step)).fetchone()
            _stale(w.conn, claim, result, row)
            return [None], []
        w.open_delta -= 1
        settled = _record(w, claim, result, retry, 0, marked=True)
        conclude.conclude(w)
        claims = _follow(w, more, claim.run_id, rows)
        notify(w.conn, claim.run_id)
        w.save()
        return [settled], claims

    out: Answer = handle.write(txn, also=done_first,
                                                       what=f"record step {claim.step} of run {claim.run_id}")
    return out


def _follow(w: RunWriter, more: Asked | None, run_id: str, rows: Any) -> list[Claim]:
    """The worker's next claims, taken in its outcome's transaction (when the run goes on)."""
    if more is None or not rows or w.row.stopping or w.doc.get("status") != "running":
        return []
    return take_steps(w, more, run_id, rows)


def _stale(conn: Connection, claim: Claim, result: Mapping[str, Any], row: Any) -> None:
    from psycopg.types.json import Jsonb

    stale = {"status": result["status"], "exitCode": result.get("exit_code"), "at": stamp(ms=True),
             "epoch": claim.epoch, "currentEpoch": int(row[1]) if row else None}
    conn.execute("UPDATE resumable_attempts SET stale = %s, log = coalesce(%s, log) WHERE run_pk = %s"
                 " AND step = %s AND n = %s", (Jsonb(stale), result.get("log"), claim.run_pk, claim.step, claim.n))


def _record(w: RunWriter, claim: Claim, result: Mapping[str, Any], retry: RetryPolicy,
            failures: int, *, marked: bool = False) -> policy.Settled:
    """The outcome's event and rows (``marked``: the step row is already done); what the policy
    made of it."""
    conn, pk = w.conn, w.row.pk
    status = result["status"]
    done_elsewhere = unit_status(units_of(w.doc).get(claim.step)) == "done"
    if not (done_elsewhere and status != "done"):
        w.apply([verbs.unit(claim.step, status, note=result.get("note"), attempt=dict(result["attempt"]),
                            fields=dict(result.get("fields") or {}))])
    conn.execute("UPDATE resumable_attempts SET status = %s, exit_code = %s, reason = %s,"
                 " finished_at = clock_timestamp(), log = %s WHERE run_pk = %s AND step = %s AND n = %s",
                 (status, result.get("exit_code"), result.get("reason"), result.get("log"), pk, claim.step, claim.n))
    if done_elsewhere:
        status = "done"
    if status != "interrupted" and status != "done":
        failures += 1
    # The backoff is counted in the server's clock (now() + delay): ``now`` = 0 here.
    settled = policy.settle(status, failures=failures, retry=retry, stopping=w.row.stopping, now=0.0,
                            rand=random.random)
    if marked:
        pass
    elif settled.state == "done":
        mark_done(w, claim.step)
    elif settled.state == "pending":
        conn.execute("UPDATE resumable_steps SET state = 'pending', worker = NULL, lease_expires = NULL,"
                     " failures = %s, not_before = now() + make_interval(secs => %s)"
                     " WHERE run_pk = %s AND step = %s", (failures, settled.retry_in or 0.0, pk, claim.step))
    else:
        conn.execute("UPDATE resumable_steps SET state = %s, worker = NULL, lease_expires = NULL,"
                     " failures = %s WHERE run_pk = %s AND step = %s", (settled.state, failures, pk, claim.step))
        w.open_delta -= 1
        failed_for_good(w, claim.step)
    return settled


def failed_for_good(w: RunWriter, step: str) -> None:
    """What the policy says a step that failed for good does to the run: dependents dep_blocked
    (keep-going), or the run stopping."""
    conn, pk = w.conn, w.row.pk
    rules = policy.JobRules.of(w.row.job if isinstance(w.row.job, dict) else None)
    rows = conn.execute("SELECT step, needs, state FROM resumable_steps WHERE run_pk = %s ORDER BY ord",
                        (pk,)).fetchall()
    states = {r[0]: r[2] for r in rows}
    failed = sum(1 for sid, st in states.items() if st in policy.FAILED_STATES and sid != step)
    if rules.keep_going:
        needs = {r[0]: list(r[1]) for r in rows}
        blocked = policy.block_dependents(step, dependents=policy.dependents_of(needs), needs=needs, states=states)
        if blocked.steps:
            w.apply(blocked.events)
            conn.execute("UPDATE resumable_steps SET state = 'dep_blocked' WHERE run_pk = %s AND step = ANY(%s)",
                         (pk, list(blocked.steps)))
            w.open_delta -= len(blocked.steps)
    if rules.stops(failed + 1):
        stop(w)


def stop(w: RunWriter) -> None:
    w.conn.execute("UPDATE resumable_runs SET stopping = true WHERE pk = %s", (w.row.pk,))
    w.row.stopping = True


def release(backend: PgBackend, claim: Claim, reason: str, *, attempt: Mapping[str, Any] | None = None,
            exit_code: int | None = None, log: bytes | None = None) -> bool:
    """Hand a claim back without an outcome (a stopping worker): the attempt ends ``interrupted``
    and the step is at once claimable by another worker."""
    record = dict(attempt or {"n": claim.n, "status": "interrupted", "finishedAt": stamp(ms=True)})
    record.setdefault("reason", reason)
    result = {"status": "interrupted", "note": reason, "attempt": record, "exit_code": exit_code,
              "reason": reason, "log": log, "fields": {}}
    return complete(backend, [(claim, result, policy.RetryPolicy())])[0][0] is not None
