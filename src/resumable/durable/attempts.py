"""Running a step's function: attempts, retries with backoff, and what each attempt records.

Used in this process (threads, ``async``) and in a pool's worker processes, which send the attempts
back to the process that records them. Outcomes are data: a failed attempt is a record, and only the
caller decides whether to raise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from resumable.core.policy import RetryPolicy
from resumable.core.stamps import stamp
from resumable.durable.codec import error_line, error_record

if TYPE_CHECKING:
    from resumable.core.types import Attempt, AttemptState, StepError
    from resumable.durable.rate import Gate


class StepFailed(Exception):
    """A step call that failed: in ``run.map`` results (``.cause`` is the live exception), and raised
    for a failure recorded by an earlier run when the step says ``retry_failed=False``."""

    def __init__(self, unit: str, error: StepError | Mapping[str, Any], cause: BaseException | None = None) -> None:
        self.unit = unit
        self.error = error  # {"type", "message", "traceback"} as recorded
        self.cause = cause
        super().__init__(f"step {unit} failed: {error_line(error)}")


def as_failure(uid: str, exc: BaseException) -> StepFailed:
    """What a failed item's place in ``run.map``'s results holds."""
    return exc if isinstance(exc, StepFailed) else StepFailed(uid, error_record(exc), cause=exc)


class Policy:
    """How a step retries: up to ``retries`` more attempts after an exception of ``retry_on``,
    waiting ``backoff * 2**(k-1)`` seconds before retry k, at most ``policy.MAX_DELAY`` (the
    runner's rule: any retry count gives a bounded wait, which ``time.sleep`` accepts)."""

    __slots__ = ("backoff", "retries", "retry_on")

    def __init__(self, retries: int, backoff: float, retry_on: type[BaseException] | tuple[type[BaseException], ...]
                 ) -> None:
        self.retries = retries
        self.backoff = backoff
        self.retry_on = retry_on

    def wait(self, k: int) -> float:
        return RetryPolicy(backoff=self.backoff, jitter=0.0).delay(k, lambda: 0.0) if self.backoff > 0 else 0.0


class NotStarted(BaseException):
    """A call that never started: the map stopped while it waited for its rate limit."""


class Outcome:
    """What running a step produced: the attempts (as records), and the value or the exception.
    ``packed``: the value pickled by a pool's worker process (``worker``), unpacked by the caller;
    ``retryable``: the last attempt failed with an exception the step retries on, for a caller that
    runs the retries itself (a rate-limited map on an executor)."""

    __slots__ = ("attempts", "exc", "ok", "packed", "retryable", "value")

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.ok = False
        self.value: Any = None
        self.exc: BaseException | None = None
        self.packed: bytes | None = None
        self.retryable = False

    def error(self) -> StepError | None:
        last = self.attempts[-1] if self.attempts else None
        err = last.get("error") if last is not None else None
        return err if isinstance(err, dict) else None


def attempt_record(n: int, status: AttemptState, started_wall: float, started: float) -> Attempt:
    duration = time.monotonic() - started
    return {"n": n, "status": status, "startedAt": stamp(started_wall, ms=True),
            "finishedAt": stamp(started_wall + duration, ms=True), "duration": round(duration, 6),
            "pid": os.getpid()}


def failed_attempt(n: int, exc: BaseException, started_wall: float, started: float) -> Attempt:
    att = attempt_record(n, "failed", started_wall, started)
    att["error"] = error_record(exc)
    return att


def run_sync(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy,
             first_n: int, on_failed: Callable[[Attempt], None] | None = None, gate: Gate | None = None) -> Outcome:
    """Attempts until one returns or the retries are spent, each passing ``gate`` (rate limits) first.
    BaseExceptions that are not ``Exception`` (KeyboardInterrupt, SystemExit) propagate: the caller
    records them interrupted; ``NotStarted`` when the gate was called off before the first attempt."""
    out = Outcome()
    n = first_n
    for k in range(policy.retries + 1):
        if gate and not gate.pass_():
            raise NotStarted if k == 0 else KeyboardInterrupt("the map stopped while a retry waited")
        started_wall, started = time.time(), time.monotonic()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            out.attempts.append(failed_attempt(n, exc, started_wall, started))
            if k < policy.retries and isinstance(exc, policy.retry_on):
                if on_failed is not None:
                    on_failed(out.attempts[-1])
                time.sleep(policy.wait(k + 1))
                n += 1
                continue
            out.exc = exc
            out.retryable = isinstance(exc, policy.retry_on)
            return out
        out.attempts.append(attempt_record(n, "done", started_wall, started))
        out.ok, out.value = True, value
        return out
    raise AssertionError("unreachable")


async def run_async(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy,
                    first_n: int, on_failed: Callable[[Attempt], None] | None = None,
                    gate: Gate | None = None) -> Outcome:
    """``run_sync`` for ``async def`` steps; cancellation propagates (recorded interrupted)."""
    import asyncio

    out = Outcome()
    n = first_n
    for k in range(policy.retries + 1):
        if gate:
            await gate.apass()
        started_wall, started = time.time(), time.monotonic()
        try:
            value = await fn(*args, **kwargs)
        except Exception as exc:
            out.attempts.append(failed_attempt(n, exc, started_wall, started))
            if k < policy.retries and isinstance(exc, policy.retry_on):
                if on_failed is not None:
                    on_failed(out.attempts[-1])
                await asyncio.sleep(policy.wait(k + 1))
                n += 1
                continue
            out.exc = exc
            return out
        out.attempts.append(attempt_record(n, "done", started_wall, started))
        out.ok, out.value = True, value
        return out
    raise AssertionError("unreachable")
