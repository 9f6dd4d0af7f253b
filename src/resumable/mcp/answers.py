"""Every answer the server gives is bounded: compact JSON under ``ANSWER_LIMIT`` bytes, long strings
clipped, lists paged with an opaque cursor.

An agent's context is small and a run may hold a million units, so no answer grows with the run: a
page takes items until the next would overflow its budget (or the caller's ``limit``), and hands
back ``next_cursor`` for the rest. A cursor names the query it belongs to (a hash of the tool and
its arguments), so one query's cursor handed to another is refused, never misread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from resumable.errors import InvalidInputError

# Whole answers stay under 20 KB on the wire: the JSON text, plus the protocol's envelope around it.
ANSWER_LIMIT = 16_000
# What a page's items may take, leaving room for the rest of the answer (counts, cursor, hints).
PAGE_BUDGET = 14_000
# A string from a run (a note, a task, a reason) is clipped to this many characters.
TEXT_LIMIT = 300

T = TypeVar("T")


def dumps(value: object) -> str:
    """Compact JSON; control characters in data come out escaped (``\\u001b``), never raw."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def size(value: object) -> int:
    return len(dumps(value).encode("utf-8"))


def clip(value: object, limit: int = TEXT_LIMIT) -> Any:
    """A string cut to ``limit`` characters (marked with …); anything else as it is."""
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value


def clip_list(values: object, limit: int = 20) -> Any:
    """A list of ids cut to ``limit`` entries, each clipped (a unit's needs, a finding's ids)."""
    if not isinstance(values, list):
        return values
    kept = [clip(v, 100) for v in values[:limit]]
    return [*kept, f"… and {len(values) - limit} more"] if len(values) > limit else kept


def answer(value: dict[str, Any]) -> str:
    """The answer's text. An answer over the limit is a bug of this server (each builder keeps to
    its budget), so it fails loudly rather than flooding the agent's context."""
    text = dumps(value)
    if len(text.encode("utf-8")) > ANSWER_LIMIT:
        raise AssertionError(f"answer of {len(text.encode('utf-8'))} bytes is over the {ANSWER_LIMIT} limit")
    return text


class Page:
    """Items taken while they fit ``budget`` bytes of JSON and number at most ``limit``."""

    def __init__(self, limit: int, budget: int = PAGE_BUDGET) -> None:
        self.limit = limit
        self.budget = budget
        self.items: list[Any] = []
        self.used = 0

    def add(self, item: Any) -> bool:
        """Take ``item`` if it fits (the first item always does: each is clipped to a few KB)."""
        if len(self.items) >= self.limit:
            return False
        cost = size(item) + 1
        if self.items and self.used + cost > self.budget:
            return False
        self.items.append(item)
        self.used += cost
        return True

    @property
    def full(self) -> bool:
        return len(self.items) >= self.limit


def fill(page: Page, source: Iterable[T], shape: Callable[[T], Any]) -> tuple[int, bool]:
    """Take shaped items from ``source`` into ``page``; (how many were consumed, whether any were
    left). The item that did not fit is not consumed: the next page starts with it."""
    taken = 0
    it: Iterator[T] = iter(source)
    for raw in it:
        if not page.add(shape(raw)):
            return taken, True
        taken += 1
        if page.full:
            return taken, next(it, _END) is not _END
    return taken, False


_END = object()


# ---- cursors -----------------------------------------------------------------------------------------

def query_key(tool: str, **args: object) -> str:
    """What a cursor is bound to: the tool and the arguments that shape its list."""
    text = dumps([tool, sorted((k, v) for k, v in args.items())])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def make_cursor(query: str, state: dict[str, Any]) -> str:
    raw = dumps({"q": query, **state}).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


# A cursor is a few dozen bytes; anything much longer was not made here.
CURSOR_LIMIT = 2000


def read_cursor(cursor: str | None, query: str) -> dict[str, Any] | None:
    """The state a cursor carries (None: start from the beginning). InvalidInputError for a cursor
    this server did not give for this query."""
    if cursor is None or cursor == "":
        return None
    bad = InvalidInputError("cursor is not one this server gave for this query: pass the previous answer's"
                            " next_cursor unchanged, with the same other arguments (or no cursor to start over)")
    if not isinstance(cursor, str) or len(cursor) > CURSOR_LIMIT:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        state = json.loads(raw.decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if not isinstance(state, dict) or state.get("q") != query:
        raise bad
    return state


def cursor_int(state: dict[str, Any], key: str, upper: int = 1 << 62) -> int:
    """An integer a cursor carries, checked (a hand-made cursor is refused, never trusted)."""
    value = state.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= upper:
        raise InvalidInputError("cursor is damaged: pass the previous answer's next_cursor unchanged")
    return value
