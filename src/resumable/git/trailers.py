"""Commit-message trailers as ulpi's autonomous pipeline writes and reads them. Pure.

An integration commit is ``subject``, a blank line, then ``Run-Id: r``, ``Task-Id: t`` and
``Plan-Id: p``. ulpi's pipeline reads each key with the multiline regex ``^Key:[ \\t]*(.+?)\\s*$`` and
trims the match, so a trailer may sit anywhere in the message, the first occurrence wins, and a
line is whatever JavaScript calls a line (it also ends at ``\\r``, U+2028 and U+2029).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from resumable.errors import InvalidInputError

TRAILER_KEYS: Final = ("Run-Id", "Task-Id", "Plan-Id")
SAFE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# JavaScript's line terminators (what `^`/`$` with the m flag and `.` stop at) and its trim() set.
_JS_LINES: Final = re.compile("\r\n?|[\n\u2028\u2029]")
_JS_SPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def is_safe_id(value: object) -> bool:
    """ulpi's SAFE_ID: ``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`` and no ``..``."""
    return isinstance(value, str) and SAFE_ID.fullmatch(value) is not None and ".." not in value


def parse_trailers(message: str, keys: Iterable[str] = TRAILER_KEYS) -> dict[str, str]:
    """``{key: value}`` for each key found: the first line that starts with ``Key:`` and has at
    least one character after the colon, its value trimmed (possibly to an empty string, as the
    pipeline's ``.+?`` then ``trim()`` gives)."""
    wanted = [(k, k + ":") for k in keys]
    out: dict[str, str] = {}
    if not any(prefix in message for _, prefix in wanted):
        return out  # the common case on a long history: no trailer at all
    for line in _JS_LINES.split(message):
        for key, prefix in wanted:
            if key not in out and line.startswith(prefix) and len(line) > len(prefix):
                out[key] = line[len(prefix):].strip(_JS_SPACE)
        if len(out) == len(wanted):
            break
    return out


def trailer_block(run_id: str, task_id: str, plan_id: str) -> str:
    """ulpi's trailer block for an integration commit; every id must be a SAFE_ID."""
    bad = [name for name, v in (("Run-Id", run_id), ("Task-Id", task_id), ("Plan-Id", plan_id))
           if not is_safe_id(v)]
    if bad:
        raise InvalidInputError(f"unsafe or missing trailer id(s): {', '.join(bad)} "
                                "(use letters, digits, '.', '_', '-'; no '..'; at most 128 characters)")
    return f"Run-Id: {run_id}\nTask-Id: {task_id}\nPlan-Id: {plan_id}"
