"""Unit ids of durable steps: readable for a single short int or string argument (``train:7``),
hashed otherwise; runs recorded with the hashed ids of earlier versions keep their results."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.durable.keys import KEY_HEX, arguments_key, readable_key

from .helpers import HERE, read_doc, step_units

LEGACY = HERE / "data" / "legacy-ids"  # written by the version before readable ids (make_legacy_ids.py)


@pytest.mark.parametrize(("value", "key"), [
    (7, "7"), (-3, "-3"), (0, "0"), ("doc-17", "doc-17"), ("café", "café"), ("a/b.txt", "a/b.txt"),
    ("7", None), ("-12", None), ("a b", None), ("a,b", None), ("a:b", None), ("", None),
    ("0123456789abcdef0123", None), ("x" * 65, None), ("a\x1bb", None), ("a\tb", None), ("a\ud800", None),
    (True, None), (7.0, None), (2**300, None), (["a"], None), (None, None),
])
def test_which_values_read_as_keys(value: Any, key: str | None) -> None:
    assert readable_key(value) == key


def test_a_single_short_argument_is_the_key_and_the_rest_are_hashed(runs: Path) -> None:
    run = resumable.open_run("ids", runs_dir=runs, task="ids")

    @run.step
    def train(epoch: int) -> int:
        return epoch

    @run.step
    def pick(a: object = None, b: object = None) -> str:
        return f"{a}/{b}"

    train(7)
    train(epoch=8)
    train("7")  # a string that reads as an integer would be taken for 7: hashed
    pick("doc-1")
    pick(b="doc-1")  # not the first parameter: pick:doc-1 is pick("doc-1")'s
    pick("doc-1", "x")
    ids = set(step_units(read_doc(runs, "ids")))
    hashed = {f"train:{arguments_key({'epoch': '7'}, 'train')}", f"pick:{arguments_key({'b': 'doc-1'}, 'pick')}",
              f"pick:{arguments_key({'a': 'doc-1', 'b': 'x'}, 'pick')}"}
    assert ids == {"train:7", "train:8", "pick:doc-1", *hashed}
    assert all(len(uid.partition(":")[2]) == KEY_HEX for uid in hashed)
    assert train(7) == 7 and pick("doc-1") == "doc-1/None"
    assert len(step_units(read_doc(runs, "ids"))) == 6


def test_a_long_step_name_with_a_readable_key_is_hashed_rather_than_refused(runs: Path) -> None:
    run = resumable.open_run("ids", runs_dir=runs, task="ids")
    name = "s" * 220

    def f(x: str) -> str:
        return x

    step = run.step(f, name=name)
    assert step("y" * 60) == "y" * 60  # name:key would be 281 characters
    (uid,) = step_units(read_doc(runs, "ids"))
    assert uid == f"{name}:{arguments_key({'x': 'y' * 60}, name)}"


def test_a_run_recorded_with_hashed_ids_keeps_its_results(runs: Path) -> None:
    runs.mkdir()
    for path in LEGACY.iterdir():
        shutil.copy(path, runs / path.name)
    before = step_units(read_doc(runs, "legacy"))
    assert all(len(uid.partition(":")[2]) == KEY_HEX for uid in before)  # the old scheme
    run = resumable.open_run("legacy", runs_dir=runs, task="a run recorded with hashed unit ids")
    ran: list[object] = []

    @run.step
    def train(epoch: int) -> dict[str, Any]:
        ran.append(epoch)
        return {"epoch": epoch, "loss": 1.0 / (epoch + 1)}

    @run.step
    def embed(doc_id: str) -> list[Any]:
        ran.append(doc_id)
        return [len(doc_id), doc_id]

    assert [train(e) for e in (0, 1, 2, 4)] == [{"epoch": e, "loss": 1.0 / (e + 1)} for e in (0, 1, 2, 4)]
    assert embed("doc-2") == [5, "doc-2"]
    assert run.map(embed, ["doc-1", "doc-2"]) == [[5, "doc-1"], [5, "doc-2"]]
    assert ran == []  # every recorded result was used
    assert train(3) == {"epoch": 3, "loss": 0.25}  # recorded failed: runs again, under its old id
    assert train(5) == {"epoch": 5, "loss": 1 / 6}  # new calls get readable ids
    assert ran == [3, 5]
    assert run.finish() == "done"  # the failed unit was the one re-run: nothing left behind
    after = step_units(read_doc(runs, "legacy"))
    assert set(after) == {*before, "train:5"}
    assert all(u["status"] == "done" for u in after.values())


def test_a_key_that_makes_an_id_over_256_characters_is_refused_at_the_call(runs: Path) -> None:
    run = resumable.open_run("ids", runs_dir=runs, task="ids")
    ran: list[str] = []

    @run.step(key=lambda x: x)
    def kf(x: str) -> str:
        ran.append(x)
        return x

    @run.step
    def default_key(x: str) -> str:
        return x

    with pytest.raises(resumable.InvalidInputError, match=r"303 characters \(limit 256\).*shorter key"):
        kf("x" * 300)
    assert ran == []
    assert default_key("y" * 300) == "y" * 300  # a long argument is hashed, never refused
    (uid,) = step_units(read_doc(runs, "ids"))
    assert len(uid) == len("default_key:") + KEY_HEX
