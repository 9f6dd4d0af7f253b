"""The end of a durable session (``run.finish()``) and marking units for re-run (``resumable rerun``).

``finish`` finalizes the run ``done`` when every unit is done, else ``needs_attention`` with an open
finding per step unit that is not done (``step-failed:<unit>``: its state, attempts and last error),
resolved by a later ``finish`` once the unit is done; then it brings the snapshot view up to date and
hands the lease back. A ``done`` run that this process did not change is left as it is (nothing is
written), so running a finished script again writes nothing.

``rerun`` is the explicit way to run a done unit again: an ``invalidate`` record per unit (the unit
goes back to pending; ``invalidations`` on the unit says when and why), for durable steps and for
job-file steps alike (the next ``resumable run`` runs the step). A finished run is reopened as
``needs_attention`` in the same commit, so nothing treats it as over (``gc`` does not archive it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.core.model import check_unit_id, unit_status, units_of
from resumable.durable.codec import error_line
from resumable.durable.engine import Engine, interrupted_leftovers, open_engine
from resumable.errors import InvalidInputError, NoRunError, RefusedError
from resumable.view.units import tally

if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.core.types import Event, StepFinding

ITEM_PREFIX = "step-failed:"  # the runner's prefix too: one kind of finding for a failed step


def _finding(uid: str, unit: object) -> StepFinding:
    attempts = unit.get("attempts") if isinstance(unit, dict) else None
    attempts = attempts if isinstance(attempts, list) else []
    last = attempts[-1] if attempts and isinstance(attempts[-1], dict) else {}
    error = last.get("error") if isinstance(last.get("error"), dict) else None
    state = unit_status(unit) or "malformed"
    summary = f"step {uid} {state}" + (f": {error_line(error)}" if error else "")
    return {"id": f"{ITEM_PREFIX}{uid}", "kind": "step_failed", "step": uid, "status": state,
            "attempts": len(attempts), "summary": summary[:300]}


def finish(engine: Engine, result: str | None = None) -> str:
    """Finalize the run; returns its status: ``done`` or ``needs_attention``."""
    if engine.in_flight():
        raise RefusedError("steps of this run are still running in this process: call finish() after"
                           " they have returned")
    records = engine.records
    doc = records.head()  # a finished run answered from a digest is not loaded to be left as it is
    if doc is None:
        raise NoRunError(f"no run at {engine.location}: nothing to finish")
    if doc.get("status") == "done" and engine.lease is None:
        return "done"
    engine.ensure_session(begin=False)  # nothing else may run steps of this run while it is finalized
    try:
        doc = records.doc() or doc
        events = interrupted_leftovers(doc)
        units = units_of(doc)
        if events:  # recorded first, so the findings below see those units as they now are
            records.commit_now(events, lazy_view=True)
            doc = records.doc() or doc
            units = units_of(doc)
        not_done = [uid for uid, u in units.items() if unit_status(u) != "done"]
        open_ids = {it.get("id") for it in doc.get("openItems") or [] if isinstance(it, dict)}
        settled = [i for i in open_ids if isinstance(i, str) and i.startswith(ITEM_PREFIX)
                   and unit_status(units.get(i[len(ITEM_PREFIX):])) == "done"]
        findings = [_finding(uid, units[uid]) for uid in not_done
                    if isinstance(units[uid], dict) and units[uid].get("kind") == "step"]
        head: list[Event] = []
        if settled:
            head.append(verbs.resolve(sorted(settled)))
        if findings:
            head.append(verbs.item(findings))
        done = len(units) - len(not_done)
        unreached = tally(doc, keep=0).unreached  # items of a map that never ran (it was stopped)
        summary = result if result is not None else (
            f"{done} step(s) done" + (f", {len(not_done)} not done: {', '.join(not_done[:10])}"
                                      + (" ..." if len(not_done) > 10 else "") if not_done else "")
            + (f", {unreached} item(s) of a map not run yet" if unreached else ""))
        status = "needs_attention" if not_done or findings or unreached else "done"
        try:
            records.commit_now([*head, verbs.finalize(status, summary)])
        except RefusedError as refusal:
            # done refused for a reason of the run itself (an open finding, a blocked phase).
            status = "needs_attention"
            records.commit_now([*head, verbs.finalize(status, f"{summary}; {refusal}")])
        return status
    finally:
        engine.end_session()


def step_units(doc: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """Every unit of the durable steps ``names``; InvalidInputError for a name with none."""
    units = units_of(doc)
    out: list[str] = []
    for name in names:
        mine = [uid for uid, u in units.items() if isinstance(u, dict) and u.get("kind") == "step"
                and u.get("step") == name]
        if not mine:
            raise InvalidInputError(f"run {doc.get('id')} has no unit of a step named {name!r}")
        out += mine
    return out


def rerun(handle: Any, unit_ids: Sequence[str], reason: str | None = None) -> list[str]:
    """Invalidate ``unit_ids`` of the run behind ``handle`` in one commit; returns them."""
    if not unit_ids:
        raise InvalidInputError("rerun needs at least one unit id")
    ids = list(dict.fromkeys(check_unit_id(u) for u in unit_ids))
    why = reason if reason is not None else "re-run requested"
    doc = handle.read()
    units = units_of(doc)
    status = doc.get("status")
    if status == "aborted":
        raise RefusedError(f"run {doc.get('id')} was aborted: start it afresh (init, or open_run with task=)"
                           " rather than re-running its units")
    missing = [u for u in ids if u not in units]
    if missing:
        raise InvalidInputError(f"run {doc.get('id')} has no unit {', '.join(missing)}"
                                " (`resumable status --units done` lists them)")
    running = [u for u in ids if unit_status(units[u]) == "in_progress"]
    if running:
        raise RefusedError(f"unit {', '.join(running)} is in progress: re-run it once it has ended (if its"
                           " process died, the next run re-runs it anyway)")
    events: list[Event] = [verbs.invalidate(u, why) for u in ids]
    if status == "done":
        events.append(verbs.finalize("needs_attention", f"{len(ids)} unit(s) marked for re-run"))
    handle.commit(events)
    # Steps of this process see it at once (other processes within records.REFRESH_EVERY).
    engine = open_engine(handle.location)
    if engine is not None:
        engine.records.refresh()
    return ids
