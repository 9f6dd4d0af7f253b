"""The end of a submitted run: once no step runs and none can start, the last transaction that
touched it records the verdict of ``core.policy``, the local runner's own (so ``status`` reads
the same in both stores)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from resumable.core import policy
from resumable.core.model import units_of
from resumable.errors import RefusedError
from resumable.store.postgres.queries import WORK, Q

if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place
    from resumable.store.postgres.runstate import RunWriter



def step_states(w: RunWriter) -> list[tuple[str, str, int]]:
    """(step, state, attempts since submitted) in the job's order."""
    rows = w.conn.execute(Q.step_states,
                          (w.row.pk,)).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def over(w: RunWriter) -> bool:
    """Whether nothing runs and nothing more will start (a stopped run: nothing new starts)."""
    if w.row.job is None:
        return False
    got = w.conn.execute(Q.steps_over, {"pk": w.row.pk, "stopping": bool(w.row.stopping)}).fetchone()
    return bool(got and got[0])


def conclude(w: RunWriter) -> bool:
    """Finalize the run if it is over (``policy.verdict``); True when it was."""
    if w.doc.get("status") != "running" or not over(w):
        return False
    units = units_of(w.doc)
    ends = {}
    for sid, state, tries in step_states(w):
        unit: Any = units.get(sid) if isinstance(units.get(sid), dict) else {}  # as stored: read key by key
        assert isinstance(unit, dict)
        log = unit.get("log")
        ends[sid] = policy.StepEnd(state, tries, unit.get("lastExitCode"), log if isinstance(log, str) else None)
    if w.row.job.get("targets"):
        ends = _with_unselected(ends, units)
    verdict = policy.verdict(ends, w.doc)
    for event in verdict.events:
        try:
            w.apply([event])
        except RefusedError as exc:  # e.g. a finding someone else recorded is still open
            if event.get("t") != "finalize":
                raise
            w.apply(verdict.refused(str(exc)))
    return True


def _with_unselected(ends: dict[str, policy.StepEnd], units: Mapping[str, object]) -> dict[str, policy.StepEnd]:
    """A run of target steps: the job's steps left out (units with no row, not removed) end as
    their units stand, skipped when done, else not selected, as the local runner's end."""
    out: dict[str, policy.StepEnd] = {}
    for sid, unit in units.items():
        if sid in ends:
            out[sid] = ends[sid]
        elif isinstance(unit, dict) and unit.get("removed") is not True:
            out[sid] = policy.StepEnd("skipped" if unit.get("status") == "done" else "not selected")
    return out | ends


def conclude_run(place: Place, run_id: str) -> bool:
    """After a worker's commit closed the run's last open step (or stopped it): conclude it under
    the run's lock, if it is still to be concluded (another worker may have done it first)."""
    def look(conn: Connection) -> bool:
        got = conn.execute(Q.run_over, {"pk": None, "run": run_id}).fetchone()
        return bool(got and got[1])

    # Looked at first, without the run's lock: the workers that saw the last steps end all come
    # here, and a run another one concluded meanwhile is not read whole again under the lock.
    if not place.read(look, what=f"look at run {run_id}", patience=0):
        return False
    handle = place.handle(run_id)

    def body(w: RunWriter) -> bool:
        done = conclude(w)
        if done:
            w.conn.execute(Q.notify, {"channel": WORK, "payload": run_id})  # workers waiting on it may exit
        return done

    # Looked at again under the lock, before the document is read: the workers that saw the last
    # steps end queue on the lock, and all but the first find the run concluded (each would
    # otherwise read the whole document for nothing, one after the other, at the run's end).
    out: bool | None = handle.write(body, what=f"conclude run {run_id}", gate=look)
    return bool(out)
