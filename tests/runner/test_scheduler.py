"""The scheduler with fake processes, clock and sleep: DAG order, parallelism, stop rules,
retries and timeouts, without spawning anything."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from resumable.runner.attempt import Outcome
from resumable.runner.explain import plan
from resumable.runner.jobfile import Job, Step
from resumable.runner.scheduler import Options, Scheduler
from resumable.runner.writer import SafeWriter


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += max(s, 0.001)


class FakeProc:
    def __init__(self, clock: Clock, duration: float, code: int, ignore_term: bool) -> None:
        self.clock, self.end, self.code, self.ignore_term = clock, clock.t + duration, code, ignore_term
        self.pid = self.pgid = 0
        self.token = None
        self.termed = self.killed = False

    def poll(self) -> int | None:
        if self.killed:
            return -9
        if self.termed and not self.ignore_term:
            return -15
        return self.code if self.clock.t >= self.end else None

    def terminate(self) -> None:
        self.termed = True

    def kill(self) -> None:
        self.killed = True

    def leftovers(self) -> bool:
        return False

    def fileno(self) -> int | None:
        return None

    def close(self) -> None:
        pass


class Spawner:
    """Each step's command is a key into ``script``: a list of (duration, exit code[, ignore TERM])
    per attempt."""

    def __init__(self, clock: Clock, script: Mapping[str, Sequence[tuple[Any, ...]]]) -> None:
        self.clock, self.script = clock, script
        self.started: list[tuple[float, str]] = []
        self.live: list[FakeProc] = []
        self.max_parallel = 0
        self.count: dict[str, int] = {}

    def __call__(self, argv: list[str], cwd: str, env: Mapping[str, str], log: str) -> FakeProc:
        key = argv[-1]
        n = self.count.get(key, 0)
        self.count[key] = n + 1
        spec = self.script[key][min(n, len(self.script[key]) - 1)]
        p = FakeProc(self.clock, spec[0], spec[1], len(spec) > 2 and spec[2])
        self.started.append((self.clock.t, key))
        self.live = [q for q in self.live if q.poll() is None] + [p]
        self.max_parallel = max(self.max_parallel, len(self.live))
        return p


class Store:
    """A RunHandle that records unit events (the scheduler writes only those)."""

    def __init__(self) -> None:
        self.units: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, ...]] = []

    def commit(self, events: Sequence[dict[str, Any]], *, lazy_view: bool = False) -> list[Any]:
        for ev in events:
            if ev["t"] == "unit":
                self.unit(ev["unit"], ev["state"], note=ev.get("note"), deps=ev.get("deps"),
                          attempt=ev.get("attempt"), fields=ev.get("fields"))
            elif ev["t"] == "invalidate":
                self.invalidate(ev["unit"], ev["reason"])
        return [None] * len(events)

    def load(self) -> dict[str, Any]:
        return {"units": self.units}

    def unit(self, unit_id: str, state: str, *, note: str | None = None,
             deps: Sequence[str] | None = None, attempt: dict[str, Any] | None = None,
             fields: dict[str, Any] | None = None, lazy_view: bool = False) -> None:
        u = self.units.setdefault(unit_id, {"attempts": []})
        u["status"] = state
        if attempt:
            u["attempts"].append(attempt)
        u.update(fields or {})
        self.calls.append((unit_id, state))

    def invalidate(self, unit_id: str, reason: str) -> None:
        self.units[unit_id]["status"] = "pending"

    def init(self, *a: Any, **k: Any) -> str:
        return "x"

    def begin(self, launch: Any = None) -> None:
        pass

    def item(self, items: object) -> list[str]:
        return []

    def resolve(self, ids: Sequence[str]) -> list[str]:
        return []

    def finalize(self, status: str, result: str | None = None) -> None:
        pass

    def close(self) -> None:
        pass

    @property
    def doc(self) -> dict[str, Any]:
        return {"units": self.units}


class Reporter:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def start(self, *a: Any) -> None:
        pass

    def step_started(self, step: Step, attempt: int) -> None:
        self.events.append(("start", step.id, attempt))

    def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                      exit_code: int | None, log: str, retry_in: float | None) -> None:
        self.events.append(("finish", step.id, status, retry_in))

    def step_blocked(self, step: Step, root: str) -> None:
        self.events.append(("blocked", step.id, root))

    def warn(self, message: str) -> None:
        self.events.append(("warn", message))

    def notice(self, message: str) -> None:
        self.events.append(("notice", message))

    def tick(self) -> None:
        pass


class OrderLog:
    """What a test of the commit ordering watches, from whichever thread did it: the unit records of
    each commit (made slow, so that anything acted on too early shows up first), each spawn, and
    whatever else a test adds, in the order it happened."""

    def __init__(self, flush_delay: float) -> None:
        self.entries: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._delay = flush_delay

    def add(self, *entries: tuple[str, str, str]) -> None:
        with self._lock:
            self.entries.extend(entries)

    def store(self) -> Store:
        order = self

        class SlowStore(Store):
            def commit(self, events: Sequence[dict[str, Any]], *, lazy_view: bool = False) -> list[Any]:
                time.sleep(order._delay)
                order.add(*(("commit", ev["unit"], ev["state"]) for ev in events if ev["t"] == "unit"))
                return super().commit(events, lazy_view=lazy_view)

        return SlowStore()

    def spawner(self, clock: Clock, script: dict[str, list[tuple[float, int]]]) -> Spawner:
        order = self

        class LoggingSpawner(Spawner):
            def __call__(self, argv: list[str], cwd: str, env: Mapping[str, str], log_path: str) -> FakeProc:
                order.add(("spawn", argv[-1], ""))
                return super().__call__(argv, cwd, env, log_path)

        return LoggingSpawner(clock, script)


def run(steps: list[Step], script: Mapping[str, Sequence[tuple[Any, ...]]],
        **opts: Any) -> tuple[Outcome, Spawner, Store, Clock, Reporter]:
    clock = Clock()
    spawner = Spawner(clock, script)
    store = Store()
    rep = Reporter()
    job = Job("j", tuple(steps), "test")
    sched = Scheduler(job, SafeWriter(store, rep.warn), {}, plan(job, {}, force=False),
                      Options(**opts), spawner=spawner, reporter=rep,
                      log_path=lambda s, n: f"/dev/null/{s.id}.{n}", clock=clock,
                      wallclock=clock, sleep=clock.sleep, rand=lambda: 0.0, base_env={})
    return sched.run(), spawner, store, clock, rep


def S(sid: str, *needs: str, **kw: Any) -> Step:
    return Step(id=sid, command=(sid,), needs=needs, cwd="/", **kw)


def test_dag_order_and_parallelism() -> None:
    steps = [S("a"), S("b", "a"), S("c", "a"), S("d", "b", "c")]
    out, sp, *_ = run(steps, {k: [(1.0, 0)] for k in "abcd"}, jobs=2)
    assert out.all_done
    order = [k for _, k in sp.started]
    assert order[0] == "a" and set(order[1:3]) == {"b", "c"} and order[3] == "d"
    t = dict((k, t) for t, k in sp.started)
    assert t["b"] == t["c"]  # started together
    assert sp.max_parallel == 2


def test_jobs_one_is_sequential_in_declaration_order() -> None:
    steps = [S("x"), S("y"), S("z")]
    _out, sp, *_ = run(steps, {k: [(0.5, 0)] for k in "xyz"}, jobs=1)
    assert [k for _, k in sp.started] == ["x", "y", "z"] and sp.max_parallel == 1


def test_failure_stops_new_starts_running_ones_finish() -> None:
    steps = [S("a"), S("b"), S("c")]
    out, sp, _store, *_ = run(steps, {"a": [(0.1, 1)], "b": [(1.0, 0)], "c": [(0.1, 0)]}, jobs=2)
    assert out.states == {"a": "failed", "b": "done", "c": "pending"}
    assert [k for _, k in sp.started] == ["a", "b"]
    assert out.failed == ["a"]


def test_keep_going_dep_blocked_points_at_root() -> None:
    steps = [S("a"), S("b", "a"), S("c", "b"), S("d")]
    out, _sp, store, _, _rep = run(steps, {k: [(0.1, 1 if k == "a" else 0)] for k in "abcd"},
                                 keep_going=True)
    assert out.states == {"a": "failed", "b": "dep_blocked", "c": "dep_blocked", "d": "done"}
    assert store.units["c"]["blockedBy"] == "a" and store.units["b"]["blockedBy"] == "a"


def test_max_failures() -> None:
    steps = [S("a"), S("b"), S("c")]
    out, *_ = run(steps, {k: [(0.1, 1)] for k in "abc"}, keep_going=True, max_failures=2)
    assert out.states == {"a": "failed", "b": "failed", "c": "pending"}


def test_retry_with_backoff_records_every_attempt() -> None:
    steps = [S("a", retries=2, backoff=1.0, jitter=0.0)]
    out, sp, store, _clock, _rep = run(steps, {"a": [(0.1, 1), (0.1, 1), (0.1, 0)]})
    assert out.states == {"a": "done"}
    starts = [t for t, _ in sp.started]
    assert starts[1] - starts[0] >= 1.1 - 1e-6 and starts[2] - starts[1] >= 2.1 - 1e-6
    atts = store.units["a"]["attempts"]
    assert [a["status"] for a in atts if "exitCode" in a] == ["failed", "failed", "done"]
    assert [a["n"] for a in atts if "exitCode" in a] == [1, 2, 3]


def test_retries_exhausted() -> None:
    out, _sp, *_ = run([S("a", retries=1, backoff=0.01)], {"a": [(0.1, 3)]})
    assert out.states == {"a": "failed"} and out.attempts["a"] == 2 and out.last_exit["a"] == 3


def test_timeout_term_then_kill_after_grace() -> None:
    out, _sp, store, clock, _ = run([S("a", timeout=1.0, grace=0.5)], {"a": [(100, 0, True)]})
    assert out.states == {"a": "timeout"}
    assert 1.5 <= clock.t < 2.0  # TERM at 1.0 ignored, KILL at 1.5
    assert store.units["a"]["attempts"][-1]["status"] == "timeout"


def test_interrupt_records_interrupted() -> None:
    clock = Clock()
    spawner = Spawner(clock, {"a": [(100, 0)], "b": [(1, 0)]})
    store = Store()
    rep = Reporter()
    job = Job("j", (S("a", grace=0.2), S("b", "a")), "t")

    def sleep(s: float) -> None:
        clock.sleep(s)
        if 1.0 <= clock.t < 1.02:
            sched.interrupt()

    sched = Scheduler(job, SafeWriter(store, rep.warn), {}, plan(job, {}, force=False), Options(),
                      spawner=spawner, reporter=rep, log_path=lambda s, n: "/dev/null",
                      clock=clock, wallclock=clock, sleep=sleep, base_env={})
    out = sched.run()
    assert out.interrupted and out.states == {"a": "interrupted", "b": "pending"}
    assert store.units["a"]["status"] == "interrupted"


def test_threaded_group_commit_acts_only_on_durable_records() -> None:
    """With launcher and flusher threads and a slow store: every process starts after a commit that
    recorded its start, and after a commit that recorded the outcome of each step it needs."""
    clock = Clock()
    order = OrderLog(0.005)
    log = order.entries
    steps = [S("a"), S("b", "a"), S("c"), S("d", "c"), S("e", "b", "d")]
    spawner = order.spawner(clock, {k: [(0.05, 0)] for k in "abcde"})
    store = order.store()
    rep = Reporter()
    job = Job("j", tuple(steps), "test")
    sched = Scheduler(job, SafeWriter(store, rep.warn), {}, plan(job, {}, force=False), Options(jobs=2),
                      spawner=spawner, reporter=rep, log_path=lambda s, n: "/dev/null", clock=clock,
                      wallclock=clock, sleep=clock.sleep, base_env={}, launch_threads=2)
    out = sched.run()
    assert out.all_done and len([e for e in log if e[0] == "spawn"]) == 5
    for i, (kind, key, _) in enumerate(log):
        if kind != "spawn":
            continue
        before = log[:i]
        assert ("commit", key, "in_progress") in before, (key, log)
        for dep in next(s for s in steps if s.id == key).needs:
            assert ("commit", dep, "done") in before, (key, dep, log)
    # Reported done only once durable, too.
    finishes = [e for e in rep.events if e[0] == "finish"]
    assert [e[1] for e in finishes if e[2] == "done"] and len(finishes) == 5
