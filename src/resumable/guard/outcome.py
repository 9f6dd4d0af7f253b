"""A pass's outcome: from the command's exit status, or (``--outcome-from-output``) from the last
outcome word it printed.

OmniNode's cron-closeout took the last case-insensitive *substring* match of success|noop|failure|halt, so
"successfully" counted as success (and "halting" as halt). Here a match is a whole word (no letter,
digit or underscore on either side); the last one wins, as in cron-closeout.

Pure functions over bytes; the log is scanned in chunks so a large log is never held in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

OUTCOMES = ("success", "noop", "failure", "halt", "unknown")
_WORD = re.compile(rb"\b(success|noop|failure|halt)\b", re.IGNORECASE)
# Longest word (7) plus a boundary character: what a match cut by a chunk boundary can span.
_CARRY = 16


def last_outcome_word(chunks: Iterable[bytes]) -> str | None:
    """The last whole-word outcome in the concatenation of ``chunks``, lower-cased, or None."""
    last: str | None = None
    carry = b""
    at_stream_start = True  # carry[0] is the output's first byte (so it has no left neighbour)
    for chunk in chunks:
        if not chunk:
            continue
        text = carry + chunk
        first = 0 if at_stream_start else 1
        for match in _WORD.finditer(text):
            # Start 0 of a carry was judged last round with its left neighbour; a match touching the
            # end may continue in the next chunk ("success" + "fully"): judged then.
            if match.start() >= first and match.end() < len(text):
                last = match.group(1).decode("ascii").lower()
        if len(text) > _CARRY:
            carry, at_stream_start = text[-_CARRY:], False
        else:
            carry = text
    first = 0 if at_stream_start else 1
    for match in _WORD.finditer(carry):
        if match.start() >= first and match.end() == len(carry):
            last = match.group(1).decode("ascii").lower()
    return last


def outcome(exit_code: int, output: Iterable[bytes] | None) -> str:
    """``failure`` for a non-zero exit; otherwise ``success``, or with ``output`` the last outcome
    word in it (``unknown`` when there is none)."""
    if exit_code != 0:
        return "failure"
    if output is None:
        return "success"
    return last_outcome_word(output) or "unknown"


def counts_as_failure(status: str) -> bool | None:
    """True for failure/halt, False for success/noop, None (leaves the count alone) for unknown.

    ``unknown`` (the command exited 0 but named no outcome) is neither: counting it as a failure (the
    cron-closeout did) trips the breaker on a healthy job that merely words its report differently, and
    resetting on it would hide failures interleaved with silent passes."""
    if status in ("failure", "halt"):
        return True
    if status in ("success", "noop"):
        return False
    return None
