"""Retry policy: pure functions of the attempt number, with the randomness passed in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# A step that keeps failing must not sleep for hours between attempts because of doubling.
MAX_DELAY = 3600.0


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 0  # extra attempts after the first, within one `resumable run`
    backoff: float = 1.0  # base: the wait before retry k is base * 2^(k-1)
    jitter: float = 0.1  # up to this fraction is added, so parallel retries do not stampede

    def should_retry(self, failed_attempts_this_run: int) -> bool:
        return failed_attempts_this_run <= self.retries

    def delay(self, retry: int, rand: Callable[[], float]) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry).

        ``rand`` returns a float in [0, 1); jitter only lengthens the wait, so the seed's
        ``BASE * 2^(k-1)`` stays the minimum a user can rely on."""
        if retry < 1:
            return 0.0
        base = min(self.backoff * (2.0 ** (retry - 1)), MAX_DELAY)
        return base * (1.0 + self.jitter * rand())
