from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from resumable.runner.retry import MAX_DELAY, RetryPolicy


def test_seed_backoff_without_jitter() -> None:
    p = RetryPolicy(retries=3, backoff=1.0, jitter=0.0)
    assert [p.delay(k, lambda: 0.5) for k in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert p.should_retry(3) and not p.should_retry(4)


@given(st.integers(1, 40), st.floats(0, 10), st.floats(0, 1), st.floats(0, 0.999))
def test_jitter_only_lengthens_and_is_bounded(k: int, base: float, jitter: float, r: float) -> None:
    p = RetryPolicy(retries=5, backoff=base, jitter=jitter)
    floor = min(base * 2 ** (k - 1), MAX_DELAY)
    assert floor <= p.delay(k, lambda: r) <= floor * (1 + jitter) + 1e-9
