"""Rate limits: ``rate="50/min"`` on ``run.map`` and ``@run.step``, at most that many starts per period
in this process, spread evenly over the period, retries counted as starts.

**Spread, not bunched.** The n-th start is due one interval (period / count) after the one before it
was due: 120/min starts an item every half second, never 120 at once and then a pause of a minute,
which is how the APIs behind such limits count (a sliding window) and what keeps a burst from
tripping them. A start that comes late (its thread was slow to wake) does not push the later ones
back, so a loaded machine does not stretch the schedule; and a second rule holds whatever happens:
no window of one period ever holds more than ``count`` starts (the last ``count`` start times are
kept, and a start waits until the oldest of them is a period old). A process that goes slower than
its limit builds up no credit: when it speeds up, starts are spaced again from then.

**This process only.** Each step's limit, and each map's, is counted by the process that makes the
starts. Two processes (two scripts, or ``executor="process"`` workers, which are not limited
themselves: the caller limits what it submits, and runs their retries through the limit too) each
get the whole rate. See docs/durable.md for what holds across processes and hosts.

The clock and the wait are injected (``Limiter(clock=..., wait=...)``), so tests check the spacing
without waiting for it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from resumable.errors import InvalidInputError

_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0,
          "hour": 3600.0, "d": 86400.0, "day": 86400.0}
MAX_COUNT = 1_000_000  # starts per period: the window keeps this many start times
_HINT = "give rate= as 'N/period', e.g. rate='50/min', '2/s', '1000/hour' or '10/5min'"


def parse(text: object) -> tuple[int, float]:
    """(count, period in seconds) of ``"50/min"``; InvalidInputError (one line) for anything else."""
    import re

    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*", text) if isinstance(text, str) else None
    if found is None:
        raise InvalidInputError(f"rate={text!r}: {_HINT}")
    unit = found[3]
    if unit not in _UNITS and unit.endswith("s") and unit[:-1] in _UNITS:
        unit = unit[:-1]  # "mins", "hours"
    count = int(found[1])
    amount = float(found[2]) if found[2] else 1.0
    if unit not in _UNITS or not 0 < amount < 1e9 or not 1 <= count <= MAX_COUNT:
        raise InvalidInputError(f"rate={text!r}: {_HINT} (at most {MAX_COUNT:,} starts per period)")
    return count, amount * _UNITS[unit]


def _wait(seconds: float, cancel: threading.Event | None) -> bool:
    """Wait ``seconds``; True when ``cancel`` was set meanwhile."""
    if cancel is None:
        time.sleep(seconds)
        return False
    return cancel.wait(seconds)


class Limiter:
    """At most ``count`` starts per ``period`` seconds, spread one ``interval`` apart (thread-safe)."""

    def __init__(self, count: int, period: float, *, text: str = "",
                 clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float, threading.Event | None], bool] = _wait) -> None:
        self.count = count
        self.period = period
        self.interval = period / count
        self.text = text or f"{count}/{period:g}s"
        self._clock = clock
        self._wait = wait
        self._lock = threading.Lock()
        self._next: float | None = None  # when the next start is due
        self._starts: collections.deque[float] = collections.deque(maxlen=count)
        self.waited = 0.0  # seconds spent waiting, all callers together (reported, tested)

    @classmethod
    def of(cls, rate: object, **kw: Callable[..., object]) -> Limiter | None:
        if rate is None:
            return None
        count, period = parse(rate)
        return cls(count, period, text=str(rate), **kw)  # type: ignore[arg-type]

    def due(self) -> float:
        """Reserve the next start: the clock time it is due (now, or later)."""
        with self._lock:
            now = self._clock()
            slot = now if self._next is None or self._next < now else self._next
            self._next = slot + self.interval
            return slot

    def admit(self) -> float:
        """0.0 and the start recorded, when the window rule lets it start now; else how long to wait."""
        with self._lock:
            now = self._clock()
            if len(self._starts) == self.count and now < self._starts[0] + self.period:
                return self._starts[0] + self.period - now
            self._starts.append(now)
            return 0.0

    def acquire(self, cancel: threading.Event | None = None) -> bool:
        """Block until a start is allowed and count it; False (nothing counted) when ``cancel`` is
        set meanwhile."""
        left = self.due() - self._clock()
        while True:
            if left > 0:
                self.waited += left
                if self._wait(left, cancel):
                    return False
            elif cancel is not None and cancel.is_set():
                return False
            left = self.admit()
            if left == 0.0:
                return True

    def poll(self) -> float:
        """Start now if allowed (0.0, counted), else how long until the next start is due (nothing
        reserved): for a caller that must not block (a map feeding an executor)."""
        with self._lock:
            now = self._clock()
            if self._next is not None and self._next > now:
                return self._next - now
            if len(self._starts) == self.count and now < self._starts[0] + self.period:
                return self._starts[0] + self.period - now
            self._next = max(now, self._next or now) + self.interval
            self._starts.append(now)
            return 0.0

    async def aacquire(self) -> None:
        import asyncio

        left = self.due() - self._clock()
        while True:
            if left > 0:
                self.waited += left
                await asyncio.sleep(left)
            left = self.admit()
            if left == 0.0:
                return


class Gate:
    """The limits one start must pass (the step's, the map's), in that order; ``cancel`` stops a wait."""

    __slots__ = ("cancel", "limiters")

    def __init__(self, limiters: list[Limiter], cancel: threading.Event | None = None) -> None:
        self.limiters = limiters
        self.cancel = cancel

    def __bool__(self) -> bool:
        return bool(self.limiters)

    def pass_(self) -> bool:
        """Wait for every limit; False when cancelled before the start."""
        return all(limiter.acquire(self.cancel) for limiter in self.limiters)

    def poll(self) -> float:
        """0.0 when every limit lets a start happen now (counted by each), else the wait of the first
        that does not. A start the first limits counted and a later one refused stays counted: a
        limit is an upper bound, and this only makes it a little stricter."""
        for limiter in self.limiters:
            left = limiter.poll()
            if left > 0:
                return left
        return 0.0

    async def apass(self) -> None:
        for limiter in self.limiters:
            await limiter.aacquire()
