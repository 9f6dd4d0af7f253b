"""journal.py: record framing (seq + crc32 + compact JSON), torn tails, and corruption."""

from __future__ import annotations

import json
import random
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resumable.errors import CorruptRunError, InvalidInputError, NewerFormatError
from resumable.store.files import journal

PATH = "/runs/r.journal.jsonl"

json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10) | st.floats(
    allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=10,
)
events = st.builds(
    lambda t, body: {"t": t, **body},
    st.text(min_size=1, max_size=8),
    st.dictionaries(st.text(max_size=6).filter(lambda k: k not in ("t", *journal.RESERVED)), json_values,
                    max_size=4),
)


def encode_all(evs: list[dict[str, Any]], first: int = 1) -> bytes:
    return b"".join(journal.encode(first + i, e) for i, e in enumerate(evs))


@given(st.lists(events, max_size=8))
def test_round_trip(evs: list[dict[str, Any]]) -> None:
    data = encode_all(evs)
    scan = journal.scan(data, base=0, path=PATH, after_seq=0)
    assert scan.records == [(i + 1, e) for i, e in enumerate(evs)]
    assert scan.end == len(data) and scan.torn == 0
    # Each record is one line: the JSON never holds a raw newline.
    assert data.count(b"\n") == len(evs)


@given(st.lists(events, min_size=1, max_size=5), st.integers(0, 10**6), st.integers(0, 50))
def test_scan_from_an_offset_continues_the_sequence(evs: list[dict[str, Any]], pick: int, first: int) -> None:
    data = encode_all(evs, first + 1)
    cut = pick % len(evs)
    base = len(encode_all(evs[:cut], first + 1))
    scan = journal.scan(data[base:], base=base, path=PATH, after_seq=first + cut)
    assert [s for s, _ in scan.records] == list(range(first + cut + 1, first + len(evs) + 1))
    assert scan.end == len(data)


@given(st.lists(events, min_size=1, max_size=5), st.data())
def test_torn_tail_is_ignored(evs: list[dict[str, Any]], data: st.DataObject) -> None:
    """Any prefix of the journal scans to exactly the complete records in it."""
    raw = encode_all(evs)
    cut = data.draw(st.integers(0, len(raw)))
    scan = journal.scan(raw[:cut], base=0, path=PATH, after_seq=0)
    complete = raw[:cut].count(b"\n")
    assert scan.records == [(i + 1, e) for i, e in enumerate(evs[:complete])]
    assert scan.end == len(encode_all(evs[:complete]))
    assert scan.torn == cut - scan.end


def test_torn_tail_of_every_length() -> None:
    evs = [{"t": "unit", "unit": f"u{i}", "state": "done", "at": "2026-11-29T08:00:00Z"} for i in range(3)]
    raw = encode_all(evs)
    last = raw.rfind(b"\n", 0, len(raw) - 1) + 1
    for cut in range(last, len(raw)):
        scan = journal.scan(raw[:cut], base=0, path=PATH, after_seq=0)
        assert len(scan.records) == 2 and scan.end == last and scan.torn == cut - last


def corrupt_error(data: bytes, base: int = 0) -> str:
    with pytest.raises(CorruptRunError) as info:
        journal.scan(data, base=base, path=PATH, after_seq=0)
    msg = str(info.value)
    assert "\n" not in msg and PATH in msg
    return msg


def test_every_byte_of_a_middle_record_is_checked() -> None:
    """Changing any one byte of a complete, non-final record is a one-line error naming the file
    and the record's byte offset, or (e.g. a hex digit's case) leaves the data intact."""
    evs = [{"t": "unit", "unit": f"u{i}", "state": "done", "note": "é ✓", "at": "2026-11-29T08:00:00Z"}
           for i in range(3)]
    raw = encode_all(evs)
    start = len(journal.encode(1, evs[0]))
    end = start + len(journal.encode(2, evs[1]))
    rnd = random.Random(7)
    for pos in range(start, end):
        for new in {raw[pos] ^ 0x01, raw[pos] ^ 0x80, rnd.randrange(256), ord("\n")} - {raw[pos]}:
            bad = bytearray(raw)
            bad[pos] = new
            try:
                scan = journal.scan(bytes(bad), base=0, path=PATH, after_seq=0)
            except CorruptRunError as exc:
                msg = str(exc)
                assert "\n" not in msg and PATH in msg
                assert f"byte offset {start}" in msg or f"byte offset {pos + 1}" in msg, (pos, msg)
            else:
                assert scan.records == [(i + 1, e) for i, e in enumerate(evs)], (pos, new)


def test_corruption_offset_is_absolute() -> None:
    evs = [{"t": "x", "i": i} for i in range(4)]
    raw = encode_all(evs)
    base = len(encode_all(evs[:1]))
    tail = bytearray(raw[base:])
    second = len(journal.encode(2, evs[1]))
    tail[second + 5] ^= 0x01
    with pytest.raises(CorruptRunError, match=f"byte offset {base + second}"):
        journal.scan(bytes(tail), base=base, path=PATH, after_seq=1)


@pytest.mark.parametrize(
    "line",
    [
        b"garbage\n",
        b"1 00000000 {}\n",
        b"\n",
        b"1 zzzzzzzz {\"t\":\"x\"}\n",
    ],
)
def test_garbage_lines_are_corruption(line: bytes) -> None:
    assert "byte offset 0" in corrupt_error(line)


def test_valid_crc_but_not_an_event_is_corruption() -> None:
    import zlib

    for payload in (b"[1]", b'{"x":1}', b'{"t":3}', b"nope"):
        crc = zlib.crc32(payload, zlib.crc32(b"1 "))
        corrupt_error(b"1 %08x %s\n" % (crc, payload))


def test_sequence_gaps_and_repeats_are_corruption() -> None:
    a, b = {"t": "x", "i": 1}, {"t": "x", "i": 2}
    gap = journal.encode(1, a) + journal.encode(3, b)
    assert "has sequence 3, expected 2" in corrupt_error(gap)
    dup = journal.encode(1, a) + journal.encode(1, a)
    assert "expected 2" in corrupt_error(dup)
    assert "expected 1" in corrupt_error(journal.encode(2, a))


# --- resumable 0.1.0's zero padding after the records --------------------------------------


@given(st.lists(events, min_size=1, max_size=6), st.integers(1, 9000))
def test_old_padding_after_the_records_ends_them_and_is_cut_by_the_next_writer(
        evs: list[dict[str, Any]], pad: int) -> None:
    data = encode_all(evs)
    scan = journal.scan(data + bytes(pad), base=0, path=PATH, after_seq=0)
    assert scan.records == [(i + 1, e) for i, e in enumerate(evs)]
    assert scan.end == len(data) and scan.torn == pad


def test_records_are_one_json_object_per_line() -> None:
    line = journal.encode(7, {"t": "unit", "unit": "a", "state": "done", "note": "x\ny"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    obj = json.loads(line)
    assert list(obj)[:3] == ["v", "seq", "t"] and list(obj)[-1] == "crc"
    assert obj["v"] == journal.FORMAT and obj["seq"] == 7 and obj["note"] == "x\ny"
    assert journal.decode_line(line[:-1]) == (7, {"t": "unit", "unit": "a", "state": "done", "note": "x\ny"})
    # The checksum covers the sequence number and every field.
    assert journal.decode_line(line[:-1].replace(b'"seq":7', b'"seq":8')) is None
    assert journal.decode_line(line[:-1].replace(b'"done"', b'"dona"')) is None


def test_an_event_may_not_carry_the_framing_keys() -> None:
    for key in journal.RESERVED:
        with pytest.raises(InvalidInputError):
            journal.encode(1, {"t": "unit", key: 1})


def newer_record(seq: int, body: str) -> bytes:
    """A record as a newer format would frame it: same framing, other content."""
    head = b'{"v":%d,"seq":%d,%s' % (journal.FORMAT + 1, seq, body.encode())
    return b'%s,"crc":"%08x"}' % (head, zlib.crc32(head))


def test_a_newer_record_format_is_refused_not_called_corrupt() -> None:
    newer = newer_record(1, '"kind":"something new","payload":[1,2]')
    with pytest.raises(NewerFormatError, match="newer resumable"):
        journal.scan(newer + b"\n", base=0, path=PATH, after_seq=0)


def test_a_bit_flip_that_raises_the_version_is_corruption() -> None:
    line = bytearray(journal.encode(1, {"t": "init", "id": "r"}))
    line[line.index(b'"v":1') + 4] = ord("3")
    corrupt_error(bytes(line))


def test_a_torn_write_into_the_padding_is_cut_off_with_everything_after_it() -> None:
    data = encode_all([{"t": "init"}, {"t": "unit", "n": 1}])
    last = journal.encode(3, {"t": "unit", "n": 2})
    for cut in range(len(last)):
        # A prefix of the record reached the disk; the padding follows it.
        scan = journal.scan(data + last[:cut] + bytes(4096), base=0, path=PATH, after_seq=0)
        assert len(scan.records) == 2 and scan.end == len(data)
        assert scan.torn == cut + 4096  # the writer cuts the fragment and the padding off
        # The head of the record was lost and its tail reached the disk (torn across blocks):
        # never acknowledged, as no complete record follows it.
        if cut:
            torn = data + bytes(cut) + last[cut:] + bytes(4096)
            scan = journal.scan(torn, base=0, path=PATH, after_seq=0)
            assert len(scan.records) == 2 and scan.end == len(data)
            assert scan.torn == len(torn) - len(data)


def test_a_hole_of_zeros_before_a_valid_record_is_corruption() -> None:
    recs = [journal.encode(i + 1, {"t": "unit", "n": i}) for i in range(4)]
    start = len(recs[0])
    holed = recs[0] + bytes(len(recs[1])) + recs[2] + recs[3] + bytes(100)
    with pytest.raises(CorruptRunError, match=f"byte offset {start}"):
        journal.scan(holed, base=0, path=PATH, after_seq=0)
    # A single byte zeroed inside an earlier record, too.
    zeroed = bytearray(b"".join(recs))
    zeroed[start + 5] = 0
    with pytest.raises(CorruptRunError, match=f"byte offset {start}"):
        journal.scan(bytes(zeroed), base=0, path=PATH, after_seq=0)
