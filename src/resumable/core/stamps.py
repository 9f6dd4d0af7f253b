"""Time as resumable writes and shows it: one stamp format, one parser, one duration format.

Stamps are ISO-8601 UTC, ``2026-11-29T08:00:00Z`` (ulpi's form, second precision); attempt
times keep milliseconds (``2026-11-29T08:00:00.123Z``) so that fast steps do not pile up on one
second. Pure: every function takes the time it formats.
"""

from __future__ import annotations

import time

_FORMAT = "%Y-%m-%dT%H:%M:%S"


_last: tuple[int, str, str] = (-1, "", "")  # (whole second, its text, its stamp): one object a second


def stamp(at: float | None = None, *, ms: bool = False) -> str:
    """``at`` (seconds since the epoch; now when None) as an ISO-8601 UTC stamp. Stamps of the same
    second are the same string object: a 100,000-unit document holds hundreds of thousands."""
    global _last
    t = time.time() if at is None else at
    second = int(t // 1)
    if _last[0] != second:
        text = time.strftime(_FORMAT, time.gmtime(t))
        _last = (second, text, text + "Z")
    if ms:
        return f"{_last[1]}.{int((t % 1) * 1000):03d}Z"
    return _last[2]


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def parse_stamp(value: object) -> float | None:
    """Seconds since the epoch of an ISO-8601 stamp ``YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`` (no
    offset: UTC), or None when ``value`` is not one. Parsed by hand: readers parse thousands of
    stamps, and datetime's import is more than a low-level verb may spend."""
    if not isinstance(value, str) or len(value) < 19 or len(value) > 40:
        return None
    v = value
    if v[4] != "-" or v[7] != "-" or v[10] not in "Tt " or v[13] != ":" or v[16] != ":":
        return None
    digits = v[0:4] + v[5:7] + v[8:10] + v[11:13] + v[14:16] + v[17:19]
    if not digits.isdigit() or not digits.isascii():
        return None
    year, month, day = int(v[0:4]), int(v[5:7]), int(v[8:10])
    hour, minute, second = int(v[11:13]), int(v[14:16]), int(v[17:19])
    if not (1 <= month <= 12 and 1 <= day <= _MONTH_DAYS[month - 1] and hour < 24 and minute < 60
            and second < 61):
        return None
    rest = v[19:]
    fraction = 0.0
    if rest[:1] in (".", ","):
        n = 1
        while n < len(rest) and rest[n].isdigit() and rest[n].isascii():
            n += 1
        if n == 1:
            return None
        fraction = float("0." + rest[1:n])
        rest = rest[n:]
    offset = 0
    if rest in ("", "Z", "z"):
        pass
    elif len(rest) == 6 and rest[0] in "+-" and rest[3] == ":" and (rest[1:3] + rest[4:6]).isdigit():
        offset = (int(rest[1:3]) * 60 + int(rest[4:6])) * 60 * (1 if rest[0] == "+" else -1)
    else:
        return None
    days = _days_from_civil(year, month, day)
    if month == 2 and day == 29 and _days_from_civil(year, 3, 1) - days != 1:
        return None  # not a leap year
    return days * 86400 + hour * 3600 + minute * 60 + second + fraction - offset


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
