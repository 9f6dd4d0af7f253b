"""Steps recorded ahead: the next ready steps get their in_progress record while the slots are busy.
No process starts before its record is durable, no outcome is reported (or lets a dependent start)
before it is durable, a step recorded ahead that never starts is pending again with its attempt
closed, and after a crash such a record is closed as interrupted and the step runs again."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from runnerhelpers import spawn_cli, status_of, units, write
from test_scheduler import Clock, OrderLog, Reporter, S, Spawner, Store

from resumable.runner.explain import plan
from resumable.runner.jobfile import Job, Step
from resumable.runner.scheduler import Options, Scheduler
from resumable.runner.writer import SafeWriter


def _scheduler(steps: list[Step], spawner: Spawner, store: Store, clock: Clock, rep: Reporter,
               **kw: Any) -> Scheduler:
    job = Job("j", tuple(steps), "test")
    return Scheduler(job, SafeWriter(store, rep.warn), {}, plan(job, {}, force=False), Options(jobs=2),
                     spawner=spawner, reporter=rep, log_path=lambda s, n: f"/dev/null/{s.id}.{n}",
                     clock=clock, wallclock=clock, sleep=clock.sleep, base_env={}, **kw)


@pytest.mark.parametrize("launchers", [0, 2])
def test_steps_recorded_ahead_start_and_are_reported_only_once_durable(launchers: int) -> None:
    clock = Clock()
    order = OrderLog(0.002)
    log = order.entries

    class LoggingReporter(Reporter):
        def step_finished(self, step: Step, attempt: int, status: str, duration: float,
                          exit_code: int | None, log_: str, retry_in: float | None) -> None:
            order.add(("report", step.id, status))

    # Twenty independent steps and a chain: the chain's steps wait on outcomes, the others do not.
    steps = [S(f"s{i}") for i in range(20)] + [S("c0"), S("c1", "c0"), S("c2", "c1")]
    spawner = order.spawner(clock, {s.id: [(0.01, 0)] for s in steps})
    store = order.store()
    out = _scheduler(steps, spawner, store, clock, LoggingReporter(), flush_thread=True,
                     record_ahead=8, launch_threads=launchers).run()
    assert out.all_done
    assert spawner.max_parallel <= 2
    spawns = [k for kind, k, _ in log if kind == "spawn"]
    assert sorted(spawns) == sorted(s.id for s in steps)
    for i, (kind, key, state) in enumerate(log):
        before = log[:i]
        if kind == "spawn":
            assert ("commit", key, "in_progress") in before, (key, log)
            for dep in next(s for s in steps if s.id == key).needs:
                assert ("commit", dep, "done") in before, (key, dep, log)
        elif kind == "report":
            assert ("commit", key, state) in before, (key, log)
    # Recorded ahead: some steps' records were durable before a slot was free for them, that is
    # before the outcome of a step started earlier.
    first_done = next(i for i, e in enumerate(log) if e[0] == "commit" and e[2] == "done")
    assert len([e for e in log[:first_done] if e[0] == "commit" and e[2] == "in_progress"]) > 2


def test_a_failure_leaves_the_steps_recorded_ahead_pending_with_their_attempt_closed() -> None:
    clock = Clock()
    steps = [S("a"), S("b")] + [S(f"s{i}") for i in range(6)]
    spawner = Spawner(clock, {"a": [(1.0, 1)], "b": [(2.0, 0)], **{f"s{i}": [(0.1, 0)] for i in range(6)}})
    store = Store()
    rep = Reporter()
    out = _scheduler(steps, spawner, store, clock, rep, flush_thread=True, record_ahead=4).run()
    assert out.failed == ["a"] and out.states["b"] == "done"
    assert [k for _, k in spawner.started] == ["a", "b"]  # nothing new starts after a failure
    ahead = [sid for sid in store.units if sid.startswith("s")]
    assert ahead, store.units  # some were recorded ahead
    for sid in ahead:
        assert out.states[sid] == "pending"
        assert store.units[sid]["status"] == "pending"
        assert [(a["n"], a["status"]) for a in store.units[sid]["attempts"]] == [(1, "running"), (1, "interrupted")]
    assert not [e for e in rep.events if e[0] in ("start", "finish") and e[1] in ahead]


def test_an_interrupt_does_not_start_the_steps_recorded_ahead() -> None:
    clock = Clock()
    steps = [S("a"), S("b")] + [S(f"s{i}") for i in range(6)]
    spawner = Spawner(clock, {"a": [(5.0, 0)], "b": [(5.0, 0)], **{f"s{i}": [(0.1, 0)] for i in range(6)}})
    store = Store()
    rep = Reporter()

    def sleep(s: float) -> None:
        clock.sleep(s)
        if 1.0 <= clock.t < 1.02:
            sched.interrupt()

    sched = _scheduler(steps, spawner, store, clock, rep, flush_thread=True, record_ahead=4)
    sched.sleep = sleep
    out = sched.run()
    assert out.interrupted and [k for _, k in spawner.started] == ["a", "b"]
    assert {out.states[k] for k in ("a", "b")} == {"interrupted"}
    recorded = [sid for sid in store.units if sid.startswith("s")]
    assert recorded and all(store.units[sid]["status"] == "pending" for sid in recorded)


JOB = """
[job]
name = "ahead"
[steps.a]
run = "echo $$ > apid; test -f go || sleep 30"
[steps.b]
run = "test -f go || sleep 30"
""" + "".join(f'[steps.s{i}]\nrun = "echo $RESUMABLE_ATTEMPT > ran.s{i}"\n' for i in range(6))


def _journal(work: Path) -> list[dict[str, Any]]:
    path = work / "runs" / "ahead.journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def test_sigkill_with_steps_recorded_ahead_then_resume_runs_them_as_a_new_attempt(work: Path) -> None:
    write(work / "resumable.toml", JOB)
    p = spawn_cli(["-j", "2"], work)
    deadline = time.monotonic() + 20
    # Killed once a step that cannot have started (both slots are busy) is recorded in progress.
    while not any(r.get("unit") == "s0" and r.get("state") == "in_progress" for r in _journal(work)):
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.02)
    while not (work / "apid").exists():
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=10)
    assert status_of(work, "ahead")["s0"] == "in_progress"
    assert not list(work.glob("ran.*"))  # recorded, never started
    (work / "go").touch()
    p = spawn_cli(["-j", "2"], work)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    got = units(work, "ahead")
    for i in range(6):
        atts = [(a["n"], a["status"]) for a in got[f"s{i}"]["attempts"]]
        if atts[0][1] == "interrupted":  # recorded ahead when the runner died: a new attempt now
            assert atts == [(1, "interrupted"), (2, "done")]
            assert (work / f"ran.s{i}").read_text().strip() == "2"
        else:
            assert atts == [(1, "done")]
    assert [(a["n"], a["status"]) for a in got["s0"]["attempts"]] == [(1, "interrupted"), (2, "done")]
