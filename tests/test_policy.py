from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from resumable.core import policy
from resumable.core.policy import MAX_DELAY, RetryPolicy


def test_seed_backoff_without_jitter() -> None:
    p = RetryPolicy(retries=3, backoff=1.0, jitter=0.0)
    assert [p.delay(k, lambda: 0.5) for k in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert p.should_retry(3) and not p.should_retry(4)


@given(st.integers(1, 40), st.floats(0, 10), st.floats(0, 1), st.floats(0, 0.999))
def test_jitter_only_lengthens_and_is_bounded(k: int, base: float, jitter: float, r: float) -> None:
    p = RetryPolicy(retries=5, backoff=base, jitter=jitter)
    floor = min(base * 2 ** (k - 1), MAX_DELAY)
    assert floor <= p.delay(k, lambda: r) <= floor * (1 + jitter) + 1e-9


_NEEDS = {"a": [], "b": ["a"], "c": ["b"], "d": ["a", "c"], "e": []}


def _decide(status: str, *, failures: int = 1, retries: int = 0, keep_going: bool = False,
            max_failures: int | None = None, failed_steps: int = 0, stopping: bool = False) -> policy.Decision:
    states = {"a": "running", "b": "waiting", "c": "waiting", "d": "waiting", "e": "done"}
    return policy.decide("a", status, failures=failures, retry=RetryPolicy(retries, 2.0, 0.0),
                         rules=policy.JobRules(keep_going, max_failures), stopping=stopping,
                         failed_steps=failed_steps, dependents=policy.dependents_of(_NEEDS), needs=_NEEDS,
                         states=states, now=100.0, rand=lambda: 0.0)


def test_a_failure_with_retries_left_waits_its_backoff_in_the_clock_given() -> None:
    d = _decide("failed", failures=2, retries=2)
    assert (d.settled.state, d.settled.due, d.settled.retry_in, d.stop) == ("pending", 104.0, 4.0, False)
    assert _decide("timeout", failures=3, retries=2).settled.state == "timeout"


def test_a_stopping_run_retries_nothing_and_an_interrupted_attempt_is_handed_back() -> None:
    assert _decide("failed", retries=2, stopping=True).settled.state == "failed"
    d = _decide("interrupted")
    assert (d.settled.state, d.settled.due, d.stop, d.events) == ("pending", None, False, [])


def test_stop_on_failure_unless_keep_going_then_dependents_are_blocked_on_the_root() -> None:
    stop = _decide("failed")
    assert stop.stop and stop.blocked.steps == {}
    going = _decide("failed", keep_going=True)
    assert not going.stop
    assert going.blocked.steps == {"b": "a", "d": "a", "c": "a"}
    assert [e["unit"] for e in going.events] == ["b", "d", "c"]
    assert all(e["state"] == "dep_blocked" and e["fields"] == {"blockedBy": "a"} for e in going.events)
    assert _decide("failed", keep_going=True, max_failures=2, failed_steps=1).stop
    assert not _decide("failed", keep_going=True, max_failures=3, failed_steps=1).stop


def test_the_verdict_finds_failures_resolves_fixed_ones_and_counts_removed_units() -> None:
    doc = {"units": {"a": {"status": "done"}, "gone": {"status": "done", "removed": True}},
           "openItems": [{"id": "step-failed:a"}]}
    ok = policy.verdict({"a": policy.StepEnd("done"), "b": policy.StepEnd("skipped")}, doc)
    assert ok.finished and ok.summary == "1 done, 1 skipped, 1 removed"
    assert [e["t"] for e in ok.events] == ["resolve", "finalize"] and ok.events[0]["ids"] == ["step-failed:a"]
    bad = policy.verdict({"a": policy.StepEnd("done"), "b": policy.StepEnd("timeout", 2, 124, "b.log")}, doc)
    assert bad.status == "needs_attention"
    item = bad.events[1]["items"][0]
    assert (item["id"], item["attempts"], item["lastExitCode"], item["summary"]) == (
        "step-failed:b", 2, 124, "step b timeout (exit 124)")
    assert bad.events[-1] == {"t": "finalize", "status": "needs_attention", "result": "1 done, 1 timeout, 1 removed"}


def test_a_unit_the_job_no_longer_has_keeps_the_run_open_until_done() -> None:
    doc = {"units": {"old": {"status": "failed", "removed": True}}}
    v = policy.verdict({"a": policy.StepEnd("done")}, doc)
    assert not v.finished and v.stale == ["old"]
