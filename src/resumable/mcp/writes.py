"""The write tools: the checkpoint verbs (init, unit, phase, item, resolve, validation, finalize) and
rerun, each one ``resumable.Run`` method, as the low-level verbs call them. Registered only with
``--allow-writes``.

The checkpoint rules hold exactly as in the CLI, because they live below both in the store's
commit: demoting a done unit, ``finalize done`` with anything open, an init over a live run, a write
under a live runner are refused (``RefusedError``), and the tool error carries the message the CLI
prints before exiting 2.
"""

from __future__ import annotations

from typing import Any

from resumable.api import Run, validate_launch
from resumable.core.model import PHASE_STATES, UNIT_STATES, check_nesting, default_run_id, unit_status
from resumable.errors import InvalidInputError
from resumable.mcp.answers import clip, clip_list
from resumable.mcp.bound import BoundStore, run_id, unit_id

MAX_IDS = 10_000  # ids in one call (units of an init, a rerun; findings resolved)


def _run(bound: BoundStore, run: str, *, exists: bool = True) -> Run:
    handle = bound.handle(run) if exists else bound.backend.open(run_id(run))
    return Run(handle, bound.backend)


def _ids(values: object, what: str) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, list) or len(values) > MAX_IDS:
        raise InvalidInputError(f"{what} must be a list of ids (at most {MAX_IDS:,})")
    return [unit_id(v) for v in values]


def _text(value: object, what: str, limit: int = 10_000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidInputError(f"{what} must be a string of at most {limit:,} characters")
    return value


def _wrote(run: Run, out: dict[str, Any]) -> dict[str, Any]:
    """The answer of a write; says so when the write is durable but the snapshot file is stale."""
    if run.snapshot_error:
        out["warning"] = clip(f"saved in the journal, but the snapshot file is stale: {run.snapshot_error}")
    return out


def init(bound: BoundStore, task: str, run: str | None = None, units: list[str] | None = None,
         required_phases: list[str] | None = None, require_validation: bool = False,
         launch: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start a run (refused while a live run has the id; a done or aborted one is archived first)."""
    if not isinstance(task, str) or not task.strip() or len(task) > 10_000:
        raise InvalidInputError("init requires a task description (a non-empty string)")
    rid = run_id(run) if run is not None else default_run_id()
    ids = _ids(units, "units")
    phases = [clip(p, 256) for p in _ids(required_phases, "required_phases")]
    if launch is not None:
        check_nesting(launch)
        launch = dict(validate_launch(launch))
    with bound.lock:
        opened = _run(bound, rid, exists=False)
        got = opened.init(task, units=ids, run_id=rid, launch=launch, required_phases=phases,
                          require_validation=bool(require_validation))
        return _wrote(opened, {"id": got, "units": len(ids)})


def unit(bound: BoundStore, run: str, unit: str, state: str, note: str | None = None,
         deps: list[str] | None = None) -> dict[str, Any]:
    """Set a unit's state (created if new); demoting a done unit is refused."""
    uid = unit_id(unit)
    if state not in UNIT_STATES:
        raise InvalidInputError(f"unknown unit state {str(state)[:100]!r}; the states are {', '.join(UNIT_STATES)}")
    with bound.lock:
        opened = _run(bound, run)
        opened.unit(uid, state, note=_text(note, "note"), deps=_ids(deps, "deps") if deps is not None else None)
        return _wrote(opened, {"id": opened.run_id, "unit": clip(uid, 256), "state": state})


def phase(bound: BoundStore, run: str, phase: str, state: str) -> dict[str, Any]:
    name = _text(phase, "phase", 256)
    if not name:
        raise InvalidInputError("phase must be a phase name")
    if state not in PHASE_STATES:
        raise InvalidInputError(f"unknown phase state {str(state)[:100]!r}; the states are {', '.join(PHASE_STATES)}")
    with bound.lock:
        opened = _run(bound, run)
        opened.phase(name, state)
        return _wrote(opened, {"id": opened.run_id, "phase": clip(name, 256), "state": state})


def item(bound: BoundStore, run: str, items: object) -> dict[str, Any]:
    """Record open findings (an object, or a list of them); returns their stable ids."""
    check_nesting(items)
    if isinstance(items, list) and len(items) > MAX_IDS:
        raise InvalidInputError(f"at most {MAX_IDS:,} findings in one call")
    with bound.lock:
        opened = _run(bound, run)
        ids = opened.item(items)
        return _wrote(opened, {"id": opened.run_id, "ids": clip_list(ids, 200)})


def resolve(bound: BoundStore, run: str, ids: list[str]) -> dict[str, Any]:
    """Move open findings to the resolved ones; returns the ids actually moved."""
    if not isinstance(ids, list) or len(ids) > MAX_IDS or not all(isinstance(i, str) for i in ids):
        raise InvalidInputError(f"ids must be a list of finding ids (at most {MAX_IDS:,})")
    with bound.lock:
        opened = _run(bound, run)
        moved = opened.resolve(ids)
        return _wrote(opened, {"id": opened.run_id, "resolved": clip_list(moved, 200)})


def validation(bound: BoundStore, run: str, status: str, note: str | None = None) -> dict[str, Any]:
    if not isinstance(status, str) or len(status) > 20:
        raise InvalidInputError("validation requires <green|red> (aliases: pass/ok/fail)")
    with bound.lock:
        opened = _run(bound, run)
        opened.validation(status, _text(note, "note"))
        return _wrote(opened, {"id": opened.run_id, "validation": status})


def finalize(bound: BoundStore, run: str, status: str, result: str | None = None) -> dict[str, Any]:
    """Finish a run; ``done`` is refused while anything is open (the refusal lists what)."""
    if status not in ("done", "needs_attention", "aborted"):
        raise InvalidInputError("finalize requires <done|needs_attention|aborted>")
    with bound.lock:
        opened = _run(bound, run)
        opened.finalize(status, result=_text(result, "result"))
        return _wrote(opened, {"id": opened.run_id, "status": status})


def rerun(bound: BoundStore, run: str, units: list[str], reason: str | None = None) -> dict[str, Any]:
    """Send units back to pending, done ones included, recording why (``resumable rerun``)."""
    ids = list(dict.fromkeys(_ids(units, "units")))
    if not ids:
        raise InvalidInputError("rerun needs unit ids")
    with bound.lock:
        opened = _run(bound, run)
        doc_units = opened.handle.read().get("units")
        have = doc_units if isinstance(doc_units, dict) else {}
        # A pending unit runs next time anyway: another invalidation would only say so twice.
        pending = [u for u in ids if unit_status(have.get(u)) == "pending"]
        rest = [u for u in ids if u not in set(pending)]
        done = opened.rerun(rest, _text(reason, "reason")) if rest else []
        return _wrote(opened, {"id": opened.run_id, "will_run_again": clip_list(done, 200),
                               "already_pending": clip_list(pending, 200)})
