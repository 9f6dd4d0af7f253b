"""A run document whose containers have the wrong type is refused in one line by every reader, as
writers already refused it: ``{"units": 5}`` made ``get`` print it and ``resume`` answer "nothing to
do", both with exit 0, while every write to the run was refused. And a unit made to depend on
itself, which could never become eligible, is refused when it is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import resumable
from corehelpers import assert_error, cli, ok, tree
from resumable.core import model
from resumable.core.events import apply
from resumable.errors import CorruptRunError, InvalidInputError

READERS = (["get", "r"], ["get", "r", "--summary"], ["resume", "r"], ["status", "r"], ["report", "r", "-o", "-"],
           ["status", "r", "--units", "done"])

MALFORMED = [
    ({"units": 5}, "'units' is a number, not an object"),
    ({"units": [1, 2]}, "'units' is an array, not an object"),
    ({"phases": "x"}, "'phases' is a string, not an object"),
    ({"status": ["running"]}, "'status' is an array, not a string"),
    ({"openItems": {"a": 1}}, "'openItems' is an object, not an array"),
    ({"resolvedItems": 3}, "'resolvedItems' is a number, not an array"),
    ({"schemaVersion": "two"}, "'schemaVersion' is a string, not a whole number"),
]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def _plant(runs: Path, change: dict[str, Any]) -> None:
    runs.mkdir(exist_ok=True)
    doc = {"schemaVersion": 2, "id": "r", "task": "t", "status": "running",
           "units": {"a": {"status": "pending", "dependsOn": []}}, "phases": {}, "openItems": [], "resolvedItems": []}
    doc.update(change)
    (runs / "r.json").write_text(json.dumps(doc))  # as a hand edit (`jq ... && mv`) leaves it


@pytest.mark.parametrize(("change", "problem"), MALFORMED)
def test_every_reader_refuses_a_malformed_document(runs: Path, change: dict[str, Any], problem: str) -> None:
    _plant(runs, change)
    before = tree(runs)
    message = f"{runs / 'r.json'}: run r is malformed: {problem} — fix its document, or move it aside"
    for args in READERS:
        assert_error(cli(*args, runs=runs), 1, message)
    proc = cli("status", "r", "--json", runs=runs)  # --json still says where and why
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"] == message
    assert proc.stderr == f"resumable: {message}\n"
    listing = ok(cli("status", "--list", runs=runs))  # a listing names it and goes on
    assert f"r.json (unreadable: {message})" in listing
    with pytest.raises(CorruptRunError, match="is malformed"):
        resumable.open_run("r", runs_dir=runs).handle.read()
    assert tree(runs) == before


def test_null_containers_and_malformed_units_are_still_shown(runs: Path) -> None:
    """What writers repair (a null container, a null or non-object unit) readers keep showing."""
    _plant(runs, {"phases": None, "openItems": None, "units": {"a": None, "b": "done", "c": {"status": 7}}})
    doc = json.loads(ok(cli("get", "r", runs=runs)))
    assert doc["units"] == {"a": None, "b": "done", "c": {"status": 7}}
    ok(cli("status", "r", runs=runs))


def test_refuse_unreadable_also_refuses_a_newer_document() -> None:
    from resumable.errors import NewerFormatError

    model.refuse_unreadable({"schemaVersion": 2, "id": "r", "units": {}})
    with pytest.raises(NewerFormatError):
        model.refuse_unreadable({"schemaVersion": 99, "id": "r", "units": 5})
    with pytest.raises(CorruptRunError, match=r"^run x is malformed: it is not a run document"):
        model.refuse_unreadable({"id": "x"})


# --- a unit that depends on itself ------------------------------------------------------------------


def test_a_unit_made_to_depend_on_itself_is_refused(runs: Path) -> None:
    ok(cli("init", "r", "--task", "t", "--units", "a,b", runs=runs))
    before = tree(runs)
    for deps in ("a", "b,a", " a ,c"):
        assert_error(cli("unit", "r", "a", "pending", "--deps", deps, runs=runs), 1,
                     "unit 'a' cannot depend on itself")
    assert tree(runs) == before
    run = resumable.open_run("r", runs_dir=runs)
    with pytest.raises(InvalidInputError, match="cannot depend on itself"):
        run.unit("new", "pending", deps=["new"])
    run.unit("a", "pending", deps=["b"])  # another unit is fine
    assert json.loads(ok(cli("resume", "r", runs=runs)))["eligible"] == ["b"]


def test_apply_refuses_a_self_dependency_before_touching_the_document() -> None:
    doc, _ = apply(None, {"t": "init", "at": "2026-01-01T00:00:00Z", "id": "r", "task": "t", "units": ["a"]})
    copy = json.loads(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="cannot depend on itself"):
        apply(doc, {"t": "unit", "at": "2026-01-01T00:00:01Z", "unit": "a", "state": "pending", "deps": ["a"]})
    assert doc == copy
