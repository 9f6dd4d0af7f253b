"""Durations as people write them (``90``, ``1.5``, ``"90s"``, ``"250ms"``, ``"10m"``, ``"2h"``),
parsed and bounded in one place for every option and job-file key that takes one.

The upper bound (``MAX_SECONDS``, 3650 days) keeps every duration inside what each consumer can
represent: PostgreSQL's timestamps (``now() + lease`` overflowed past year 294276, and a worker
retried the failing claim forever), ``time.sleep`` and ``datetime.timedelta``. Nothing resumable
waits for is meaningfully longer.
"""

from __future__ import annotations

import re

MAX_DAYS = 3650
MAX_SECONDS = MAX_DAYS * 86400.0
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class DurationError(ValueError):
    """What is wrong with a duration, without where it was given (the caller adds that)."""


def seconds(value: object, *, minimum: float = 0.0) -> float:
    """``value`` in seconds, within [``minimum``, ``MAX_SECONDS``]; ``DurationError`` otherwise."""
    if isinstance(value, bool):
        raise DurationError('expected a duration like 90, "90s", "10m" or "2h"')
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:  # an integer beyond float range (`timeout = 999...9`)
            raise DurationError(f"duration must be at most {MAX_DAYS} days, got a number of"
                                f" {len(str(abs(value)))} digits") from None
    elif isinstance(value, str) and (m := _RE.match(value)):
        out = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise DurationError(f'bad duration {value!r}; expected a number of seconds or "90s", "10m", "2h"')
    if out != out or out < 0:
        raise DurationError(f"duration must be a finite number >= 0, got {value!r}")
    if out > MAX_SECONDS:
        raise DurationError(f"duration must be at most {MAX_DAYS} days ({MAX_SECONDS:.0f}s), got {_show(value)}")
    if out < minimum:
        raise DurationError(f"duration must be at least {minimum:g}s, got {_show(value)}")
    return out


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
