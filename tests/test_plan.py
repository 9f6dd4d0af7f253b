"""plan.py: the resume set (the seed's algorithm, null-safe), unknown deps and cycles reported."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.core.plan import find_cycles, resume_set, topological_order


def doc_of(units: dict[str, Any]) -> dict[str, Any]:
    return {"units": {uid: u if not isinstance(u, tuple) else {"status": u[0], "dependsOn": list(u[1])}
                      for uid, u in units.items()}}


def test_chain_root() -> None:
    out = resume_set(doc_of({"a": ("pending", []), "b": ("pending", ["a"]), "c": ("pending", ["b"])}))
    assert out == {"skip": [], "eligible": ["a"], "dep_blocked": {"b": "a", "c": "a"}}


def test_unknown_dep_is_its_own_root_and_reported() -> None:
    out = resume_set(doc_of({"x": ("pending", ["q"]), "y": ("done", ["q"])}))
    assert out["dep_blocked"] == {"x": "q"}
    assert out["skip"] == ["y"] and out["eligible"] == []
    assert out["unknown_deps"] == {"x": ["q"], "y": ["q"]}


def test_cycle_roots_and_report() -> None:
    out = resume_set(doc_of({"a": ("pending", ["b"]), "b": ("pending", ["a"]), "c": ("pending", ["a"])}))
    assert out["dep_blocked"] == {"a": "b", "b": "a", "c": "a"}
    assert out["cycles"] == [["a", "b"]]
    assert out["eligible"] == [] and out["skip"] == []


def test_self_dependency_is_a_cycle() -> None:
    out = resume_set(doc_of({"a": ("pending", ["a"])}))
    assert out["dep_blocked"] == {"a": "a"} and out["cycles"] == [["a"]]


def test_only_done_skips_and_landed_deps_make_units_eligible() -> None:
    units = {"d": ("done", []), "p": ("pending", ["d"]), "i": ("in_progress", []), "b": ("blocked", ["d"]),
             "db": ("dep_blocked", ["d"]), "f": ("failed", []), "t": ("timeout", []), "x": ("interrupted", [])}
    out = resume_set(doc_of(units))
    assert out == {"skip": ["d"], "eligible": ["p", "i", "b", "db", "f", "t", "x"], "dep_blocked": {}}


def test_null_and_malformed_units_never_crash() -> None:
    doc = {"units": {"n": None, "s": "x", "l": [], "e": {}, "k": {"status": 3, "dependsOn": "a"},
                     "m": {"status": "pending", "dependsOn": [None, 1, "n"]}}}
    out = resume_set(doc)
    assert out["malformed"] == ["n", "s", "l", "e", "k"]
    assert out["dep_blocked"] == {"m": "n"}  # a malformed unit is not done
    assert set(out["eligible"]) == {"n", "s", "l", "e", "k"}
    for units in (None, [], "x", 1):
        assert resume_set({"units": units}) == {"skip": [], "eligible": [], "dep_blocked": {}}
    assert resume_set({}) == {"skip": [], "eligible": [], "dep_blocked": {}}


def seed_resume(units: dict[str, Any]) -> dict[str, Any]:
    """A straight port of checkpoint.mjs's resume (seed-contracts §1.4), null-safe."""
    def st_of(u: Any) -> Any:
        return u.get("status") if isinstance(u, dict) else None

    def deps_of(u: Any) -> list[str]:
        d = u.get("dependsOn") if isinstance(u, dict) else None
        return [x for x in d if isinstance(x, str)] if isinstance(d, list) else []

    skip, eligible, blocked = [], [], {}
    for uid, u in units.items():
        if st_of(u) == "done":
            skip.append(uid)
            continue
        missing = [d for d in deps_of(u) if st_of(units.get(d)) != "done"]
        if not missing:
            eligible.append(uid)
            continue
        root, seen = missing[0], set()
        while root not in seen:
            seen.add(root)
            nxt = [d for d in deps_of(units.get(root)) if st_of(units.get(d)) != "done"]
            if not nxt:
                break
            root = nxt[0]
        blocked[uid] = root
    return {"skip": skip, "eligible": eligible, "dep_blocked": blocked}


names = st.sampled_from(list("abcdefg"))
unit_values = st.one_of(
    st.none(),
    st.just("junk"),
    st.fixed_dictionaries(
        {"status": st.sampled_from(["pending", "done", "done", "in_progress", "blocked", "dep_blocked"]),
         "dependsOn": st.lists(st.sampled_from(list("abcdefgq")), max_size=3)}),
)
graphs = st.dictionaries(names, unit_values, max_size=7)


def reaches(units: dict[str, Any], start: str, target: str) -> bool:
    graph = {k: [d for d in (v.get("dependsOn") if isinstance(v, dict) else []) if d in units]
             for k, v in units.items()}
    todo, seen = list(graph[start]), set()
    while todo:
        n = todo.pop()
        if n == target:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(graph[n])
    return False


@given(graphs)
def test_resume_set_properties(units: dict[str, Any]) -> None:
    out = resume_set({"units": units})
    ref = seed_resume(units)
    assert {k: out[k] for k in ("skip", "eligible", "dep_blocked")} == ref
    # A partition of the units, in document order.
    assert sorted([*out["skip"], *out["eligible"], *out["dep_blocked"]]) == sorted(units)
    for root in out["dep_blocked"].values():
        assert root not in units or not (isinstance(units[root], dict) and units[root]["status"] == "done")
    unknown = {uid: [d for d in u["dependsOn"] if d not in units]
               for uid, u in units.items() if isinstance(u, dict) and any(d not in units for d in u["dependsOn"])}
    assert out.get("unknown_deps", {}) == unknown
    in_cycle = {uid for uid in units if reaches(units, uid, uid)}
    assert {u for c in out.get("cycles", []) for u in c} == in_cycle
    malformed = [uid for uid, u in units.items() if not isinstance(u, dict)]
    assert out.get("malformed", []) == malformed


def test_find_cycles_deep_chain_no_recursion_limit() -> None:
    n = 50_000
    graph = {f"u{i}": [f"u{i - 1}"] if i else [] for i in range(n)}
    assert find_cycles(graph) == []
    graph["u0"] = [f"u{n - 1}"]
    cycles = find_cycles(graph)
    assert len(cycles) == 1 and len(cycles[0]) == n


def test_topological_order() -> None:
    assert topological_order({"c": ["b"], "b": ["a"], "a": [], "d": []}) == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="unknown step 'q'"):
        topological_order({"a": ["q"]})
    with pytest.raises(ValueError, match="dependency cycle: a -> b"):
        topological_order({"a": ["b"], "b": ["a"]})
