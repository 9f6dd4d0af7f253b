"""run.map on real engines: a Dask LocalCluster (real scheduler and worker processes), loky and
ProcessPoolExecutor, on a runs directory and on a PostgreSQL store. Workers are killed, the caller is
killed, and what is submitted is counted by an executor the test wraps around the engine's.

Without ``distributed`` (``pip install '.[test]'`` brings it) these tests are skipped with one line;
with ``CI=true`` that is a failure."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.durable import StepFailed
from resumable.durable.executors import capacity
from resumable.errors import InvalidInputError

from .counting import Counting, submitted
from .helpers import HERE, drop_pg_database, journal, pg_database, python, read_doc, step_units
from .items import compute, log_execution

CI = os.environ.get("CI", "").lower() == "true"
try:
    import distributed
except ImportError as missing:
    if CI:
        raise ImportError(f"CI=true and distributed is missing ({missing}): pip install '.[test]'") from missing
    pytest.skip("distributed is not installed: the Dask tests need pip install '.[test]' (or '.[dask]')",
                allow_module_level=True)


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as made:
        yield made


def done_records(runs: Path, run_id: str) -> Counter[str]:
    return Counter(r["unit"] for r in journal(runs, run_id) if r.get("t") == "unit" and r.get("state") == "done")


def exec_log(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(p), int(i)) for p, i, _ in (line.split() for line in path.read_text().splitlines())]


def logging_step(run: resumable.Run, log: Path, sleep: float = 0.0) -> Callable[[int], dict[str, object]]:
    """A step (nested here, so it travels by value) that logs each execution."""

    @run.step
    def work(i: int) -> dict[str, object]:
        if sleep:
            time.sleep(sleep)
        log_execution(str(log), i)
        return compute(i)

    return work


def test_a_dask_map_records_each_item_once_with_a_serial_loops_results(runs: Path, tmp_path: Path,
                                                                        client: distributed.Client) -> None:
    run = resumable.open_run("d", runs_dir=runs, task="dask")
    work = logging_step(run, tmp_path / "exec.log")
    counting = Counting(client.get_executor(), str(tmp_path / "submitted"))
    n = 2000
    assert run.map(work, range(n), executor=counting, jobs=64, progress=False) == [compute(i) for i in range(n)]
    records = done_records(runs, "d")
    assert len(records) == n and set(records.values()) == {1}
    assert counting.submitted == n
    pids = {p for p, _ in exec_log(tmp_path / "exec.log")}
    assert os.getpid() not in pids and pids <= set(client.run(os.getpid).values())  # ran on the workers
    assert run.map(work, range(n), executor=counting, progress=False)[-1] == compute(n - 1)
    assert counting.submitted == n  # the second map submitted nothing
    assert run.finish() == "done"


def test_failures_are_recorded_and_the_other_items_go_on(runs: Path, client: distributed.Client) -> None:
    run = resumable.open_run("d", runs_dir=runs, task="dask")

    @run.step(retries=1, backoff=0)
    def check(x: int) -> int:
        if x % 7 == 3:
            raise ValueError(f"bad {x}")
        return x

    results = run.map(check, range(30), executor=client)  # the Client itself stands for its executor
    failed = [r for r in results if isinstance(r, StepFailed)]
    assert [f.unit for f in failed] == ["check:3", "check:10", "check:17", "check:24"]
    assert "ValueError: bad 3" in str(failed[0])
    unit = step_units(read_doc(runs, "d"))["check:3"]
    assert unit["status"] == "failed" and [a["status"] for a in unit["attempts"]] == ["failed", "failed"]
    assert unit["attempts"][0]["pid"] != os.getpid()  # the attempts ran, and were timed, on a worker
    assert run.finish() == "needs_attention"


def test_a_killed_dask_worker_loses_no_item(runs: Path, tmp_path: Path, client: distributed.Client) -> None:
    run = resumable.open_run("d", runs_dir=runs, task="dask")
    log = tmp_path / "exec.log"
    work = logging_step(run, log, sleep=0.02)
    victim = next(iter(client.run(os.getpid).values()))
    n = 400

    def kill_when_busy() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(p == victim for p, _ in exec_log(log)) < 20:
            time.sleep(0.01)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    results = run.map(work, range(n), executor=client.get_executor(), progress=False)
    killer.join()
    assert results == [compute(i) for i in range(n)]
    records = done_records(runs, "d")
    assert len(records) == n and set(records.values()) == {1}
    ran = exec_log(log)
    assert any(p == victim for p, _ in ran)  # it was killed while it had run items
    assert {i for _, i in ran} == set(range(n))
    client.wait_for_workers(2, timeout=30)  # the nanny restarts it, for the tests after this one


def test_a_killed_caller_resubmits_only_what_was_not_recorded(tmp_path: Path, client: distributed.Client) -> None:
    runs, subs, log = tmp_path / "runs", tmp_path / "submitted", tmp_path / "exec.log"
    n = 300
    args = [str(HERE / "clusterscript.py"), client.scheduler.address, str(runs), "c", str(n), str(subs), str(log)]
    first = python(args, tmp_path, {"ITEM_SLEEP": "0.02"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(exec_log(log)) < 60 and first.poll() is None:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    recorded = {int(u.removeprefix("work:")) for u in done_records(runs, "c")}
    assert 0 < len(recorded) < n, "the kill did not land in the middle of the map"
    before = len(submitted(str(subs)))
    second = python([*args, "finish"], tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert out.strip() == "done"
    again = [item[0] for item in submitted(str(subs))[before:]]
    assert sorted(again) == sorted(set(range(n)) - recorded)  # exactly the items not recorded
    records = done_records(runs, "c")
    assert len(records) == n and set(records.values()) == {1}


LOCK = threading.Lock()


@pytest.mark.parametrize("stored", ["runs-dir", "postgres"])
def test_an_unpicklable_step_is_refused_in_one_line_and_nothing_is_submitted(
        runs: Path, tmp_path: Path, client: distributed.Client, stored: str) -> None:
    url = pg_database("durable_unpicklable") if stored == "postgres" else None
    try:
        run = resumable.open_run("d", runs_dir=None if url else runs, store_url=url, task="dask")

        @run.step
        def locked(x: int) -> int:
            with LOCK:  # a global that does not pickle: the step cannot travel
                return x

        before = run.handle.load()
        loky = pytest.importorskip("loky")
        engines: list[Executor] = [client.get_executor(), loky.get_reusable_executor(max_workers=1),
                                   ProcessPoolExecutor(1)]
        for engine in engines:
            counting = Counting(engine, str(tmp_path / "submitted"))
            with pytest.raises(InvalidInputError) as refused:
                run.map(locked, range(5), executor=counting)
            message = str(refused.value)
            assert "\n" not in message and message.startswith("step locked cannot be sent to the executor's workers")
            assert "pickle" in message
            assert counting.submitted == 0
        engines[-1].shutdown()
        assert run.handle.load() == before  # nothing looked up, nothing begun
    finally:
        if url is not None:
            from resumable.durable import engine as engine_module

            engine_module._close_all()
            drop_pg_database(url)


@pytest.mark.parametrize("engine", ["ProcessPoolExecutor", "loky"])
def test_the_same_map_on_local_process_pools(tmp_path: Path, engine: str) -> None:
    # The script's step is a function of __main__: by reference on a ProcessPoolExecutor (whose
    # workers import the script), by value on loky (whose workers do not).
    if engine == "loky":
        pytest.importorskip("loky")
    runs, log = tmp_path / "runs", tmp_path / "exec.log"
    args = [str(HERE / "mapscript.py"), str(runs), "p", "200", "2", engine, str(log), "finish"]
    proc = python(args, tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "done"
    records = done_records(runs, "p")
    assert len(records) == 200 and set(records.values()) == {1}
    pids = {int(line.split()[0]) for line in log.read_text().splitlines()}
    assert proc.pid not in pids and len(log.read_text().splitlines()) == 200


def test_capacity_of_known_executors(client: distributed.Client) -> None:
    # A private attribute of CPython's and loky's pools and of Dask's executor: this fails if one
    # goes away (the map would then fall back to 2 x the CPU count).
    with ProcessPoolExecutor(3) as pool:
        assert capacity(pool) == 3
    assert capacity(client.get_executor()) == sum(client.nthreads().values()) == 4
    assert capacity(Counting(client.get_executor(), os.devnull)) is None


def test_a_dask_map_on_a_postgresql_store(tmp_path: Path, client: distributed.Client) -> None:
    url = pg_database("durable_dask")
    try:
        run = resumable.open_run("pgmap", store_url=url, task="dask on postgres")
        work = logging_step(run, tmp_path / "exec.log")
        counting = Counting(client.get_executor(), str(tmp_path / "submitted"))
        assert run.map(work, range(300), executor=counting, progress=False) == [compute(i) for i in range(300)]
        assert run.map(work, range(300), executor=counting, progress=False)[7] == compute(7)
        assert counting.submitted == 300
        assert run.finish() == "done"
        from resumable import store

        doc = store.open_backend(url=url).open("pgmap").load()
        assert doc is not None and doc["status"] == "done"
        units = step_units(doc)
        assert len(units) == 300 and all(u["result"]["value"] == compute(int(k[5:])) for k, u in units.items())
    finally:
        from resumable.durable import engine as engine_module

        engine_module._close_all()
        drop_pg_database(url)


def test_results_are_json_documents_of_the_run(runs: Path, client: distributed.Client) -> None:
    run = resumable.open_run("d", runs_dir=runs, task="dask")

    @run.step
    def pair(x: int) -> Any:
        return (x, {"k": x})

    assert run.map(pair, [1, 2], executor=client) == [[1, {"k": 1}], [2, {"k": 2}]]  # what a hit returns
    assert json.loads(json.dumps(step_units(read_doc(runs, "d"))["pair:1"]["result"])) == {
        "codec": "json", "value": [1, {"k": 1}]}


def test_a_step_the_workers_cannot_load_stops_the_map_and_records_nothing(
        runs: Path, tmp_path: Path, client: distributed.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "only_here.py").write_text("def triple(x):\n    return 3 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # this process only: the workers started before
    import only_here  # type: ignore[import-not-found]

    run = resumable.open_run("d", runs_dir=runs, task="dask")

    @run.step
    def uses_module(x: int) -> int:
        return int(only_here.triple(x))

    with pytest.raises(InvalidInputError, match=r"workers cannot load step uses_module .*only_here"):
        run.map(uses_module, range(20), executor=client)
    assert step_units(read_doc(runs, "d")) == {}  # not recorded as 20 failures of the items


def lock_for_three(i: int) -> object:
    """A result that cannot travel back from a worker process (nor be stored) for item 3."""
    return threading.Lock() if i == 3 else i * 10


@pytest.mark.parametrize("where", ["thread", "process", "ProcessPoolExecutor", "dask"])
def test_a_result_that_cannot_travel_back_fails_only_its_item(runs: Path, client: distributed.Client,
                                                               where: str) -> None:
    """Every executor finishes the map: the item whose result does not pickle (Dask raised from
    ``gather`` and abandoned the map) is that item's failure, recorded, and the others go on."""
    import multiprocessing

    run = resumable.open_run(f"u-{where}", runs_dir=runs, task="unreturnable")
    step = run.step(lock_for_three, name="lock_for_three")
    pool: Any = None
    if where == "ProcessPoolExecutor":
        pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    executor: Any = {"thread": "thread", "process": "process", "dask": client}.get(where, pool)
    try:
        for _ in range(2):  # and again: the failed item runs again, the others are answered
            results = run.map(step, range(8), executor=executor, jobs=2, progress=False)
            assert [r for i, r in enumerate(results) if i != 3] == [i * 10 for i in range(8) if i != 3]
            failed = results[3]
            assert isinstance(failed, StepFailed), failed
            said = str(failed)
            if where == "thread":  # nothing travels: it is the storing that fails
                assert "returned a _thread.lock, which no format it may use holds exactly" in said, said
            else:
                assert "its result, a _thread.lock, cannot be sent back from the executor's worker" in said, said
    finally:
        if pool is not None:
            pool.shutdown()
    units = step_units(read_doc(runs, f"u-{where}"))
    assert units["lock_for_three:3"]["status"] == "failed" and len(units["lock_for_three:3"]["attempts"]) == 2
    assert sum(u["status"] == "done" for u in units.values()) == 7
    assert run.finish() == "needs_attention"
