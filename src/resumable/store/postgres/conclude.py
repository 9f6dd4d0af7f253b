"""The end of a submitted run: once no step runs and none can start, the last transaction that
touched it resolves or opens the findings of failed steps and finalizes it, in the same way and
with the same words as the local runner's ``runner.conclude`` (so ``status`` reads the same)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.core.model import unit_status, units_of
from resumable.errors import RefusedError

if TYPE_CHECKING:
    from resumable.store.postgres.runstate import RunWriter

ITEM_PREFIX = "step-failed:"  # the local runner's ids: a run moved between stores keeps its findings
_FAILED = ("failed", "timeout")


def step_states(w: RunWriter) -> list[tuple[str, str, int]]:
    """(step, state, attempts since submitted) in the job's order."""
    rows = w.conn.execute("SELECT step, state, tries FROM resumable_steps WHERE run_pk = %s ORDER BY ord",
                          (w.row.pk,)).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def summary_of(states: list[tuple[str, str, int]]) -> str:
    counts: dict[str, int] = {}
    for _, state, _ in states:
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))


def over(w: RunWriter) -> bool:
    """Whether nothing runs and nothing more will start (a stopped run: nothing new starts). The
    run's row counts its open (pending or running) steps, so this costs no query but when stopping."""
    if w.row.job is None:
        return False
    if w.row.open_steps + w.open_delta <= 0:
        return True
    if not w.row.stopping:
        return False
    running = w.conn.execute("SELECT EXISTS (SELECT 1 FROM resumable_steps WHERE run_pk = %s AND state = 'running')",
                             (w.row.pk,)).fetchone()
    return not (running and running[0])


def conclude(w: RunWriter) -> bool:
    """Finalize the run if it is over; True when it was."""
    if w.doc.get("status") != "running" or not over(w):
        return False
    states = step_states(w)
    doc = w.doc
    open_items = [it for it in (doc.get("openItems") or []) if isinstance(it, dict)]
    ours = {it.get("id") for it in open_items if str(it.get("id", "")).startswith(ITEM_PREFIX)}
    to_resolve = [f"{ITEM_PREFIX}{sid}" for sid, st, _ in states
                  if st in ("done", "skipped") and f"{ITEM_PREFIX}{sid}" in ours]
    if to_resolve:
        w.apply([verbs.resolve(to_resolve)])
    summary = summary_of(states)
    step_ids = {sid for sid, _, _ in states}
    units = units_of(w.doc)
    stale = sorted(uid for uid, u in units.items() if uid not in step_ids and unit_status(u) != "done")
    finished = all(st in ("done", "skipped") for _, st, _ in states) and not stale
    if finished:
        try:
            w.apply([verbs.finalize("done", summary)])
            return True
        except RefusedError as exc:  # e.g. a finding someone else recorded is still open
            summary = f"{summary}; {exc}"
    items: list[dict[str, Any]] = []
    for sid, st, tries in states:
        if st not in _FAILED:
            continue
        unit = units.get(sid) if isinstance(units.get(sid), dict) else {}
        assert isinstance(unit, dict)
        items.append({
            "id": f"{ITEM_PREFIX}{sid}", "kind": "step_failed", "step": sid, "status": st, "attempts": tries,
            "lastExitCode": unit.get("lastExitCode"), "log": unit.get("log"),
            "summary": f"step {sid} {st} (exit {unit.get('lastExitCode')})",
        })
    if items:
        w.apply([verbs.item(items)])
    w.apply([verbs.finalize("needs_attention", summary)])
    return True
