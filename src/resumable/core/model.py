"""The run document: states, stamps, ids, and schema v1/v2 handling.

The document is a plain ``dict`` (it is what `cat`, `jq` and ulpi's tools read), a superset of
ulpi's v2 status document. Everything here is pure and null-safe: a hand-edited file may hold a
``null`` unit, a string where an object belongs, or a missing key, and no reader may crash on it.
"""

from __future__ import annotations

import time

from resumable.errors import CorruptRunError, InvalidInputError, NewerFormatError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any, Final, NoReturn, TypeGuard

    from resumable.core.types import (
        Attempt,
        FinalState,
        Item,
        Launch,
        Phase,
        PhaseState,
        RunDocument,
        Summary,
        Unit,
        UnitState,
        ValidationStatus,
    )

SCHEMA_VERSION: Final = 2

RUN_STATES: Final = ("initializing", "running", "done", "needs_attention", "aborted")
# Live to init and gc: a run in one of these states is resumed, never re-initialised or archived.
LIVE_RUN_STATES: Final = frozenset({"initializing", "running", "needs_attention"})
# Being worked on right now (a tuple: `x in ACTIVE_RUN_STATES` must not hash a hand-edited list).
ACTIVE_RUN_STATES: Final = ("running", "initializing")
TERMINAL_RUN_STATES: Final = frozenset({"done", "aborted"})
FINAL_STATES: Final = ("done", "needs_attention", "aborted")

# ulpi's five unit states plus the runner's outcomes.
UNIT_STATES: Final = (
    "pending",
    "in_progress",
    "done",
    "blocked",
    "dep_blocked",
    "failed",
    "timeout",
    "interrupted",
)
# States that stamp a unit's finishedAt (ulpi stamps done/blocked/dep_blocked).
UNIT_FINISH_STATES: Final = frozenset({"done", "blocked", "dep_blocked", "failed", "timeout"})
PHASE_STATES: Final = ("pending", "running", "done", "blocked", "skipped")
PHASE_FINISH_STATES: Final = frozenset({"done", "blocked", "skipped"})
VALIDATION_ALIASES: Final[dict[str, ValidationStatus]] = {
    "green": "green",
    "pass": "green",
    "ok": "green",
    "red": "red",
    "fail": "red",
}

# Run ids: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ without "..". Checked with sets, not `re`, whose
# import costs a CLI call more than the check saves in clarity.
_ID_FIRST: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_REST: Final = _ID_FIRST | frozenset("._-")
MAX_RUN_ID: Final = 128
MAX_UNIT_ID: Final = 256

# Unit keys the runner may not overwrite through free-form fields: they carry the contract.
RESERVED_UNIT_KEYS: Final = frozenset(
    {"status", "dependsOn", "note", "createdAt", "updatedAt", "startedAt", "finishedAt",
     "attempts", "invalidations"}
)


def default_run_id(at: float | None = None) -> str:
    """ulpi's default id: ``run-2026-07-18-101010Z``."""
    return time.strftime("run-%Y-%m-%d-%H%M%SZ", time.gmtime(time.time() if at is None else at))


def check_run_id(run_id: str) -> str:
    if (
        not isinstance(run_id, str)
        or not 0 < len(run_id) <= MAX_RUN_ID
        or run_id[0] not in _ID_FIRST
        or not _ID_REST.issuperset(run_id)
        or ".." in run_id
    ):
        raise InvalidInputError(
            f"invalid run id {run_id!r}: use 1-128 of A-Z a-z 0-9 . _ - "
            "starting with a letter or digit, without '..'"
        )
    return run_id


def check_unit_id(unit_id: str) -> str:
    if not isinstance(unit_id, str) or not unit_id:
        raise InvalidInputError("unit id must be a non-empty string")
    if len(unit_id) > MAX_UNIT_ID:
        raise InvalidInputError(f"unit id is {len(unit_id)} characters; the limit is {MAX_UNIT_ID}")
    # split() with no argument splits on exactly what isspace() calls whitespace, in C.
    if "," in unit_id or unit_id.split() != [unit_id]:
        raise InvalidInputError(
            f"unit id {unit_id!r} contains commas/whitespace — use a single token like 'task-3'"
        )
    return unit_id


def is_unit_state(state: object) -> TypeGuard[UnitState]:
    return isinstance(state, str) and state in UNIT_STATES


def is_phase_state(state: object) -> TypeGuard[PhaseState]:
    return isinstance(state, str) and state in PHASE_STATES


def is_final_state(state: object) -> TypeGuard[FinalState]:
    return isinstance(state, str) and state in FINAL_STATES


def is_launch(value: object) -> TypeGuard[Launch]:
    """Whether a ``--launch`` value is an object; ``core.verbs.validate_launch`` checks its keys."""
    return isinstance(value, dict)


def is_attempt(value: object) -> TypeGuard[Attempt]:
    """Whether a value can be an attempt record: an object with an integer ``n``."""
    return isinstance(value, dict) and isinstance(value.get("n"), int)


def is_item(value: object) -> TypeGuard[Item]:
    """Whether a value of an ``item`` event is a finding (a JSON object: its keys are the finder's
    own, and apply gives it an ``id`` and an ``at``) rather than a bare value, kept as it is."""
    return isinstance(value, dict)


def check_unit_state(state: str) -> UnitState:
    if not is_unit_state(state):
        raise InvalidInputError(f"unknown unit state {state!r}: use one of {'|'.join(UNIT_STATES)}")
    return state


def check_phase_state(state: str) -> PhaseState:
    if not is_phase_state(state):
        raise InvalidInputError(
            f"unknown phase state {state!r}: use one of {'|'.join(PHASE_STATES)}"
        )
    return state


def split_csv(value: str | None) -> list[str]:
    """ulpi's csv rule: split on ',', trim each part, drop empty parts."""
    if not value:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def new_document(
    run_id: str,
    task: str,
    units: list[str],
    at: str,
    *,
    launch: Launch | None = None,
    required_phases: list[str] | None = None,
    require_validation: bool = False,
) -> RunDocument:
    """A fresh v2 document in ulpi's key order."""
    doc: RunDocument = {
        "schemaVersion": SCHEMA_VERSION,
        "id": run_id,
        "task": task,
        "status": "running",
        "createdAt": at,
        "updatedAt": at,
        "phases": {},
        "units": {
            u: {"status": "pending", "dependsOn": [], "note": "", "createdAt": at, "updatedAt": at}
            for u in units
        },
        "openItems": [],
        "resolvedItems": [],
        "result": None,
    }
    if required_phases:
        doc["requiredPhases"] = list(required_phases)
    if require_validation:
        doc["requireValidation"] = True
    if launch is not None:
        doc["launch"] = launch
    return doc


def upgrade(doc: RunDocument) -> None:
    """Add-only v1 -> v2 upgrade, done by every write (never by a read), in place."""
    version = doc.get("schemaVersion")
    if type(version) is int and version == SCHEMA_VERSION and type(doc.get("openItems")) is list \
            and "resolvedItems" in doc:
        return  # already current: every record replayed and every write after the first ends here
    if doc.get("openItems") is None:
        # ulpi's `openItems ??= []`: a null openItems is replaced too (setdefault left a null
        # in place and `item`/`resolve` then crashed iterating it).
        doc["openItems"] = []
    if "resolvedItems" not in doc:
        doc["resolvedItems"] = []
    version = doc.get("schemaVersion")
    if isinstance(version, str):
        # ulpi left a string "2" a string; a number is what every reader compares against.
        try:
            version = int(version)
        except ValueError:
            version = None
    if not isinstance(version, int) or isinstance(version, bool) or version < SCHEMA_VERSION:
        doc["schemaVersion"] = SCHEMA_VERSION
    else:
        doc["schemaVersion"] = version


_SHAPES: Final = (
    ("units", dict, "an object"),
    ("phases", dict, "an object"),
    ("resolvedItems", list, "an array"),
    ("status", str, "a string"),
    ("id", str, "a string"),
    ("task", str, "a string"),
)


# How deep a value written through the API may nest. Deeper values are refused at the door:
# Python 3.11's JSON scanner stops near 1,000 levels while 3.13's reads thousands, so a run
# written on one version could otherwise be unreadable on the other, and the code that hashes
# items recurses.
MAX_NESTING = 200


def check_nesting(value: object) -> None:
    """InvalidInputError if ``value`` nests deeper than MAX_NESTING (iteratively: a recursive
    walk would fail on exactly the values it is meant to refuse)."""
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = []
    if isinstance(value, (dict, list)):
        stack.append((value, 1))
    while stack:
        current, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InvalidInputError(
                f"JSON value nested deeper than {MAX_NESTING} levels — flatten it")
        for child in current.values() if isinstance(current, dict) else current:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


def newer_version(doc: Mapping[str, Any]) -> int | float | None:
    """The document's schemaVersion when it is newer than this resumable understands, else None.

    A digit string counts as its number (ulpi left ``"2"`` a string); any other malformed
    version is not "newer": reads show it and ``shape_problem`` refuses writes to it."""
    version = doc.get("schemaVersion")
    if isinstance(version, str) and version.isdigit() and len(version) < 6:
        version = int(version)
    if isinstance(version, (int, float)) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return version
    return None


def refuse_newer(doc: Mapping[str, Any], run: str | None = None) -> None:
    """NewerFormatError when a newer resumable wrote ``doc``: reading it as this version's document
    could misread what the newer format means (a state, a key), and a write could destroy it.
    ``run`` names the run (default: the document's id)."""
    version = newer_version(doc)
    if version is None:
        return
    if run is None:
        rid = doc.get("id")
        run = rid if isinstance(rid, str) and rid else "?"
    shown = str(version)
    if len(shown) > 20:
        shown = shown[:20] + "…"  # a hand-edited 1e40 must not make the line run on
    raise NewerFormatError(
        f"run {run[:MAX_RUN_ID]} has schemaVersion {shown}, newer than this resumable"
        f" understands ({SCHEMA_VERSION}); upgrade resumable")


def refuse_unreadable(doc: Mapping[str, Any], run: str | None = None, where: str | None = None) -> RunDocument:
    """What every reader of a stored document calls (the stores' load paths): the document, typed, when
    it can be read (``is_document``), else ``unreadable``'s one-line error. Shown as it is, such a
    document reads as a healthy run with nothing to do (``get`` prints it, ``resume`` answers "nothing
    to do", both exit 0) while every write to it is refused. ``where`` names the files that hold it,
    for the message."""
    if not is_document(doc):
        unreadable(doc, run, where)
    return doc


def unreadable(doc: Mapping[str, Any], run: str | None = None, where: str | None = None) -> NoReturn:
    """The error for a document ``is_document`` refused: NewerFormatError for a newer resumable's
    (``refuse_newer``), else CorruptRunError naming what is malformed (``units`` a number, ``phases`` a
    string: ``shape_problem``)."""
    refuse_newer(doc, run)
    if run is None:
        rid = doc.get("id")
        run = rid if isinstance(rid, str) and rid else "?"
    raise CorruptRunError(f"{where + ': ' if where else ''}run {run[:MAX_RUN_ID]} is malformed:"
                          f" {_container_problem(doc)} — fix its document, or move it aside")


def is_document(doc: Mapping[str, Any]) -> TypeGuard[RunDocument]:
    """Whether ``doc`` can be read as a run document: not a newer resumable's (``newer_version``), its
    containers of the right type (``shape_problem``). The stores call it once per load, at their
    boundary; past it the document is a ``RunDocument`` to the type checker, and is still read
    null-safe (a null unit, a missing key)."""
    return newer_version(doc) is None and _container_problem(doc) is None


def is_stored(value: object) -> TypeGuard[RunDocument]:
    """Whether a decoded value can be held as a run's document: an object. What the stores hold and
    ``core.events.apply`` works on is typed ``RunDocument``, the shape resumable writes, and read
    null-safe whatever a hand edit left in it; the readers' check is ``is_document``."""
    return isinstance(value, dict)


def is_head(head: Mapping[str, Any]) -> TypeGuard[RunDocument]:
    """``is_document`` for a document read without its units (``store.backend.UnitDigest``): judged
    as if they were an empty object."""
    return is_document({**head, "units": {}})


def shape_problem(doc: Mapping[str, Any]) -> str | None:
    """Why a document cannot be read or written to, or None. A document whose containers have
    the wrong type is refused rather than "repaired", which would silently drop whatever the
    hand-edited field held. A null container, or a null or malformed *unit*, is fine: readers show
    it, and the unit verb replaces it, as ulpi's checkpoint.mjs did.

    A document a newer resumable wrote raises NewerFormatError (``refuse_newer``) instead, before
    any shape is looked at: its shapes are the newer format's, and the remedy is an upgrade, not
    an edit of the document."""
    refuse_newer(doc)
    return _container_problem(doc)


def _container_problem(doc: Mapping[str, Any]) -> str | None:
    if "units" not in doc and "status" not in doc:
        return "it is not a run document (no units, no status)"
    for key, kind, name in _SHAPES:
        value = doc.get(key)
        if value is not None and not isinstance(value, kind):
            return f"'{key}' is {json_type_name(value)}, not {name}"
    open_items = doc.get("openItems")
    if open_items is not None and not isinstance(open_items, list):
        return f"'openItems' is {json_type_name(open_items)}, not an array"
    version = doc.get("schemaVersion")
    if isinstance(version, str) and version.isdigit() and len(version) < 6:
        version = int(version)
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        return f"'schemaVersion' is {json_type_name(version)}, not a whole number"
    return None


def json_type_name(value: object) -> str:
    """'an array', 'a string', ... for one-line messages about a JSON value of the wrong type."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


def units_of(doc: Mapping[str, Any]) -> dict[str, Unit]:
    """The document's units ({} when it has none); a value may still be whatever a hand edit left
    (null, a string): read each null-safe (``unit_status``)."""
    units = doc.get("units")
    return units if isinstance(units, dict) else {}


def phases_of(doc: Mapping[str, Any]) -> dict[str, Phase]:
    phases = doc.get("phases")
    return phases if isinstance(phases, dict) else {}


def list_of(doc: Mapping[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    return value if isinstance(value, list) else []


def unit_status(unit: object) -> str | None:
    """A unit's status, or None for a malformed unit (null, non-object, missing status)."""
    if isinstance(unit, dict):
        status = unit.get("status")
        if isinstance(status, str):
            return status
    return None


def unit_deps(unit: object) -> list[str]:
    if isinstance(unit, dict):
        deps = unit.get("dependsOn")
        if isinstance(deps, list):
            return [d for d in deps if isinstance(d, str)]
    return []


def next_attempt_number(unit: object) -> int:
    """The number the unit's next attempt gets: one above the highest ``n`` among its recorded
    attempts (1 for a unit with none). Null-safe: a malformed attempt, or a boolean ``n``, counts
    for nothing."""
    attempts = unit.get("attempts") if isinstance(unit, dict) else None
    if not isinstance(attempts, list):
        return 1
    ns = [a.get("n") for a in attempts if isinstance(a, dict)]
    return max([n for n in ns if type(n) is int], default=0) + 1


def iter_units(doc: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(unit id, status or None if malformed) in document order."""
    for uid, unit in units_of(doc).items():
        yield uid, unit_status(unit)


def summary(doc: Mapping[str, Any]) -> Summary:
    """ulpi's ``get --summary`` shape, null-safe."""
    blocked: list[str] = []
    dep_blocked: list[str] = []
    in_progress: list[str] = []
    total = done = 0
    for uid, status in iter_units(doc):
        total += 1
        if status == "done":
            done += 1
        elif status == "blocked":
            blocked.append(uid)
        elif status == "dep_blocked":
            dep_blocked.append(uid)
        elif status == "in_progress":
            in_progress.append(uid)
    current = doc.get("currentPhase")
    return {
        "id": doc.get("id"),
        "status": doc.get("status"),
        "task": doc.get("task"),
        "currentPhase": current if current is not None else None,
        "total": total,
        "done": done,
        "blocked": blocked,
        "dep_blocked": dep_blocked,
        "in_progress": in_progress,
        "updatedAt": doc.get("updatedAt"),
    }
