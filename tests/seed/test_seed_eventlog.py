"""The seed's hash-chained event log: replayed by its rules, corruption fails closed, never written."""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from seedhelpers import SeedWriter, js_digest

from corehelpers import needs
from resumable.errors import CorruptRunError, StoreError
from resumable.store.files.ulpi_eventlog import (
    TransitionError,
    apply_event,
    compare,
    digest,
    digest_matches,
    event_log_path,
    js_number,
    last_after_hash,
    parse_json,
    replay,
    stringify,
)

BASE = {"schemaVersion": 2, "id": "demo", "task": "t", "status": "running",
        "units": {"a": {"status": "pending"}}, "openItems": [], "resolvedItems": [], "result": None}


@pytest.fixture
def writer(tmp_path: Path) -> SeedWriter:
    w = SeedWriter(tmp_path / "demo.json")
    w.init(BASE)
    w.transition("merge", ["units", "a"], {"status": "in_progress", "startedAt": "2026-01-01T00:00:00Z"})
    w.transition("set", ["units", "b"], {"status": "pending", "dependsOn": ["a"]})
    w.transition("set", ["phases", "build", "status"], "running")  # creates the intermediates
    w.transition("delete", ["result"])
    return w


def lines_of(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines(keepends=True)


def rewrite(log: Path, lines: list[str]) -> None:
    log.write_text("".join(lines), encoding="utf-8")


# ---- names and replay -----------------------------------------------------------------------------

def test_event_log_path_follows_the_seed_rule() -> None:
    assert event_log_path("/r/x.json") == "/r/x.events.jsonl"
    assert event_log_path("/r/x.status") == "/r/x.status.events.jsonl"
    assert event_log_path(Path("rel/a.json")) == "rel/a.events.jsonl"
    with pytest.raises(StoreError, match="nonempty"):
        event_log_path("  ")


def test_replay_rebuilds_the_document(writer: SeedWriter) -> None:
    got = replay(writer.snapshot)
    assert got.doc == writer.doc
    assert got.events == 5
    assert got.discarded_tail_bytes == 0
    assert got.doc["phases"] == {"build": {"status": "running"}}
    assert "result" not in got.doc
    assert got.last_hash == js_digest(writer.doc)
    assert len(got.after_hashes) == 5


def test_replay_keeps_javascript_key_order_after_merge(tmp_path: Path) -> None:
    w = SeedWriter(tmp_path / "o.json")
    w.init({"z": 1, "a": {"k": 1, "m": 2}})
    w.transition("merge", ["a"], {"m": 3, "n": 4})
    w.transition("set", ["z"], 2)  # an existing key keeps its place
    w.transition("delete", ["a", "k"])
    got = replay(w.snapshot)
    assert json.dumps(got.doc) == json.dumps(w.doc) == '{"z": 2, "a": {"m": 3, "n": 4}}'


def test_intermediate_non_objects_are_replaced(tmp_path: Path) -> None:
    w = SeedWriter(tmp_path / "i.json")
    w.init({"a": [1, 2], "b": "text"})
    w.transition("set", ["a", "x"], True)
    w.transition("merge", ["b"], {"k": None})
    assert replay(w.snapshot).doc == {"a": {"x": True}, "b": {"k": None}}


def test_torn_final_fragment_is_dropped_and_counted(writer: SeedWriter) -> None:
    whole = replay(writer.snapshot)
    fragment = '{"v":1,"op":"set","path":["units","a","status"],"val'
    with open(writer.log, "a", encoding="utf-8") as f:
        f.write(fragment)
    got = replay(writer.snapshot)
    assert got.doc == whole.doc and got.events == whole.events
    assert got.discarded_tail_bytes == len(fragment.encode())


def test_a_complete_looking_final_line_without_newline_is_still_torn(writer: SeedWriter) -> None:
    # The seed drops ANY final fragment without a newline, even one that would parse.
    text = writer.log.read_text(encoding="utf-8")
    writer.log.write_text(text.rstrip("\n"), encoding="utf-8")
    got = replay(writer.snapshot)
    assert got.events == 4
    assert got.discarded_tail_bytes == len(lines_of(writer.log)[-1].encode())


def test_empty_or_fragment_only_log_has_no_init(tmp_path: Path) -> None:
    snap = tmp_path / "e.json"
    log = Path(event_log_path(snap))
    for content in ("", '{"v":1,"op":"init"'):
        log.write_text(content, encoding="utf-8")
        with pytest.raises(CorruptRunError, match="has no complete init record"):
            replay(snap)


# ---- corruption: each kind fails closed with one line naming the file and line -----------------

def _corrupt(writer: SeedWriter, index: int, line: str) -> CorruptRunError:
    lines = lines_of(writer.log)
    lines[index] = line
    rewrite(writer.log, lines)
    before = writer.log.read_bytes()
    with pytest.raises(CorruptRunError) as info:
        replay(writer.snapshot)
    assert writer.log.read_bytes() == before  # nothing repaired
    message = str(info.value)
    assert "\n" not in message and str(writer.log) in message
    return info.value


def _record(writer: SeedWriter, index: int) -> dict[str, Any]:
    rec: dict[str, Any] = json.loads(lines_of(writer.log)[index])
    return rec


def _line(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n"


@pytest.mark.parametrize(("line", "expect"), [
    ('{"v":1,"op":"set",\n', "line 3 is corrupt"),
    ("\n", "line 3 is corrupt"),
    ('{"v":1,"op":"set","path":["x"],"value":NaN,"beforeHash":"","afterHash":""}\n', "line 3 is corrupt"),
    ('{"v":2,"op":"set","path":["x"],"value":1}\n', "line 3 has an invalid envelope"),
    ('{"v":true,"op":"set","path":["x"],"value":1}\n', "line 3 has an invalid envelope"),
    ('{"v":1,"op":7}\n', "line 3 has an invalid envelope"),
    ('[1]\n', "line 3 has an invalid envelope"),
])
def test_bad_lines_fail_closed(writer: SeedWriter, line: str, expect: str) -> None:
    assert expect in str(_corrupt(writer, 2, line))


def test_repeated_init_is_corruption(writer: SeedWriter) -> None:
    assert "line 4 repeats init" in str(_corrupt(writer, 3, lines_of(writer.log)[0]))


def test_chain_breaks_are_corruption(writer: SeedWriter) -> None:
    rec = _record(writer, 2)
    rec["beforeHash"] = "0" * 64
    assert "line 3 breaks the beforeHash chain" in str(_corrupt(writer, 2, _line(rec)))


def test_after_hash_break_is_corruption(writer: SeedWriter) -> None:
    rec = _record(writer, 2)
    rec["value"] = {"status": "tampered"}
    assert "line 3 breaks the afterHash chain" in str(_corrupt(writer, 2, _line(rec)))


@pytest.mark.parametrize(("change", "expect"), [
    ({"op": "push"}, "unsupported transition op 'push'"),
    ({"path": []}, "nonempty array of safe string keys"),
    ({"path": ["units", ""]}, "nonempty array of safe string keys"),
    ({"path": ["__proto__", "x"]}, "nonempty array of safe string keys"),
    ({"path": ["a", "constructor"]}, "nonempty array of safe string keys"),
    ({"path": "units"}, "nonempty array of safe string keys"),
    ({"op": "merge", "value": [1]}, "merge transition requires an object value"),
    ({"value": None, "drop": "value"}, "set transition requires value"),
])
def test_apply_rule_violations_are_corruption(writer: SeedWriter, change: dict[str, Any], expect: str) -> None:
    rec = _record(writer, 2)
    drop = change.pop("drop", None)
    rec.update(change)
    if drop:
        del rec[drop]
    err = _corrupt(writer, 2, _line(rec))
    assert "line 3" in str(err) and expect in str(err)


def test_first_line_must_be_an_init_with_its_hash(writer: SeedWriter) -> None:
    lines = lines_of(writer.log)
    init = json.loads(lines[0])
    assert "must start with one init document" in str(_corrupt(writer, 0, lines[1]))
    init["doc"]["task"] = "edited"
    assert "init hash does not match" in str(_corrupt(writer, 0, _line(init)))
    init["doc"] = [1]
    assert "must start with one init document" in str(_corrupt(writer, 0, _line(init)))


def test_missing_symlinked_and_fifo_logs_are_refused(tmp_path: Path, writer: SeedWriter) -> None:
    with pytest.raises(StoreError, match="event log does not exist"):
        replay(tmp_path / "other.json")
    link = tmp_path / "linked.json"
    os.symlink(writer.log, event_log_path(link))
    with pytest.raises(StoreError, match="symlink"):
        replay(link)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(event_log_path(fifo))
    with pytest.raises(StoreError, match="not a regular file"):
        replay(fifo)  # returns at once: O_NONBLOCK, then fstat
    with pytest.raises(StoreError, match="not a regular file"):
        last_after_hash(fifo)


def test_never_writes_the_seed_files(writer: SeedWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    flags_seen: list[int] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        flags_seen.append(flags)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (writer.log, writer.snapshot)}
    writer.transition("set", ["x"], 1, snapshot=False)
    replay(writer.snapshot)
    compare(writer.snapshot)
    digest_matches(writer.doc, writer.snapshot)
    assert flags_seen
    assert all(f & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND) == 0 for f in flags_seen)
    assert (writer.snapshot.read_bytes(), writer.snapshot.stat().st_mtime_ns) == before[writer.snapshot]


# ---- is the log ahead of the snapshot? ------------------------------------------------------------

def test_in_sync_is_the_seed_digest_test(writer: SeedWriter) -> None:
    assert last_after_hash(writer.snapshot) == js_digest(writer.doc)
    assert digest_matches(json.loads(writer.snapshot.read_text()), writer.snapshot)
    state = compare(writer.snapshot)
    assert state.kind == "in_sync" and state.replayed is None


def test_log_ahead_of_snapshot_after_a_crash(writer: SeedWriter) -> None:
    snapshot_doc = json.loads(writer.snapshot.read_text())
    # The crash window: the log record is fsynced, the snapshot rename never happened (twice).
    writer.transition("merge", ["units", "a"], {"status": "done"}, snapshot=False)
    writer.transition("set", ["units", "c"], {"status": "pending"}, snapshot=False)
    assert not digest_matches(snapshot_doc, writer.snapshot)
    state = compare(writer.snapshot)
    assert state.kind == "log_ahead" and state.ahead_by == 2
    assert state.replayed is not None and state.replayed.doc == writer.doc
    assert state.replayed.doc["units"]["a"]["status"] == "done"


def test_torn_tail_does_not_make_the_log_ahead(writer: SeedWriter) -> None:
    with open(writer.log, "a", encoding="utf-8") as f:
        f.write('{"v":1,"op":"set","pa')
    assert digest_matches(writer.doc, writer.snapshot)
    assert compare(writer.snapshot).kind == "in_sync"


def test_snapshot_written_by_something_else_has_diverged(writer: SeedWriter) -> None:
    edited = json.loads(writer.snapshot.read_text())
    edited["units"]["a"]["status"] = "done"  # the seed's plain store wrote past the log
    writer.snapshot.write_text(json.dumps(edited, indent=2) + "\n")
    state = compare(writer.snapshot)
    assert state.kind == "diverged" and state.replayed is not None
    assert state.replayed.doc["units"]["a"]["status"] == "in_progress"


def test_missing_snapshot_or_log(writer: SeedWriter, tmp_path: Path) -> None:
    writer.snapshot.unlink()
    state = compare(writer.snapshot)
    assert state.kind == "snapshot_unreadable" and state.ahead_by == 5
    writer.snapshot.write_text("{not json")
    assert compare(writer.snapshot).kind == "snapshot_unreadable"
    assert compare(tmp_path / "nolog.json").kind == "no_log"


def test_compare_fails_closed_on_a_corrupt_log(writer: SeedWriter) -> None:
    writer.transition("set", ["x"], 1, snapshot=False)
    lines = lines_of(writer.log)
    lines[1] = "garbage\n"
    rewrite(writer.log, lines)
    with pytest.raises(CorruptRunError, match="line 2 is corrupt"):
        compare(writer.snapshot)


def test_tail_read_of_a_long_log(tmp_path: Path) -> None:
    w = SeedWriter(tmp_path / "long.json")
    w.init({"n": 0, "pad": "x" * 70_000})  # a first line longer than one read block
    assert last_after_hash(w.snapshot) == js_digest(w.doc)
    for i in range(1, 300):
        w.transition("set", ["n"], i, snapshot=False)
    assert last_after_hash(w.snapshot) == js_digest(w.doc)
    assert compare(w.snapshot).ahead_by == 299


# ---- JavaScript's JSON, exactly ---------------------------------------------------------------------

GOLDEN = [
    (r'{"b":1.0,"2":[1e21,1e-7,0.1,-0.0,123456789012345678901234567890,5e-324,1E400,2.5e-6,100e-2],'
     r'"a":"é\u2028\u007f\u0001\"\\\/","1":{"x":"\ud800","y":"\ud83d\ude00","z":"\udc00\ud800"},'
     r'"4294967295":null,"4294967294":true,"01":false,"-1":[]}',
     '{"1":{"x":"\\ud800","y":"\U0001f600","z":"\\udc00\\ud800"},"2":[1e+21,1e-7,0.1,0,1.2345678901234568e+29,'
     '5e-324,null,0.0000025,1],"4294967294":true,"b":1,"a":"\xe9\u2028\x7f\\u0001\\"\\\\/","4294967295":null,'
     '"01":false,"-1":[]}',
     "03e258cf217bbc718a54bbfd58851257b01486b9deed37cad8cd6e493f6eab25"),
    (r'{"schemaVersion":2,"id":"r","units":{"10":{"status":"done"},"9":{"status":"pending"},"a":{}},'
     r'"ratio":0.30000000000000004,"big":9007199254740993,"neg":-1.5e300}',
     '{"schemaVersion":2,"id":"r","units":{"9":{"status":"pending"},"10":{"status":"done"},"a":{}},'
     '"ratio":0.30000000000000004,"big":9007199254740992,"neg":-1.5e+300}',
     "6645e6fa0337e1048984120d3f2259a7182c2f8a5e62a97ad1c50151ad9a639e"),
]


@pytest.mark.parametrize(("text", "expect", "sha"), GOLDEN)
def test_golden_stringify_and_digest(text: str, expect: str, sha: str) -> None:
    """Expected values printed by Node 20's JSON.parse/JSON.stringify/createHash on the same text."""
    doc = parse_json(text)
    assert stringify(doc) == expect
    assert digest(doc) == sha == hashlib.sha256(expect.encode()).hexdigest()


@pytest.mark.parametrize(("value", "text"), [
    (1e21, "1e+21"), (1e-7, "1e-7"), (123e-20, "1.23e-18"), (0.000001, "0.000001"), (1.0, "1"),
    (-0.0, "0"), (2.0**53, "9007199254740992"), (2.0**64, "18446744073709552000"),
    (0.1 + 0.2, "0.30000000000000004"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    (123456789012345680000.0, "123456789012345680000"), (1e20, "100000000000000000000"), (-1.5, "-1.5"),
    (1.5e-6, "0.0000015"), (1 / 3, "0.3333333333333333"), (4.35, "4.35"), (float("inf"), "null"),
    (float("nan"), "null"),
])
def test_js_number_golden(value: float, text: str) -> None:
    assert js_number(value) == text


def test_parse_json_is_javascripts() -> None:
    for bad in ("NaN", '{"a":Infinity}', "-Infinity", "01", "\ufeff{}", "{'a':1}", '"\x01"'):
        with pytest.raises(ValueError):
            parse_json(bad)
    assert parse_json("[1e400,-1e999,1" + "0" * 400 + "]") == [None, None, None]
    assert parse_json('{"a":1,"b":2,"a":3}') == {"a": 3, "b": 2}
    assert list(parse_json('{"a":1,"b":2,"a":3}')) == ["a", "b"]


def test_apply_event_is_pure() -> None:
    doc = {"u": {"a": {"s": 1}}}
    value = {"t": [1]}
    out = apply_event(doc, {"op": "merge", "path": ["u", "a"], "value": value})
    assert out == {"u": {"a": {"s": 1, "t": [1]}}}
    assert doc == {"u": {"a": {"s": 1}}}
    out["u"]["a"]["t"].append(2)
    assert value == {"t": [1]}
    with pytest.raises(TransitionError, match="must be JSON objects"):
        apply_event([], {"op": "set"})  # type: ignore[arg-type]
    with pytest.raises(TransitionError, match="unsupported transition op 'undefined'"):
        apply_event({}, {"path": ["a"]})


@needs("node", "the JavaScript comparisons run the real JSON.stringify")
def test_differential_against_node() -> None:
    """Random documents and doubles, stringified by Node and by us: the same bytes."""
    rnd = random.Random(7)
    alphabet = ["a", "Z", "0", "7", "é", "\u2028", "\x7f", "\x1f", "\n", '"', "\\", "😀", "\ud800", "\udfff", " "]

    def text() -> str:
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 6)))

    def number() -> float | int:
        pick = rnd.random()
        if pick < 0.3:
            return rnd.randint(-(2**60), 2**60)
        if pick < 0.6:
            double: float = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
            return double
        return rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-30, 30)

    def value(depth: int) -> Any:
        pick = rnd.random()
        if depth > 3 or pick < 0.4:
            return rnd.choice([None, True, False, number(), text()])
        if pick < 0.7:
            return [value(depth + 1) for _ in range(rnd.randint(0, 4))]
        keys = [text() for _ in range(rnd.randint(0, 4))]
        keys += [str(rnd.randint(0, 2**33)) for _ in range(rnd.randint(0, 2))]
        return {k: value(depth + 1) for k in keys}

    docs = [value(0) for _ in range(400)]
    # Both sides parse the same JSON text (NaN/inf come out as null, lone surrogates as escapes).
    payload = "[" + ",".join(stringify(d) for d in docs) + "]"
    js = ("const c=require('crypto');const d=JSON.parse(require('fs').readFileSync(0,'utf8'));"
          "console.log(JSON.stringify(d.map(x=>[JSON.stringify(x),c.createHash('sha256').update(JSON.stringify(x)).digest('hex')])))")
    done = subprocess.run(["node", "-e", js], input=payload.encode("utf-8", "surrogatepass"),
                          capture_output=True, check=True)
    theirs = json.loads(done.stdout)
    ours = parse_json(payload)
    assert len(theirs) == len(ours)
    for mine, (their_text, their_sha) in zip(ours, theirs, strict=True):
        assert stringify(mine) == their_text
        assert digest(mine) == their_sha
