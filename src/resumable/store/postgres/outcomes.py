"""Outcomes: a worker records what its claim's attempt did, if the claim still holds.

The claim holds while the step's epoch is still the claim's (nobody took the step back after its
lease expired). Then the unit's event, the attempt, and what follows are written in one
transaction: dependents one need closer to ready, a retry after its backoff, a failure that stops
the run (make's rule) or blocks its dependents (keep-going), the run's conclusion, and, in the
same transaction, the worker's next claims on the run. A stale claim's outcome is kept with its
attempt only (``stale``), never applied to the run's document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.core.model import unit_status, units_of
from resumable.core.stamps import stamp
from resumable.store.postgres import conclude
from resumable.store.postgres.claims import READY, RUN_PK, Asked, Claim, mark_done, notify, take_steps

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from resumable.store.postgres.backend import PgBackend
    from resumable.store.postgres.handle import PgRunHandle

    Item = tuple[Claim, Mapping[str, Any], Callable[[int], float | None]]
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.runstate import RunWriter


def complete(backend: PgBackend, items: Sequence[Item], more: Asked | None = None) -> tuple[list[bool], list[Claim]]:
    """Record the outcomes of attempts of one run, in one transaction; (for each, whether it was
    recorded, the claims taken with them).

    Each item is (claim, result, retry_delay). ``result``: ``status`` (done failed timeout
    interrupted), ``note``, ``attempt`` (the unit's attempt record), ``fields``, ``exit_code``,
    ``reason``, ``log`` (bytes). ``retry_delay(k)``: the wait before retry k, None when the step has
    no retry left. ``more``: claim up to that many ready steps of the run in the same transaction."""
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

    def txn(w: RunWriter) -> tuple[list[bool], list[Claim]]:
        rows = {r[0]: r for r in w.prefetched.fetchall()}
        recorded = []
        for claim, result, retry_delay in items:
            row = rows.get(claim.step) if w.row.pk == claim.run_pk else None
            if row is None or int(row[2]) != claim.epoch or row[1] != "running":
                _stale(w.conn, claim, result, row[1:] if row else None)
                recorded.append(False)
                continue
            _record(w, claim, result, retry_delay, int(row[3]))
            recorded.append(True)
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

    out: tuple[list[bool], list[Claim]] = handle.write(txn, also=step_rows,
                                                       what=f"record {len(items)} outcome(s) of run {run_id}")
    return out


def _done_alone(handle: PgRunHandle, item: Item, more: Asked | None, limit: int) -> tuple[list[bool], list[Claim]]:
    """One step done, in two round trips: the fenced update of the step (it matches only while the
    claim's epoch is current) and the next ready steps travel with the run's lock."""
    claim, result, retry_delay = item

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

    def txn(w: RunWriter) -> tuple[list[bool], list[Claim]]:
        matched, ready = w.prefetched
        got = matched.fetchone()
        rows = ready.fetchall() if ready is not None else []
        if not got or got[0] != 1 or w.row.pk != claim.run_pk:
            row = w.conn.execute("SELECT state, epoch FROM resumable_steps WHERE run_pk = %s AND step = %s",
                                 (w.row.pk, claim.step)).fetchone()
            _stale(w.conn, claim, result, row)
            return [False], []
        w.open_delta -= 1
        _record(w, claim, result, retry_delay, 0, marked=True)
        conclude.conclude(w)
        claims = _follow(w, more, claim.run_id, rows)
        notify(w.conn, claim.run_id)
        w.save()
        return [True], claims

    out: tuple[list[bool], list[Claim]] = handle.write(txn, also=done_first,
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


def _record(w: RunWriter, claim: Claim, result: Mapping[str, Any], retry_delay: Callable[[int], float | None],
            failures: int, *, marked: bool = False) -> None:
    """The outcome's event and rows (``marked``: the step row is already done)."""
    conn, pk = w.conn, w.row.pk
    status = result["status"]
    done_elsewhere = unit_status(units_of(w.doc).get(claim.step)) == "done"
    if not (done_elsewhere and status != "done"):
        w.apply([verbs.unit(claim.step, status, note=result.get("note"), attempt=dict(result["attempt"]),
                            fields=dict(result.get("fields") or {}))])
    conn.execute("UPDATE resumable_attempts SET status = %s, exit_code = %s, reason = %s,"
                 " finished_at = clock_timestamp(), log = %s WHERE run_pk = %s AND step = %s AND n = %s",
                 (status, result.get("exit_code"), result.get("reason"), result.get("log"), pk, claim.step, claim.n))
    if marked:
        pass
    elif status == "done" or done_elsewhere:
        mark_done(w, claim.step)
    elif status == "interrupted":
        conn.execute("UPDATE resumable_steps SET state = 'pending', worker = NULL, lease_expires = NULL"
                     " WHERE run_pk = %s AND step = %s", (pk, claim.step))
    else:
        failures += 1
        delay = None if w.row.stopping else retry_delay(failures)
        if delay is not None:
            conn.execute("UPDATE resumable_steps SET state = 'pending', worker = NULL, lease_expires = NULL,"
                         " failures = %s, not_before = now() + make_interval(secs => %s)"
                         " WHERE run_pk = %s AND step = %s", (failures, delay, pk, claim.step))
        else:
            conn.execute("UPDATE resumable_steps SET state = %s, worker = NULL, lease_expires = NULL,"
                         " failures = %s WHERE run_pk = %s AND step = %s", (status, failures, pk, claim.step))
            w.open_delta -= 1
            failed_for_good(w, claim.step)


def failed_for_good(w: RunWriter, step: str) -> None:
    """make's stop rules: without keep_going nothing new starts; with it, every step that needs the
    failed one is dep_blocked on it, and max_failures stops the run once reached."""
    conn, pk = w.conn, w.row.pk
    job = w.row.job if isinstance(w.row.job, dict) else {}
    if not job.get("keep_going"):
        stop(w)
        return
    rows = conn.execute("SELECT step, needs, state FROM resumable_steps WHERE run_pk = %s ORDER BY ord",
                        (pk,)).fetchall()
    state = {r[0]: r[2] for r in rows}
    state[step] = "failed"
    root = {step: step}
    changed = True
    blocked = []
    while changed:
        changed = False
        for sid, needs, _ in rows:
            if state[sid] != "pending":
                continue
            hit = next((d for d in needs if state.get(d) in ("failed", "timeout", "dep_blocked")), None)
            if hit is None:
                continue
            r = root.get(hit, hit)
            root[sid] = r
            state[sid] = "dep_blocked"
            blocked.append(sid)
            w.apply([verbs.unit(sid, "dep_blocked", note=f"blocked by {r}", deps=list(needs),
                                fields={"blockedBy": r})])
            changed = True
    if blocked:
        conn.execute("UPDATE resumable_steps SET state = 'dep_blocked' WHERE run_pk = %s AND step = ANY(%s)",
                     (pk, blocked))
        w.open_delta -= len(blocked)
    cap = job.get("max_failures")
    if isinstance(cap, int) and sum(1 for s in state.values() if s in ("failed", "timeout")) >= cap:
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
    return complete(backend, [(claim, result, lambda k: None)])[0][0]
