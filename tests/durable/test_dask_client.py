"""run.map on a Dask cluster's own executor, which goes through its client in batches
(``durable.dask_client``): what reaches the scheduler is counted by a scheduler plugin the test adds,
so the bound on the items in flight, the batching and "only the unrecorded are submitted again" are
measured where the work is scheduled."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.durable import StepFailed

from .helpers import HERE, journal, python
from .items import compute, log_execution

CI = os.environ.get("CI", "").lower() == "true"
try:
    import distributed
    from distributed.diagnostics.plugin import SchedulerPlugin
except ImportError as missing:
    if CI:
        raise ImportError(f"CI=true and distributed is missing ({missing}): pip install '.[test]'") from missing
    pytest.skip("distributed is not installed: the Dask tests need pip install '.[test]' (or '.[dask]')",
                allow_module_level=True)


class Submissions(SchedulerPlugin):  # type: ignore[misc]
    """The run.map tasks the scheduler was given: every unit id submitted, the graphs they came in,
    and the most that were waiting or running at once."""

    def __init__(self) -> None:
        self.units: list[str] = []  # the unit id of each task, once per task
        self.maps: list[str] = []  # the map (its key's <step>-<token>) of each
        self.graphs = 0
        self.seen: set[Any] = set()
        self.live: set[Any] = set()
        self.peak = 0

    def update_graph(self, scheduler: Any, **kwargs: Any) -> None:
        self.graphs += 1

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str)):
            return  # not a run.map task (its key is (<step>-<token>, <unit id>))
        if finish in ("memory", "erred", "released", "forgotten"):
            self.live.discard(key)
        elif key not in self.live:
            if key not in self.seen:
                self.seen.add(key)
                self.units.append(key[1])
                self.maps.append(key[0])
            self.live.add(key)
            self.peak = max(self.peak, len(self.live))


@pytest.fixture(scope="module")
def cluster() -> Iterator[distributed.LocalCluster]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                                  silence_logs=40) as made:
        yield made


@pytest.fixture
def counted(cluster: distributed.LocalCluster) -> Iterator[tuple[distributed.Client, Submissions]]:
    plugin = Submissions()
    cluster.scheduler.add_plugin(plugin, name="run.map submissions")
    try:
        with distributed.Client(cluster) as client:
            yield client, plugin
    finally:
        cluster.scheduler.remove_plugin(name="run.map submissions")


def done_records(runs: Path, run_id: str) -> Counter[str]:
    return Counter(r["unit"] for r in journal(runs, run_id) if r.get("t") == "unit" and r.get("state") == "done")


def test_items_go_in_batches_with_at_most_jobs_in_flight(runs: Path, tmp_path: Path,
                                                         counted: tuple[distributed.Client, Submissions]) -> None:
    client, plugin = counted
    run = resumable.open_run("d", runs_dir=runs, task="dask")
    log = str(tmp_path / "exec.log")

    @run.step
    def work(i: int) -> dict[str, object]:
        time.sleep(0.002)
        log_execution(log, i)
        return compute(i)

    n = 400
    assert run.map(work, range(n), executor=client.get_executor(), jobs=12, progress=False) == [
        compute(i) for i in range(n)]
    assert sorted(plugin.units) == sorted(f"work:{i}" for i in range(n))  # each item submitted once
    assert plugin.peak <= 12  # what waits or runs on the cluster never exceeds jobs
    assert plugin.graphs < n  # the items that fill the places a batch freed go in one graph
    records = done_records(runs, "d")
    assert len(records) == n and set(records.values()) == {1}
    assert run.map(work, range(n), executor=client.get_executor(), progress=False)[-1] == compute(n - 1)
    assert len(plugin.units) == n  # the second map submitted nothing
    assert run.finish() == "done"


def test_an_item_whose_arguments_do_not_pickle_fails_alone(runs: Path,
                                                           counted: tuple[distributed.Client, Submissions]) -> None:
    client, _ = counted
    run = resumable.open_run("d", runs_dir=runs, task="dask")
    lock = threading.Lock()

    @run.step(key=lambda x: "lock" if x is lock else str(x))
    def ident(x: Any) -> Any:
        return x

    results = run.map(ident, [0, 1, lock, 3, 4], executor=client.get_executor(), progress=False)
    assert results[:2] == [0, 1] and results[3:] == [3, 4]
    assert isinstance(results[2], StepFailed) and "pickle" in str(results[2]) and "\n" not in str(results[2])
    assert set(done_records(runs, "d")) == {"ident:0", "ident:1", "ident:3", "ident:4"}


def test_a_killed_caller_resubmits_only_what_was_not_recorded(tmp_path: Path,
                                                              counted: tuple[distributed.Client, Submissions]) -> None:
    client, plugin = counted
    runs, log = tmp_path / "runs", tmp_path / "exec.log"
    n = 300
    args = [str(HERE / "clusterscript.py"), client.scheduler.address, str(runs), "c", str(n), os.devnull, str(log)]
    first = python(args, tmp_path, {"ITEM_SLEEP": "0.02", "EXECUTOR": "client"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(log.read_text().splitlines() if log.exists() else []) < 60 \
            and first.poll() is None:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    recorded = {int(u.removeprefix("work:")) for u in done_records(runs, "c")}
    assert 0 < len(recorded) < n, "the kill did not land in the middle of the map"
    first_maps = set(plugin.maps)
    second = python([*args, "finish"], tmp_path, {"EXECUTOR": "client"})
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert out.strip() == "done"
    # Told apart by their map's key: the killed caller's last submissions may reach the
    # scheduler after its death.
    again = [int(u.removeprefix("work:")) for u, m in zip(plugin.units, plugin.maps, strict=True)
             if m not in first_maps]
    assert sorted(again) == sorted(set(range(n)) - recorded)  # exactly the items not recorded
    records = done_records(runs, "c")
    assert len(records) == n and set(records.values()) == {1}


Counted = tuple[distributed.Client, Submissions]


def test_ctrl_c_records_what_came_back_and_leaves_nothing_claimed(runs: Path, tmp_path: Path,
                                                                  counted: Counted) -> None:
    import _thread

    from resumable.durable.opening import engine_of

    client, plugin = counted
    run = resumable.open_run("d", runs_dir=runs, task="dask")
    log = tmp_path / "exec.log"

    @run.step
    def work(i: int) -> dict[str, object]:
        time.sleep(0.02)
        log_execution(str(log), i)
        return compute(i)

    def interrupt_when_busy() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(log.read_text().splitlines() if log.exists() else []) < 30:
            time.sleep(0.01)
        _thread.interrupt_main()  # Ctrl-C in the calling thread, in the middle of the map

    n = 300
    interrupter = threading.Thread(target=interrupt_when_busy)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        run.map(work, range(n), executor=client.get_executor(), progress=False)
    interrupter.join()
    assert engine_of(run).in_flight() == 0  # every claim released
    recorded = set(done_records(runs, "d"))
    assert 0 < len(recorded) < n
    first_map = set(plugin.maps)
    assert run.map(work, range(n), executor=client.get_executor(), progress=False) == [compute(i) for i in range(n)]
    again = {f"work:{i}" for i in range(n)} - recorded
    # Told apart by their map's key: a cancelled graph of the first map may reach the scheduler late.
    second = [u for u, m in zip(plugin.units, plugin.maps, strict=True) if m not in first_map]
    records = done_records(runs, "d")
    assert len(records) == n and set(records.values()) == {1}
    assert sorted(second) == sorted(again)  # only what was not recorded went again
