"""snapshot.py: a large run's snapshot written in pieces is byte for byte the whole encoding."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.core import jsonio
from resumable.store.files import snapshot

# Integers beyond 64 bits and floats are left out: for those the whole document and a unit on its
# own may go to different encoders (orjson, or the standard one), which print some floats
# differently (1e-07 and 1e-7); the values read back the same, as the round-trip test checks.
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8,
)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8,
)


def big_doc(units: dict[str, Any]) -> dict[str, Any]:
    return {"schemaVersion": 2, "id": "r", "task": "t\u00e9 \x00", "status": "running", "units": units,
            "openItems": [{"a": 1}], "result": None}


def pieces_of(doc: dict[str, Any]) -> list[bytes]:
    per_piece = snapshot._UNITS_PER_PIECE
    snapshot._UNITS_PER_PIECE = 3  # pieces of 3 units: the same code path as 1,000 at a time
    try:
        return list(snapshot.stream(doc, 7, 99, big=True))
    finally:
        snapshot._UNITS_PER_PIECE = per_piece


@settings(max_examples=200)
@given(st.dictionaries(st.text(min_size=1, max_size=6), values, min_size=4, max_size=12))
def test_pieces_read_back_as_the_document(units: dict[str, Any]) -> None:
    doc = big_doc(units)
    decoded = snapshot.decode(b"".join(pieces_of(doc)))
    assert decoded.intact and decoded.doc == doc


@settings(max_examples=200)
@given(st.dictionaries(st.text(min_size=1, max_size=6), plain, min_size=4, max_size=12))
def test_pieces_are_the_whole_encoding(units: dict[str, Any]) -> None:
    doc = big_doc(units)
    whole = jsonio.dumps_pretty(doc, big=True)
    pieces = pieces_of(doc)
    assert len(pieces) > 3  # really in pieces
    joined = b"".join(pieces)
    assert joined.startswith(whole[:-2]) and joined[len(whole) - 2:].startswith(b',\n  "_journal": ')
    decoded = snapshot.decode(b"".join(pieces))
    assert decoded.intact and decoded.marker is not None and decoded.marker.seq == 7
    assert decoded.doc == doc


def test_small_documents_stay_one_piece() -> None:
    doc = big_doc({"a": {"status": "done"}})
    assert list(snapshot.stream(doc, 1, 2, big=True)) == [snapshot.encode(doc, 1, 2)]
