"""Any retry count gives a bounded backoff: ``base * 2^(k-1)`` is capped, never an OverflowError,
however many retries a step is given and however many attempts it has made (the runner's and the
workers' rule in core.policy, and a durable step's)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from runnerhelpers import run_cli, units, write

from resumable.core.policy import MAX_DELAY, RetryPolicy
from resumable.durable.attempts import Policy


@pytest.mark.parametrize("retry", [1024, 1025, 1100, 10**6, 10**9, 10**30])
@pytest.mark.parametrize("backoff", [0.0, 1e-9, 1.0, 315_360_000.0])
def test_the_runners_backoff_is_bounded_for_any_retry(retry: int, backoff: float) -> None:
    p = RetryPolicy(retries=10**9, backoff=backoff, jitter=0.1)
    delay = p.delay(retry, random.Random(1).random)
    assert delay == (0.0 if backoff == 0 else pytest.approx(MAX_DELAY * (1 + 0.1 * random.Random(1).random())))
    assert RetryPolicy(backoff=backoff, jitter=0.0).delay(retry, random.random) == min(backoff * 1e300, MAX_DELAY)


def test_the_runners_backoff_still_doubles_below_the_cap() -> None:
    p = RetryPolicy(backoff=0.5, jitter=0.0)
    assert [p.delay(k, random.random) for k in (1, 2, 3, 12, 13, 14)] == [0.5, 1.0, 2.0, 1024.0, 2048.0, MAX_DELAY]


@pytest.mark.parametrize("k", [13, 40, 1025, 10**9])
def test_a_durable_steps_backoff_is_bounded_for_any_retry(k: int) -> None:
    """Beyond an hour a wait is capped, as the runner's: time.sleep itself refuses ~300 years."""
    assert Policy(10**9, 1.0, Exception).wait(k) == MAX_DELAY
    assert Policy(10**9, 0.0, Exception).wait(k) == 0.0
    assert Policy(10**9, 1.0, Exception).wait(3) == 4.0


def test_a_step_failing_past_1024_attempts_is_retried_and_recorded(work: Path) -> None:
    """retries = 10^9 is accepted, and attempt 1026 (2^1024 would overflow a float) runs."""
    write(work / "resumable.toml", '[job]\nname = "r"\nbackoff = "0s"\n[steps.a]\n'
                                   'run = "test $RESUMABLE_ATTEMPT -gt 1025"\nretries = 1000000000\n')
    r = run_cli(["-q"])
    assert r.exit_code == 0, r.output
    unit = units(work, "r")["a"]
    assert unit["status"] == "done" and len(unit["attempts"]) == 1026
