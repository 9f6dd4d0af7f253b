"""Claims: workers on any host take ready steps, hold them under leases, and lose them.

A claim takes steps that are ready (every need done or skipped, not leased, past any retry
backoff) with ``FOR UPDATE SKIP LOCKED``, in the job's order. Each claim bumps the step's
``epoch``: the fencing token the claim carries. A lease lives in the server's clock
(``lease_expires``), renewed by the worker's heartbeats; once it has expired, the next claim on
the run takes the step back (the attempt is recorded ``interrupted``, "lease expired") and bumps
the epoch again, so a completion arriving later from the worker that lost it (paused, cut off) no
longer matches (``outcomes``): a step is done exactly once, and every attempt is on record.

Lock order, the same in every transaction: the run's row, then step rows (heartbeats lock step
rows alone), so writers never wait on each other in a cycle.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from resumable.core import policy, verbs
from resumable.core.model import unit_status, units_of
from resumable.core.stamps import stamp
from resumable.store.postgres import conclude

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from resumable.store.postgres.backend import PgBackend
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.runstate import RunWriter

WORK = "resumable_work"  # NOTIFY channel: a step may have become claimable (payload: run id)
RUN_PK = "(SELECT pk FROM resumable_runs WHERE id = %s AND archived_at IS NULL)"
READY = "state = 'pending' AND remaining = 0 AND (not_before IS NULL OR not_before <= now())"


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


class Asked:
    """What a claim asks for: how many steps, for whom, for how long, and where their logs go."""

    __slots__ = ("limit", "log_path", "ttl", "worker")

    def __init__(self, worker: WorkerInfo, limit: int, ttl: float, log_path: Callable[[str, str, int], str]) -> None:
        self.worker = worker
        self.limit = limit
        self.ttl = ttl
        self.log_path = log_path


def notify(conn: Connection, run_id: str) -> None:
    conn.execute("SELECT pg_notify(%s, %s)", (WORK, run_id))


def last_attempt(unit: object) -> int:
    atts = unit.get("attempts") if isinstance(unit, dict) else None
    ns = [a.get("n") for a in atts if isinstance(a, dict)] if isinstance(atts, list) else []
    return max([n for n in ns if isinstance(n, int) and not isinstance(n, bool)], default=0)


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


# --- claim -----------------------------------------------------------------------------------


def candidates(backend: PgBackend) -> list[str]:
    """Runs with something to claim or to take back (an expired lease), oldest first."""
    def look(conn: Connection) -> list[str]:
        return [r[0] for r in conn.execute(
            "SELECT r.id FROM resumable_runs r WHERE r.archived_at IS NULL AND r.status = 'running'"
            " AND r.job IS NOT NULL AND EXISTS (SELECT 1 FROM resumable_steps s WHERE s.run_pk = r.pk AND"
            " ((s.state = 'pending' AND s.remaining = 0 AND (s.not_before IS NULL OR s.not_before <= now()))"
            " OR (s.state = 'running' AND s.lease_expires < now()))) ORDER BY r.pk")]

    return backend.read(look, what="look for work", patience=0)


def claim(backend: PgBackend, asked: Asked, runs: Sequence[str] | None) -> tuple[list[Claim], float | None]:
    """Up to ``asked.limit`` ready steps of ``runs`` (every run when None); expired leases of those
    runs are taken back first. Returns the claims and, when fewer than asked were found, how many
    seconds until something becomes due without a notification (a backoff ends, a lease expires)."""
    out: list[Claim] = []
    wake: float | None = None
    for run_id in (candidates(backend) if runs is None else runs):
        left = asked.limit - len(out)
        if left <= 0:
            break
        def body(w: RunWriter, run_id: str = run_id, left: int = left) -> tuple[list[Claim], float | None]:
            return take(w, asked, run_id, left)

        def also(conn: Connection, run_id: str = run_id, left: int = left) -> tuple[Any, Any, Any]:
            return ask_for_steps(conn, run_id, left, asked.worker)

        got, due = backend.handle(run_id).write(body, also=also, what=f"claim steps of run {run_id}", patience=0)
        out += got
        if due is not None:
            wake = due if wake is None else min(wake, due)
    return out, wake


def ask_for_steps(conn: Connection, run_id: str, limit: int, worker: WorkerInfo) -> tuple[Any, Any, Any]:
    """The statements a claim sends with the run's lock: ready steps, expired leases, and when the
    next thing falls due."""
    ready = conn.execute(
        f"SELECT step, spec, attempt, epoch, needs FROM resumable_steps WHERE run_pk = {RUN_PK} AND {READY}"
        " ORDER BY ord LIMIT %s FOR UPDATE SKIP LOCKED", (run_id, limit)) if limit > 0 else None
    expired = conn.execute(
        f"SELECT step, attempt, worker FROM resumable_steps WHERE run_pk = {RUN_PK} AND state = 'running'"
        " AND lease_expires < now() ORDER BY ord FOR UPDATE SKIP LOCKED", (run_id,))
    due = conn.execute(
        "SELECT extract(epoch FROM least("
        " min(not_before) FILTER (WHERE state = 'pending' AND remaining = 0 AND not_before > now()),"
        " min(lease_expires) FILTER (WHERE state = 'running' AND worker IS DISTINCT FROM %s)) - now())"
        f" FROM resumable_steps WHERE run_pk = {RUN_PK} AND (state = 'running' OR not_before IS NOT NULL)",
        (worker.id, run_id))
    return ready, expired, due


def take(w: RunWriter, asked: Asked, run_id: str, limit: int) -> tuple[list[Claim], float | None]:
    """Inside a run's transaction (``ask_for_steps`` sent with its lock): sweep, claim, conclude."""
    ready, expired, due_cur = w.prefetched
    rows = ready.fetchall() if ready is not None else []
    lapsed = expired.fetchall()
    got = due_cur.fetchone()
    due = float(got[0]) if got and got[0] is not None else None
    if w.row.status != "running" or w.row.job is None or w.state.doc is None:
        return [], due
    swept = sweep(w, lapsed)
    claims: list[Claim] = []
    if not w.row.stopping:
        claims = take_steps(w, asked, run_id, rows[:limit])
    if swept or w.row.stopping:
        conclude.conclude(w)
    if swept or w.doc.get("status") != "running":
        notify(w.conn, run_id)
    w.save()
    return claims, (None if len(claims) >= limit else due)


def take_steps(w: RunWriter, asked: Asked, run_id: str, rows: Sequence[Sequence[Any]]) -> list[Claim]:
    """Claim the ready ``rows`` (locked). A step found done (recorded by someone else, or kept done
    by early cutoff) is marked so, which may make its dependents ready: they are claimed in the
    same transaction, and the run concluded if that was its last step."""
    claims: list[Claim] = []
    kept = False
    while rows:
        got, marked = _take_rows(w, asked, run_id, rows)
        claims.extend(got)
        kept = kept or marked
        if not marked:
            break
        rows = w.conn.execute(f"SELECT step, spec, attempt, epoch, needs FROM resumable_steps WHERE run_pk = %s"
                              f" AND {READY} ORDER BY ord LIMIT %s FOR UPDATE SKIP LOCKED",
                              (w.row.pk, max(asked.limit - len(claims), 1))).fetchall()
    if kept and conclude.conclude(w):
        notify(w.conn, run_id)
    return claims


def _take_rows(w: RunWriter, asked: Asked, run_id: str, rows: Sequence[Sequence[Any]]) -> tuple[list[Claim], bool]:
    conn, pk, worker = w.conn, w.row.pk, asked.worker
    units = units_of(w.doc)
    at = stamp(time.time(), ms=True)
    taken = []
    claims = []
    marked = False
    for step, spec, attempt, epoch, needs in rows:
        unit = units.get(step)
        upstream = policy.upstream_digests(needs, lambda n: _artifacts(units.get(n)))
        if unit_status(unit) == "done":
            why = _reruns(w.doc, unit, spec, needs, upstream) if spec.get("cutoff") else None
            if why is None:
                # Recorded done by someone else meanwhile, or cut off early: nothing to run.
                mark_done(w, step)
                marked = True
                continue
            w.apply([verbs.invalidate(step, why)])
        if needs:  # what its needs made, for the fingerprint the worker records (early cutoff)
            spec = {**spec, "upstream": policy.upstream_record(upstream)}
        n = max(int(attempt), last_attempt(unit)) + 1
        log = asked.log_path(run_id, step, n)
        w.apply([verbs.unit(step, "in_progress", deps=list(needs),
                            attempt={"n": n, "status": "running", "startedAt": at, "log": log,
                                     "host": worker.host, "worker": worker.id},
                            fields={"command": spec.get("command_text", "")})])
        taken.append((step, n, int(epoch) + 1, log))
        claims.append(Claim(run_id, pk, step, n, int(epoch) + 1, spec, _unit_copy(units_of(w.doc).get(step)), log))
    if taken:
        cur = conn.cursor()
        cur.executemany(
            "UPDATE resumable_steps SET state = 'running', worker = %s, epoch = %s, attempt = %s,"
            " tries = tries + 1, not_before = NULL, lease_expires = now() + make_interval(secs => %s)"
            " WHERE run_pk = %s AND step = %s",
            [(worker.id, epoch, n, asked.ttl, pk, step) for step, n, epoch, _ in taken])
        cur.executemany(
            "INSERT INTO resumable_attempts (run_pk, step, n, epoch, worker, host, pid, started_at, status,"
            " log_path) VALUES (%s, %s, %s, %s, %s, %s, %s, clock_timestamp(), 'running', %s)"
            " ON CONFLICT (run_pk, step, n) DO NOTHING",
            [(pk, step, n, epoch, worker.id, worker.host, worker.pid, log) for step, n, epoch, log in taken])
    return claims, marked


def _artifacts(unit: object) -> object:
    return unit.get("artifacts") if isinstance(unit, dict) else None


def _reruns(doc: Mapping[str, Any], unit: Any, spec: Mapping[str, Any], needs: Sequence[str],
            upstream: Mapping[str, str | None]) -> str | None:
    """Why a done step submitted to wait for its needs (``cutoff``) runs after all, or None when
    it stays done: the scheduling policy's rule (``policy.keeps_done``), as the local runner's."""
    from resumable.core.stamps import parse_stamp

    units = units_of(doc)
    stored = unit.get("fingerprint") if isinstance(unit, dict) else None
    reran = policy.reran_since(needs, units, parse_stamp(doc.get("sessionStartedAt")))
    if policy.keeps_done(bool(spec.get("artifacts") or spec.get("inputs")), stored, upstream, reran):
        return None
    changed = policy.upstream_changes(stored, upstream) or reran or list(needs)
    return f"upstream re-ran: {', '.join(changed)}"


def _unit_copy(unit: object) -> dict[str, Any]:
    return {k: v for k, v in unit.items() if k != "attempts"} if isinstance(unit, dict) else {}


def sweep(w: RunWriter, rows: Sequence[Sequence[Any]]) -> int:
    """Take back steps whose lease expired (``rows``: step, attempt, worker; locked): their attempt
    ends ``interrupted`` (lease expired) and the epoch moves on, fencing off the worker that held them."""
    if not rows:
        return 0
    conn, pk = w.conn, w.row.pk
    at = stamp(time.time(), ms=True)
    units = units_of(w.doc)
    back = []
    for step, n, holder in rows:
        reason = f"lease expired: worker {holder} stopped renewing it"
        if unit_status(units.get(step)) == "done":
            mark_done(w, step)
            continue
        w.apply([verbs.unit(step, "interrupted", note=reason,
                            attempt={"n": int(n), "status": "interrupted", "finishedAt": at, "reason": reason})])
        back.append(step)
    conn.execute("UPDATE resumable_steps SET state = 'pending', epoch = epoch + 1, worker = NULL, lease_expires = NULL"
                 " WHERE run_pk = %s AND step = ANY(%s)", (pk, back))
    conn.cursor().executemany(
        "UPDATE resumable_attempts SET status = 'expired', finished_at = clock_timestamp(), reason = %s"
        " WHERE run_pk = %s AND step = %s AND n = %s AND status = 'running'",
        [(f"lease expired: worker {holder} stopped renewing it", pk, step, n) for step, n, holder in rows])
    return len(rows)


def mark_done(w: RunWriter, step: str) -> None:
    """A pending or running step is done: its dependents have one need fewer."""
    w.conn.execute("UPDATE resumable_steps SET state = 'done', worker = NULL, lease_expires = NULL, not_before = NULL,"
                   " epoch = epoch + 1 WHERE run_pk = %s AND step = %s", (w.row.pk, step))
    w.conn.execute("UPDATE resumable_steps SET remaining = remaining - 1 WHERE run_pk = %s"
                   " AND needs @> ARRAY[%s]::text[]", (w.row.pk, step))
    w.open_delta -= 1


# --- heartbeats ------------------------------------------------------------------------------


def renew(backend: PgBackend, worker: WorkerInfo, claims: Sequence[Claim], ttl: float) -> list[Claim]:
    """Extend the leases of ``claims``; returns those that were lost (taken back after expiring)."""
    def beat(conn: Connection) -> set[tuple[int, str]]:
        kept: set[tuple[int, str]] = set()
        if claims:
            kept = {(int(r[0]), r[1]) for r in conn.execute(
                "UPDATE resumable_steps s SET lease_expires = now() + make_interval(secs => %s)"
                " FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) AS c(pk, step, epoch)"
                " WHERE s.run_pk = c.pk AND s.step = c.step AND s.epoch = c.epoch AND s.state = 'running'"
                " RETURNING s.run_pk, s.step",
                (ttl, [c.run_pk for c in claims], [c.step for c in claims], [c.epoch for c in claims])).fetchall()}
        conn.execute("UPDATE resumable_workers SET seen_at = now() WHERE id = %s", (worker.id,))
        return kept

    kept = backend.write(beat, what="renew the leases", patience=0)
    return [c for c in claims if (c.run_pk, c.step) not in kept]
