"""Crash recovery: a SIGKILL loop where every write the writer saw acknowledged survives; a journal
truncated at every byte of its last two records recovers the exact prefix; a byte flipped in an
earlier record is a clean one-line error naming file and offset, and nothing is rewritten.

The SIGKILL loop forks children from this (already imported) process, so a trial costs a fork and
a few writes rather than an interpreter start: hundreds of trials fit in a few seconds.
"""

from __future__ import annotations

import copy
import os
import random
import select
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resumable
from corehelpers import assert_error, cli, journal_of, journal_records, records, snapshot_file, tree
from resumable import fsio
from resumable.errors import CorruptRunError
from resumable.store.files import refresh as store

TRIALS = int(os.environ.get("RESUMABLE_CRASH_TRIALS", "240"))
WRITES_PER_CHILD = 40  # more than fit in the longest random delay: most children die mid-way


def plan(trial: int) -> list[tuple[str, str]]:
    """The child's deterministic writes: each unit goes in_progress, then done."""
    return [(f"t{trial}-{i // 2}", "in_progress" if i % 2 == 0 else "done") for i in range(WRITES_PER_CHILD)]


def child(path: Path, trial: int, wfd: int, kill_at_io: int, small_snapshot: bool) -> None:
    """Runs in the forked child; never returns."""
    try:
        if small_snapshot:
            store.EXACT_SNAPSHOT_BYTES = 256  # the large-run path: snapshot refreshed on a budget
        if kill_at_io:
            calls = 0

            def hook(op: str, _path: str) -> None:
                nonlocal calls
                calls += 1
                if calls == kill_at_io:
                    os.kill(os.getpid(), signal.SIGKILL)

            fsio.set_fault_hook(hook)
        run = resumable.open_run(path)
        for i, (unit, state) in enumerate(plan(trial)):
            if i == 5:
                run.item({"trial": trial})  # a different kind of record in the mix
            run.unit(unit, state)
            os.write(wfd, b"%d\n" % i)  # acknowledged: the API call returned
        run.close()
    finally:
        os._exit(0)


def expected_units(trial: int, writes: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for unit, state in plan(trial)[:writes]:
        out[unit] = state
    return out


def kill_child(path: Path, trial: int, rnd: random.Random, small: bool) -> tuple[int, bool]:
    """Fork a writer, SIGKILL it at a random moment; returns (acknowledged writes, was killed)."""
    rfd, wfd = os.pipe()
    kill_at_io = rnd.randrange(1, 80) if rnd.random() < 0.5 else 0
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        child(path, trial, wfd, kill_at_io, small)
    os.close(wfd)
    delay = rnd.random() * 0.012
    deadline = time.monotonic() + delay
    buf = b""
    if not kill_at_io:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([rfd], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                chunk = os.read(rfd, 4096)
                if not chunk:
                    break
                buf += chunk
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    while chunk := os.read(rfd, 4096):
        buf += chunk
    os.close(rfd)
    acks = [int(x) for x in buf.split()]
    assert acks == list(range(len(acks)))
    return len(acks), os.WIFSIGNALED(status)


def check_recovered(path: Path, trial: int, acked: int, history: dict[str, str]) -> None:
    doc = resumable.read_doc(path)  # a reader, before any writer repairs anything
    units = doc["units"]
    mine = {u: s["status"] for u, s in units.items() if u.startswith(f"t{trial}-")}
    options = [expected_units(trial, acked)]
    if acked < WRITES_PER_CHILD:
        options.append(expected_units(trial, acked + 1))  # the write in flight may have landed
    assert mine in options, (trial, acked, mine)
    # Everything acknowledged by earlier trials is still there.
    for unit, state in history.items():
        assert units[unit]["status"] == state, (unit, state, units.get(unit))
    history.update(mine)
    recs = records(path.with_name(path.name[: -len(".json")] + ".journal.jsonl"))  # gap-free or raises
    assert [s for s, _ in recs] == list(range(1, len(recs) + 1))
    writes = [e for _, e in recs if e["t"] == "unit" and e["unit"].startswith(f"t{trial}-")]
    assert len(writes) in (acked, acked + 1)


def test_sigkill_loop_acknowledged_writes_survive(tmp_path: Path) -> None:
    rnd = random.Random(int(os.environ.get("RESUMABLE_CRASH_SEED", "20261129")))
    kills = 0
    for small in (False, True):
        path = tmp_path / ("small" if small else "big") / "r.json"
        run = resumable.open_run(path)
        run.init("crash loop", units=["base"])
        run.close()
        history: dict[str, str] = {}
        for trial in range(TRIALS // 2):
            acked, killed = kill_child(path, trial, rnd, small)
            kills += killed
            check_recovered(path, trial, acked, history)
            if trial % 20 == 19:
                # The next write works and lands after everything recovered.
                after = resumable.open_run(path)
                after.unit(f"probe{trial}", "done")
                after.close()
                history[f"probe{trial}"] = "done"
        final = resumable.open_run(path)
        final.unit("last", "done")
        final.close()
        doc, marker = snapshot_file(path)
        assert doc == resumable.read_doc(path) and marker is not None
    assert kills >= TRIALS * 0.5, kills  # most trials really died mid-way


# --- truncation ------------------------------------------------------------------------------------


def build(path: Path, small_snapshot: bool, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A run whose journal has 8 records; returns the document after each record (index = seq)."""
    if small_snapshot:
        monkeypatch.setattr(store, "EXACT_SNAPSHOT_BYTES", 256)
    run = resumable.open_run(path)
    run.init("t", units=["a", "b", "c"])
    docs: list[dict[str, Any]] = [{}, copy.deepcopy(run.doc)]
    for step in (lambda: run.unit("a", "in_progress"), lambda: run.unit("a", "done"),
                 lambda: run.item({"x": 1}), lambda: run.phase("p", "running"),
                 lambda: run.unit("b", "done", note="n"), lambda: run.unit("y", "done"),
                 lambda: run.unit("c", "blocked")):
        step()
        docs.append(copy.deepcopy(run.doc))
    run.close()  # the snapshot is exact: after truncation it is *ahead* of the journal
    return docs


def view_as_of(docs: list[dict[str, Any]], full: bytes, seq: int) -> bytes:
    """The snapshot a lazy refresh would have left after record ``seq`` (its marker there)."""
    from resumable.store.files import snapshot

    offset = [0, *[i + 1 for i, b in enumerate(full) if b == ord("\n")]][seq]
    return snapshot.encode(docs[seq], seq, offset)


@pytest.mark.parametrize("small_snapshot", [False, True])
@pytest.mark.parametrize("view", ["behind", "none"])
def test_truncation_at_every_byte_of_the_last_two_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_snapshot: bool, view: str
) -> None:
    """Cut past what the snapshot acknowledged (its marker is at record 6, or there is none): the
    torn tail is discarded and the exact prefix recovered."""
    path = tmp_path / "r.json"
    journal_path = tmp_path / "r.journal.jsonl"
    docs = build(path, small_snapshot, monkeypatch)
    full = journal_records(journal_path)
    snap = view_as_of(docs, full, 6)
    assert full.count(b"\n") == 8
    starts = [0] + [i + 1 for i, b in enumerate(full) if b == ord("\n")]
    for cut in range(starts[6], len(full)):
        path.write_bytes(snap)
        if view == "none":
            path.unlink()
        journal_path.write_bytes(full[:cut])
        complete = full[:cut].count(b"\n")
        assert resumable.read_doc(path) == docs[complete], cut
        # The next write works, follows the exact prefix, and every reader agrees afterwards.
        run = resumable.open_run(path)
        run.unit("z", "done")
        expected = copy.deepcopy(docs[complete])
        got = run.doc
        expected["units"]["z"] = got["units"]["z"]
        expected["updatedAt"] = got["updatedAt"]
        assert got == expected, cut
        run.close()
        recs = records(journal_path)
        assert [s for s, _ in recs] == list(range(1, complete + 2))
        assert recs[-1][1]["unit"] == "z"
        assert resumable.read_doc(path) == expected, cut


def test_truncation_below_what_the_snapshot_acknowledged_is_corruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot is exact (its marker at record 8): a journal cut anywhere before that lost
    acknowledged writes, which the torn-tail rule must never discard. Reads and writes refuse in
    one line, and nothing is rewritten."""
    path = tmp_path / "r.json"
    journal_path = tmp_path / "r.journal.jsonl"
    build(path, True, monkeypatch)
    full, snap = journal_records(journal_path), path.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(full) if b == ord("\n")]
    for cut in range(starts[6], len(full)):
        path.write_bytes(snap)
        journal_path.write_bytes(full[:cut])
        before = tree(tmp_path)
        with pytest.raises(CorruptRunError, match="acknowledges records up to 8"):
            resumable.read_doc(path)
        with pytest.raises(CorruptRunError, match="nothing was changed"):
            resumable.open_run(path).unit("z", "done")
        assert tree(tmp_path) == before, cut


def test_next_write_after_a_torn_tail_is_read_correctly_without_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record cut off, then a new record of exactly the same length and sequence number in its
    place: a reader must see the new record, not a stale snapshot that still matches the offset."""
    path = tmp_path / "r.json"
    journal_path = tmp_path / "r.journal.jsonl"
    docs = build(path, True, monkeypatch)
    full = journal_records(journal_path)
    path.write_bytes(view_as_of(docs, full, 7))  # the view before record 8 (a lazy refresh)
    last = full.rfind(b"\n", 0, len(full) - 1) + 1
    journal_path.write_bytes(full[: last + 10])  # record 8 ("c" blocked) torn
    w2 = resumable.open_run(path)
    w2.unit("d", "blocked")  # same length and seq as the torn record 8 ("c" "blocked")
    assert len(records(journal_path)) == 8
    assert len(journal_records(journal_path)) == len(full)
    doc = resumable.read_doc(path)
    assert doc["units"].get("d", {}).get("status") == "blocked", "stale snapshot served after a torn tail"
    assert doc["units"]["c"]["status"] == "pending"


# --- corruption --------------------------------------------------------------------------------------


def corrupt_second_record(journal_path: Path) -> int:
    data = bytearray(journal_path.read_bytes())
    second = data.index(b"\n") + 1
    data[second + 20] ^= 0x04
    journal_path.write_bytes(bytes(data))
    return second


@pytest.mark.parametrize("snapshot", ["missing", "lagging"])
def test_a_flipped_byte_in_an_earlier_record_is_a_clean_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot: str
) -> None:
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a", "b"])
    if snapshot == "lagging":
        early = run.path.read_bytes()  # reflects only the init record
    for i in range(6):
        run.unit(f"u{i}", "done")
    run.close()
    if snapshot == "missing":
        run.path.unlink()
    else:
        run.path.write_bytes(early)
    offset = corrupt_second_record(journal_of(run))
    before = tree(runs)
    with pytest.raises(CorruptRunError) as info:
        resumable.read_doc(run.path)
    msg = str(info.value)
    assert "\n" not in msg and str(journal_of(run)) in msg and f"byte offset {offset}" in msg
    writer = resumable.open_run("r", runs_dir=runs)
    with pytest.raises(CorruptRunError):
        writer.unit("c", "done")
    with pytest.raises(CorruptRunError):
        writer.init("again")
    assert resumable.gc(runs, keep_days=0)[0] == 0
    for args in (["get", "r"], ["resume", "r"], ["unit", "r", "c", "done"], ["finalize", "r", "aborted"]):
        assert_error(cli(*args, runs=runs), 1, str(journal_of(run)), f"byte offset {offset}")
    assert tree(runs) == before  # nothing rewritten, truncated or archived


def test_corruption_behind_an_exact_snapshot_is_found_by_a_rebuild(tmp_path: Path) -> None:
    """Loads read only the journal after the snapshot (O(1)); a damaged record behind an exact
    snapshot surfaces as soon as anything replays the journal, never as silently wrong state."""
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a"])
    run.unit("a", "done")
    run.unit("b", "done")
    run.close()
    offset = corrupt_second_record(journal_of(run))
    assert resumable.read_doc(run.path)["units"]["b"]["status"] == "done"
    run.path.unlink()
    with pytest.raises(CorruptRunError, match=f"byte offset {offset}"):
        resumable.read_doc(run.path)


def test_a_record_that_does_not_apply_is_corruption(tmp_path: Path) -> None:
    """A well-framed record that breaks the contract on replay (e.g. a demotion written by a
    buggy tool) is refused as corruption, not applied."""
    from resumable.store.files import journal

    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a"])
    run.unit("a", "done")
    run.close()
    bad = journal.encode(3, {"t": "unit", "unit": "a", "state": "pending", "at": "2026-11-29T08:00:00Z"})
    journal_of(run).write_bytes(journal_records(journal_of(run)) + bad)
    with pytest.raises(CorruptRunError, match="record 3 does not apply"):
        resumable.read_doc(run.path)
    assert_error(cli("get", "r", runs=runs), 1, "does not apply")


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(alphabet="ab ,", max_size=3),
    lambda kids: st.lists(kids, max_size=2) | st.dictionaries(st.sampled_from(["n", "a", "id"]), kids, max_size=2),
    max_leaves=4,
)
FIELDS = {
    "init": ("id", "task", "units", "launch"), "base": ("doc", "reason"), "begin": ("launch",),
    "unit": ("unit", "state", "note", "deps", "attempt", "fields"), "invalidate": ("unit", "reason"),
    "phase": ("phase", "state"), "item": ("items",), "resolve": ("ids",), "validation": ("status", "note"),
    "finalize": ("status", "result"), "nope": (),
}
framed_events = st.sampled_from(sorted(FIELDS)).flatmap(
    lambda t: st.fixed_dictionaries({"t": st.just(t), "at": st.just("2026-11-29T08:00:00Z")},
                                    optional={k: junk for k in FIELDS[t]}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(framed_events, min_size=1, max_size=4))
def test_well_framed_but_malformed_records_are_corruption_not_crashes(
    tmp_path_factory: pytest.TempPathFactory, events: list[dict[str, Any]]
) -> None:
    """Records with a valid checksum written by some other tool may hold anything: replaying
    them either works or is a one-line CorruptRunError, never a TypeError."""
    from resumable.store.files import journal

    d = tmp_path_factory.mktemp("framed")
    init = {"t": "init", "at": "2026-11-29T08:00:00Z", "id": "r", "task": "t", "units": ["a"]}
    (d / "r.journal.jsonl").write_bytes(b"".join(journal.encode(i + 1, e) for i, e in enumerate([init, *events])))
    try:
        resumable.read_doc(d / "r.json")
    except CorruptRunError as exc:
        assert "\n" not in str(exc) and "r.journal.jsonl" in str(exc)
