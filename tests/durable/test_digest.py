"""A process that has not loaded its run answers a map of recorded items from a digest of the run
(``durable.digest``): the same answers as from the document, never stale, and the document is not
loaded unless a step must run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import resumable
from resumable.durable import StepFailed
from resumable.durable import engine as engine_module
from resumable.durable import records as records_module
from resumable.durable.opening import engine_of

from .helpers import journal, python


def square(i: int) -> dict[str, Any]:
    return {"i": i, "sq": i * i, "tags": ["a"]}


def recorded(runs: Path, n: int = 50) -> None:
    run = resumable.open_run("d", runs_dir=runs, task="digest")
    assert run.map(run.step(square), range(n), progress=False) == [square(i) for i in range(n)]
    assert run.finish() == "done"
    engine_module._close_all()  # as if this process ended: the next open reads the run afresh


def reopened(runs: Path) -> resumable.Run:
    return resumable.open_run("d", runs_dir=runs, task="digest")


def loaded(run: resumable.Run) -> bool:
    return engine_of(run).records._doc is not None


def test_a_map_of_recorded_items_is_answered_without_loading_the_run(runs: Path) -> None:
    recorded(runs)
    run = reopened(runs)
    before = len(journal(runs, "d"))
    results = run.map(run.step(square), range(50), progress=False)
    assert results == [square(i) for i in range(50)]
    assert not loaded(run)
    assert run.finish() == "done" and not loaded(run)  # a done run, left as it is
    assert len(journal(runs, "d")) == before  # nothing written


def test_a_unit_marked_for_rerun_after_the_open_runs_again(runs: Path) -> None:
    recorded(runs)
    run = reopened(runs)
    other = python(["-c", f"import resumable; resumable.open_run('d', runs_dir={str(runs)!r}).rerun(['square:7'])"],
                   runs.parent)  # another process, between this one's open and its map
    assert other.wait(timeout=60) == 0, other.communicate()
    calls: list[int] = []

    @run.step(name="square")
    def counted(i: int) -> dict[str, Any]:
        calls.append(i)
        return square(i)

    assert run.map(counted, range(50), progress=False) == [square(i) for i in range(50)]
    assert calls == [7]


def test_failures_versions_and_missing_items_as_from_the_document(runs: Path) -> None:
    run = resumable.open_run("d", runs_dir=runs, task="digest")

    @run.step(retry_failed=False)
    def odd(i: int) -> int:
        if i == 3:
            raise ValueError("three")
        return i

    run.map(odd, range(6), progress=False)
    run.map(run.step(square, version=1), range(4), progress=False)
    run.finish()
    engine_module._close_all()
    run = reopened(runs)
    calls: list[int] = []

    @run.step(retry_failed=False, name="odd")
    def odd_again(i: int) -> int:
        calls.append(i)
        return i

    results = run.map(odd_again, range(8), progress=False)
    assert isinstance(results[3], StepFailed) and "ValueError: three" in str(results[3])
    assert results[:3] == [0, 1, 2] and results[4:] == [4, 5, 6, 7]
    assert sorted(calls) == [6, 7]  # only the items not recorded ran
    engine_module._close_all()
    run = reopened(runs)
    changed: list[int] = []

    @run.step(version=2, name="square")
    def square_v2(i: int) -> dict[str, Any]:
        changed.append(i)
        return square(i)

    assert run.map(square_v2, range(4), progress=False) == [square(i) for i in range(4)]
    assert sorted(changed) == [0, 1, 2, 3]  # another version: every item runs again


def test_equal_items_get_results_of_their_own(runs: Path) -> None:
    recorded(runs, n=3)
    run = reopened(runs)
    results = run.map(run.step(square), [1, 1, 2], progress=False)
    assert results == [square(1), square(1), square(2)] and results[0] is not results[1]
    results[0]["tags"].append("changed")
    assert run.map(run.step(square), [1], progress=False) == [square(1)]  # the run's own is untouched


def test_calls_one_at_a_time_are_answered_from_the_digest_until_a_step_must_run(runs: Path) -> None:
    recorded(runs, n=20)
    run = reopened(runs)
    calls: list[int] = []

    @run.step(name="square")
    def counted(i: int) -> dict[str, Any]:
        calls.append(i)
        return square(i)

    assert [counted(i) for i in range(20)] == [square(i) for i in range(20)]
    assert calls == [] and not loaded(run)
    other = python(["-c", f"import resumable; resumable.open_run('d', runs_dir={str(runs)!r}).rerun(['square:4'])"],
                   runs.parent)
    assert other.wait(timeout=60) == 0, other.communicate()
    time.sleep(records_module.REFRESH_EVERY + 0.1)  # how stale a hit's view of other processes may be
    assert counted(4) == square(4) and calls == [4]  # the digest no longer stood: the run was loaded
    assert loaded(run)
    assert counted(25) == square(25) and calls == [4, 25]
