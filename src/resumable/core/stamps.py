"""Time as resumable writes and shows it: one stamp format, one parser, one duration format.

Stamps are ISO-8601 UTC, ``2026-11-29T08:00:00Z`` (the seed's form, second precision); attempt
times keep milliseconds (``2026-11-29T08:00:00.123Z``) so that fast steps do not pile up on one
second. Pure: every function takes the time it formats.
"""

from __future__ import annotations

import time

_FORMAT = "%Y-%m-%dT%H:%M:%S"


def stamp(at: float | None = None, *, ms: bool = False) -> str:
    """``at`` (seconds since the epoch; now when None) as an ISO-8601 UTC stamp."""
    t = time.time() if at is None else at
    text = time.strftime(_FORMAT, time.gmtime(t))
    if ms:
        return f"{text}.{int((t % 1) * 1000):03d}Z"
    return text + "Z"


def parse_stamp(value: object) -> float | None:
    """Seconds since the epoch of an ISO-8601 stamp (with or without fraction, ``Z`` or an offset;
    a stamp without one is taken as UTC), or None when ``value`` is not one."""
    if not isinstance(value, str) or not value:
        return None
    from datetime import UTC, datetime  # readers only: the seed verbs never parse stamps

    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def format_duration(seconds: float | None) -> str:
    """``0.8s``, ``42s``, ``3m 05s``, ``2h 03m``, ``3d 4h``; ``?`` when unknown or negative."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"
