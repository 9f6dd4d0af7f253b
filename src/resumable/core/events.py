"""The journal's events and ``apply(doc, event)``, which enforces the checkpoint contract.

An event is a plain dict with a type ``t`` and a stamp ``at`` (taken by the caller, so apply is
deterministic). ``apply`` checks everything first and raises ``RefusedError`` or
``InvalidInputError`` before touching the document, then mutates it in place: copying a
100,000-unit document per transition would make every write O(N), which is what the journal
exists to avoid. Callers that need the old value keep a deep copy themselves.

    init        {id, task, units, launch?, requiredPhases?, requireValidation?}
    base        {doc, reason}            adopt a whole document (ulpi's event log, an external edit)
    begin       {launch?, clock?}        (re)open a run for a new runner session
    unit        {unit, state, note?, deps?, attempt?, fields?}  (only fields, state as it was: stamps kept)
    invalidate  {unit, reason}           the only way a done unit goes back to pending
    phase       {phase, state}
    item        {items}
    resolve     {ids}
    validation  {status, note?}
    finalize    {status, result?, clock?}
    map         {step, units, done?, rate?, interval?}  a durable step's run.map began: its true total (``maps``)

``clock`` (optional) is the event's time with milliseconds. A runner session runs from its ``begin``
to its ``finalize``; the document sums the sessions in ``ranSeconds`` (``sessionStartedAt`` while
one is open), so "how long did this run take" counts the runner's time, never the idle time
between invocations. A session that never finalized (a killed runner) counts up to its last write.
"""

from __future__ import annotations

from resumable.core import jsonio
from resumable.core.model import (
    LIVE_RUN_STATES,
    PHASE_FINISH_STATES,
    RESERVED_UNIT_KEYS,
    UNIT_FINISH_STATES,
    check_phase_state,
    check_unit_id,
    check_unit_state,
    is_item,
    new_document,
    unit_status,
    units_of,
    upgrade,
)
from resumable.errors import InvalidInputError, RefusedError

_INF = float("inf")


def _finite(x: float) -> bool:
    """math.isfinite without importing math (a low-level verb's start-up counts every import)."""
    return x == x and x not in (_INF, -_INF)


TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeGuard

    from resumable.core.types import (
        BaseEvent,
        BeginEvent,
        Event,
        FinalizeEvent,
        FinalValidation,
        InitEvent,
        InvalidateEvent,
        Item,
        ItemEvent,
        MapEvent,
        MapTotal,
        Phase,
        PhaseEvent,
        ResolveEvent,
        RunDocument,
        UnitEvent,
        ValidationEvent,
    )

    # The document as resumable writes it (``core.types``); what a hand edit left may be anything,
    # so it is read null-safe whatever its type says.
    Doc = RunDocument
    Output = list[str] | None  # what the verb prints: item ids, resolved ids, or nothing


# --- stable item ids -------------------------------------------------------------------------


def _js_normal(value: Any) -> Any:
    """Make Python's JSON match JavaScript's JSON.stringify for hashing: integral floats print
    as integers (1.0 -> 1) and object keys sort by UTF-16 code units, as JS's default sort does."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return {k: _js_normal(value[k]) for k in keys}
    if isinstance(value, list):
        return [_js_normal(v) for v in value]
    # Only below 1e21: JS prints 1e21 and up in exponent form ("1e+21"), as Python's repr does.
    if isinstance(value, float) and _finite(value) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def item_id(item: Mapping[str, Any]) -> str:
    """``item["id"]`` if it is a non-blank string, else ``f-`` + 12 hex of the sha1 of the
    canonical JSON of the item without ``at`` and ``id`` (golden: {"a":1} -> f-9f89c740ceb4)."""
    given = item.get("id")
    if isinstance(given, str) and given.strip():
        return given
    body = {k: v for k, v in item.items() if k not in ("at", "id")}
    import hashlib  # here, not at the top: most CLI calls never hash

    # Keys are pre-sorted by _js_normal; the encoder prints no spaces and raw UTF-8, C1 controls
    # included, as JSON.stringify does, and prints integers of any size (orjson stops at 64 bits).
    canonical = jsonio.canonical(_js_normal(body))
    return "f-" + hashlib.sha1(canonical).hexdigest()[:12]


# --- apply -----------------------------------------------------------------------------------


def _need(event: Mapping[str, object], key: str) -> Any:
    """``event[key]``, or a one-line InvalidInputError: a stored event may lack what its type says
    it has (a hand-written journal line, a newer writer's)."""
    if key not in event:
        raise InvalidInputError(f"event {event.get('t')!r} lacks {key!r}")
    return event[key]


def _apply_init(doc: Doc | None, ev: InitEvent) -> tuple[Doc, Output]:
    # str check first: a hand-edited status may be a list, which `in frozenset` cannot hash.
    if doc is not None and isinstance(doc.get("status"), str) and doc["status"] in LIVE_RUN_STATES:
        raise RefusedError(
            f"run {doc.get('id')} is a LIVE checkpoint (status={doc.get('status')}). Resume it — do"
            " not re-init. Finalize it first if it is really over."
        )
    units = list(ev.get("units") or [])
    for u in units:
        check_unit_id(u)
    new = new_document(
        _need(ev, "id"),
        _need(ev, "task"),
        list(dict.fromkeys(units)),
        ev["at"],
        launch=ev.get("launch"),
        required_phases=ev.get("requiredPhases"),
        require_validation=bool(ev.get("requireValidation")),
    )
    return new, None


def _apply_base(doc: Doc | None, ev: BaseEvent) -> tuple[Doc, Output]:
    base: Doc = _need(ev, "doc")  # judged by its readers, as any stored document
    if not isinstance(base, dict):
        raise InvalidInputError("base event needs an object document")
    return base, None


def _apply_unit(doc: Doc, ev: UnitEvent) -> Output:
    uid = check_unit_id(_need(ev, "unit"))
    state = check_unit_state(_need(ev, "state"))
    at = ev["at"]
    units = doc.get("units")
    if not isinstance(units, dict):
        units = None
    unit = units.get(uid) if units is not None else None
    if unit_status(unit) == "done" and state != "done":
        raise RefusedError(
            f"unit '{uid}' is already done — refusing to demote it (resume must skip done units)"
        )
    deps = ev.get("deps")
    if deps is not None:
        deps = [check_unit_id(d) for d in deps]
        if uid in deps:
            # It could never become eligible: it would wait for itself forever.
            raise InvalidInputError(f"unit '{uid}' cannot depend on itself — drop it from --deps")
    attempt = ev.get("attempt")
    if attempt is not None and not (isinstance(attempt, dict) and isinstance(attempt.get("n"), int)):
        raise InvalidInputError("an attempt must be an object with an integer 'n'")
    fields = ev.get("fields")
    if fields is not None:
        if not isinstance(fields, dict):
            raise InvalidInputError("unit fields must be an object")
        clash = sorted(set(fields) & RESERVED_UNIT_KEYS)
        if clash:
            raise InvalidInputError(f"unit fields may not set {', '.join(clash)}")
    # A restatement of a unit's state that only sets fields (the runner marking a step removed
    # from its job file, or back) is no new start or finish: its stamps stay as they were.
    restated = bool(fields) and attempt is None and deps is None and ev.get("note") is None \
        and isinstance(unit, dict) and unit.get("status") == state
    # Checks are over; mutate.
    upgrade(doc)
    if units is None:
        units = doc["units"] = {}
    if not isinstance(unit, dict):
        # A missing unit is created; a malformed one (null, a string) is replaced, never crashed on.
        unit = {"status": "pending", "dependsOn": [], "note": "", "createdAt": at}
        units[uid] = unit
    unit["status"] = state
    note = ev.get("note")
    if note is not None:
        unit["note"] = note
    if deps is not None:
        unit["dependsOn"] = deps
    if not restated:
        if state == "in_progress":
            unit.setdefault("startedAt", at)
            # A unit re-entering work is no longer finished (ulpi's checkpoint.mjs left a stale finishedAt).
            unit.pop("finishedAt", None)
        elif state == "pending":
            unit.pop("finishedAt", None)
        if state in UNIT_FINISH_STATES:
            unit["finishedAt"] = at
    if attempt is not None:
        attempts = unit.get("attempts")
        if not isinstance(attempts, list):
            # Made holding its first attempt: a list grown by append keeps room for three more,
            # and a unit's first attempt is nearly always its only one.
            unit["attempts"] = [attempt.copy()]
        else:
            _put_attempt(attempts, attempt)
    if fields:
        own: Any = fields  # a caller's own keys, which ``Unit`` cannot list
        unit.update(own)
    unit["updatedAt"] = at
    doc["updatedAt"] = at
    return None


def _put_attempt(attempts: list[Any], attempt: Any) -> None:
    for i, old in enumerate(attempts):
        if isinstance(old, dict) and old.get("n") == attempt["n"]:
            if old.keys() <= attempt.keys():
                # The usual case (a finished attempt restates its start): a copy sized for all its
                # keys, where growing the old one would reallocate it larger still.
                attempts[i] = attempt.copy()
            else:
                old.update(attempt)  # the document's own dict (copied in below)
            return
    attempts.append(attempt.copy())


def _apply_invalidate(doc: Doc, ev: InvalidateEvent) -> Output:
    uid = check_unit_id(_need(ev, "unit"))
    reason = _need(ev, "reason")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInputError("an invalidation needs a reason")
    unit = units_of(doc).get(uid)
    if not isinstance(unit, dict):
        raise InvalidInputError(f"no unit '{uid}' to invalidate")
    at = ev["at"]
    upgrade(doc)
    history = unit.get("invalidations")
    if not isinstance(history, list):
        history = unit["invalidations"] = []
    history.append({"at": at, "reason": reason, "from": unit.get("status")})
    unit["status"] = "pending"
    unit.pop("finishedAt", None)
    unit["updatedAt"] = at
    doc["updatedAt"] = at
    return None


def _apply_phase(doc: Doc, ev: PhaseEvent) -> Output:
    name = _need(ev, "phase")
    if not isinstance(name, str) or not name:
        raise InvalidInputError("phase name must be a non-empty string")
    state = check_phase_state(_need(ev, "state"))
    at = ev["at"]
    upgrade(doc)
    phases: dict[str, Phase] | None = doc.get("phases")
    if not isinstance(phases, dict):
        phases = doc["phases"] = {}
    prev = phases.get(name)
    # A hand edit may have left anything there: only an object is carried over.
    phase: Phase = prev.copy() if isinstance(prev, dict) else {"status": state}
    phase["status"] = state
    phase["updatedAt"] = at
    if state == "running":
        phase.setdefault("startedAt", at)
        doc["currentPhase"] = name
    if state in PHASE_FINISH_STATES:
        phase["finishedAt"] = at
    phases[name] = phase
    doc["updatedAt"] = at
    return None


def _check_open_items(doc: Doc) -> None:
    # A hand-edited openItems that is neither absent/null (upgrade adds []) nor an array would
    # crash item/resolve with a TypeError; refuse it in one line before touching anything.
    value = doc.get("openItems")
    if value is not None and not isinstance(value, list):
        raise InvalidInputError(
            f"openItems is a {type(value).__name__}, not an array — fix the run file (or set it to [])"
        )


def _apply_item(doc: Doc, ev: ItemEvent) -> Output:
    raw = _need(ev, "items")
    items = raw if isinstance(raw, list) else [raw]
    _check_open_items(doc)
    at = ev["at"]
    upgrade(doc)
    open_items = doc["openItems"]
    index = {
        it["id"]: i
        for i, it in enumerate(open_items)
        if isinstance(it, dict) and isinstance(it.get("id"), str)
    }
    ids: list[str] = []
    for it in items:
        if not is_item(it):
            open_items.append(it)  # kept as it is: readers show it, as ulpi's checkpoint.mjs does
            continue
        iid = item_id(it)
        if iid in index:
            prev = open_items[index[iid]]
            entry: Item = {"at": prev.get("at") or at}
            entry.update(it)
            entry["id"] = iid
            open_items[index[iid]] = entry
        else:
            entry = {"at": at}
            entry.update(it)
            entry["id"] = iid
            index[iid] = len(open_items)
            open_items.append(entry)
        if iid not in ids:
            ids.append(iid)
    doc["updatedAt"] = at
    return ids


def _apply_resolve(doc: Doc, ev: ResolveEvent) -> Output:
    wanted = [i for i in _need(ev, "ids") if isinstance(i, str)]
    _check_open_items(doc)
    at = ev["at"]
    upgrade(doc)
    open_items = doc["openItems"]
    resolved = doc.get("resolvedItems")
    if not isinstance(resolved, list):
        resolved = doc["resolvedItems"] = []
    moved: list[str] = []
    for rid in wanted:
        for i, it in enumerate(open_items):
            if isinstance(it, dict) and it.get("id") == rid:
                entry: Item = it.copy()
                entry["resolvedAt"] = at
                resolved.append(entry)
                del open_items[i]
                moved.append(rid)
                break
    doc["updatedAt"] = at
    return moved


def _apply_validation(doc: Doc, ev: ValidationEvent) -> Output:
    status = _need(ev, "status")
    if status not in ("green", "red"):
        raise InvalidInputError("validation requires <green|red> (aliases: pass/ok/fail)")
    at = ev["at"]
    upgrade(doc)
    fv: FinalValidation = {"status": status, "at": at}
    note = ev.get("note")
    if note is not None:
        fv["note"] = note
    doc["finalValidation"] = fv
    doc["updatedAt"] = at
    return None


def _apply_finalize(doc: Doc, ev: FinalizeEvent) -> Output:
    status = _need(ev, "status")
    if status not in ("done", "needs_attention", "aborted"):
        raise InvalidInputError("finalize requires <done|needs_attention|aborted>")
    if status == "done":
        from resumable.core.finalize import finalize_done_reasons  # only finalize needs them

        reasons = finalize_done_reasons(doc)
        if reasons:
            raise RefusedError(
                f"refusing finalize done — {'; '.join(reasons)} (use needs_attention)"
            )
    at = ev["at"]
    upgrade(doc)
    _close_session(doc, ev.get("clock") or at)
    doc["status"] = status
    doc["finishedAt"] = at
    if ev.get("result") is not None:
        doc["result"] = ev["result"]
    doc["updatedAt"] = at
    return None


def _close_session(doc: Doc, end: object) -> None:
    from resumable.core.stamps import parse_stamp

    start = parse_stamp(doc.pop("sessionStartedAt", None))
    stop = parse_stamp(end)
    if start is None or stop is None:
        return
    before = doc.get("ranSeconds")
    if isinstance(before, bool) or not isinstance(before, (int, float)) or not _finite(before):
        before = 0.0
    # max(): a stamp without milliseconds may fall up to a second before a session's exact start.
    doc["ranSeconds"] = round(before + max(stop - start, 0.0), 3)


def _apply_begin(doc: Doc, ev: BeginEvent) -> Output:
    at = ev["at"]
    upgrade(doc)
    if "sessionStartedAt" in doc:
        _close_session(doc, doc.get("updatedAt"))  # a runner that died: up to its last write
    clock = ev.get("clock")
    doc["sessionStartedAt"] = clock if isinstance(clock, str) else at
    doc["status"] = "running"
    doc.pop("finishedAt", None)
    if ev.get("launch") is not None:
        doc["launch"] = ev["launch"]
    doc["updatedAt"] = at
    return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _apply_map(doc: Doc, ev: MapEvent) -> Output:
    step = _need(ev, "step")
    units = _need(ev, "units")
    done = ev.get("done", 0)
    rate = ev.get("rate")
    interval = ev.get("interval")
    if not isinstance(step, str) or not step:
        raise InvalidInputError("a map event needs the step's name")
    if not _count(units) or not _count(done) or (rate is not None and not isinstance(rate, str)) or (
            interval is not None and (isinstance(interval, bool) or not isinstance(interval, int | float)
                                      or not _finite(interval) or interval <= 0)):
        raise InvalidInputError("a map event needs counts >= 0 (units, done), and a rate with a positive interval")
    at = ev["at"]
    upgrade(doc)
    maps = doc.get("maps")
    if not isinstance(maps, dict):
        maps = doc["maps"] = {}
    entry: MapTotal = {"units": units, "done": done, "startedAt": at}
    if rate is not None and interval is not None:
        entry["rate"] = rate
        entry["interval"] = float(interval)
    maps[step] = entry
    doc["updatedAt"] = at
    return None


_KINDS = frozenset({"init", "base", "unit", "invalidate", "phase", "item", "resolve", "validation", "finalize",
                    "begin", "map"})


def is_event(value: object) -> TypeGuard[Event]:
    """Whether a value read back from storage (a journal line, a row) is an object with a kind
    ``t``: what a store's decoder checks before calling it an event. ``apply`` checks the rest, key
    by key, as it does for every event (an unknown kind is refused there, in one line)."""
    return isinstance(value, dict) and isinstance(value.get("t"), str)


def apply(doc: Doc | None, event: Event) -> tuple[Doc, Output]:
    """Apply one event; returns the (possibly new) document and the verb's output.

    Raises RefusedError / InvalidInputError with the document untouched."""
    kind = event.get("t")
    if not isinstance(event.get("at"), str):
        raise InvalidInputError(f"event {kind!r} lacks a stamp")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise InvalidInputError(f"unknown event type {kind!r}")
    if event["t"] == "init":
        return _apply_init(doc, event)
    if event["t"] == "base":
        return _apply_base(doc, event)
    if doc is None:
        raise InvalidInputError(f"cannot apply {kind!r}: the run has no document yet (init it)")
    # The commonest first: nearly every record of a long run is a unit's.
    if event["t"] == "unit":
        return doc, _apply_unit(doc, event)
    if event["t"] == "item":
        return doc, _apply_item(doc, event)
    if event["t"] == "resolve":
        return doc, _apply_resolve(doc, event)
    if event["t"] == "phase":
        return doc, _apply_phase(doc, event)
    if event["t"] == "invalidate":
        return doc, _apply_invalidate(doc, event)
    if event["t"] == "validation":
        return doc, _apply_validation(doc, event)
    if event["t"] == "finalize":
        return doc, _apply_finalize(doc, event)
    if event["t"] == "map":
        return doc, _apply_map(doc, event)
    return doc, _apply_begin(doc, event)
