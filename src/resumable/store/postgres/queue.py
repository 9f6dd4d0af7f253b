"""The work queue of submitted jobs: workers on any host claim steps, hold them under leases, and
record what happened, each in one transaction that also appends the run's events.

A claim takes steps that are ready (every need done or skipped, not leased, past any retry
backoff) with ``FOR UPDATE SKIP LOCKED``, in the job's order. Each claim bumps the step's
``epoch``: the fencing token the claim carries. A lease lives in the server's clock
(``lease_expires``), renewed by the worker's heartbeats; once it has expired, the next claim on
the run takes the step back (the attempt is recorded ``interrupted``, "lease expired") and bumps
the epoch again, so a completion arriving later from the worker that lost it (paused, cut off) no
longer matches: it is kept as a stale attempt in ``resumable_attempts`` and never touches the
run's document. A step is therefore done exactly once, and every attempt is on record.

Lock order, the same in every transaction: the run's row, then step rows (heartbeats lock step
rows alone), so writers never wait on each other in a cycle.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.core.model import unit_status, units_of
from resumable.core.stamps import stamp
from resumable.store.postgres import conclude

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from resumable.store.postgres.backend import PgBackend
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.runstate import RunWriter

WORK = "resumable_work"  # NOTIFY channel: a step may have become claimable (payload: run id)
_READY = "state = 'pending' AND remaining = 0 AND (not_before IS NULL OR not_before <= now())"


class WorkerInfo:
    __slots__ = ("host", "id", "pid")

    def __init__(self, worker_id: str, host: str, pid: int) -> None:
        self.id = worker_id
        self.host = host
        self.pid = pid


class Claim:
    """A step a worker holds: what to run, which attempt this is, and the fencing token."""

    __slots__ = ("epoch", "log", "n", "run_id", "run_pk", "spec", "step", "unit")

    def __init__(self, run_id: str, run_pk: int, step: str, n: int, epoch: int, spec: dict[str, Any],
                 unit: dict[str, Any], log: str) -> None:
        self.run_id = run_id
        self.run_pk = run_pk
        self.step = step
        self.n = n  # the attempt number
        self.epoch = epoch  # the fencing token
        self.spec = spec  # how to run the step (runner.stepspec)
        self.unit = unit  # the unit as claimed (its stored fingerprint)
        self.log = log  # where this host writes the attempt's output

    @property
    def key(self) -> tuple[str, str]:
        return self.run_id, self.step


# --- workers ---------------------------------------------------------------------------------


def register(backend: PgBackend, worker: WorkerInfo) -> None:
    def put(conn: Connection) -> None:
        conn.execute("INSERT INTO resumable_workers (id, host, pid) VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE"
                     " SET seen_at = now(), stopped_at = NULL", (worker.id, worker.host, worker.pid))

    backend.write(put, what="register the worker")


def unregister(backend: PgBackend, worker: WorkerInfo) -> None:
    def put(conn: Connection) -> None:
        conn.execute("UPDATE resumable_workers SET stopped_at = now() WHERE id = %s", (worker.id,))

    backend.write(put, what="unregister the worker")


# --- submit ----------------------------------------------------------------------------------


def submit(backend: PgBackend, run_id: str, *, task: str, launch: dict[str, Any],
           steps: Sequence[Mapping[str, Any]], plan: Callable[[Mapping[str, Any]], Mapping[str, Any]],
           options: Mapping[str, Any]) -> dict[str, Any]:
    """Record a job as a run: its steps (``{"id", "needs", "spec", "command"}``, in the job's
    order), which of them run (``plan(units)`` -> ``{step: decision}`` with ``run``, ``reason``,
    ``invalidate``, decided on the document under the row lock) and the run's options. Submitting
    the same job again is a resume: done steps stay skipped, steps a live worker holds keep their
    claim, and nothing is recorded twice. Returns ``{"run", "skip", "run_steps", "concluded"}``."""
    handle = backend.handle(run_id)

    def txn(w: RunWriter) -> dict[str, Any]:
        conn = w.conn
        if w.state.doc is None:
            w.apply([verbs.init(task, run_id, units=[s["id"] for s in steps], launch=launch)])
        w.apply([verbs.begin(launch)])
        old = {r[0]: r[1:] for r in conn.execute(
            "SELECT step, epoch, attempt, state, worker, lease_expires, lease_expires > now()"
            " FROM resumable_steps WHERE run_pk = %s FOR UPDATE", (w.row.pk,))}
        live = {sid for sid, r in old.items() if r[2] == "running" and r[5]}
        units = units_of(w.doc)
        at = stamp(time.time(), ms=True)
        for sid, unit in list(units.items()):
            # A unit left in_progress by a worker whose claim is gone: its attempt ends interrupted.
            if sid not in live and unit_status(unit) == "in_progress":
                n = _last_attempt(unit)
                att = {"n": n, "status": "interrupted", "finishedAt": at} if n > 0 else None
                w.apply([verbs.unit(sid, "interrupted", note="its worker stopped during this step", attempt=att)])
        units = units_of(w.doc)
        decisions = plan(units)
        runs = {s["id"] for s in steps if decisions[s["id"]]["run"] or s["id"] in live}
        rows = []
        for order, s in enumerate(steps):
            sid = s["id"]
            d = decisions[sid]
            if sid not in live:
                if d.get("invalidate"):
                    w.apply([verbs.invalidate(sid, d["reason"])])
                elif sid not in units:
                    w.apply([verbs.unit(sid, "pending", deps=list(s["needs"]), fields={"command": s["command"]})])
            prev = old.get(sid)
            epoch, attempt = (int(prev[0]), int(prev[1])) if prev else (0, 0)
            attempt = max(attempt, _last_attempt(units.get(sid)))
            remaining = sum(1 for n in s["needs"] if n in runs)
            if sid in live:
                assert prev is not None
                rows.append((w.row.pk, sid, order, s["spec"], list(s["needs"]), remaining, "running", epoch, attempt,
                             prev[3], prev[4]))
            else:
                state = "pending" if sid in runs else "skipped"
                rows.append((w.row.pk, sid, order, s["spec"], list(s["needs"]), remaining, state, epoch, attempt,
                             None, None))
        conn.execute("DELETE FROM resumable_steps WHERE run_pk = %s", (w.row.pk,))
        from psycopg.types.json import Jsonb

        conn.cursor().executemany(
            "INSERT INTO resumable_steps (run_pk, step, ord, spec, needs, remaining, state, epoch, attempt, worker,"
            " lease_expires) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(*r[:3], Jsonb(r[3]), *r[4:]) for r in rows])
        conn.execute("UPDATE resumable_runs SET job = %s, stopping = false WHERE pk = %s",
                     (Jsonb(dict(options)), w.row.pk))
        w.row.job, w.row.stopping = dict(options), False
        concluded = conclude.conclude(w)
        _notify(conn, run_id)
        return {"run": run_id, "run_steps": sorted(runs), "skip": len(steps) - len(runs), "concluded": concluded}

    out: dict[str, Any] = handle.write(txn, create=True, what=f"submit run {run_id}")
    return out


def _last_attempt(unit: object) -> int:
    atts = unit.get("attempts") if isinstance(unit, dict) else None
    ns = [a.get("n") for a in atts if isinstance(a, dict)] if isinstance(atts, list) else []
    return max([n for n in ns if isinstance(n, int) and not isinstance(n, bool)], default=0)


def _notify(conn: Connection, run_id: str) -> None:
    conn.execute("SELECT pg_notify(%s, %s)", (WORK, run_id))


# --- claim -----------------------------------------------------------------------------------


def candidates(backend: PgBackend, runs: Sequence[str] | None) -> list[str]:
    """Runs with something to claim or to take back (an expired lease), oldest first."""
    def look(conn: Connection) -> list[str]:
        query = (
            "SELECT r.id FROM resumable_runs r WHERE r.archived_at IS NULL AND r.status = 'running'"
            " AND r.job IS NOT NULL AND EXISTS (SELECT 1 FROM resumable_steps s WHERE s.run_pk = r.pk AND"
            " ((s.state = 'pending' AND s.remaining = 0 AND (s.not_before IS NULL OR s.not_before <= now()))"
            " OR (s.state = 'running' AND s.lease_expires < now())))")
        if runs is not None:
            return [r[0] for r in conn.execute(query + " AND r.id = ANY(%s) ORDER BY r.pk", (list(runs),))]
        return [r[0] for r in conn.execute(query + " ORDER BY r.pk")]

    return backend.read(look, what="look for work", patience=0)


def claim(backend: PgBackend, worker: WorkerInfo, runs: Sequence[str] | None, limit: int, *, ttl: float,
          log_path: Callable[[str, str, int], str]) -> list[Claim]:
    """Up to ``limit`` ready steps of ``runs`` (every run when None), each under a lease of ``ttl``
    seconds; expired leases of those runs are taken back first."""
    out: list[Claim] = []
    for run_id in candidates(backend, runs):
        left = limit - len(out)
        if left <= 0:
            break

        def body(w: RunWriter, run_id: str = run_id, left: int = left) -> list[Claim]:
            return _claim_run(w, worker, run_id, left, ttl, log_path)

        out += backend.handle(run_id).write(body, what=f"claim steps of run {run_id}", patience=0)
    return out


def _claim_run(w: RunWriter, worker: WorkerInfo, run_id: str, limit: int, ttl: float,
               log_path: Callable[[str, str, int], str]) -> list[Claim]:
    conn, pk = w.conn, w.row.pk
    if w.row.status != "running" or w.row.job is None:
        return []
    if _sweep(w):
        _notify(conn, run_id)
    claims: list[Claim] = []
    if not w.row.stopping:
        rows = conn.execute(
            f"SELECT step, spec, attempt, epoch, needs FROM resumable_steps WHERE run_pk = %s AND {_READY}"
            " ORDER BY ord LIMIT %s FOR UPDATE SKIP LOCKED", (pk, limit)).fetchall()
        units = units_of(w.doc)
        at = stamp(time.time(), ms=True)
        taken = []
        for step, spec, attempt, epoch, needs in rows:
            unit = units.get(step)
            if unit_status(unit) == "done":
                _mark_done(conn, pk, step)  # recorded done by someone else meanwhile: nothing to run
                continue
            n = max(int(attempt), _last_attempt(unit)) + 1
            log = log_path(run_id, step, n)
            w.apply([verbs.unit(step, "in_progress", deps=list(needs),
                                attempt={"n": n, "status": "running", "startedAt": at, "log": log,
                                         "host": worker.host, "worker": worker.id},
                                fields={"command": spec.get("command_text", ""), "log": log})])
            taken.append((step, n, int(epoch) + 1, log))
            claims.append(Claim(run_id, pk, step, n, int(epoch) + 1, spec, _copy(units_of(w.doc).get(step)), log))
        if taken:
            cur = conn.cursor()
            cur.executemany(
                "UPDATE resumable_steps SET state = 'running', worker = %s, epoch = %s, attempt = %s,"
                " tries = tries + 1, not_before = NULL, lease_expires = now() + make_interval(secs => %s)"
                " WHERE run_pk = %s AND step = %s",
                [(worker.id, epoch, n, ttl, pk, step) for step, n, epoch, _ in taken])
            cur.executemany(
                "INSERT INTO resumable_attempts (run_pk, step, n, epoch, worker, host, pid, started_at, status,"
                " log_path) VALUES (%s, %s, %s, %s, %s, %s, %s, clock_timestamp(), 'running', %s)"
                " ON CONFLICT (run_pk, step, n) DO NOTHING",
                [(pk, step, n, epoch, worker.id, worker.host, worker.pid, log) for step, n, epoch, log in taken])
    conclude.conclude(w)
    if w.doc.get("status") != "running":
        _notify(conn, run_id)
    w.save()
    return claims


def _copy(unit: object) -> dict[str, Any]:
    return {k: v for k, v in unit.items() if k != "attempts"} if isinstance(unit, dict) else {}


def _sweep(w: RunWriter) -> int:
    """Take back the steps whose lease expired: their attempt ends ``interrupted`` (lease expired)
    and the epoch moves on, fencing off the worker that held them."""
    conn, pk = w.conn, w.row.pk
    rows = conn.execute(
        "SELECT step, attempt, worker FROM resumable_steps WHERE run_pk = %s AND state = 'running'"
        " AND lease_expires < now() ORDER BY ord FOR UPDATE", (pk,)).fetchall()
    if not rows:
        return 0
    at = stamp(time.time(), ms=True)
    units = units_of(w.doc)
    for step, n, holder in rows:
        if unit_status(units.get(step)) == "done":
            continue
        reason = f"lease expired: worker {holder} stopped renewing it"
        w.apply([verbs.unit(step, "interrupted", note=reason,
                            attempt={"n": int(n), "status": "interrupted", "finishedAt": at, "reason": reason})])
    steps = [r[0] for r in rows]
    conn.execute("UPDATE resumable_steps SET state = 'pending', epoch = epoch + 1, worker = NULL, lease_expires = NULL"
                 " WHERE run_pk = %s AND step = ANY(%s)", (pk, steps))
    conn.cursor().executemany(
        "UPDATE resumable_attempts SET status = 'expired', finished_at = clock_timestamp(), reason = %s"
        " WHERE run_pk = %s AND step = %s AND n = %s AND status = 'running'",
        [(f"lease expired: worker {holder} stopped renewing it", pk, step, n) for step, n, holder in rows])
    for step in steps:
        if unit_status(units.get(step)) == "done":
            _mark_done(conn, pk, step)
    return len(rows)


def _mark_done(conn: Connection, pk: int, step: str) -> None:
    got = conn.execute("UPDATE resumable_steps SET state = 'done', worker = NULL, lease_expires = NULL,"
                       " not_before = NULL WHERE run_pk = %s AND step = %s AND state NOT IN ('done', 'skipped')"
                       " RETURNING step", (pk, step)).fetchone()
    if got is not None:
        conn.execute("UPDATE resumable_steps SET remaining = remaining - 1 WHERE run_pk = %s"
                     " AND needs @> ARRAY[%s]::text[]", (pk, step))


# --- heartbeats ------------------------------------------------------------------------------


def renew(backend: PgBackend, worker: WorkerInfo, claims: Sequence[Claim], ttl: float) -> list[Claim]:
    """Extend the leases of ``claims``; returns those that were lost (taken back after expiring)."""
    if not claims:
        def seen(conn: Connection) -> None:
            conn.execute("UPDATE resumable_workers SET seen_at = now() WHERE id = %s", (worker.id,))

        backend.write(seen, what="heartbeat", patience=0)
        return []

    def beat(conn: Connection) -> set[tuple[int, str]]:
        kept = conn.execute(
            "UPDATE resumable_steps s SET lease_expires = now() + make_interval(secs => %s)"
            " FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) AS c(pk, step, epoch)"
            " WHERE s.run_pk = c.pk AND s.step = c.step AND s.epoch = c.epoch AND s.state = 'running'"
            " RETURNING s.run_pk, s.step",
            (ttl, [c.run_pk for c in claims], [c.step for c in claims], [c.epoch for c in claims])).fetchall()
        conn.execute("UPDATE resumable_workers SET seen_at = now() WHERE id = %s", (worker.id,))
        return {(int(r[0]), r[1]) for r in kept}

    kept = backend.write(beat, what="renew the leases", patience=0)
    return [c for c in claims if (c.run_pk, c.step) not in kept]


# --- outcomes --------------------------------------------------------------------------------


def complete(backend: PgBackend, claim: Claim, result: Mapping[str, Any],
             retry_delay: Callable[[int], float | None]) -> bool:
    """Record an attempt's outcome if the claim still holds (its epoch is current): the unit's
    event, the attempt, and what follows (dependents ready, a retry after its backoff, a failure
    that stops the run or blocks its dependents, the run's conclusion). A stale claim's outcome is
    kept with its attempt only (``stale``) and False is returned.

    ``result``: ``status`` (done failed timeout interrupted), ``note``, ``attempt`` (the unit's
    attempt record), ``fields``, ``exit_code``, ``reason``, ``log`` (bytes). ``retry_delay(k)``:
    the wait before retry k, None when the step has no retry left."""
    handle = backend.handle(claim.run_id)

    def txn(w: RunWriter) -> bool:
        conn, pk = w.conn, w.row.pk
        row = conn.execute("SELECT state, epoch, failures FROM resumable_steps WHERE run_pk = %s AND step = %s"
                           " FOR UPDATE", (pk, claim.step)).fetchone() if pk == claim.run_pk else None
        log = result.get("log")
        if row is None or int(row[1]) != claim.epoch or row[0] != "running":
            from psycopg.types.json import Jsonb

            stale = {"status": result["status"], "exitCode": result.get("exit_code"), "at": stamp(ms=True),
                     "epoch": claim.epoch, "currentEpoch": int(row[1]) if row else None}
            conn.execute("UPDATE resumable_attempts SET stale = %s, log = coalesce(%s, log) WHERE run_pk = %s"
                         " AND step = %s AND n = %s", (Jsonb(stale), log, claim.run_pk, claim.step, claim.n))
            return False
        status = result["status"]
        done_elsewhere = unit_status(units_of(w.doc).get(claim.step)) == "done"
        if not (done_elsewhere and status != "done"):
            w.apply([verbs.unit(claim.step, status, note=result.get("note"), attempt=dict(result["attempt"]),
                                fields=dict(result.get("fields") or {}))])
        conn.execute("UPDATE resumable_attempts SET status = %s, exit_code = %s, reason = %s,"
                     " finished_at = clock_timestamp(), log = %s WHERE run_pk = %s AND step = %s AND n = %s",
                     (status, result.get("exit_code"), result.get("reason"), log, pk, claim.step, claim.n))
        if status == "done" or done_elsewhere:
            _mark_done(conn, pk, claim.step)
        elif status == "interrupted":
            conn.execute("UPDATE resumable_steps SET state = 'pending', worker = NULL, lease_expires = NULL"
                         " WHERE run_pk = %s AND step = %s", (pk, claim.step))
        else:
            failures = int(row[2]) + 1
            delay = None if w.row.stopping else retry_delay(failures)
            if delay is not None:
                conn.execute("UPDATE resumable_steps SET state = 'pending', worker = NULL, lease_expires = NULL,"
                             " failures = %s, not_before = now() + make_interval(secs => %s)"
                             " WHERE run_pk = %s AND step = %s", (failures, delay, pk, claim.step))
            else:
                conn.execute("UPDATE resumable_steps SET state = %s, worker = NULL, lease_expires = NULL,"
                             " failures = %s WHERE run_pk = %s AND step = %s", (status, failures, pk, claim.step))
                _failed_for_good(w, claim.step)
        _notify(conn, claim.run_id)
        conclude.conclude(w)
        w.save()
        return True

    out: bool = handle.write(txn, what=f"record step {claim.step} of run {claim.run_id}")
    return out


def _failed_for_good(w: RunWriter, step: str) -> None:
    """make's stop rules: without keep_going nothing new starts; with it, every step that needs the
    failed one is dep_blocked on it, and max_failures stops the run once reached."""
    conn, pk = w.conn, w.row.pk
    job = w.row.job if isinstance(w.row.job, dict) else {}
    if not job.get("keep_going"):
        _stop(w)
        return
    rows = conn.execute("SELECT step, needs, state FROM resumable_steps WHERE run_pk = %s ORDER BY ord",
                        (pk,)).fetchall()
    state = {r[0]: r[2] for r in rows}
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
    cap = job.get("max_failures")
    if isinstance(cap, int) and sum(1 for s in state.values() if s in ("failed", "timeout")) >= cap:
        _stop(w)


def _stop(w: RunWriter) -> None:
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
    return complete(backend, claim, result, lambda k: None)


# --- waiting and reading ---------------------------------------------------------------------


def next_wake(backend: PgBackend, runs: Sequence[str] | None, worker: WorkerInfo) -> float | None:
    """Seconds until something this worker may claim becomes due without a notification (a retry's
    backoff ends, another worker's lease expires); None when nothing is due."""
    def look(conn: Connection) -> float | None:
        query = (
            "SELECT extract(epoch FROM least("
            " min(s.not_before) FILTER (WHERE s.state = 'pending' AND s.remaining = 0),"
            " min(s.lease_expires) FILTER (WHERE s.state = 'running' AND s.worker IS DISTINCT FROM %s)) - now())"
            " FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk"
            " WHERE r.archived_at IS NULL AND r.status = 'running'")
        params: list[Any] = [worker.id]
        if runs is not None:
            query += " AND r.id = ANY(%s)"
            params.append(list(runs))
        got = conn.execute(query, params).fetchone()
        return float(got[0]) if got and got[0] is not None else None

    return backend.read(look, what="look for work", patience=0)


def run_states(backend: PgBackend, runs: Sequence[str]) -> dict[str, str | None]:
    """The status of each run (None when it does not exist)."""
    def look(conn: Connection) -> dict[str, str | None]:
        got = {r[0]: r[1] for r in conn.execute(
            "SELECT id, status FROM resumable_runs WHERE archived_at IS NULL AND id = ANY(%s)", (list(runs),))}
        return {r: got.get(r) for r in runs}

    return backend.read(look, what="read the runs' status", patience=0)


def step_summary(backend: PgBackend, run_id: str) -> str:
    def look(conn: Connection) -> str:
        rows = conn.execute(
            "SELECT s.state, count(*) FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk"
            " WHERE r.id = %s AND r.archived_at IS NULL GROUP BY s.state ORDER BY s.state", (run_id,)).fetchall()
        return ", ".join(f"{n} {st}" for st, n in rows)

    return backend.read(look, what=f"read the steps of run {run_id}")


def attempts(backend: PgBackend, run_id: str, step: str | None = None) -> list[dict[str, Any]]:
    """Every attempt workers made on the run's steps (stale ones included), oldest first."""
    def look(conn: Connection) -> list[dict[str, Any]]:
        query = ("SELECT a.step, a.n, a.epoch, a.worker, a.host, a.pid, a.started_at, a.finished_at, a.status,"
                 " a.exit_code, a.reason, a.stale, a.log_path, length(a.log) FROM resumable_attempts a"
                 " JOIN resumable_runs r ON r.pk = a.run_pk WHERE r.id = %s AND r.archived_at IS NULL")
        params: list[Any] = [run_id]
        if step is not None:
            query += " AND a.step = %s"
            params.append(step)
        keys = ("step", "n", "epoch", "worker", "host", "pid", "startedAt", "finishedAt", "status", "exitCode",
                "reason", "stale", "logPath", "logBytes")
        return [dict(zip(keys, r, strict=True)) for r in conn.execute(query + " ORDER BY a.started_at, a.step",
                                                                      params)]

    return backend.read(look, what=f"read the attempts of run {run_id}")


def attempt_log(backend: PgBackend, run_id: str, step: str, n: int | None) -> tuple[int, bytes | None] | None:
    """(attempt number, stored log) of a step's attempt ``n`` (the last one when None)."""
    def look(conn: Connection) -> tuple[int, bytes | None] | None:
        query = ("SELECT a.n, a.log FROM resumable_attempts a JOIN resumable_runs r ON r.pk = a.run_pk"
                 " WHERE r.id = %s AND r.archived_at IS NULL AND a.step = %s")
        params: list[Any] = [run_id, step]
        if n is not None:
            query += " AND a.n = %s"
            params.append(n)
        got = conn.execute(query + " ORDER BY a.n DESC LIMIT 1", params).fetchone()
        return (int(got[0]), bytes(got[1]) if got[1] is not None else None) if got else None

    return backend.read(look, what=f"read a log of run {run_id}")
