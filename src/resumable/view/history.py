"""One line per recorded event, for people (``resumable log``). Pure."""

from __future__ import annotations

import json
from typing import Any


def _short(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(event: dict[str, Any]) -> str:
    """What an event changed: ``unit load -> done (attempt 2, exit 0)``, ``finalize done``..."""
    t = event.get("t")
    if t == "init":
        units = event.get("units") or []
        return f"init {event.get('id')}: {_short(event.get('task'))} ({len(units)} unit(s))"
    if t == "base":
        return f"base document adopted ({event.get('reason')})"
    if t == "begin":
        return "begin: a new session started"
    if t == "unit":
        text = f"unit {event.get('unit')} -> {event.get('state')}"
        facts = []
        attempt = event.get("attempt")
        if isinstance(attempt, dict):
            facts.append(f"attempt {attempt.get('n')}")
            if attempt.get("exitCode") is not None:
                facts.append(f"exit {attempt.get('exitCode')}")
        if event.get("deps") is not None:
            facts.append(f"deps {','.join(map(str, event.get('deps') or [])) or '-'}")
        fields = event.get("fields")
        if isinstance(fields, dict) and isinstance(fields.get("removed"), bool):
            facts.append("removed from the job" if fields["removed"] else "back in the job")
        if facts:
            text += f" ({', '.join(facts)})"
        if event.get("note"):
            text += f" — {_short(event.get('note'))}"
        return text
    if t == "invalidate":
        return f"invalidate {event.get('unit')}: {_short(event.get('reason'))}"
    if t == "phase":
        return f"phase {event.get('phase')} -> {event.get('state')}"
    if t == "item":
        items = event.get("items")
        n = len(items) if isinstance(items, list) else 1
        return f"item: {n} finding(s) recorded"
    if t == "resolve":
        return f"resolve {','.join(map(str, event.get('ids') or [])) or '(none)'}"
    if t == "validation":
        note = f" — {_short(event.get('note'))}" if event.get("note") else ""
        return f"validation {event.get('status')}{note}"
    if t == "finalize":
        result = f" — {_short(event.get('result'))}" if event.get("result") else ""
        return f"finalize {event.get('status')}{result}"
    rest = {k: v for k, v in event.items() if k not in ("t", "at")}
    return f"{t} {_short(rest)}"
