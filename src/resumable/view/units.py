"""Units as the status views count and describe them: the bucket a unit is counted under, the facts
a triager needs about it, and the one O(N) pass that counts a run's units. Pure, null-safe."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from resumable.core.instance import SEP
from resumable.core.stamps import format_duration as fmt_dur
from resumable.core.stamps import parse_stamp as parse_ts

UNIT_GLYPH: Final = {
    "done": ("✓", "green"),
    "in_progress": ("▶", "blue"),
    "failed": ("✗", "red"),
    "timeout": ("⏱", "red"),
    "blocked": ("■", "yellow"),
    "dep_blocked": ("⋯", "yellow"),
    "interrupted": ("↯", "magenta"),
    "pending": ("·", "dim"),
}
DETAIL_LIMIT: Final = 20


def str_or_none(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def unit_bucket(unit: object) -> str:
    """The state a unit is counted under: its status, 'malformed', or 'unknown'."""
    if not isinstance(unit, dict):
        return "malformed"
    if unit.get("removed") is True:
        return "removed"  # a step the job file no longer has: shown, never counted in done/total
    st = unit.get("status")
    if not isinstance(st, str):
        return "malformed"
    return st if st in UNIT_GLYPH else "unknown"


def last_attempt(unit: Mapping[str, Any]) -> Mapping[str, Any] | None:
    attempts = unit.get("attempts")
    if isinstance(attempts, list):
        for a in reversed(attempts):
            if isinstance(a, dict):
                return a
    return None


def unit_facts(unit: object, now: float) -> list[str]:
    """attempts, last exit code, duration (elapsed while running), log: what a triager needs."""
    if not isinstance(unit, dict):
        return []
    facts: list[str] = []
    attempts = unit.get("attempts")
    att = last_attempt(unit)
    if isinstance(attempts, list) and attempts:
        facts.append(f"attempt {att.get('n', len(attempts)) if att else len(attempts)}")
    exit_code = att.get("exitCode") if att else None
    if att is None and unit.get("status") != "in_progress":
        # A ulpi unit's only exit code; a unit with attempts shows its last attempt's, so a step
        # running again never shows the exit code of the attempt before.
        exit_code = unit.get("lastExitCode")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        facts.append(f"exit {exit_code}")
    status = unit.get("status")
    dur: float | None = None
    if att is not None and isinstance(att.get("duration"), int | float):
        dur = float(att["duration"])
    start = parse_ts(att.get("startedAt") if att else None) or parse_ts(unit.get("startedAt"))
    if status == "in_progress" and start is not None:
        facts.append(f"running {fmt_dur(now - start)}")
    else:
        if dur is None and start is not None:
            end = parse_ts(att.get("finishedAt") if att else None) or parse_ts(
                unit.get("finishedAt")
            )
            if end is not None and end >= start:
                dur = end - start
        if dur is not None:
            facts.append(fmt_dur(dur))
    log = str_or_none(att.get("log")) if att else None
    log = log or str_or_none(unit.get("log"))
    if log:
        facts.append(f"log {log}")
    return facts


# ---- the summary pass ----------------------------------------------------------------------------


@dataclass
class Tally:
    """One O(N) pass over the units: counts per bucket and the first few ids of each. A durable map
    that has not reached all its items yet (``maps``) counts them in ``total`` and ``pending``."""

    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, list[str]] = field(default_factory=dict)
    reconciled: list[tuple[str, str]] = field(default_factory=list)
    reconciled_count: int = 0
    first_start: float | None = None
    # Per family of steps (unit ids ``family+...``): the count of each bucket, and the order the
    # families come in.
    families: dict[str, dict[str, int]] = field(default_factory=dict)
    family_order: dict[str, int] = field(default_factory=dict)
    unreached: int = 0  # items of durable maps not recorded as units yet
    per_step: dict[str, list[int]] = field(default_factory=dict)  # mapped step -> [units, done]

    @property
    def done(self) -> int:
        return self.counts.get("done", 0)


def mapped_steps(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The ``maps`` entries that are well formed (a hand edit may have left anything there)."""
    maps = doc.get("maps")
    if not isinstance(maps, dict):
        return {}
    return {k: v for k, v in maps.items() if isinstance(k, str) and isinstance(v, dict)
            and isinstance(v.get("units"), int) and not isinstance(v.get("units"), bool)}


def tally(doc: Mapping[str, Any], keep: int = DETAIL_LIMIT) -> Tally:
    units = doc.get("units")
    t = Tally()
    if not isinstance(units, dict):
        return t
    counts = t.counts
    first = t.first
    families = t.families
    maps = mapped_steps(doc)
    per_step = t.per_step = {name: [0, 0] for name in maps}
    # A unit's step is its id up to the first colon; names with a colon are matched one by one.
    colons = [name for name in maps if ":" in name]
    for uid, unit in units.items():
        b = unit_bucket(unit)
        counts[b] = counts.get(b, 0) + 1
        if SEP in uid:
            fam = uid.partition(SEP)[0]
            fc = families.get(fam)
            if fc is None:
                fc = families[fam] = {}
                t.family_order[fam] = len(t.family_order)
            fc[b] = fc.get(b, 0) + 1
        if b == "removed":
            continue
        if maps:
            mine = per_step.get(uid.partition(":")[0]) if isinstance(uid, str) else None
            if mine is None and colons:
                mine = next((per_step[n] for n in colons if uid.startswith(n + ":")), None)
            if mine is not None:
                mine[0] += 1
                mine[1] += b == "done"
        if b != "done" and b != "pending":
            ids = first.setdefault(b, [])
            if len(ids) < keep:
                ids.append(uid)
        elif b == "done":
            note = unit.get("note")
            if isinstance(note, str) and note.startswith("reconciled-from-trailer"):
                t.reconciled_count += 1
                if len(t.reconciled) < keep:
                    t.reconciled.append((uid, note))
    t.total = len(units) - counts.get("removed", 0)
    t.unreached = sum(max(0, maps[name]["units"] - have) for name, (have, _) in per_step.items())
    if t.unreached:
        t.total += t.unreached
        counts["pending"] = counts.get("pending", 0) + t.unreached
    return t


def eta(doc: Mapping[str, Any], t: Tally, now: float) -> float | None:
    """Remaining time at the run's average throughput so far; for a run with a durable map, at the
    throughput of its latest map since it began (bounded by its rate limit); None until something
    finished."""
    remaining = t.total - t.done
    if remaining <= 0:
        return None
    latest = _latest_map(doc, now)
    if latest is not None:
        name, entry, began = latest
        done_since = t.per_step.get(name, [0, 0])[1] - int(entry.get("done") or 0)
        per_second = done_since / (now - began) if done_since > 0 else 0.0
        limit = rate_per_second(entry)
        if limit is not None:
            per_second = min(per_second, limit) if per_second else limit
        return remaining / per_second if per_second > 0 else None
    start = parse_ts(doc.get("createdAt"))
    if start is None or t.done == 0 or now <= start:
        return None
    return remaining * (now - start) / t.done


def _latest_map(doc: Mapping[str, Any], now: float) -> tuple[str, Mapping[str, Any], float] | None:
    found: tuple[str, Mapping[str, Any], float] | None = None
    for name, entry in mapped_steps(doc).items():
        began = parse_ts(entry.get("startedAt"))
        if began is not None and began < now and (found is None or began > found[2]):
            found = (name, entry, began)
    return found


def rate_per_second(entry: Mapping[str, Any]) -> float | None:
    """Starts per second a map's rate limit allows (its recorded ``interval``), or None."""
    interval = entry.get("interval")
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval > 0:
        return None
    return 1.0 / float(interval)


def rate_line(doc: Mapping[str, Any], now: float) -> str | None:
    """What paces a live run's latest map, for ``status --watch``: ``embed: at most 50/min (a start
    every 1.2 s)``; None when it has no rate limit."""
    latest = _latest_map(doc, now)
    if latest is None:
        return None
    name, entry, _ = latest
    per_second = rate_per_second(entry)
    if per_second is None:
        return None
    return f"{name}: at most {entry.get('rate')}, starts wait for it (one every {fmt_dur(1 / per_second)})"
