"""Submitting a job: its steps, fingerprints and needs recorded as a run, for workers to claim."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.core.model import unit_status, units_of
from resumable.core.policy import needs_unrecorded
from resumable.core.stamps import stamp
from resumable.store.postgres import conclude
from resumable.store.postgres.queries import WORK, Q

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from resumable.core.types import Event
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place
    from resumable.store.postgres.runstate import RunWriter


def submit(place: Place, run_id: str, *, task: str, launch: dict[str, Any],
           steps: Sequence[Mapping[str, Any]], plan: Callable[[Mapping[str, Any]], Mapping[str, Any]],
           options: Mapping[str, Any],
           marks: Callable[[Mapping[str, Any]], Sequence[Event]] | None = None) -> dict[str, Any]:
    """Record a job as a run: its steps (``{"id", "needs", "spec", "command"}``, in the job's
    order), which of them run (``plan(units)`` -> ``{step: decision}`` with ``run``, ``reason``,
    ``invalidate``, decided on the document under the row lock) and the run's options; ``marks(units)``
    gives the events marking units of steps the job no longer has (and unmarking returned ones). Submitting
    the same job again is a resume: done steps stay skipped, steps a live worker holds keep their
    claim, and nothing is recorded twice. Returns ``{"run", "skip", "run_steps", "concluded"}``."""
    handle = place.handle(run_id)

    def txn(w: RunWriter) -> dict[str, Any]:
        conn = w.conn
        if w.state.doc is None:
            w.apply([verbs.init(task, run_id, units=[s["id"] for s in steps], launch=launch)])
        w.apply([verbs.begin(launch)])
        old = {r[0]: r[1:] for r in w.first_rows.fetchall()} if w.first_rows is not None else {}
        if any(int(r[6]) != w.row.pk for r in old.values()):
            old = {}  # the rows of an archived run of the same id
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
        removal = marks(units) if marks is not None else []
        if removal:  # before invalidations: each restates its unit's state as planned
            w.apply(removal)
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
                elif needs_unrecorded(units.get(sid), s["needs"]):
                    # Its needs recorded before it runs, as the local runner records them: `resume`,
                    # `get` and `status` read a submitted DAG as they read a local one.
                    w.apply([verbs.unit(sid, "pending", deps=list(s["needs"]))])
            prev = old.get(sid)
            epoch, attempt = (int(prev[0]), int(prev[1])) if prev else (0, 0)
            attempt = max(attempt, _last_attempt(units.get(sid)))
            remaining = sum(1 for n in s["needs"] if n in runs)
            known = units.get(sid)
            fingerprint = {k: known[k] for k in ("fingerprint", "fingerprintHost", "artifacts")
                           if isinstance(known, dict) and k in known}
            if sid in live:
                assert prev is not None
                rows.append((w.row.pk, sid, order, s["spec"], list(s["needs"]), remaining, "running", epoch, attempt,
                             prev[3], prev[4], fingerprint))
            else:
                state = "pending" if sid in runs else "skipped"
                rows.append((w.row.pk, sid, order, s["spec"], list(s["needs"]), remaining, state, epoch, attempt,
                             None, None, fingerprint))
        conn.execute("DELETE FROM resumable_steps WHERE run_pk = %s", (w.row.pk,))
        from psycopg.types.json import Jsonb

        conn.cursor().executemany(
            "INSERT INTO resumable_steps (run_pk, step, ord, spec, needs, remaining, state, epoch, attempt, worker,"
            " lease_expires, fingerprint) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(*r[:3], Jsonb(r[3]), *r[4:11], Jsonb(r[11])) for r in rows])
        conn.execute("UPDATE resumable_runs SET job = %s, stopping = false WHERE pk = %s",
                     (Jsonb(dict(options)), w.row.pk))
        w.row.job, w.row.stopping = dict(options), False
        concluded = conclude.conclude(w)
        conn.execute(Q.notify, {"channel": WORK, "payload": run_id})
        return {"run": run_id, "run_steps": sorted(runs), "skip": len(steps) - len(runs), "concluded": concluded}

    def lock_steps(conn: Connection) -> Any:
        # Every step row, before the run's row: the workers' lock order.
        return conn.execute(
            "SELECT s.step, s.epoch, s.attempt, s.state, s.worker, s.lease_expires, s.lease_expires > now(), s.run_pk"
            " FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk WHERE r.id = %s"
            " AND r.archived_at IS NULL FOR UPDATE OF s", (run_id,))

    out: dict[str, Any] = handle.write(txn, create=True, what=f"submit run {run_id}", first=lock_steps)
    return out


def _last_attempt(unit: object) -> int:
    atts = unit.get("attempts") if isinstance(unit, dict) else None
    ns = [a.get("n") for a in atts if isinstance(a, dict)] if isinstance(atts, list) else []
    return max([n for n in ns if isinstance(n, int) and not isinstance(n, bool)], default=0)
