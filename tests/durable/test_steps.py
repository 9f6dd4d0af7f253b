"""@run.step: hits and misses, what is recorded, versions, failures, retries, interruptions, nesting,
async steps, threads, serializers and large results."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.durable import StepFailed, UnkeyableArguments
from resumable.durable.opening import engine_of
from resumable.errors import InvalidInputError

from .helpers import journal, read_doc, step_units


def open_run(runs: Path, name: str = "r") -> resumable.Run:
    return resumable.open_run(name, runs_dir=runs, task="durable steps")


def test_a_call_runs_once_and_is_recorded_durably(runs: Path) -> None:
    run = open_run(runs)
    calls: list[str] = []

    @run.step
    def embed(doc_id: str, scale: float = 1.0) -> list[float]:
        calls.append(doc_id)
        return [len(doc_id) * scale, 0.5]

    assert embed("abc") == [3.0, 0.5]
    assert embed("abc") == [3.0, 0.5]
    assert embed(doc_id="abc") == [3.0, 0.5]  # the same call, by name
    assert embed("abc", 2.0) == [6.0, 0.5]  # another call
    assert calls == ["abc", "abc"]
    units = step_units(read_doc(runs, "r"))  # what another process reads, right now
    assert len(units) == 2
    unit = next(u for u in units.values() if u["result"]["value"] == [3.0, 0.5])
    assert unit["status"] == "done" and unit["step"] == "embed"
    assert [a["status"] for a in unit["attempts"]] == ["done"]


def test_a_new_process_gets_the_recorded_result_without_running(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert [square(i) for i in range(3)] == [0, 1, 4]
    run.finish()
    from resumable.durable import engine as engine_module

    engine_module._close_all()
    again = open_run(runs)

    @again.step  # type: ignore[no-redef]
    def square(x: int) -> int:
        calls.append(x)
        return -1

    assert [square(i) for i in range(3)] == [0, 1, 4]
    assert calls == [0, 1, 2]


def test_results_are_what_a_hit_returns(runs: Path) -> None:
    run = open_run(runs)

    @run.step
    def pair(x: int) -> Any:
        return (x, {1: "one"})

    first = pair(1)
    assert first == [1, {"1": "one"}]  # JSON's forms, on the first call as on every later one
    assert pair(1) == first
    first[1]["1"] = "changed"  # the caller's copy: the record is untouched
    assert pair(1) == [1, {"1": "one"}]


def test_a_value_json_cannot_hold_is_refused_and_recorded_failed(runs: Path) -> None:
    run = open_run(runs)

    @run.step
    def bad(x: int) -> Any:
        return {1, 2}

    with pytest.raises(InvalidInputError, match=r"step bad returned a set, which no format it may use holds"
                                                 r" exactly .*@run.step\(allow_pickle=True\)"):
        bad(1)
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["status"] == "failed"
    assert unit["attempts"][-1]["error"]["type"] == "resumable.errors.InvalidInputError"


@pytest.mark.parametrize("result", [{1: "int", "1": "str"}, [{"x": {True: 1, "true": 2}}],
                                    {"a": {2.5: "f", "2.5": "s"}}, {None: 0, "null": 1}])
def test_a_result_whose_keys_collide_as_strings_is_kept_exactly(runs: Path, result: Any) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step
    def colliding() -> Any:
        calls.append(1)
        return result

    assert colliding() == result  # not JSON (one value would be lost): a tree that keeps the keys' types
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["status"] == "done" and unit["result"]["codec"] == "tree"
    assert colliding() == result and calls == [1]


@pytest.mark.parametrize("value", [object(), threading.Lock(), (x for x in ())])
def test_arguments_without_a_content_key_are_refused(runs: Path, value: Any) -> None:
    run = open_run(runs)
    calls: list[Any] = []

    @run.step
    def f(x: Any) -> int:
        calls.append(x)
        return 1

    with pytest.raises(UnkeyableArguments, match="key="):
        f(value)
    with pytest.raises(TypeError):  # a TypeError too, for code that catches those
        f(value)
    assert calls == []

    @run.step(key=lambda x: "fixed")
    def g(x: Any) -> int:
        return 2

    assert g(value) == 2


def test_key_overrides_identity(runs: Path) -> None:
    run = open_run(runs)

    @run.step(key=lambda doc_id, client=None: doc_id)
    def fetch(doc_id: str, client: object = None) -> str:
        return doc_id.upper()

    assert fetch("doc-17", client=object()) == "DOC-17"
    assert "fetch:doc-17" in step_units(read_doc(runs, "r"))
    with pytest.raises(InvalidInputError, match="whitespace"):
        fetch("doc 17")


def test_version_change_reruns_with_an_invalidation_record(runs: Path) -> None:
    run = open_run(runs)
    calls: list[str] = []

    @run.step(version=1)
    def f(x: int) -> str:
        calls.append("v1")
        return "one"

    assert f(1) == "one"

    @run.step(version=2)  # type: ignore[no-redef]
    def f(x: int) -> str:
        calls.append("v2")
        return "two"

    assert f(1) == "two"
    assert f(1) == "two"
    assert calls == ["v1", "v2"]
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["invalidations"][-1]["reason"] == "step version changed: 1 -> 2"
    assert unit["version"] == 2


def test_code_change_alone_does_not_invalidate(runs: Path) -> None:
    run = open_run(runs)

    @run.step
    def f(x: int) -> str:
        return "old"

    f(1)

    @run.step  # type: ignore[no-redef]
    def f(x: int) -> str:
        return "new"

    assert f(1) == "old"


def test_failure_is_recorded_and_runs_again_by_default(runs: Path) -> None:
    run = open_run(runs)
    outcomes = iter([ValueError("boom"), "ok"])

    @run.step
    def flaky(x: int) -> str:
        out = next(outcomes)
        if isinstance(out, Exception):
            raise out
        return str(out)

    with pytest.raises(ValueError, match="boom"):
        flaky(1)
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["status"] == "failed" and unit["note"] == "ValueError: boom"
    assert "Traceback" in unit["attempts"][0]["error"]["traceback"]
    assert flaky(1) == "ok"
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert [a["status"] for a in unit["attempts"]] == ["failed", "done"]
    assert [a["n"] for a in unit["attempts"]] == [1, 2]


def test_retry_failed_false_reraises_the_recorded_failure(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step(retry_failed=False)
    def fails(x: int) -> None:
        calls.append(x)
        raise KeyError("missing")

    with pytest.raises(KeyError):
        fails(1)
    with pytest.raises(StepFailed, match="KeyError") as info:
        fails(1)
    assert info.value.error["type"] == "KeyError"
    assert calls == [1]


def test_retries_record_every_attempt(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step(retries=3, backoff=0)
    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise ConnectionError("try again")
        return 42

    assert flaky(7) == 42
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert [a["status"] for a in unit["attempts"]] == ["failed", "failed", "done"]
    assert [a["n"] for a in unit["attempts"]] == [1, 2, 3]


def test_retry_on_limits_what_is_retried(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step(retries=3, backoff=0, retry_on=ConnectionError)
    def f(x: int) -> int:
        calls.append(x)
        raise ValueError("not transient")

    with pytest.raises(ValueError):
        f(1)
    assert calls == [1]


def test_interrupted_call_is_recorded_and_runs_again(runs: Path) -> None:
    run = open_run(runs)
    first = [True]

    @run.step
    def slow(x: int) -> int:
        if first[0]:
            first[0] = False
            raise KeyboardInterrupt
        return x

    with pytest.raises(KeyboardInterrupt):
        slow(5)
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["status"] == "interrupted"
    assert unit["attempts"][0]["status"] == "interrupted"
    assert slow(5) == 5


def test_nested_steps_are_recorded_with_their_parent(runs: Path) -> None:
    run = open_run(runs)

    @run.step(key=lambda x: f"c{x}")
    def child(x: int) -> int:
        return x + 1

    @run.step(key=lambda x: f"p{x}")
    def parent(x: int) -> int:
        return child(x) * 2

    assert parent(1) == 4
    units = step_units(read_doc(runs, "r"))
    assert units["child:c1"]["parent"] == "parent:p1"
    assert "parent" not in units["parent:p1"]


def test_a_step_calling_itself_with_the_same_arguments_is_an_error(runs: Path) -> None:
    run = open_run(runs)

    @run.step
    def loop(x: int) -> int:
        return int(loop(x))

    with pytest.raises(InvalidInputError, match="calls itself"):
        loop(1)


def test_async_steps(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step
    async def fetch(x: int) -> dict[str, int]:
        calls.append(x)
        await asyncio.sleep(0.01)
        return {"x": x}

    async def main() -> list[Any]:
        first = await asyncio.gather(*(fetch(i) for i in [1, 2, 2, 3]))
        second = await asyncio.gather(*(fetch(i) for i in [1, 2, 3]))
        return [first, second]

    first, second = asyncio.run(main())
    assert first == [{"x": 1}, {"x": 2}, {"x": 2}, {"x": 3}]
    assert second == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert sorted(calls) == [1, 2, 3]  # the duplicate waited for the call in flight


def test_async_cancellation_is_recorded_interrupted(runs: Path) -> None:
    run = open_run(runs)

    @run.step
    async def forever(x: int) -> int:
        await asyncio.sleep(60)
        return x

    async def main() -> None:
        task = asyncio.ensure_future(forever(1))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["status"] == "interrupted"


def test_threads_calling_the_same_step_run_it_once(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []
    gate = threading.Event()

    @run.step
    def slow(x: int) -> int:
        calls.append(x)
        gate.wait(5)
        return x * 10

    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(slow(3))) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    gate.set()
    for t in threads:
        t.join()
    assert results == [30] * 6
    assert calls == [3]


def test_large_results_go_to_blobs(runs: Path) -> None:
    run = open_run(runs)
    big = "x" * (70 * 1024)

    @run.step
    def produce(x: int) -> str:
        return big

    assert produce(1) == big
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["result"]["ref"].startswith("sha256:") and "value" not in unit["result"]
    assert unit["result"]["size"] > 64 * 1024
    assert produce(1) == big
    # The journal holds the reference, not the value.
    assert all(len(str(r)) < 4096 for r in journal(runs, "r"))


def test_pickle_serializer(runs: Path) -> None:
    run = open_run(runs)

    @run.step(serializer="pickle")
    def make(x: int) -> Any:
        return {"set": {1, 2}, "tuple": (x, b"bytes")}

    assert make(1) == {"set": {1, 2}, "tuple": (1, b"bytes")}
    assert make(1) == {"set": {1, 2}, "tuple": (1, b"bytes")}
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["result"]["codec"] == "pickle" and "b64" in unit["result"]


def test_a_result_of_another_serializer_reruns_the_step(runs: Path) -> None:
    run = open_run(runs)
    calls: list[str] = []

    @run.step(serializer="pickle")
    def f(x: int) -> str:
        calls.append("pickle")
        return "p"

    f(1)

    @run.step  # type: ignore[no-redef]
    def f(x: int) -> str:
        calls.append("json")
        return "j"

    assert f(1) == "j"
    assert calls == ["pickle", "json"]


def test_custom_serializer(runs: Path) -> None:
    class Upper:
        name = "upper"

        def dumps(self, value: Any) -> bytes:
            return str(value).upper().encode()

        def loads(self, data: bytes) -> Any:
            return data.decode()

    run = open_run(runs)

    @run.step(serializer=Upper())
    def f(x: str) -> str:
        return x

    assert f("abc") == "ABC"
    assert f("abc") == "ABC"


@pytest.mark.parametrize("options", [{"key": "not callable"}, {"version": 1.5}, {"retries": -1},
                                     {"backoff": -1}, {"serializer": "yaml"}, {"name": "has space"}])
def test_bad_decorator_options_are_refused_at_decoration(runs: Path, options: dict[str, Any]) -> None:
    run = open_run(runs)
    with pytest.raises(InvalidInputError):
        run.step(lambda x: x, **options)


def test_two_functions_with_one_name_are_refused(runs: Path) -> None:
    run = open_run(runs)

    def one(x: int) -> int:
        return x

    def two(x: int) -> int:
        return -x

    run.step(one, name="same")
    with pytest.raises(InvalidInputError, match="name="):
        run.step(two, name="same")
    run.step(one, name="same")  # the same function again (a notebook cell run twice) is fine


def test_long_calls_are_recorded_running(runs: Path) -> None:
    run = open_run(runs)
    engine_of(run).record_start_after = 0.05
    seen: list[str] = []

    @run.step
    def slow(x: int) -> int:
        time.sleep(0.4)
        seen.append(read_doc(runs, "r")["units"][f"slow:{x}"]["status"])
        return x

    assert slow(1) == 1
    assert seen == ["in_progress"]
    (unit,) = step_units(read_doc(runs, "r")).values()
    assert unit["status"] == "done"
    assert [(a["n"], a["status"]) for a in unit["attempts"]] == [(1, "done")]
    assert isinstance(unit["attempts"][0]["pid"], int)


def test_open_run_with_task(runs: Path) -> None:
    run = resumable.open_run("fresh", runs_dir=runs, task="made on open")
    doc = read_doc(runs, "fresh")
    assert doc["task"] == "made on open" and doc["status"] == "running"
    assert resumable.open_run("fresh", runs_dir=runs, task="other").doc["task"] == "made on open"

    @run.step
    def f(x: int) -> int:
        return x

    f(1)
    assert run.finish() == "done"
    size = (runs / "fresh.journal.jsonl").stat().st_size
    again = resumable.open_run("fresh", runs_dir=runs, task="made on open")
    assert again.doc["status"] == "done"
    assert again.finish() == "done"
    assert (runs / "fresh.journal.jsonl").stat().st_size == size  # nothing written

    resumable.open_run("gave-up", runs_dir=runs, task="t").finalize("aborted")
    reopened = resumable.open_run("gave-up", runs_dir=runs, task="second try")
    assert reopened.doc["task"] == "second try" and reopened.doc["status"] == "running"
    assert list((runs / "archive").iterdir())


def test_open_run_without_task_is_unchanged(runs: Path) -> None:
    run = resumable.open_run("untouched", runs_dir=runs)
    assert not run.exists()
    assert not runs.exists()

    @run.step
    def f(x: int) -> int:
        return x

    with pytest.raises(resumable.NoRunError, match="task="):
        f(1)


def test_a_done_record_is_what_the_unit_verb_makes(runs: Path) -> None:
    from resumable.core import verbs
    from resumable.durable.attempts import Outcome

    run = open_run(runs)

    @run.step
    def shaped(x: int) -> dict[str, Any]:
        return {"x": x, "nested": [[1, [2, {"a": None}]]]}

    step = shaped.step  # type: ignore[attr-defined]
    uid = step.unit_id((1,), {})
    call = step.begin_call(uid)
    out = Outcome()
    out.ok, out.value = True, shaped.__wrapped__(1)
    out.attempts.append({"n": 1, "status": "done"})
    events, value, error = step.settle(call, out)
    assert error is None and value == out.value
    field = {"codec": "json", "value": out.value}
    assert events == [verbs.unit(uid, "done", note="", attempt={"n": 1, "status": "done"},
                                 fields={"kind": "step", "step": "shaped", "version": None, "result": field})]


def test_a_result_nested_too_deep_for_the_run_is_refused_and_one_within_bounds_is_kept(runs: Path) -> None:
    run = open_run(runs)

    def nest(depth: int) -> Any:
        value: Any = 0
        for _ in range(depth):
            value = [value]
        return value

    @run.step
    def deep(depth: int) -> Any:
        return nest(depth)

    assert deep(150) == nest(150)
    assert deep(150) == nest(150)  # recorded: a hit
    with pytest.raises(InvalidInputError, match="nested deeper"):
        deep(199)
