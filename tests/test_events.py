"""events.py: the pure apply(doc, event) that enforces the checkpoint contract, stable item ids,
and every reason ``finalize done`` refuses."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from resumable.core.events import apply, item_id
from resumable.core.finalize import finalize_done_reasons
from resumable.core.model import UNIT_STATES, shape_problem
from resumable.errors import InvalidInputError, NewerFormatError, RefusedError

AT = "2026-11-29T08:00:00Z"
LATER = "2026-11-29T09:00:00Z"


def fresh(units: list[str] | None = None, **init: Any) -> dict[str, Any]:
    doc, out = apply(None, {"t": "init", "at": AT, "id": "r", "task": "t", "units": units or [], **init})
    assert out is None
    return doc


def ev(t: str, at: str = LATER, **kw: Any) -> dict[str, Any]:
    return {"t": t, "at": at, **kw}


def refused(doc: dict[str, Any], event: dict[str, Any], exc: type[Exception] = RefusedError) -> str:
    """Apply must refuse and leave the document exactly as it was."""
    before = copy.deepcopy(doc)
    with pytest.raises(exc) as info:
        apply(doc, event)
    assert doc == before
    assert "\n" not in str(info.value)
    return str(info.value)


# --- stable item ids ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"a": 1}, "f-9f89c740ceb4"),
        ({"phase": "test", "issue": "gap"}, "f-9e559be5907f"),
        ({"issue": "gap", "phase": "test"}, "f-9e559be5907f"),
        ({"phase": "test", "issue": "gap", "at": "2020-01-01T00:00:00Z"}, "f-9e559be5907f"),
        ({"phase": "test", "issue": "gap", "at": 12345}, "f-9e559be5907f"),
        ({"at": None, "phase": "test", "issue": "gap"}, "f-9e559be5907f"),
        ({"id": "  ", "x": [{"b": 2, "a": 1}]}, "f-85edd0b43715"),
        ({"id": "", "x": [{"a": 1, "b": 2}]}, "f-85edd0b43715"),
        ({"id": 7, "x": [{"a": 1, "b": 2}]}, "f-85edd0b43715"),
        ({"a": 1.0}, "f-9f89c740ceb4"),  # JSON.stringify prints 1.0 as 1
        # JSON.stringify leaves C1 and DEL raw; the output's escaping of them must not change ids
        # (node -e 'sha1(JSON.stringify({note:"x\u009by\u007f"}))').
        ({"note": "x\x9by\x7f"}, "f-891fd0a0d31a"),
    ],
)
def test_item_id_golden(item: dict[str, Any], expected: str) -> None:
    assert item_id(item) == expected


def test_item_id_given_id_wins() -> None:
    assert item_id({"id": "mine", "a": 1}) == "mine"
    assert item_id({"id": " x ", "a": 1}) == " x "


@pytest.mark.parametrize("value", [1e20, 1e21, 1e300, -1e25, 2**70, 123456789012345678901234567890])
def test_item_id_of_huge_numbers_does_not_crash(value: float) -> None:
    assert item_id({"a": value}).startswith("f-")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=15,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.randoms(), json_values)
def test_item_id_ignores_key_order_and_at(item: dict[str, Any], rnd: Any, at: Any) -> None:
    item.pop("id", None)
    keys = list(item)
    rnd.shuffle(keys)
    shuffled = {k: item[k] for k in keys}
    shuffled["at"] = at
    assert item_id(shuffled) == item_id(item)
    assert item_id(item).startswith("f-") and len(item_id(item)) == 14


# --- init / base ---------------------------------------------------------------------------------


def test_init_over_live_refused_and_over_terminal_allowed() -> None:
    doc = fresh(["a"])
    for status in ("running", "initializing", "needs_attention"):
        doc["status"] = status
        msg = refused(doc, ev("init", id="r", task="t2", units=[]))
        assert "LIVE" in msg
    for status in ("done", "aborted"):
        doc["status"] = status
        new, _ = apply(doc, ev("init", id="r", task="t2", units=["b"]))
        assert new["task"] == "t2" and list(new["units"]) == ["b"]


def test_init_rejects_bad_unit_ids_and_dedups() -> None:
    with pytest.raises(InvalidInputError):
        apply(None, ev("init", id="r", task="t", units=["a b"]))
    doc, _ = apply(None, ev("init", id="r", task="t", units=["a", "b", "a"]))
    assert list(doc["units"]) == ["a", "b"]


def test_base_adopts_a_document() -> None:
    doc, _ = apply(fresh(), ev("base", doc={"id": "x", "units": {}}, reason="import"))
    assert doc == {"id": "x", "units": {}}
    with pytest.raises(InvalidInputError):
        apply(None, ev("base", doc=[1], reason="import"))


def test_unknown_or_unstamped_events() -> None:
    doc = fresh()
    refused(doc, {"t": "nope", "at": AT}, InvalidInputError)
    refused(doc, {"t": "unit", "unit": "a", "state": "done"}, InvalidInputError)
    with pytest.raises(InvalidInputError):
        apply(None, ev("unit", unit="a", state="done"))


# --- units ---------------------------------------------------------------------------------------


def test_unit_lifecycle_stamps() -> None:
    doc = fresh(["a"])
    apply(doc, ev("unit", at="T1", unit="a", state="in_progress", note="go", deps=["x"]))
    u = doc["units"]["a"]
    assert u["status"] == "in_progress" and u["startedAt"] == "T1" and u["note"] == "go"
    assert u["dependsOn"] == ["x"] and "finishedAt" not in u
    apply(doc, ev("unit", at="T2", unit="a", state="blocked"))
    assert u["finishedAt"] == "T2" and u["startedAt"] == "T1" and u["note"] == "go"
    apply(doc, ev("unit", at="T3", unit="a", state="in_progress", deps=[]))
    assert "finishedAt" not in u and u["startedAt"] == "T1" and u["dependsOn"] == []
    apply(doc, ev("unit", at="T4", unit="a", state="done"))
    apply(doc, ev("unit", at="T5", unit="a", state="done"))  # done -> done re-stamps
    assert u["finishedAt"] == "T5" and u["updatedAt"] == "T5" and doc["updatedAt"] == "T5"


def test_a_fields_only_restatement_keeps_the_stamps() -> None:
    """The runner marks a step removed from its job (or back) by restating the unit's state with
    fields only: no new start or finish. The seed's own `unit a done` again still re-stamps."""
    doc = fresh(["a"])
    apply(doc, ev("unit", at=AT, unit="a", state="done"))
    apply(doc, ev("unit", unit="a", state="done", fields={"removed": True}))
    assert doc["units"]["a"]["finishedAt"] == AT and doc["units"]["a"]["removed"] is True
    assert doc["units"]["a"]["updatedAt"] == LATER
    apply(doc, ev("unit", unit="a", state="done"))
    assert doc["units"]["a"]["finishedAt"] == LATER
    later = "2026-11-29T10:00:00Z"
    apply(doc, ev("unit", at=later, unit="a", state="done", fields={"removed": False}, note="n"))
    assert doc["units"]["a"]["finishedAt"] == later  # a note is a new statement


def test_unit_creates_missing_and_replaces_malformed_units() -> None:
    doc = fresh()
    doc["units"] = {"n": None, "s": "junk", "l": [1]}
    for uid in ("n", "s", "l", "new"):
        apply(doc, ev("unit", unit=uid, state="pending"))
        assert doc["units"][uid]["status"] == "pending"
        assert doc["units"][uid]["dependsOn"] == []
    doc["units"] = None
    apply(doc, ev("unit", unit="a", state="done"))
    assert doc["units"] == {"a": doc["units"]["a"]} and doc["units"]["a"]["status"] == "done"


@pytest.mark.parametrize("state", [s for s in UNIT_STATES if s != "done"])
def test_done_is_never_demoted(state: str) -> None:
    doc = fresh(["a"])
    apply(doc, ev("unit", unit="a", state="done"))
    msg = refused(doc, ev("unit", unit="a", state=state, note="x"))
    assert msg == "unit 'a' is already done — refusing to demote it (resume must skip done units)"


def test_invalidate_is_the_way_back_from_done() -> None:
    doc = fresh(["a"])
    apply(doc, ev("unit", unit="a", state="done"))
    apply(doc, ev("invalidate", at="T9", unit="a", reason="command changed"))
    u = doc["units"]["a"]
    assert u["status"] == "pending" and "finishedAt" not in u
    assert u["invalidations"] == [{"at": "T9", "reason": "command changed", "from": "done"}]
    refused(doc, ev("invalidate", unit="a", reason="  "), InvalidInputError)
    refused(doc, ev("invalidate", unit="zz", reason="x"), InvalidInputError)
    doc["units"]["n"] = None
    refused(doc, ev("invalidate", unit="n", reason="x"), InvalidInputError)


def test_unit_bad_input_refused_untouched() -> None:
    doc = fresh(["a"])
    refused(doc, ev("unit", unit="a b", state="done"), InvalidInputError)
    refused(doc, ev("unit", unit="a", state="finished"), InvalidInputError)
    refused(doc, ev("unit", unit="a", state="done", deps=["x,y"]), InvalidInputError)
    refused(doc, ev("unit", unit="a", state="done", attempt={"n": "1"}), InvalidInputError)
    refused(doc, ev("unit", unit="a", state="done", fields={"status": "pending"}), InvalidInputError)
    refused(doc, ev("unit", unit="a", state="done", fields=[1]), InvalidInputError)


def test_attempts_merge_by_n_and_fields() -> None:
    doc = fresh(["a"])
    apply(doc, ev("unit", unit="a", state="in_progress", attempt={"n": 1, "status": "running"}))
    apply(doc, ev("unit", unit="a", state="failed", attempt={"n": 1, "status": "failed", "exitCode": 3},
                  fields={"command": "make"}))
    apply(doc, ev("unit", unit="a", state="in_progress", attempt={"n": 2, "status": "running"}))
    u = doc["units"]["a"]
    assert u["attempts"] == [{"n": 1, "status": "failed", "exitCode": 3}, {"n": 2, "status": "running"}]
    assert u["command"] == "make"


unit_ids = st.sampled_from(["a", "b", "c"])
unit_events = st.lists(st.tuples(unit_ids, st.sampled_from(UNIT_STATES)), max_size=30)


@given(unit_events)
def test_apply_units_matches_a_reference_model(events: list[tuple[str, str]]) -> None:
    """Each unit's status is its last accepted state; a write is refused exactly when it would
    demote a done unit, and a refusal changes nothing."""
    doc = fresh(["a"])
    model: dict[str, str] = {"a": "pending"}
    for i, (uid, state) in enumerate(events):
        event = ev("unit", at=f"T{i}", unit=uid, state=state)
        if model.get(uid) == "done" and state != "done":
            refused(doc, event)
        else:
            apply(doc, event)
            model[uid] = state
        assert {k: v["status"] for k, v in doc["units"].items()} == model
        assert doc["updatedAt"].startswith("T") or doc["updatedAt"] == AT


@given(unit_events)
def test_apply_is_deterministic(events: list[tuple[str, str]]) -> None:
    one, two = fresh(["a"]), fresh(["a"])
    for i, (uid, state) in enumerate(events):
        event = ev("unit", at=f"T{i}", unit=uid, state=state)
        for doc in (one, two):
            try:
                apply(doc, copy.deepcopy(event))
            except RefusedError:
                pass
    assert json.dumps(one) == json.dumps(two)


# --- phases, items, resolve, validation -------------------------------------------------------


def test_phase_merges_and_sets_current_phase() -> None:
    doc = fresh()
    apply(doc, ev("phase", at="T1", phase="build", state="running"))
    apply(doc, ev("phase", at="T2", phase="build", state="done"))
    assert doc["phases"]["build"] == {"status": "done", "updatedAt": "T2", "startedAt": "T1", "finishedAt": "T2"}
    assert doc["currentPhase"] == "build"
    apply(doc, ev("phase", at="T3", phase="test", state="pending"))
    assert doc["currentPhase"] == "build"
    refused(doc, ev("phase", phase="x", state="in_progress"), InvalidInputError)
    refused(doc, ev("phase", phase="", state="done"), InvalidInputError)
    doc["phases"] = None
    apply(doc, ev("phase", phase="p", state="skipped"))
    assert doc["phases"]["p"]["status"] == "skipped"


def test_items_stable_ids_first_seen_at_and_no_duplicate_ids() -> None:
    doc = fresh()
    _, ids = apply(doc, ev("item", at="T1", items={"phase": "test", "issue": "gap"}))
    assert ids == ["f-9e559be5907f"]
    _, ids = apply(doc, ev("item", at="T2", items=[{"issue": "gap", "phase": "test"}, "plain", 3,
                                                   {"issue": "gap", "phase": "test"}, {"a": 1}]))
    assert ids == ["f-9e559be5907f", "f-9f89c740ceb4"]
    assert doc["openItems"] == [
        {"at": "T1", "phase": "test", "issue": "gap", "id": "f-9e559be5907f"},
        "plain",
        3,
        {"at": "T2", "a": 1, "id": "f-9f89c740ceb4"},
    ]
    _, ids = apply(doc, ev("item", at="T3", items={"a": 1, "at": "mine"}))
    assert doc["openItems"][3]["at"] == "mine"
    _, ids = apply(doc, ev("item", items=[]))
    assert ids == []


def test_resolve_moves_only_open_ids() -> None:
    doc = fresh()
    apply(doc, ev("item", at="T1", items=[{"id": "x", "v": 1}, {"id": "y"}]))
    _, moved = apply(doc, ev("resolve", at="T2", ids=["y", "nope", "y"]))
    assert moved == ["y"]
    assert doc["resolvedItems"] == [{"at": "T1", "id": "y", "resolvedAt": "T2"}]
    assert [i["id"] for i in doc["openItems"]] == ["x"]
    _, moved = apply(doc, ev("resolve", ids=[]))
    assert moved == []


@pytest.mark.parametrize("verb", ["item", "resolve"])
def test_items_on_malformed_open_items(verb: str) -> None:
    event = ev("item", items={"a": 1}) if verb == "item" else ev("resolve", ids=["x"])
    doc = fresh()
    doc["openItems"] = None
    doc.pop("resolvedItems")
    apply(doc, copy.deepcopy(event))  # null -> [] (the seed's `??=`), never a TypeError
    assert isinstance(doc["openItems"], list) and doc["resolvedItems"] == []
    doc = fresh()
    doc["openItems"] = "junk"
    refused(doc, event, InvalidInputError)


def test_validation() -> None:
    doc = fresh()
    apply(doc, ev("validation", at="T1", status="red", note="flaky"))
    assert doc["finalValidation"] == {"status": "red", "at": "T1", "note": "flaky"}
    apply(doc, ev("validation", at="T2", status="green"))
    assert doc["finalValidation"] == {"status": "green", "at": "T2"}
    refused(doc, ev("validation", status="pass"), InvalidInputError)


def test_v1_document_upgraded_add_only_by_a_write() -> None:
    v1 = {"schemaVersion": 1, "id": "o", "task": "t", "status": "running",
          "units": {"a": {"status": "pending", "x": 1}}, "phases": {}, "launch": {"scriptPath": "s"}}
    doc = copy.deepcopy(v1)
    apply(doc, ev("phase", phase="p", state="running"))
    assert doc["schemaVersion"] == 2 and doc["openItems"] == [] and doc["resolvedItems"] == []
    assert doc["units"] == v1["units"] and doc["launch"] == v1["launch"]


# --- finalize --------------------------------------------------------------------------------------

SHA = "a" * 64


def good_pipeline() -> dict[str, Any]:
    return {
        "intakePath": "intake.md",
        "intakeFileSha": SHA,
        "intakeScopeSha": "0123456789abcdef" * 4,
        "intakeSelection": "all",
        "intakeScope": [{"id": "s1", "title": "T", "source": "S"}, {"id": "s2", "title": "T", "source": "S"}],
        "scopeCoverage": {"total": 2, "covered": ["s1"], "dropped": ["s2"], "uncovered": [], "errors": []},
    }


def finalizable(**extra: Any) -> dict[str, Any]:
    doc = fresh(["a"])
    apply(doc, ev("unit", unit="a", state="done"))
    doc.update(extra)
    return doc


def test_finalize_done_when_everything_holds() -> None:
    doc = finalizable(pipeline=good_pipeline())
    assert finalize_done_reasons(doc) == []
    apply(doc, ev("finalize", at="T9", status="done", result="shipped"))
    assert doc["status"] == "done" and doc["finishedAt"] == "T9" and doc["result"] == "shipped"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d["units"].update(b={"status": "pending"}, c=None), "2 unit(s) not done: b, c"),
        (lambda d: d["phases"].update(p={"status": "blocked"}), "1 phase(s) blocked: p"),
        (lambda d: d.update(requiredPhases=["build", "test"], phases={"build": {"status": "done"}}),
         "1 required phase(s) not done: test"),
        (lambda d: d["openItems"].append({"id": "x"}), "1 open finding(s) in openItems"),
        (lambda d: d.update(requireValidation=True), "final validation is absent"),
        (lambda d: d.update(requireValidation=True, finalValidation={"status": "red", "at": "x"}),
         "final validation is red (not green)"),
        (lambda d: d.update(pipeline={}), "binding selected-scope coverage receipt is absent"),
        (lambda d: d.update(pipeline={"scopeCoverage": []}), "binding selected-scope coverage receipt is absent"),
    ],
)
def test_finalize_done_refusals(mutate: Any, reason: str) -> None:
    doc = finalizable()
    mutate(doc)
    msg = refused(doc, ev("finalize", status="done"))
    assert msg.startswith("refusing finalize done — ") and msg.endswith(" (use needs_attention)")
    assert reason in msg
    for status in ("needs_attention", "aborted"):
        d = copy.deepcopy(doc)
        apply(d, ev("finalize", status=status))
        assert d["status"] == status


def P(**changes: Any) -> dict[str, Any]:
    p = good_pipeline()
    cov = changes.pop("cov", None)
    p.update(changes)
    if cov is not None:
        p["scopeCoverage"] = {**p["scopeCoverage"], **cov}
    return p


@pytest.mark.parametrize(
    ("pipeline", "reason"),
    [
        (P(intakePath=" "), "intakePath is blank"),
        (P(intakeFileSha="A" * 64), "intakeFileSha is not a valid sha256 binding"),
        (P(intakeScopeSha="abc"), "intakeScopeSha is not a valid sha256 binding"),
        (P(intakeSelection=""), "intakeSelection is blank"),
        (P(intakeScope=[]), "intakeScope is empty"),
        (P(intakeScope=[{"id": "s1", "title": "T", "source": "S"}, {"id": "s1", "title": "T", "source": "S"}]),
         "duplicate id"),
        (P(intakeScope=[{"id": "s1", "title": "T", "source": "S"}, {"id": "s2", "title": "T"}]),
         "intakeScope entry s2 lacks title/source"),
        (P(cov={"covered": ["s1"], "dropped": [], "total": 2}), "intake id s2 is absent from the coverage receipt"),
        (P(cov={"dropped": ["s2", "zz"], "total": 3}), "coverage receipt contains non-intake id zz"),
        (P(cov={"total": 0}), "scopeCoverage.total is not an integer >= 1"),
        (P(cov={"total": "2"}), "scopeCoverage.total is not an integer >= 1"),
        (P(cov={"covered": "s1"}), "scopeCoverage.covered is not an array"),
        (P(cov={"covered": ["s1", " "]}), "scopeCoverage.covered has a blank or non-string id"),
        (P(cov={"covered": ["s1", "s2"]}), "scopeCoverage id s2 appears in two groups"),
        (P(cov={"total": 3}), "scopeCoverage accounts for 2 of 3"),
        (P(cov={"total": 3}), "scopeCoverage.total 3 != intake count 2"),
        (P(cov={"errors": ["boom"]}), "scopeCoverage.errors is not an empty array"),
        (P(cov={"errors": None}), "scopeCoverage.errors is not an empty array"),
        (P(cov={"dropped": [], "uncovered": ["s2"]}), "1 selected-scope item(s) UNCOVERED: s2"),
    ],
)
def test_finalize_done_scope_coverage_receipt(pipeline: dict[str, Any], reason: str) -> None:
    doc = finalizable(pipeline=pipeline)
    assert reason in refused(doc, ev("finalize", status="done"))


def test_finalize_done_collects_every_reason_in_order() -> None:
    doc = fresh(["a", "b"], requiredPhases=["ship"], requireValidation=True)
    apply(doc, ev("phase", phase="p", state="blocked"))
    apply(doc, ev("item", items={"a": 1}))
    doc["pipeline"] = {}
    msg = refused(doc, ev("finalize", status="done"))
    assert msg == (
        "refusing finalize done — 2 unit(s) not done: a, b; 1 phase(s) blocked: p; "
        "1 required phase(s) not done: ship; 1 open finding(s) in openItems; "
        "binding selected-scope coverage receipt is absent; final validation is absent (use needs_attention)"
    )


def test_finalize_bad_status_and_null_units() -> None:
    doc = fresh()
    refused(doc, ev("finalize", status="finished"), InvalidInputError)
    doc["units"] = {"a": None}
    assert "1 unit(s) not done: a" in refused(doc, ev("finalize", status="done"))
    doc["units"] = None
    doc["phases"] = "junk"
    apply(doc, ev("finalize", status="done"))  # nothing malformed is "not done"
    assert doc["status"] == "done"


def test_begin_reopens() -> None:
    doc = finalizable()
    apply(doc, ev("finalize", status="aborted"))
    apply(doc, ev("begin", launch={"kind": "resumable", "argv": ["resumable", "run"], "cwd": "/"}))
    assert doc["status"] == "running" and "finishedAt" not in doc and doc["launch"]["kind"] == "resumable"


@settings(max_examples=60)
@given(st.dictionaries(st.sampled_from(["units", "phases", "openItems", "resolvedItems", "requiredPhases",
                                        "pipeline", "finalValidation", "requireValidation", "schemaVersion"]),
                       json_values, max_size=6),
       st.sampled_from(["unit", "phase", "item", "resolve", "validation", "finalize", "invalidate", "begin"]))
def test_malformed_documents_never_crash_apply(junk: dict[str, Any], verb: str) -> None:
    """Whatever a hand edit left in the document, apply either works or refuses in one line."""
    doc = {"id": "r", "status": "running", **junk}
    event = {
        "unit": ev("unit", unit="a", state="done"),
        "phase": ev("phase", phase="p", state="done"),
        "item": ev("item", items={"a": 1}),
        "resolve": ev("resolve", ids=["x"]),
        "validation": ev("validation", status="green"),
        "finalize": ev("finalize", status="done"),
        "invalidate": ev("invalidate", unit="a", reason="r"),
        "begin": ev("begin"),
    }[verb]
    try:
        apply(doc, event)
    except (RefusedError, InvalidInputError) as exc:
        assert "\n" not in str(exc)


@settings(max_examples=150)
@given(st.dictionaries(st.sampled_from(["units", "phases", "openItems", "resolvedItems", "status", "id", "task",
                                        "schemaVersion"]),
                       json_values | st.sampled_from(["2", "1", "x", 1, 2, 1.0]), max_size=8),
       st.lists(st.sampled_from(["unit", "phase", "item", "resolve", "validation", "finalize", "invalidate",
                                 "begin"]), min_size=1, max_size=4))
def test_apply_never_unfits_a_document_fit_to_write(junk: dict[str, Any], verbs: list[str]) -> None:
    """The file store checks a document's shape only when it is new to the writer, not after each
    of its own (or caught-up) events: that is sound only if no event applied to a document that
    passed ``shape_problem`` can make it fail."""
    def fit(d: dict[str, Any]) -> bool:
        try:
            return shape_problem(d) is None
        except NewerFormatError:
            return False

    doc = {"units": {}, **junk}
    assume(fit(doc))
    events = {
        "unit": ev("unit", unit="a", state="in_progress", note="n", deps=["b"], attempt={"n": 1},
                   fields={"k": [1]}),
        "phase": ev("phase", phase="p", state="running"),
        "item": ev("item", items=[{"a": 1}, "loose"]),
        "resolve": ev("resolve", ids=["x"]),
        "validation": ev("validation", status="red", note="n"),
        "finalize": ev("finalize", status="needs_attention", result="r"),
        "invalidate": ev("invalidate", unit="a", reason="r"),
        "begin": ev("begin", launch={"scriptPath": "s"}),
    }
    for verb in verbs:
        try:
            doc, _ = apply(doc, copy.deepcopy(events[verb]))
        except (RefusedError, InvalidInputError):
            continue
        assert fit(doc), verb
