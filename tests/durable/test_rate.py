"""Rate limits: at most N starts per period in this process, spread evenly, retries counted. The
spacing is checked with an injected clock (exact, and immune to a loaded machine); one test measures
it in real time, in the serial phase."""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.durable import rate as rate_module
from resumable.durable.opening import engine_of
from resumable.durable.rate import Limiter, parse
from resumable.errors import InvalidInputError

from .helpers import read_doc, step_units


class VirtualClock:
    """Time that passes only when someone waits: a limiter's schedule, without waiting for it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float, cancel: threading.Event | None) -> bool:
        with self.lock:
            self.now += seconds
        return False

    def limiter(self, text: str) -> Limiter:
        count, period = parse(text)
        return Limiter(count, period, text=text, clock=self.clock, wait=self.wait)


def most_in_a_window(starts: list[float], period: float) -> int:
    starts = sorted(starts)
    best, j = 0, 0
    for i, t in enumerate(starts):
        while starts[j] <= t - period + 1e-9:  # half-open windows, whatever the float rounding
            j += 1
        best = max(best, i - j + 1)
    return best


@pytest.mark.parametrize(("text", "count", "period"), [
    ("50/min", 50, 60.0), ("2/s", 2, 1.0), ("1000/hour", 1000, 3600.0), ("10/5min", 10, 300.0),
    (" 3 / 2.5 hours", 3, 9000.0), ("1/day", 1, 86400.0)])
def test_rates_read_as_count_per_period(text: str, count: int, period: float) -> None:
    assert parse(text) == (count, period)


@pytest.mark.parametrize("text", ["0/min", "x/min", "5/fortnight", "5", "5/0s", 5, "5/min/2", "-1/s"])
def test_a_bad_rate_is_refused_in_one_line(text: Any, runs: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^rate=.*give rate= as 'N/period', e.g. rate='50/min'"):
        parse(text)
    run = resumable.open_run("r", runs_dir=runs, task="t")
    calls: list[int] = []
    step = run.step(lambda i: calls.append(i), name="s")
    with pytest.raises(InvalidInputError, match=r"^rate="):
        run.map(step, [1, 2], rate=text, progress=False)
    with pytest.raises(InvalidInputError, match=r"^rate="):
        run.step(lambda i: i, name="t", rate=text)
    assert calls == [] and not step_units(read_doc(runs, "r"))


def test_starts_are_spread_one_interval_apart() -> None:
    v = VirtualClock()
    limiter = v.limiter("120/min")
    starts = []
    for _ in range(60):
        assert limiter.acquire()
        starts.append(v.now)
    assert starts == [k * 0.5 for k in range(60)]  # 60 items at 120/min: the last starts at 29.5 s
    assert most_in_a_window(starts, 60.0) == 60


def test_a_late_caller_starts_at_once_and_no_window_holds_more_than_the_count() -> None:
    """A caller that comes after its turn starts at once and the schedule goes on from it; whatever
    the timing, no window of one period ever holds more than the count."""
    v = VirtualClock()
    limiter = v.limiter("4/s")
    starts = []
    for k in range(40):
        if k % 7 == 3:
            v.now += 0.6  # this caller came late
        limiter.acquire()
        starts.append(v.now)
    assert most_in_a_window(starts, 1.0) <= 4
    assert starts[-1] < 40 * 0.25 + 6 * 0.6


def test_an_idle_limiter_keeps_no_credit() -> None:
    v = VirtualClock()
    limiter = v.limiter("2/s")
    limiter.acquire()
    v.now += 100.0  # idle: when it speeds up again, starts are spaced from then, not bunched
    times = []
    for _ in range(4):
        limiter.acquire()
        times.append(v.now)
    assert times == [100.0, 100.5, 101.0, 101.5]


def virtual_limits(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    v = VirtualClock()
    monkeypatch.setattr(rate_module.Limiter, "of", classmethod(lambda cls, text: None if text is None
                                                                else v.limiter(str(text))))
    return v


def test_a_map_counts_retries_as_starts(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = virtual_limits(monkeypatch)
    run = resumable.open_run("r", runs_dir=runs, task="t")
    starts: list[tuple[int, float]] = []

    @run.step(retries=2, backoff=0)
    def call_api(i: int) -> int:
        starts.append((i, v.now))
        if sum(1 for j, _ in starts if j == i) < 3 and i % 4 == 0:
            raise ConnectionError("flaky")
        return i

    assert run.map(call_api, range(8), jobs=1, rate="2/s", progress=False) == list(range(8))
    times = [t for _, t in starts]
    assert len(times) == 8 + 2 * 2  # items 0 and 4 took three attempts each
    assert times == [k * 0.5 for k in range(len(times))]  # every attempt waited its turn
    attempts = {uid: [a["status"] for a in u["attempts"]] for uid, u in step_units(read_doc(runs, "r")).items()}
    assert attempts["call_api:0"] == ["failed", "failed", "done"]
    recorded = read_doc(runs, "r")["maps"]["call_api"]
    assert recorded == {"units": 8, "done": 0, "startedAt": recorded["startedAt"], "rate": "2/s", "interval": 0.5}


def test_a_steps_own_rate_paces_its_direct_calls(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = virtual_limits(monkeypatch)
    run = resumable.open_run("r", runs_dir=runs, task="t")
    starts: list[float] = []

    @run.step(rate="10/min")
    def ask(q: str) -> str:
        starts.append(v.now)
        return q.upper()

    assert [ask(q) for q in "abc"] == ["A", "B", "C"]
    assert [ask(q) for q in "abc"] == ["A", "B", "C"]  # recorded: no start, no wait
    assert starts == [0.0, 6.0, 12.0]


def test_a_map_on_an_executor_submits_at_the_rate_and_retries_from_the_caller(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="t")
    starts: list[float] = []
    lock = threading.Lock()

    @run.step(retries=1, backoff=0)
    def call_api(i: int) -> int:
        with lock:
            starts.append(time.monotonic())
            failing = i % 5 == 0 and i not in seen  # items 0 and 5 fail their first attempt
            seen.add(i)
        if failing:
            raise ConnectionError("flaky")
        return i

    seen: set[int] = set()
    began = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        assert run.map(call_api, range(10), executor=pool, rate="40/s", progress=False) == list(range(10))
    took = time.monotonic() - began
    assert len(starts) == 12  # items 0 and 5 failed once each, and were submitted again
    assert took >= 11 * 0.025  # a limit bounds from above: never faster, however loaded the machine
    assert most_in_a_window(starts, 1.0) <= 40
    units = step_units(read_doc(runs, "r"))
    assert [a["status"] for a in units["call_api:5"]["attempts"]] == ["failed", "done"]


def test_stopping_a_map_ends_the_waits_for_its_rate(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="t")

    @run.step
    def first_stops(i: int) -> int:
        raise KeyboardInterrupt  # whichever item the limit lets start first stops the map

    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run.map(first_stops, range(4), jobs=3, rate="1/hour", progress=False)
    assert time.monotonic() - began < 30  # not an hour: the threads waiting for their turn gave up
    assert {u["status"] for u in step_units(read_doc(runs, "r")).values()} <= {"interrupted"}
    assert engine_of(run).in_flight() == 0


@pytest.mark.serial  # measures wall time: alone on the machine
@pytest.mark.slow
def test_120_a_minute_over_60_instant_items_takes_30_seconds_spread_evenly(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="t")
    starts: list[float] = []

    @run.step
    def instant(i: int) -> int:
        starts.append(time.monotonic())
        return i

    began = time.monotonic()
    assert run.map(instant, range(60), jobs=8, rate="120/min", progress=False) == list(range(60))
    took = time.monotonic() - began
    assert 27.0 <= took <= 33.0, took
    gaps = [b - a for a, b in zip(sorted(starts), sorted(starts)[1:], strict=False)]
    assert 0.45 <= statistics.median(gaps) <= 0.55, gaps
    assert sum(0.35 <= g <= 0.65 for g in gaps) >= 0.9 * len(gaps), gaps  # spread, not bunched at the edges
    assert most_in_a_window(starts, 5.0) <= 11  # any 5 s hold about 10 starts


def test_an_async_step_waits_for_its_rate_too(runs: Path) -> None:
    import asyncio

    run = resumable.open_run("r", runs_dir=runs, task="t")
    starts: list[float] = []

    @run.step(rate="20/s")
    async def fetch(i: int) -> int:
        starts.append(time.monotonic())
        return i

    async def main() -> list[int]:
        return list(await asyncio.gather(*(fetch(i) for i in range(5))))

    assert asyncio.run(main()) == list(range(5))
    assert max(starts) - min(starts) >= 4 * 0.05 - 1e-3  # a limit bounds from above: never faster
