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
    """One O(N) pass over the units: counts per bucket and the first few ids of each."""

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

    @property
    def done(self) -> int:
        return self.counts.get("done", 0)


def tally(doc: Mapping[str, Any], keep: int = DETAIL_LIMIT) -> Tally:
    units = doc.get("units")
    t = Tally()
    if not isinstance(units, dict):
        return t
    counts = t.counts
    first = t.first
    families = t.families
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
    return t


def eta(doc: Mapping[str, Any], t: Tally, now: float) -> float | None:
    """Remaining time at the run's average throughput so far; None until something finished."""
    start = parse_ts(doc.get("createdAt"))
    if start is None or t.done == 0 or now <= start:
        return None
    remaining = t.total - t.done
    if remaining <= 0:
        return None
    return remaining * (now - start) / t.done
