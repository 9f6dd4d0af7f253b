"""One line per recorded event, for people (``resumable log``). Pure."""

from __future__ import annotations

from resumable.core import jsonio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.core.types import Event, UnitEvent


def _short(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else jsonio.stdlib_dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(event: Event) -> str:
    """What an event changed: ``unit load -> done (attempt 2, exit 0)``, ``finalize done``...

    Null-safe throughout: a stored event may lack what its kind says it has (a hand-written line)."""
    if event["t"] == "init":
        units = event.get("units") or []
        return f"init {event.get('id')}: {_short(event.get('task'))} ({len(units)} unit(s))"
    if event["t"] == "base":
        return f"base document adopted ({event.get('reason')})"
    if event["t"] == "begin":
        return "begin: a new session started"
    if event["t"] == "unit":
        return _describe_unit(event)
    if event["t"] == "invalidate":
        return f"invalidate {event.get('unit')}: {_short(event.get('reason'))}"
    if event["t"] == "phase":
        return f"phase {event.get('phase')} -> {event.get('state')}"
    if event["t"] == "item":
        items = event.get("items")
        n = len(items) if isinstance(items, list) else 1
        return f"item: {n} finding(s) recorded"
    if event["t"] == "resolve":
        return f"resolve {','.join(map(str, event.get('ids') or [])) or '(none)'}"
    if event["t"] == "validation":
        note = f" — {_short(event.get('note'))}" if event.get("note") else ""
        return f"validation {event.get('status')}{note}"
    if event["t"] == "finalize":
        result = f" — {_short(event.get('result'))}" if event.get("result") else ""
        return f"finalize {event.get('status')}{result}"
    if event["t"] == "map":
        rate = f", at most {event.get('rate')}" if event.get("rate") else ""
        return f"map {event.get('step')}: {event.get('units')} unit(s) once it ends{rate}"
    # A kind this version does not know (a newer writer's): shown as it is.
    unknown: Mapping[str, object] = event
    rest = {k: v for k, v in unknown.items() if k not in ("t", "at")}
    return f"{unknown.get('t')} {_short(rest)}"


def _describe_unit(event: UnitEvent) -> str:
    text = f"unit {event.get('unit')} -> {event.get('state')}"
    facts = []
    attempt: object = event.get("attempt")
    if isinstance(attempt, dict):
        facts.append(f"attempt {attempt.get('n')}")
        if attempt.get("exitCode") is not None:
            facts.append(f"exit {attempt.get('exitCode')}")
    if event.get("deps") is not None:
        facts.append(f"deps {','.join(map(str, event.get('deps') or [])) or '-'}")
    fields: object = event.get("fields")
    if isinstance(fields, dict) and isinstance(fields.get("removed"), bool):
        facts.append("removed from the job" if fields["removed"] else "back in the job")
    if facts:
        text += f" ({', '.join(facts)})"
    if event.get("note"):
        text += f" — {_short(event.get('note'))}"
    return text
