"""snapshot.py: a large run's snapshot written in pieces is byte for byte the whole encoding."""

from __future__ import annotations

from typing import Any

import pytest
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


# --- decode_chunked: decode()'s answer, read a piece at a time --------------------------------


def chunked(data: bytes, chunk: int = 97) -> snapshot.Decoded | None:
    got = snapshot.decode_chunked(lambda offset, size: data[offset : offset + size], chunk)
    if got is None:
        return None
    decoded, size = got
    assert size == len(data)
    return decoded


def answer(decoded: snapshot.Decoded) -> tuple[str, Any, Any, bool]:
    # repr() tells key order, int from float, 2**70 from its float, -0.0 from 0.0.
    marker = decoded.marker
    return (repr(decoded.doc), marker and marker.seq, marker and marker.offset, decoded.intact)


def decode_answer(data: bytes) -> tuple[str, Any, Any, bool] | str:
    try:
        return answer(snapshot.decode(data))
    except ValueError as exc:
        return f"ValueError: {exc}"


def loaded_answer(data: bytes, chunk: int = 97) -> tuple[str, Any, Any, bool] | str:
    """What the loader gets: the pieces' answer, or decode()'s when they give none."""
    decoded = chunked(data, chunk)
    return decode_answer(data) if decoded is None else answer(decoded)


def tricky_units(n: int) -> dict[str, Any]:
    units: dict[str, Any] = {}
    for i in range(n):
        units[f"s{i}"] = {
            "status": "done",
            "dependsOn": [f"s{i - 1}"] if i else [],
            "note": ["", '\n    "x": {', '",\n    "y": 1\n  }\n}', "caf\u00e9 \u2603 \U0001f600", "\\n  }"][i % 5],
            "attempts": [{"n": 1, "exitCode": 0, "big": 2**70 + i, "neg": -(2**65), "f": 0.1 * i,
                          "deep": {"a": [[], {}, [{"b": None}]]}}] if i % 3 else [],
            "empty": {},
        }
    units[',\n    "odd key'] = {}
    units["\n  }"] = []
    units["last"] = 12345678901234567890123
    return units


def test_pieces_decode_as_a_whole_parse() -> None:
    doc = big_doc(tricky_units(300))
    doc["launch"] = {"kind": "resumable", "argv": ["a", "b"], "nested": {"k": {"v": 1}}}
    for big in (True, False):
        data = snapshot.encode(doc, 12, 3456, big=big)
        for chunk in (1, 7, 97, 4096, len(data)):
            decoded = chunked(data, chunk)
            assert decoded is not None
            assert answer(decoded) == decode_answer(data)
            assert decoded.doc == doc and list(decoded.doc) == list(doc)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=6), values, min_size=1, max_size=12), st.integers(1, 300))
def test_a_pick_keeps_of_each_unit_what_it_returns(units: dict[str, Any], chunk: int) -> None:
    doc = big_doc(units)
    data = snapshot.encode(doc, 5, 77, big=True)

    def pick(uid: str, unit: Any) -> Any:
        return None if len(uid) % 2 else ("kept", unit)

    got = snapshot.decode_chunked(lambda offset, size: data[offset : offset + size], chunk, pick)
    assert got is not None
    whole = snapshot.decode(data).doc
    assert got[0].doc["units"] == {k: ("kept", u) for k, u in whole["units"].items() if not len(k) % 2}
    assert {k: v for k, v in got[0].doc.items() if k != "units"} == {k: v for k, v in whole.items() if k != "units"}


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=6), values, min_size=1, max_size=12), st.integers(1, 300))
def test_any_units_decode_as_a_whole_parse(units: dict[str, Any], chunk: int) -> None:
    data = snapshot.encode(big_doc(units), 5, 77, big=True)
    assert loaded_answer(data, chunk) == decode_answer(data)


def test_a_damaged_byte_is_answered_as_decode_answers() -> None:
    data = snapshot.encode(big_doc(tricky_units(40)), 9, 900, big=True)
    for at in range(0, len(data), max(len(data) // 300, 1)):
        for byte in (0x20, 0x31, 0x7D):
            if data[at] == byte:
                continue
            damaged = data[:at] + bytes([byte]) + data[at + 1 :]
            expected = decode_answer(damaged)
            decoded = chunked(damaged)
            if decoded is not None:  # a damaged file that still parses: not intact, as decode() says
                assert answer(decoded) == expected
            if isinstance(expected, str):
                assert decoded is None
            assert loaded_answer(damaged) == expected


def test_files_not_in_the_layout_are_left_to_decode() -> None:
    import json

    doc = big_doc(tricky_units(30))
    data = snapshot.encode(doc, 3, 30, big=True)
    assert chunked(data) is not None
    marker_at = data.rindex(b',\n  "_journal"')
    shapes = {
        # jq '.k = 1': a key after the marker
        "key after marker": data[:-2] + b',\n  "k": 1\n}\n',
        # the marker not last: moved before the document's last key
        "marker not last": data[:marker_at] + b',\n  "_journal": {"seq": 3, "offset": 30, "crc": "00000000"}'
        + b',\n  "moved": 1\n}\n',
        "re-indented": json.dumps(json.loads(data), indent=4, ensure_ascii=False).encode(),
        "jq": json.dumps(json.loads(data), indent=2).encode() + b"\n",
        "compact": json.dumps(json.loads(data), separators=(",", ":")).encode(),
        "no marker": jsonio.dumps_pretty(doc, big=True),
        "byte order mark": b"\xef\xbb\xbf" + data,
        "two units keys": data.replace(b'\n  "openItems"', b'\n  "units": {},\n  "openItems"'),
        "not an object": b"[" + data + b"]",
    }
    for name, shaped in shapes.items():
        decoded = chunked(shaped)
        assert decoded is None or answer(decoded) == decode_answer(shaped), name
        assert loaded_answer(shaped) == decode_answer(shaped), name
    # Read in pieces whatever the indentation (decode()'s answer: edited, so not intact) ...
    for name in ("key after marker", "marker not last", "re-indented", "jq", "no marker"):
        decoded = chunked(shapes[name])
        assert decoded is not None and answer(decoded) == decode_answer(shapes[name]), name
        assert not decoded.intact
    # ... but not one line of JSON, nor a document with two "units": decode() reads those whole.
    for name in ("compact", "byte order mark", "two units keys", "not an object"):
        assert chunked(shapes[name]) is None, name


@pytest.mark.parametrize(("indent", "ascii"), [(2, True), (4, False), ("\t", False), (" ", True)])
def test_a_reindented_snapshot_is_read_in_pieces(indent: int | str, ascii: bool) -> None:
    """The pieces are found by the format (the units object's tokens, its members' line
    indentation learnt from the file), not by resumable's own two spaces."""
    import json

    doc = big_doc(tricky_units(200))
    doc["launch"] = {"kind": "resumable", "argv": ["a"], "units": "a key named units, deeper"}
    text = json.dumps(json.loads(snapshot.encode(doc, 4, 40, big=True)), indent=indent, ensure_ascii=ascii)
    data = text.encode()
    for chunk in (1, 64, 4096, len(data)):
        got = snapshot.decode_chunked(lambda offset, size: data[offset : offset + size], chunk)
        assert got is not None, chunk
        assert answer(got[0]) == decode_answer(data)
        assert got[0].doc == doc and got[0].marker is not None and not got[0].intact


def test_a_file_cut_short_is_left_to_decode() -> None:
    data = snapshot.encode(big_doc(tricky_units(20)), 3, 30, big=True)
    for end in range(0, len(data), 37):
        cut = data[:end]
        assert chunked(cut) is None
        assert loaded_answer(cut) == decode_answer(cut)
    # Everything but the final newline: still decode()'s answer, intact as peek() finds it.
    assert loaded_answer(data[:-1]) == decode_answer(data[:-1])


def test_repeating_values_of_units_are_one_string_each() -> None:
    stamp = "2026-11-30T16:17:11Z"
    units = {f"u{i}": {"status": "done", "createdAt": "".join(["2026-11-30T16:", "17:11Z"]),
                       "note": f"n{i}", "fingerprint": {"v": 1, "env": "e" * 64, "cwd": "/".join(["", "w"])}}
             for i in range(2500)}
    doc = {"id": "r", "status": "done", "units": units}
    data = snapshot.encode(doc, 1, 10, big=True)
    got = snapshot.decode_chunked(lambda offset, size: data[offset : offset + size], 4096)
    assert got is not None
    decoded = got[0].doc
    assert decoded == doc  # equal values, as decode() gives them
    shared = decoded["units"]
    assert shared["u0"]["createdAt"] == stamp and shared["u0"]["createdAt"] is shared["u2499"]["createdAt"]
    assert shared["u7"]["fingerprint"]["env"] is shared["u1900"]["fingerprint"]["env"]
    assert shared["u7"]["note"] == "n7"  # a value of another field stays its own
