"""Results in the format that fits them: JSON, .npy (read with allow_pickle=False), Parquet, trees of
those and dataclass fields, pickle only when allowed and only from a store nobody else can write to;
a result no allowed format holds fails its call in one line; generators are refused before they run."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import resumable
from resumable.durable import engine as engine_module
from resumable.durable import formats
from resumable.errors import CorruptRunError, InvalidInputError, RefusedError

from .helpers import SRC, drop_pg_database, pg_database, read_doc, step_units
from .resultcases import Fit, Frozen, Pair, Report, WithCache


def open_run(runs: Path, **kw: Any) -> resumable.Run:
    return resumable.open_run("r", runs_dir=runs, task="t", **kw)


def result_of(runs: Path, prefix: str) -> dict[str, Any]:
    (unit,) = [u for uid, u in step_units(read_doc(runs, "r")).items() if uid.startswith(prefix + ":")]
    field: dict[str, Any] = unit["result"]
    return field


def blob_path(runs: Path, ref: str) -> Path:
    digest = ref.removeprefix("sha256:")
    return runs / "r" / "blobs" / digest[:2] / digest


def test_an_array_is_stored_as_npy_that_numpy_reads_without_pickle(runs: Path) -> None:
    run = open_run(runs)
    calls: list[int] = []

    @run.step
    def grid(n: int) -> np.ndarray:
        calls.append(n)
        return np.arange(n * n, dtype=np.float32).reshape(n, n)

    first = grid(40)  # 6.4 KB: a blob beside the run
    again = grid(40)
    assert calls == [40]
    assert first.dtype == again.dtype == np.float32 and np.array_equal(first, again)
    field = result_of(runs, "grid")
    assert field["codec"] == "npy" and field["v"] == 2 and field["dtype"] == "<f4" and field["shape"] == [40, 40]
    on_disk = np.load(blob_path(runs, field["ref"]), allow_pickle=False)  # a standard tool reads it
    assert np.array_equal(on_disk, first)
    first[0, 0] = 99  # the caller's copy
    assert grid(40)[0, 0] == 0


def test_a_small_array_is_kept_in_the_record(runs: Path) -> None:
    run = open_run(runs)
    step = run.step(lambda n: np.array([n, n + 1]), name="small")
    assert step(1).tolist() == [1, 2]
    field = result_of(runs, "small")
    assert field["codec"] == "npy" and "b64" in field and "ref" not in field


def test_frames_and_series_are_stored_as_parquet(runs: Path) -> None:
    run = open_run(runs)
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, None, 2.5], "c": ["x", "y", "z"]},
                         index=pd.Index([10, 20, 30], name="id"))
    series = pd.Series([1.5, 2.5], index=["p", "q"], name="score")

    @run.step
    def table(_: int) -> pd.DataFrame:
        return frame

    @run.step
    def column(_: int) -> pd.Series:
        return series

    for _ in range(2):
        pd.testing.assert_frame_equal(table(1), frame, check_exact=True)
        pd.testing.assert_series_equal(column(1), series, check_exact=True)
    assert result_of(runs, "table")["codec"] == result_of(runs, "column")["codec"] == "parquet"


def test_records_with_arrays_come_back_as_their_classes(runs: Path) -> None:
    run = open_run(runs)
    values: dict[str, Any] = {
        "fit": Fit(np.ones(3), 0.25, {"epochs": 3, "$": "a key like a node's"}),
        "frozen": Frozen("abc", np.float32(0.5)),
        "pair": Pair(np.zeros((2, 2), dtype=np.int16), [1, 2]),
        "report": Report(title="q3"),
        "mixed": [np.arange(3), (1, 2), float("nan"), b"\x00raw", pathlib.Path("out/x.csv"), {1: "one", "1": "s"}],
    }
    calls: list[str] = []

    @run.step
    def make(kind: str) -> Any:
        calls.append(kind)
        return values[kind]

    for _ in range(2):
        fit = make("fit")
        assert type(fit) is Fit and np.array_equal(fit.weights, np.ones(3)) and fit.meta == values["fit"].meta
        frozen = make("frozen")
        assert type(frozen) is Frozen and frozen == values["frozen"] and frozen.computed == 3
        assert type(frozen.scale) is np.float32
        pair = make("pair")
        assert type(pair) is Pair and pair.left.dtype == np.int16 and pair.right == [1, 2]
        report = make("report")
        assert type(report) is Report and report == values["report"]
        assert report.model_fields_set == values["report"].model_fields_set
        mixed = make("mixed")
        assert np.array_equal(mixed[0], np.arange(3)) and mixed[1] == [1, 2]  # sequences come back as lists
        assert mixed[2] != mixed[2] and mixed[3:] == values["mixed"][3:]
    assert calls == list(values)
    codecs = {uid: u["result"]["codec"] for uid, u in step_units(read_doc(runs, "r")).items()}
    assert codecs == {f"make:{kind}": "tree" for kind in values}


def test_a_result_no_format_holds_fails_its_call_with_the_fix(runs: Path) -> None:
    run = open_run(runs)
    returned: dict[str, Any] = {
        "objects": np.array([1, "a"], dtype=object),
        "mixed-frame": pd.DataFrame({"a": [1, "x"]}, dtype=object),
        "extra-attribute": WithCache(1).warm(),
        "a-set": {1, 2},
    }

    @run.step
    def odd(kind: str) -> Any:
        return returned[kind]

    expected = {
        "objects": "step odd returned a numpy array of dtype object, holding Python objects",
        "mixed-frame": "step odd returned a pandas DataFrame that Parquet cannot hold",
        "extra-attribute": f"step odd returned a {WithCache.__module__}.WithCache with attributes that are not"
                           " fields (cache)",
        "a-set": "step odd returned a set",
    }
    for kind, start in expected.items():
        with pytest.raises(InvalidInputError) as caught:
            odd(kind)
        message = str(caught.value)
        assert message.startswith(start), message
        assert message.endswith("or let the step pickle it with @run.step(allow_pickle=True)") and "\n" not in message
    units = step_units(read_doc(runs, "r"))
    assert {u["status"] for u in units.values()} == {"failed"} and len(units) == 4

    @dataclasses.dataclass
    class Local:
        x: int

    local = run.step(lambda: Local(1), name="local")
    with pytest.raises(InvalidInputError, match=r"defined where it cannot be found by name.*top level of a module"):
        local()


def test_pickle_takes_what_nothing_else_holds_when_the_step_or_the_run_allows_it(runs: Path) -> None:
    run = open_run(runs)
    step = run.step(lambda: WithCache(1).warm(), name="cached", allow_pickle=True)
    assert step().cache == [1]
    assert result_of(runs, "cached")["codec"] == "pickle"
    assert run.step(lambda: np.arange(2), name="array", allow_pickle=True)().tolist() == [0, 1]
    assert result_of(runs, "array")["codec"] == "npy"  # a format that holds it still comes first
    everything = resumable.open_run("r", runs_dir=runs, task="t", allow_pickle=True)
    assert everything.step(lambda: {3, 4}, name="aset")() == {3, 4}
    assert result_of(runs, "aset")["codec"] == "pickle"
    # A step that no longer allows pickle does not read one: it runs again.
    calls: list[int] = []
    again = run.step(lambda: calls.append(1) or [1], name="aset")
    assert again() == [1] and calls == [1]


PICKLED = """
import sys, resumable
sys.path.insert(0, sys.argv[2])
from resultcases import WithCache
run = resumable.open_run("r", runs_dir=sys.argv[1], task="t")
step = run.step(lambda n: WithCache(n).warm(), name="cached", allow_pickle=True)
try:
    print(step(int(sys.argv[3])).cache)
except resumable.RefusedError as exc:
    print("refused:", exc)
"""


def pickled(runs: Path, n: int) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    here = str(Path(__file__).parent)
    proc = subprocess.run([sys.executable, "-c", PICKLED, str(runs), here, str(n)], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_pickle_is_read_only_from_a_store_nobody_else_can_write_to(runs: Path) -> None:
    assert pickled(runs, 1) == "[1]"
    assert pickled(runs, 1) == "[1]"  # read back: the store is this user's
    runs.chmod(0o775)
    refused = pickled(runs, 1)
    assert refused.startswith("refused: unit cached:1: its recorded result is a pickle, and its runs directory")
    assert "writable by other users" in refused and "chmod go-w" in refused
    runs.chmod(0o755)
    assert pickled(runs, 1) == "[1]"
    if os.geteuid() == 0:  # a journal another user owns (root can make one)
        journal = runs / "r.journal.jsonl"
        os.chown(journal, 65534, -1)
        assert "belongs to another user (uid 65534)" in pickled(runs, 1)
        os.chown(journal, 0, -1)


def test_a_planted_pickle_blob_is_refused(runs: Path) -> None:
    run = open_run(runs)
    step = run.step(lambda: {"blob": os.urandom(100_000)}, name="big", serializer="pickle")
    step()
    ref = result_of(runs, "big")["ref"]
    blob_path(runs, ref).chmod(0o666)
    engine_module._close_all()  # as a fresh process: nothing of the run held in memory
    fresh = resumable.open_run("r", runs_dir=runs, task="t")
    again = fresh.step(lambda: {"blob": b""}, name="big", serializer="pickle")
    with pytest.raises(RefusedError, match=r"its stored value .* is writable by other users"):
        again()


def test_a_generator_function_is_refused_before_it_runs(runs: Path) -> None:
    run = open_run(runs)

    def numbers(n: int) -> Any:
        yield from range(n)

    with pytest.raises(InvalidInputError, match=r"numbers is a generator function.*as a list"):
        run.step(numbers)

    async def agen() -> Any:
        yield 1

    with pytest.raises(InvalidInputError, match="generator function"):
        run.step(agen)


def test_a_returned_iterator_fails_the_call_and_says_what_to_return(runs: Path) -> None:
    run = open_run(runs)
    step = run.step(lambda n: map(str, range(n)), name="lazy")
    with pytest.raises(InvalidInputError, match=r"step lazy returned a map, an iterator: .*return list\(\.\.\.\)"):
        step(3)
    (unit,) = step_units(read_doc(runs, "r")).values()  # recorded failed: it runs again next time
    assert unit["status"] == "failed"


def test_a_class_not_imported_is_said_not_guessed(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = open_run(runs)
    step = run.step(lambda: Fit(np.zeros(1), 0.0, {}), name="fit")
    step()
    monkeypatch.delitem(sys.modules, Fit.__module__)
    with pytest.raises(CorruptRunError, match=re.escape(f"is a {Fit.__module__}.Fit, a class this process has not"
                                                        " imported: import its module")):
        step()


def test_a_damaged_array_record_is_corruption_not_a_rerun() -> None:
    reader = formats.Reader(lambda ref: b"not npy", "unit x")
    with pytest.raises(CorruptRunError, match="unit x: its recorded npy result cannot be read"):
        reader.decode({"codec": "npy", "v": 2, "ref": "sha256:" + "0" * 64})


def test_formats_and_totals_on_a_postgresql_store(tmp_path: Path) -> None:
    url = pg_database("durable_formats")
    try:
        run = resumable.open_run("pgdata", store_url=url, task="arrays on postgres")
        grid = run.step(lambda n: np.arange(n * n, dtype=np.float32).reshape(n, n), name="grid")
        fit = run.step(lambda n: Fit(np.ones(n), float(n), {"n": n}), name="fit")
        assert [g.shape for g in run.map(grid, [2, 40], progress=False)] == [(2, 2), (40, 40)]  # a blob too
        assert fit(3).loss == 3.0
        pickled = run.step(lambda: WithCache(2).warm(), name="cached", allow_pickle=True)
        assert pickled().cache == [2]
        engine_module._close_all()  # as a fresh process: read back from the database
        again = resumable.open_run("pgdata", store_url=url, task="arrays on postgres")
        grid = again.step(lambda n: np.zeros(1), name="grid")
        assert np.array_equal(grid(40), np.arange(1600, dtype=np.float32).reshape(40, 40))
        assert type(again.step(lambda n: None, name="fit")(3)) is Fit
        assert again.step(lambda: None, name="cached", allow_pickle=True)().cache == [2]  # the database's trust
        from resumable import store

        doc = store.open_backend(url=url).open("pgdata").load()
        assert doc is not None and doc["maps"]["grid"]["units"] == 2
    finally:
        engine_module._close_all()
        drop_pg_database(url)
