"""run.map: items recorded as they end, failures recorded while the rest go on, group commit,
worker processes, and the progress bar."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.durable import StepFailed
from resumable.durable.opening import engine_of
from resumable.errors import InvalidInputError

from .helpers import HERE, python, read_doc, step_units
from .items import compute


def open_run(runs: Path) -> resumable.Run:
    return resumable.open_run("m", runs_dir=runs, task="map")


def test_map_records_every_item_and_answers_hits_without_running(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []
    lock = threading.Lock()

    @run.step
    def square(x: int) -> int:
        with lock:
            calls.append(x)
        return x * x

    assert square(3) == 9
    assert run.map(square, range(50), jobs=8) == [x * x for x in range(50)]
    assert sorted(calls) == sorted([3, *[x for x in range(50) if x != 3]])
    units = step_units(read_doc(runs, "m"))
    assert len(units) == 50 and all(u["status"] == "done" for u in units.values())
    assert run.map(square, range(50)) == [x * x for x in range(50)]
    assert len(calls) == 50


def test_map_groups_records_into_few_commits(runs: Path) -> None:
    run = open_run(runs)

    @run.step
    def ident(x: int) -> int:
        return x

    ident(-1)
    records = engine_of(run).records
    before = records.commits
    assert run.map(ident, range(400), jobs=8) == list(range(400))
    assert records.commits - before < 400  # items that ended together shared a commit


def test_a_failing_item_is_recorded_and_the_rest_go_on(runs: Path) -> None:
    run = open_run(runs)

    @run.step(key=lambda x: str(x))
    def check(x: int) -> int:
        if x % 10 == 3:
            raise ValueError(f"bad {x}")
        return x

    results = run.map(check, range(30), jobs=4)
    failed = [r for r in results if isinstance(r, StepFailed)]
    assert [f.unit for f in failed] == ["check:3", "check:13", "check:23"]
    assert isinstance(failed[0].cause, ValueError)
    assert [r for r in results if not isinstance(r, StepFailed)] == [x for x in range(30) if x % 10 != 3]
    units = step_units(read_doc(runs, "m"))
    assert units["check:13"]["status"] == "failed" and units["check:14"]["status"] == "done"
    assert run.finish() == "needs_attention"
    doc = read_doc(runs, "m")
    assert {it["id"] for it in doc["openItems"]} == {"step-failed:check:3", "step-failed:check:13",
                                                     "step-failed:check:23"}
    with pytest.raises(StepFailed, match="check:3"):
        run.map(check, range(30), on_error="raise")


def test_equal_items_run_once(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step
    def f(x: int) -> int:
        calls.append(x)
        return x

    assert run.map(f, [1, 1, 2, 1, 2]) == [1, 1, 2, 1, 2]
    assert sorted(calls) == [1, 2]


def test_map_takes_several_iterables_and_plain_functions(runs: Path) -> None:
    run = open_run(runs)

    def add(a: int, b: int) -> int:
        return a + b

    assert run.map(add, [1, 2, 3], [10, 20, 30]) == [11, 22, 33]
    assert len(step_units(read_doc(runs, "m"))) == 3


@pytest.mark.parametrize("options", [{"executor": "fiber"}, {"jobs": 0}, {"on_error": "ignore"}])
def test_bad_map_options(runs: Path, options: dict[str, Any]) -> None:
    run = open_run(runs)
    with pytest.raises(InvalidInputError):
        run.map(lambda x: x, [1], **options)


def test_a_step_no_worker_can_import_travels_by_value_or_is_refused(runs: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("cloudpickle", reason="cloudpickle (the dask extra brings it) sends steps by value")
    run = open_run(runs)

    @run.step
    def local(x: int) -> int:
        return x * 3

    assert run.map(local, [1, 2], executor="process", jobs=1) == [3, 6]  # nested: sent by value
    from resumable.durable import shipping

    monkeypatch.setattr(shipping, "_cloudpickle", lambda: None)
    with pytest.raises(InvalidInputError, match=r"inside a function.*pip install cloudpickle"):
        run.map(local, [3], executor="process")
    assert len(step_units(read_doc(runs, "m"))) == 2


def test_process_executor(tmp_path: Path) -> None:
    log = tmp_path / "exec.log"
    proc = python([str(HERE / "mapscript.py"), str(tmp_path / "runs"), "pool", "40", "2", "process", str(log),
                   "finish"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "done"
    units = step_units(read_doc(tmp_path / "runs", "pool"))
    assert all(units[f"work:item-{i}"]["result"]["value"] == compute(i) for i in range(40))
    pids = {int(line.split()[0]) for line in log.read_text().splitlines()}
    assert proc.pid not in pids  # the work ran in the pool's processes
    assert {u["attempts"][-1]["pid"] for u in units.values()} <= pids
    again = python([str(HERE / "mapscript.py"), str(tmp_path / "runs"), "pool", "40", "2", "process", str(log)],
                   tmp_path)
    assert again.communicate(timeout=120)[1] == "" and again.returncode == 0
    assert len(log.read_text().splitlines()) == 40  # the second run answered every item from the run


def test_progress_bar_counts_items(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    run = open_run(runs)

    @run.step
    def f(x: int) -> int:
        if x == 2:
            raise ValueError("no")
        return x

    run.map(f, range(5), progress=True)
    assert "5/5" in err.getvalue() and "1 failed" in err.getvalue()
    err.truncate(0)
    run.map(f, range(5))  # not a terminal: no bar
    assert err.getvalue().strip("\x00") == ""


def test_an_item_another_thread_is_running_is_waited_for_not_run_again(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="map")
    calls: list[int] = []
    started = threading.Event()
    go_on = threading.Event()

    @run.step
    def slow(x: int) -> int:
        calls.append(x)
        if x == 3:
            started.set()
            go_on.wait(10)
        return x * 10

    other = threading.Thread(target=slow, args=(3,))
    other.start()
    assert started.wait(10)
    threading.Timer(0.3, go_on.set).start()
    assert run.map(slow, range(6), jobs=3, progress=False) == [0, 10, 20, 30, 40, 50]
    other.join(10)
    assert sorted(calls) == [0, 1, 2, 3, 4, 5]


def test_an_interrupted_map_gives_back_the_items_it_did_not_start(runs: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from resumable.durable import pool

    run = resumable.open_run("r", runs_dir=runs, task="map")
    calls: list[int] = []

    @run.step
    def item(x: int) -> int:
        calls.append(x)
        return x

    class Interrupted(ThreadPoolExecutor):
        def submit(self, *args: Any, **kwargs: Any) -> Any:
            raise KeyboardInterrupt  # Ctrl-C as the workers are being started

    monkeypatch.setattr(pool, "ThreadPoolExecutor", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        run.map(item, range(5), jobs=2, progress=False)
    assert calls == []
    monkeypatch.undo()
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(item(4)), daemon=True)
    t.start()
    t.join(10)
    assert done == [4]  # not left claimed by the map
    assert run.map(item, range(5), progress=False) == [0, 1, 2, 3, 4]
    assert sorted(calls) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("jobs", [1, 3])
def test_an_item_calling_a_later_item_of_its_map_runs_it_and_does_not_wait_for_it(runs: Path, jobs: int) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="map")
    calls: list[int] = []

    @run.step
    def fib(n: int) -> int:
        calls.append(n)
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    expected = [0, 1]
    for _ in range(23):
        expected.append(expected[-1] + expected[-2])
    assert run.map(fib, reversed(range(25)), jobs=jobs, progress=False) == expected[::-1]
    assert sorted(calls) == list(range(25))  # each once


@pytest.mark.parametrize("jobs", [1, 3])
def test_an_executor_gets_at_most_jobs_items_in_flight_and_every_item_is_answered(runs: Path, jobs: int) -> None:
    from concurrent.futures import Future, ThreadPoolExecutor

    run = open_run(runs)
    lock = threading.Lock()
    flying = [0, 0]  # submitted and not ended now, the most at once

    class Watching(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            with lock:
                flying[0] += 1
                flying[1] = max(flying)
            future = super().submit(fn, *args, **kwargs)
            future.add_done_callback(lambda _: self.ended())
            return future

        def ended(self) -> None:
            with lock:
                flying[0] -= 1

    @run.step
    def item(x: int) -> int:
        return x * 2

    with Watching(8) as executor:  # in this process: the step needs no pickling
        assert run.map(item, range(60), executor=executor, jobs=jobs) == [x * 2 for x in range(60)]
    assert 1 <= flying[1] <= jobs
    assert len(step_units(read_doc(runs, "m"))) == 60


def test_nothing_imports_dask_unless_a_dask_executor_is_passed(tmp_path: Path) -> None:
    script = tmp_path / "nodask.py"
    script.write_text(
        "import sys\nfrom concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor\nimport resumable\n"
        f"run = resumable.open_run('n', runs_dir={str(tmp_path / 'runs')!r}, task='t')\n"
        "@run.step\ndef f(x):\n    return x + 1\n"
        "if __name__ == '__main__':\n"
        "    assert run.map(f, range(4)) == [1, 2, 3, 4]\n"
        "    assert run.map(f, range(4, 8), executor='process', jobs=1) == [5, 6, 7, 8]\n"
        "    with ProcessPoolExecutor(1) as pool, ThreadPoolExecutor(2) as threads:\n"
        "        assert run.map(f, range(8, 10), executor=pool) == [9, 10]\n"
        "        assert run.map(f, range(10, 12), executor=threads) == [11, 12]\n"
        "    print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n")
    proc = python([str(script)], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "[]"


def test_an_interrupted_executor_map_records_what_ended_and_leaves_nothing_claimed(runs: Path) -> None:
    from concurrent.futures import Future, ThreadPoolExecutor

    run = open_run(runs)
    calls: list[int] = []

    class Interrupted(ThreadPoolExecutor):
        submitted = 0

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            if self.submitted == 6:
                raise KeyboardInterrupt  # Ctrl-C while items are being submitted
            self.submitted += 1
            future = super().submit(fn, *args, **kwargs)
            future.result()  # ended before the next is submitted: recorded by the map's stop
            return future

    @run.step
    def item(x: int) -> int:
        calls.append(x)
        return x

    with Interrupted(2) as executor, pytest.raises(KeyboardInterrupt):
        run.map(item, range(10), executor=executor, jobs=4)
    recorded = {u for u, unit in step_units(read_doc(runs, "m")).items() if unit["status"] == "done"}
    assert recorded == {f"item:{x}" for x in range(6)}  # every item that ended was recorded
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(item(7)), daemon=True)
    t.start()
    t.join(10)
    assert done == [7]  # not left claimed by the map
    assert run.map(item, range(10), progress=False) == list(range(10))
    assert sorted(calls) == list(range(10))
