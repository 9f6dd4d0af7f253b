"""Code written against the run model's types, checked by mypy (pyproject's ``[tool.mypy] files``).

It must type-check as it is, without a single ``type: ignore``: ``test_model_types.py`` runs mypy on it,
and on the misspellings next to it, which must fail.
"""

from __future__ import annotations

from resumable.core.types import Attempt, Event, FinalizeEvent, RunDocument, RunState, Unit, UnitEvent, UnitState


def describe(event: Event) -> str:
    """Narrowing on ``t`` gives each kind's own keys."""
    if event["t"] == "unit":
        return f"{event['unit']} -> {event['state']}"
    if event["t"] == "invalidate":
        return f"{event['unit']} invalidated: {event['reason']}"
    if event["t"] == "phase":
        return f"phase {event['phase']} {event['state']}"
    if event["t"] == "finalize":
        return f"finalized {event['status']}"
    if event["t"] == "init":
        return f"init {event['id']} with {len(event['units'])} unit(s)"
    return event["t"]


def retried(unit_id: str, n: int) -> UnitEvent:
    attempt: Attempt = {"n": n, "status": "failed", "exitCode": 1, "duration": 0.5}
    return {"t": "unit", "unit": unit_id, "state": "pending", "attempt": attempt}


def finished() -> FinalizeEvent:
    return {"t": "finalize", "status": "needs_attention", "result": "1 step failed"}


def states(doc: RunDocument) -> dict[str, UnitState]:
    units: dict[str, Unit] = doc["units"]
    return {uid: unit["status"] for uid, unit in units.items()}


def batch() -> list[Event]:
    return [retried("build", 2), finished(), {"t": "resolve", "ids": ["step-failed:build"]}]


def from_the_verbs() -> list[Event]:
    """What ``core.verbs`` builds is typed by kind: its keys are checked where it is read."""
    from resumable.core import verbs

    done = verbs.unit("build", "done", note="ok")
    state: UnitState = done["state"]
    closing = verbs.finalize("done", f"{done['unit']} {state}")
    return [done, closing, verbs.invalidate("build", "the command changed"), verbs.phase("test", "running")]


def read_state(path: str) -> RunState:
    """A store hands out the document typed: ``core.model.is_document`` guards its load path."""
    from resumable.store import open_path

    return open_path(path).read()["status"]


def checked(value: dict[str, object]) -> str | None:
    """``is_document`` narrows a decoded value to a ``RunDocument``."""
    from resumable.core.model import is_document

    return value["task"] if is_document(value) else None
