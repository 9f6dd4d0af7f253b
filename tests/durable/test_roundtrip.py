"""Results round-trip: what a call returns, what a later hit returns and what the value was agree,
for JSON (inline and in blobs) and for pickle."""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import resumable
from resumable.durable import engine as engine_module

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
picklable = st.recursive(
    st.none() | st.integers() | st.floats(allow_nan=False) | st.binary(max_size=20) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.frozensets(st.integers(), max_size=3) | st.dictionaries(st.integers(), inner, max_size=3),
    max_leaves=10,
)


def round_trip(value: Any, serializer: str) -> tuple[Any, Any, Any]:
    """(first call, hit in this process, hit in a fresh engine) for a step returning ``value``."""
    with tempfile.TemporaryDirectory() as tmp:
        run = resumable.open_run("rt", runs_dir=tmp, task="round trip")
        step = run.step(lambda k: value, name="v", key=lambda k: k, serializer=serializer)
        first, hit = step("k"), step("k")
        engine_module._close_all()
        again = resumable.open_run("rt", runs_dir=tmp, task="round trip")
        fresh = again.step(lambda k: None, name="v", key=lambda k: k, serializer=serializer)("k")
        engine_module._close_all()
        return first, hit, fresh


@settings(max_examples=60)
@given(json_values)
def test_json_results_round_trip(value: Any) -> None:
    assert round_trip(value, "json") == (value, value, value)


@settings(max_examples=40)
@given(picklable)
def test_pickle_results_round_trip(value: Any) -> None:
    assert round_trip(value, "pickle") == (value, value, value)


@settings(max_examples=5)
@given(st.text(min_size=1, max_size=3), st.integers(min_value=66_000, max_value=200_000))
def test_large_results_round_trip_through_blobs(unit: str, size: int) -> None:
    value = {"blob": unit * (size // len(unit))}
    assert round_trip(value, "json") == (value, value, value)
    assert round_trip(value, "pickle") == (value, value, value)
