"""The verbs as events: each function checks its arguments and returns the event to commit. Pure.

The Python API (``Run``), the low-level verbs and the runner all build their writes here, so a verb's
rules live in one place; ``core.events.apply`` then enforces the checkpoint contract against the
run's current document when the event is committed.
"""

from __future__ import annotations

from resumable.core.model import (
    VALIDATION_ALIASES,
    check_nesting,
    check_phase_state,
    check_run_id,
    check_unit_id,
    check_unit_state,
    is_attempt,
    is_final_state,
    is_launch,
)
from resumable.core.stamps import stamp
from resumable.errors import InvalidInputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, TypeVar

    from resumable.core.types import (
        BeginEvent,
        Event,
        FinalizeEvent,
        InitEvent,
        InvalidateEvent,
        ItemEvent,
        Launch,
        MapEvent,
        PhaseEvent,
        ResolveEvent,
        UnitEvent,
        ValidationEvent,
    )

    E = TypeVar("E", bound=Event)

FINAL_STATUSES = ("done", "needs_attention", "aborted")


def stamp_batch(events: Sequence[Event]) -> bool:
    """Ready a batch for a store's commit: every event stamped (those built without a time get
    now), and an ``init`` alone in its batch. Returns whether the batch is an init. The same rule
    for every store."""
    init = events[0].get("t") == "init"
    if init and len(events) > 1:
        raise InvalidInputError("an init event must be committed on its own")
    for event in events:
        if not isinstance(event.get("at"), str):
            event["at"] = stamp()
    return init


def validate_launch(launch: object) -> Launch:
    """checkpoint.mjs's ``--launch`` checks: a plain object with a non-blank ``scriptPath`` and, when
    present, an object ``args``; or the runner's ``{"kind": "resumable", "argv": [...]}``."""
    if not is_launch(launch):
        kind = "null" if launch is None else "an array" if isinstance(launch, list) else (
            type(launch).__name__)
        raise InvalidInputError(f"--launch must be a JSON object {{ scriptPath, args }} — got {kind}")
    if launch.get("kind") == "resumable":
        argv = launch.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise InvalidInputError("--launch.argv must be a non-empty array of strings")
        return launch
    script = launch.get("scriptPath")
    if not isinstance(script, str) or not script.strip():
        raise InvalidInputError(
            "--launch.scriptPath must be a non-empty string (the script that resumes this run)"
        )
    if "args" in launch and not isinstance(launch["args"], dict):
        raise InvalidInputError("--launch.args must be a JSON object when present")
    return launch


def _checked(event: E) -> E:
    check_nesting(event)
    return event


def init(
    task: str,
    run_id: str,
    *,
    units: Sequence[str] = (),
    launch: Mapping[str, Any] | None = None,
    required_phases: Sequence[str] = (),
    require_validation: bool = False,
) -> InitEvent:
    if not isinstance(task, str) or not task.strip():
        raise InvalidInputError('init requires a task description (--task "<desc>")')
    check_run_id(run_id)
    for u in units:
        check_unit_id(u)
    event: InitEvent = {"t": "init", "id": run_id, "task": task, "units": list(units)}
    if launch is not None:
        event["launch"] = validate_launch(launch)
    if required_phases:
        event["requiredPhases"] = list(required_phases)
    if require_validation:
        event["requireValidation"] = True
    return _checked(event)


def begin(launch: Mapping[str, Any] | None = None) -> BeginEvent:
    """(Re)open a run for a new working session: status running, launch recorded."""
    event: BeginEvent = {"t": "begin"}
    if launch is not None:
        event["launch"] = validate_launch(launch)
    return _checked(event)


def unit(
    unit_id: str,
    state: str,
    *,
    note: str | None = None,
    deps: Sequence[str] | None = None,
    attempt: Mapping[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    shallow: bool = False,
) -> UnitEvent:
    """A unit's transition. ``shallow``: the caller built ``attempt`` and ``fields`` itself, a few
    levels deep at most (the runner's attempt records and fingerprints), so the walk that refuses
    values nested too deeply is skipped: it was the largest cost of building a step's two records."""
    check_unit_id(unit_id)
    event: UnitEvent = {"t": "unit", "unit": unit_id, "state": check_unit_state(state)}
    if note is not None:
        event["note"] = note
    if deps is not None:
        event["deps"] = [check_unit_id(d) for d in deps]
    if attempt is not None:
        if not is_attempt(attempt):
            raise InvalidInputError("an attempt must be an object with an integer 'n'")
        event["attempt"] = attempt
    if fields is not None:
        event["fields"] = fields
    if shallow or (attempt is None and fields is None and (note is None or isinstance(note, str))):
        # Nothing here can nest (deps are checked strings): the walk is skipped on the path every
        # transition takes.
        return event
    return _checked(event)


def invalidate(unit_id: str, reason: str) -> InvalidateEvent:
    """The only way a done unit goes back to pending: an explicit record of why."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInputError("an invalidation needs a reason")
    event: InvalidateEvent = {"t": "invalidate", "unit": check_unit_id(unit_id), "reason": reason}
    return _checked(event)


def phase(name: str, state: str) -> PhaseEvent:
    if not isinstance(name, str) or not name:
        raise InvalidInputError("phase requires <phase> <pending|running|done|blocked|skipped>")
    event: PhaseEvent = {"t": "phase", "phase": name, "state": check_phase_state(state)}
    return _checked(event)


def item(items: object) -> ItemEvent:
    event: ItemEvent = {"t": "item", "items": items}
    return _checked(event)


def resolve(ids: Sequence[str]) -> ResolveEvent:
    event: ResolveEvent = {"t": "resolve", "ids": [str(i) for i in ids]}
    return _checked(event)


def validation(status: str, note: str | None = None) -> ValidationEvent:
    canonical = VALIDATION_ALIASES.get(status)
    if canonical is None:
        raise InvalidInputError("validation requires <green|red> (aliases: pass/ok/fail)")
    event: ValidationEvent = {"t": "validation", "status": canonical}
    if note is not None:
        event["note"] = note
    return _checked(event)


def finalize(status: str, result: str | None = None) -> FinalizeEvent:
    if not is_final_state(status):
        raise InvalidInputError("finalize requires <done|needs_attention|aborted>")
    event: FinalizeEvent = {"t": "finalize", "status": status}
    if result is not None:
        event["result"] = result
    return _checked(event)


def map_started(step: str, units: int, done: int = 0, rate: tuple[str, float] | None = None) -> MapEvent:
    """A durable step's ``run.map`` began: the step will have ``units`` units when it ends, ``done``
    of them are done now (the true total and the ETA of ``status``); ``rate``: its limit as given
    and its seconds between starts."""
    event: MapEvent = {"t": "map", "step": step, "units": units, "done": done}
    if rate is not None:
        event["rate"], event["interval"] = rate
    return event

