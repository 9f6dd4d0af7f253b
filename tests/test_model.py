"""model.py: ids, states, csv, stamps, the add-only v1 upgrade and the null-safe summary."""

from __future__ import annotations

import copy
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.core.model import (
    check_phase_state,
    check_run_id,
    check_unit_id,
    check_unit_state,
    default_run_id,
    new_document,
    split_csv,
    summary,
    upgrade,
)
from resumable.core.stamps import stamp
from resumable.errors import InvalidInputError

RUN_ID_RULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@pytest.mark.parametrize("run_id", ["a", "run-2026-07-18-101010Z", "A.b_c-d", "x" * 128, "9.9"])
def test_good_run_ids(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize(
    "run_id",
    ["", "..", "a..b", "../x", "a/b", "/abs", ".hidden", "-x", "_x", "x" * 129, "x" * 200, "a b", "a\nb",
     "a\x00b", "é", "a:b", "a\\b", "abc\n", "abc\r"],
)
def test_bad_run_ids(run_id: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        check_run_id(run_id)
    assert "\n" not in str(info.value)


@given(st.text(max_size=140) | st.text(alphabet="aZ9._-/ \n", max_size=140))
def test_run_id_rule_is_the_documented_regex(text: str) -> None:
    ok = bool(RUN_ID_RULE.fullmatch(text)) and ".." not in text
    if ok:
        assert check_run_id(text) == text
    else:
        with pytest.raises(InvalidInputError):
            check_run_id(text)


@pytest.mark.parametrize("unit_id", ["a", "task-3", "x" * 256, "é", "a.b/c"])
def test_good_unit_ids(unit_id: str) -> None:
    assert check_unit_id(unit_id) == unit_id


@pytest.mark.parametrize("unit_id", ["", "a b", "a,b", "a\tb", "a\nb", " a", "x" * 257, "a\u00a0b"])
def test_bad_unit_ids(unit_id: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        check_unit_id(unit_id)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("unit_id", [None, 3, ["a"]])
def test_non_string_unit_ids(unit_id: object) -> None:
    with pytest.raises(InvalidInputError):
        check_unit_id(unit_id)  # type: ignore[arg-type]


@given(st.text(max_size=300) | st.text(alphabet="ab,\t -", max_size=300))
def test_unit_id_rule(text: str) -> None:
    ok = 0 < len(text) <= 256 and not re.search(r"[\s,]", text)
    if ok:
        assert check_unit_id(text) == text
    else:
        with pytest.raises(InvalidInputError):
            check_unit_id(text)


def test_states() -> None:
    for s in ("pending", "in_progress", "done", "blocked", "dep_blocked", "failed", "timeout", "interrupted"):
        assert check_unit_state(s) == s
    for s in ("pending", "running", "done", "blocked", "skipped"):
        assert check_phase_state(s) == s
    for bad in ("DONE", "", "running"):
        with pytest.raises(InvalidInputError):
            check_unit_state(bad)
    with pytest.raises(InvalidInputError):
        check_phase_state("in_progress")


@pytest.mark.parametrize(
    ("raw", "parts"),
    [(None, []), ("", []), ("a,b", ["a", "b"]), (" a , ,b ,", ["a", "b"]), (",,,", []), ("a b,c", ["a b", "c"])],
)
def test_split_csv(raw: str | None, parts: list[str]) -> None:
    assert split_csv(raw) == parts


def test_stamps_and_default_id() -> None:
    assert stamp(0) == "1970-01-01T00:00:00Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp())
    assert default_run_id(1784369410) == "run-2026-07-18-101010Z"
    assert re.fullmatch(r"run-\d{4}-\d{2}-\d{2}-\d{6}Z", default_run_id())
    check_run_id(default_run_id())


def test_new_document_key_order_and_shape() -> None:
    doc = new_document("r", "t", ["a", "b"], "2026-01-01T00:00:00Z")
    assert list(doc) == ["schemaVersion", "id", "task", "status", "createdAt", "updatedAt", "phases", "units",
                         "openItems", "resolvedItems", "result"]
    assert doc["status"] == "running" and doc["schemaVersion"] == 2
    assert doc["units"]["a"] == {"status": "pending", "dependsOn": [], "note": "",
                                 "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}
    full = new_document("r", "t", [], "x", launch={"scriptPath": "p"}, required_phases=["p"],
                        require_validation=True)
    assert list(full)[-3:] == ["requiredPhases", "requireValidation", "launch"]


V1 = {
    "schemaVersion": 1,
    "id": "old",
    "task": "t",
    "status": "running",
    "units": {"a": {"status": "done", "weird": [1]}, "b": None},
    "phases": {"p": {"status": "running", "x": 1}},
    "launch": {"scriptPath": "s.mjs"},
}


def test_upgrade_is_add_only() -> None:
    doc = copy.deepcopy(V1)
    upgrade(doc)
    assert doc["schemaVersion"] == 2
    assert doc["openItems"] == [] and doc["resolvedItems"] == []
    for key in ("units", "phases", "launch", "id", "task", "status"):
        assert doc[key] == V1[key]


def test_upgrade_keeps_existing_items_and_newer_versions() -> None:
    doc = {"schemaVersion": 3, "openItems": [{"id": "x"}], "resolvedItems": [1]}
    upgrade(doc)
    assert doc == {"schemaVersion": 3, "openItems": [{"id": "x"}], "resolvedItems": [1]}
    doc2: dict[str, object] = {"schemaVersion": "2"}
    upgrade(doc2)
    assert doc2["schemaVersion"] == 2  # the seed left the string a string
    doc3: dict[str, object] = {"schemaVersion": True, "openItems": None}
    upgrade(doc3)
    assert doc3["schemaVersion"] == 2 and doc3["openItems"] == []


def test_summary_is_null_safe() -> None:
    doc = {"id": "r", "status": "running", "task": "t",
           "units": {"a": None, "b": "x", "c": {"status": "done"}, "d": {"status": "blocked"},
                     "e": {"status": "dep_blocked"}, "f": {"status": "in_progress"}, "g": {}, "h": {"status": 3}}}
    s = summary(doc)
    assert s == {"id": "r", "status": "running", "task": "t", "currentPhase": None, "total": 8, "done": 1,
                 "blocked": ["d"], "dep_blocked": ["e"], "in_progress": ["f"], "updatedAt": None}
    for bad_units in (None, [], "x", 3):
        assert summary({"units": bad_units})["total"] == 0


def test_next_attempt_number_is_one_above_the_highest_recorded() -> None:
    from resumable.core.model import next_attempt_number

    assert next_attempt_number({"attempts": [{"n": 1}, {"n": 3}, {"n": 2}]}) == 4
    assert next_attempt_number({"status": "pending"}) == 1
    # Null-safe: a malformed unit, attempt list or attempt, or a boolean n, counts for nothing.
    for unit in (None, "x", {"attempts": None}, {"attempts": ["x", None, {"n": "2"}, {"n": True}, {}]}):
        assert next_attempt_number(unit) == 1


def test_is_document_accepts_what_resumable_writes_and_refuses_what_readers_must_not_see() -> None:
    from resumable.core.model import is_document, refuse_unreadable
    from resumable.errors import CorruptRunError, NewerFormatError

    doc = new_document("r1", "t", ["a"], stamp())
    assert is_document(doc)
    assert refuse_unreadable(doc) is doc  # handed back as it is, typed: no copy on the load path
    # A null unit or container is read null-safe, not refused.
    assert is_document({**doc, "units": {"a": None}, "phases": None})
    for bad in ({**doc, "units": 3}, {**doc, "phases": "x"}, {**doc, "openItems": {}}, {"task": "t"}):
        assert not is_document(bad)
        with pytest.raises(CorruptRunError, match="is malformed"):
            refuse_unreadable(bad, "r1")
    newer = {**doc, "schemaVersion": 99}
    assert not is_document(newer)  # never raises: the readers' error says why
    with pytest.raises(NewerFormatError, match="upgrade resumable"):
        refuse_unreadable(newer, "r1")
