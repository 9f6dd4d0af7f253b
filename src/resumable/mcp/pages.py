"""Read tools that page through one run: its units (filtered by state) and its history.

A units cursor is a position in the run's unit order, which only ever grows at its end (units are
added, never removed or reordered), plus the id of the unit before it: a page starts where the last
one stopped, so paging returns each unit once, and a run re-initialised under the cursor is noticed
(the id no longer matches) rather than paged on silently. A history cursor is a sequence number.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from resumable.errors import InvalidInputError
from resumable.mcp import answers
from resumable.mcp.answers import clip, clip_list
from resumable.mcp.bound import BoundStore, bounded, unit_filter
from resumable.view.history import describe
from resumable.view.units import last_attempt, unit_bucket

# Units not done carry their detail even in a compact page: they are what an agent asks about.
QUIET = ("done", "pending")


def _start(units: dict[str, Any], state: dict[str, Any] | None) -> int:
    """Where a page starts: the cursor's position, checked against the id it says comes before."""
    if state is None:
        return 0
    i = answers.cursor_int(state, "i")
    after = state.get("after")
    if i == 0 or not isinstance(after, str):
        raise InvalidInputError("cursor is damaged: pass the previous answer's next_cursor unchanged")
    before = next(islice(units, i - 1, None), None)
    if before != after:
        raise InvalidInputError(f"the run changed under the cursor (unit {after[:100]!r} is no longer at its"
                                " place: was it initialised again?); start again without a cursor")
    return i


def unit_item(uid: str, unit: object, detail: bool) -> dict[str, Any]:
    if not isinstance(unit, dict):
        return {"id": clip(uid, 256), "status": "malformed"}
    bucket = unit_bucket(unit)
    item: dict[str, Any] = {"id": clip(uid, 256), "status": bucket}
    if not detail and bucket in QUIET:
        return item
    att = last_attempt(unit)
    code = att.get("exitCode") if att else unit.get("lastExitCode")
    if code is not None:
        item["exitCode"] = code
    attempts = unit.get("attempts")
    if isinstance(attempts, list) and attempts:
        item["attempts"] = len(attempts)
    if unit.get("note"):
        item["note"] = clip(unit.get("note"), 200 if detail else 120)
    if detail:
        deps = unit.get("dependsOn")
        if deps:
            item["dependsOn"] = clip_list(deps, 10)
        for key in ("startedAt", "finishedAt", "updatedAt"):
            if unit.get(key):
                item[key] = clip(unit.get(key), 40)
        log = (att.get("log") if att else None) or unit.get("log")
        if isinstance(log, str) and log:
            item["log"] = clip(log, 300)
    return item


def list_units(bound: BoundStore, run: str, state: str | None = None, cursor: str | None = None,
               limit: int = 200, detail: bool = False) -> dict[str, Any]:
    """The run's units in one state (default all), in the run's order, a page at a time. Compact by
    default: done and pending units are listed by id and state only; ``detail`` adds each unit's
    needs, times and log."""
    limit = bounded(limit, "limit", 1, 1000)
    want = unit_filter(state)
    if not isinstance(detail, bool):
        raise InvalidInputError("detail must be true or false")
    with bound.lock:
        view = bound.view(run)
        units = view.units
        query = answers.query_key("list_units", run=view.run_id, state=want, detail=detail)
        start = _start(units, answers.read_cursor(cursor, query))
        # The page's candidates, by position: at most ``limit`` of them, and whether more follow.
        chosen: list[tuple[int, str]] = []
        more = False
        for i, (uid, unit) in enumerate(islice(units.items(), start, None), start):
            if want is not None and unit_bucket(unit) != want:
                continue
            if len(chosen) == limit:
                more = True
                break
            chosen.append((i, uid))
        matching = view.count(want)
        needs_whole = [uid for _, uid in chosen
                       if detail or unit_bucket(units[uid]) not in QUIET]
        whole = view.whole(needs_whole) if needs_whole else {}
    page = answers.Page(limit)
    next_at: int | None = None
    for i, uid in chosen:
        if not page.add(unit_item(uid, whole.get(uid, units.get(uid)), detail)):
            next_at = i
            break
    if next_at is None and more:
        next_at = chosen[-1][0] + 1 if chosen else None
    out: dict[str, Any] = {"id": view.run_id, "state": state, "matching": matching, "total": len(units),
                           "units": page.items}
    if next_at is not None:
        after = next(islice(units, next_at - 1, None))
        out["next_cursor"] = answers.make_cursor(query, {"i": next_at, "after": after})
    return out


def history(bound: BoundStore, run: str, since: int = 0, limit: int = 100) -> dict[str, Any]:
    """The run's recorded events after sequence number ``since``, oldest first, a page at a time:
    ``next_since`` is the cursor (pass it as ``since``)."""
    limit = bounded(limit, "limit", 1, 1000)
    since = bounded(since, "since", 0, (1 << 62))
    with bound.lock:
        handle = bound.handle(run)
        page = answers.Page(limit)
        last = since
        more = False
        records = iter(handle.history(since))
        for record in records:
            event = record.event
            item = {"seq": record.seq, "at": clip(event.get("at"), 40), "t": clip(event.get("t"), 40),
                    "what": clip(describe(event), 300)}
            if not page.add(item):
                more = True
                break
            last = record.seq
            if page.full:
                more = next(records, None) is not None
                break
        close = getattr(records, "close", None)
        if close is not None:
            close()
    out: dict[str, Any] = {"id": handle.run_id, "since": since, "events": page.items}
    if more:
        out["next_since"] = last
    return out
