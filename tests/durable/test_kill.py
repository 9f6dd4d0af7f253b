"""SIGKILL a process running ``run.map`` at random moments, again and again: afterwards every item's
recorded result equals a fresh computation, no item recorded done ran again after it was recorded,
and the final run is ``done``."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest

from .helpers import HERE, journal, python, read_doc, step_units
from .items import compute

N = 2000


def kill_and_resume(tmp_path: Path, kills: int, item_sleep: float, executor: str = "thread",
                    window: tuple[float, float] = (0.1, 0.8)) -> None:
    runs = tmp_path / "runs"
    log = tmp_path / "exec.log"
    rng = random.Random(kills * 7919 + N)
    args = [str(HERE / "mapscript.py"), str(runs), "ingest", str(N), "8", executor, str(log)]
    env = {"ITEM_SLEEP": str(item_sleep)}
    order: list[int] = []  # pids, in the order the processes ran (one at a time)
    for _ in range(kills):
        proc = python(args, tmp_path, env)
        order.append(proc.pid)
        time.sleep(rng.uniform(*window))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    final = python([*args, "finish"], tmp_path, env)
    order.append(final.pid)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert out.strip().splitlines()[-1] == "done"

    doc = read_doc(runs, "ingest")
    assert doc["status"] == "done"
    units = step_units(doc)
    assert set(units) == {f"work:item-{i}" for i in range(N)}
    for i in range(N):
        unit = units[f"work:item-{i}"]
        assert unit["status"] == "done"
        assert unit["result"] == {"codec": "json", "value": compute(i)}

    # Who recorded each item first (the pid in its done attempt), and who ran it (the exec log).
    recorded_by: dict[int, int] = {}
    for record in journal(runs, "ingest"):
        if record.get("t") == "unit" and record.get("state") == "done":
            i = int(record["unit"].removeprefix("work:item-"))
            if i not in recorded_by:
                recorded_by[i] = record["attempt"]["pid"]
    assert len(recorded_by) == N
    rank = {pid: k for k, pid in enumerate(order)}
    runs_of: dict[int, list[int]] = {}
    for line in log.read_text().splitlines():
        pid, item = map(int, line.split()[:2])
        runs_of.setdefault(item, []).append(pid)
    worker_rank = dict(rank)
    if executor == "process":
        # A pool worker's pid is not one of ours: an item's executions are then checked by count
        # only (at most one per process that ran it).
        for item, pids in runs_of.items():
            assert len(pids) == len(set(pids)), f"item {item} ran twice in one worker"
        return
    for item, pids in runs_of.items():
        first = worker_rank[recorded_by[item]]
        later = [p for p in pids if worker_rank[p] > first]
        assert not later, f"item {item} was recorded done by process #{first} and ran again in #{worker_rank[later[0]]}"
        assert pids.count(recorded_by[item]) == 1, f"item {item} ran twice in the process that recorded it"
    assert sum(len(p) for p in runs_of.values()) >= N


def test_kill_map_quick(tmp_path: Path) -> None:
    kill_and_resume(tmp_path, kills=8, item_sleep=0.006)


@pytest.mark.slow
def test_kill_map_50_times(tmp_path: Path) -> None:
    kill_and_resume(tmp_path, kills=50, item_sleep=0.03, window=(0.15, 0.7))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_killing_only_the_parent_of_a_process_map_ends_its_workers(tmp_path: Path) -> None:
    runs, log = tmp_path / "runs", tmp_path / "exec.log"
    n, jobs = 40, 4
    args = [str(HERE / "mapscript.py"), str(runs), "orphans", str(n), str(jobs), "process", str(log)]
    env = {"ITEM_SLEEP": "0.3"}
    first = python(args, tmp_path, env)
    deadline = time.monotonic() + 60
    # Until every worker has run an item (on a busy machine one may start a few items late).
    while time.monotonic() < deadline and (not log.exists() or len(
            {line.split()[0] for line in log.read_text().splitlines()}) < jobs):
        time.sleep(0.01)
    killed_at = time.time()
    first.send_signal(signal.SIGKILL)  # the parent only: its workers are not signalled by us
    first.wait(30)  # not communicate(): workers that outlive it would hold its output open
    for pipe in (first.stdout, first.stderr):
        assert pipe is not None
        pipe.close()
    lines = [line.split() for line in log.read_text().splitlines()]
    workers = {int(pid) for pid, _, _ in lines}
    assert first.pid not in workers and len(workers) == jobs
    time.sleep(1.0)  # over three items' time: a worker still alive would have run more
    late = [line for line in log.read_text().splitlines()[len(lines):] if int(line.split()[0]) in workers]
    assert not late, f"workers of the killed process went on: {late[:3]}"
    assert not [pid for pid in workers if alive(pid)]
    final = python([*args, "finish"], tmp_path, env)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert out.strip() == "done"
    executed = [int(item) for _, item, _ in (line.split() for line in log.read_text().splitlines())]
    assert sorted(set(executed)) == list(range(n))
    assert len(executed) <= n + jobs  # at most the items running at the kill ran twice
    assert all(float(t) <= killed_at + 0.1 for pid, _, t in lines if int(pid) in workers)
