"""A run's recorded step outcomes, read without holding the run's document: how a fresh process
answers a map over many recorded items.

The run's document holds every unit whole (its attempts, stamps, fields): some 2.5 KB of objects per
unit, 250 MB at 100,000 units, of which answering a recorded call needs its state, version and result.
So a process that has not loaded the run yet reads it through the store's ``UnitDigest`` (a runs
directory whose snapshot is current): each unit is decoded and at once cut down to a ``Recorded``,
and the rest of it let go. The results in it are the store's fresh decoding, held by nothing else:
the first map's answers are those objects themselves, not copies.

A digest stands for the run only while the run's files are unchanged (``change_token``), and only
until this process loads the document for something else (executing a step does): then the
document answers, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.core.types import RunDocument, StepError


class Recorded:
    """What answering a call needs of one unit."""

    __slots__ = ("error", "result", "status", "version")

    def __init__(self, status: str, version: Any, result: Any, error: StepError | None) -> None:
        self.status = status  # "done", "failed", or "" (anything else: the call runs)
        self.version = version
        self.result = result  # the unit's result field, when done
        self.error = error  # the recorded error, when failed


OTHER = Recorded("", None, None, None)  # one object for every unit neither done nor failed


def pick(uid: str, unit: Any) -> Recorded:
    """The ``UnitDigest`` pick: every unit is kept (its id answers "is it in the run"), cut down."""
    if unit.__class__ is not dict:
        return OTHER
    status = unit.get("status")
    if status == "done":
        return Recorded("done", unit.get("version"), unit.get("result"), None)
    if status == "failed":
        return Recorded("failed", None, None, recorded_error(unit))
    return OTHER


def recorded_error(unit: Mapping[str, Any]) -> StepError:
    attempts = unit.get("attempts")
    if isinstance(attempts, list):
        for a in reversed(attempts):
            if isinstance(a, dict) and isinstance(a.get("error"), dict):
                error: StepError = a["error"]
                return error
    note = unit.get("note")
    return {"type": "Exception", "message": note if isinstance(note, str) else "failed"}


class Digest:
    """The run as one read found it: its document without units, and a ``Recorded`` per unit."""

    __slots__ = ("head", "token", "units")

    def __init__(self, head: RunDocument, units: dict[str, Recorded], token: object) -> None:
        self.head = head
        self.units = units
        self.token = token  # the store's change token before the read
