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

    from resumable.core.types import Event, Launch
    from resumable.store.backend import PlanDecision, Submitted
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place
    from resumable.store.postgres.runstate import RunWriter


def submit(place: Place, run_id: str, *, task: str, launch: Launch,
           steps: Sequence[Mapping[str, Any]], plan: Callable[[Mapping[str, Any]], Mapping[str, PlanDecision]],
           options: Mapping[str, Any],
           marks: Callable[[Mapping[str, Any]], Sequence[Event]] | None = None,
           units: Sequence[str] | None = None,
           held: Callable[[str], Mapping[str, Any] | None] | None = None) -> Submitted:
    """Record a job as a run: its steps (``{"id", "needs", "spec", "command"}``, in the job's
    order), which of them run (``plan(units)`` -> ``{step: decision}`` with ``run``, ``reason``,
    ``invalidate``, decided on the document under the row lock) and the run's options; ``marks(units)``
    gives the events marking units of steps the job no longer has (and unmarking returned ones). Submitting
    the same job again is a resume: done steps stay skipped, steps a live worker holds keep their
    claim, and nothing is recorded twice. Returns ``{"run", "skip", "run_steps", "concluded"}``.

    Target steps: ``steps`` are the selected ones, ``units`` every step of the job (the units a new
    run starts with) and ``held(step)`` a step not selected in the same form, for one a live worker
    holds (it keeps its claim). The other steps get no row: their units stay as they stand."""
    handle = place.handle(run_id)

    def txn(w: RunWriter) -> Submitted:
        if w.state.doc is None:
            w.apply([verbs.init(task, run_id, units=list(units or [s["id"] for s in steps]), launch=launch)])
        w.apply([verbs.begin(launch)])
        old = {r[0]: r[1:] for r in w.first_rows.fetchall()} if w.first_rows is not None else {}
        if any(int(r[6]) != w.row.pk for r in old.values()):
            old = {}  # the rows of an archived run of the same id
        live = {sid for sid, r in old.items() if r[2] == "running" and r[5]}
        _close_dead_attempts(w, live)
        removal = marks(units_of(w.doc)) if marks is not None else []
        if removal:  # before invalidations: each restates its unit's state as planned
            w.apply(removal)
        decisions = plan(units_of(w.doc))
        rows_of = [*steps, *_held(steps, live, held)]
        runs = {s["id"] for s in rows_of if s["id"] in live or decisions[s["id"]]["run"]}
        rows = [_step_row(w, order, s, decisions.get(s["id"], {}), old.get(s["id"]), s["id"] in live, runs)
                for order, s in enumerate(rows_of)]
        dependents = _dependents(rows_of)
        from psycopg.types.json import Jsonb

        w.conn.execute(Q.drop_steps, {"pk": w.row.pk})
        w.conn.cursor().executemany(Q.insert_step, [(*r[:3], Jsonb(r[3]), *r[4:11], Jsonb(r[11]),
                                                     dependents.get(r[1], [])) for r in rows])
        w.conn.execute(Q.set_job, {"pk": w.row.pk, "job": Jsonb(dict(options))})
        w.row.job, w.row.stopping = dict(options), False
        concluded = conclude.conclude(w)
        w.conn.execute(Q.notify, {"channel": WORK, "payload": run_id})
        return {"run": run_id, "run_steps": sorted(runs), "skip": len(rows_of) - len(runs), "concluded": concluded}

    def lock_steps(conn: Connection) -> Any:
        return conn.execute(Q.lock_all_steps, {"run": run_id})  # before the run's row: the workers' lock order

    out: Submitted = handle.write(txn, create=True, what=f"submit run {run_id}", first=lock_steps)
    return out


def _dependents(steps: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each step's dependents (the steps with a row that need it), in the job's order: a completion
    frees them by their keys (``finish_done``)."""
    out: dict[str, list[str]] = {}
    for s in steps:
        for need in s["needs"]:
            out.setdefault(need, []).append(s["id"])
    return out


def _held(steps: Sequence[Mapping[str, Any]], live: set[str],
          held: Callable[[str], Mapping[str, Any] | None] | None) -> list[Mapping[str, Any]]:
    """The steps not selected that a live worker holds: they keep their rows (and claims)."""
    if held is None:
        return []
    chosen = {s["id"] for s in steps}
    return [s for s in map(held, sorted(live - chosen)) if s is not None]


def _close_dead_attempts(w: RunWriter, live: set[str]) -> None:
    """A unit left in_progress by a worker whose claim is gone: its attempt ends interrupted."""
    at = stamp(time.time(), ms=True)
    for sid, unit in list(units_of(w.doc).items()):
        if sid not in live and unit_status(unit) == "in_progress":
            n = _last_attempt(unit)
            att = {"n": n, "status": "interrupted", "finishedAt": at} if n > 0 else None
            w.apply([verbs.unit(sid, "interrupted", note="its worker stopped during this step", attempt=att)])


def _step_row(w: RunWriter, order: int, s: Mapping[str, Any], decision: Mapping[str, Any], prev: Any, live: bool,
              runs: set[str]) -> tuple[Any, ...]:
    """The step's row (``insert_step``'s parameters), and its unit's events: an invalidation, a
    new unit, or its needs recorded before it runs (as the local runner records them, so `resume`,
    `get` and `status` read a submitted DAG as they read a local one). A step a live worker holds
    keeps its claim."""
    sid = s["id"]
    units = units_of(w.doc)
    if not live:
        if decision.get("invalidate"):
            w.apply([verbs.invalidate(sid, decision["reason"])])
        elif sid not in units:
            w.apply([verbs.unit(sid, "pending", deps=list(s["needs"]), fields={"command": s["command"]})])
        elif needs_unrecorded(units.get(sid), s["needs"]):
            w.apply([verbs.unit(sid, "pending", deps=list(s["needs"]))])
    epoch, attempt = (int(prev[0]), int(prev[1])) if prev else (0, 0)
    known = units_of(w.doc).get(sid)
    attempt = max(attempt, _last_attempt(known))
    remaining = sum(1 for n in s["needs"] if n in runs)
    fingerprint = {k: known[k] for k in ("fingerprint", "fingerprintHost", "artifacts")
                   if isinstance(known, dict) and k in known}
    state, worker, lease = ("running", prev[3], prev[4]) if live else ("pending" if sid in runs else "skipped",
                                                                          None, None)
    return (w.row.pk, sid, order, s["spec"], list(s["needs"]), remaining, state, epoch, attempt, worker, lease,
            fingerprint)


def _last_attempt(unit: object) -> int:
    atts = unit.get("attempts") if isinstance(unit, dict) else None
    ns = [a.get("n") for a in atts if isinstance(a, dict)] if isinstance(atts, list) else []
    return max([n for n in ns if isinstance(n, int) and not isinstance(n, bool)], default=0)
