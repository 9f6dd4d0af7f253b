"""The unit index of a large run (store/files/index.py): a write through it changes one unit without
loading the others, and what it holds always equals a full decode of the snapshot and journal,
after every verb, after kills at random points and at every I/O call, after damage, a reboot, a
planted link or a journal written by a writer that kept no index."""

from __future__ import annotations

import os
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import resumable
from corehelpers import assert_error, cli
from resumable import fsio
from resumable.core.model import summary
from resumable.core.plan import resume_set
from resumable.store.files import digests, journal
from resumable.store.files import index as index_mod
from resumable.store.files.index import Index, digest
from resumable.store.files.layout import files_for
from resumable.store.files.loader import load, replay

UNITS = 600  # past the size whose snapshot is rewritten on every write: the index is kept


def make_run(tmp_path: Path, n: int = UNITS) -> Path:
    path = tmp_path / "runs" / "big.json"
    run = resumable.open_run(path)
    run.init("indexed", units=[f"u{i}" for i in range(n)])
    run.close()
    assert os.path.exists(files_for(path).index)
    return path


def index_doc(path: Path) -> dict[str, Any]:
    """The document as the index holds it, with the journal records past it applied."""
    files = files_for(path)
    ix = Index.open(files.index)
    assert ix is not None, "no trusted index"
    try:
        doc = ix.document()
        data = Path(files.journal).read_bytes()[ix.h.jend :]
        scan = journal.scan(data, base=ix.h.jend, path=files.journal, after_seq=ix.h.seq)
    finally:
        ix.close()
    out = replay(scan.records, doc, files.journal, lenient=False)
    assert out is not None
    return out


def assert_exact(path: Path) -> None:
    """What the index holds, and the digests readers take from it, equal a full decode."""
    full = load(files_for(path)).doc
    assert full is not None
    assert index_doc(path) == full
    view = digests.load(files_for(path))
    assert view is not None, "the digests of a run with a trusted index are not read"
    head = {k: v for k, v in view.doc.items() if k != "units"}
    assert head == {k: v for k, v in full.items() if k != "units"}
    assert list(view.doc["units"]) == list(full["units"])
    assert {u: digest(v) for u, v in view.doc["units"].items()} == {u: digest(v) for u, v in full["units"].items()}
    some = list(full["units"])[:3] + list(full["units"])[-3:]
    assert view.units(some) == {u: full["units"][u] for u in some}
    assert summary(view.doc) == summary(full)
    assert resume_set(view.doc) == resume_set(full)


def write(path: Path, verb: str, *args: Any, **kw: Any) -> Any:
    """One write by a fresh process-like handle (nothing cached): the index path."""
    run = resumable.open_run(path)
    try:
        return getattr(run, verb)(*args, **kw)
    finally:
        run.handle.writer.close()  # no flush: as a CLI call ends


def test_every_verb_keeps_the_index_exact(tmp_path: Path) -> None:
    path = make_run(tmp_path)
    steps: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("unit", ("u1", "in_progress"), {}),
        ("unit", ("u1", "done"), {"note": "ok"}),
        ("unit", ("new-one", "blocked"), {"deps": ["u1", "u2"]}),
        ("unit", ("u3", "in_progress"), {"attempt": {"n": 1, "startedAt": "2026-01-01T00:00:00Z"}}),
        ("unit", ("u3", "in_progress"), {"attempt": {"n": 1, "exitCode": 0}, "fields": {"log": "l"}}),
        ("invalidate", ("u1", "changed"), {}),
        ("phase", ("build", "running"), {}),
        ("item", ({"issue": "x"},), {}),
        ("resolve", (["f-nothing"],), {}),
        ("validation", ("green",), {"note": "fine"}),
        ("begin", (), {}),
        ("unit", ("u4", "done"), {"note": "reconciled-from-trailer:abc"}),
    ]
    for verb, args, kw in steps:
        write(path, verb, *args, **kw)
        assert_exact(path)
    doc = load(files_for(path)).doc
    assert doc is not None and list(doc["units"])[-1] == "new-one"
    assert doc["units"]["u1"]["status"] == "pending" and doc["units"]["u1"]["invalidations"]
    write(path, "finalize", "needs_attention")  # a whole-document write: the index is rebuilt
    assert_exact(path)


def test_refusals_through_the_index_change_nothing(tmp_path: Path) -> None:
    path = make_run(tmp_path)
    write(path, "unit", "u7", "done")
    files = files_for(path)
    before = {p: Path(p).read_bytes() for p in (files.journal, files.index, files.snapshot)}
    assert_error(cli("unit", str(path), "u7", "pending"), 2, "refusing to demote")
    assert_error(cli("unit", str(path), "u8", "blocked", "--deps", "u8"), 1, "cannot depend on itself")
    with pytest.raises(resumable.InvalidInputError, match="no unit 'nope'"):
        write(path, "invalidate", "nope", "why")
    assert {p: Path(p).read_bytes() for p in before} == before
    assert cli("unit", str(path), "u8", "in_progress").returncode == 0
    assert_exact(path)


def test_a_write_reads_one_unit_not_the_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_run(tmp_path)
    from resumable.store.files import loader, snapshot

    def no(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the whole document was decoded")

    monkeypatch.setattr(snapshot, "decode", no)
    monkeypatch.setattr(snapshot, "decode_chunked", no)
    monkeypatch.setattr(loader, "load", no)
    for i in range(5):
        write(path, "unit", f"u{i}", "in_progress")
    monkeypatch.undo()
    assert_exact(path)


def test_journal_written_without_the_index_is_caught_up(tmp_path: Path) -> None:
    path = make_run(tmp_path)
    files = files_for(path)
    data = Path(files.journal).read_bytes()
    seq = len(data.splitlines())
    extra = b"".join(journal.encode(seq + i + 1, {"t": "unit", "unit": f"u{i}", "state": "done",
                                                  "at": "2026-01-01T00:00:00Z"}) for i in range(3))
    Path(files.journal).write_bytes(data + extra)  # as a writer that keeps no index would
    write(path, "unit", "u1", "done")  # u1 is done already: no refusal, no demotion
    with pytest.raises(resumable.RefusedError):
        write(path, "unit", "u2", "pending")
    assert_exact(path)


@pytest.mark.parametrize("damage", ["header", "boot", "link", "journal-replaced", "snapshot-edited"])
def test_an_index_it_cannot_vouch_for_is_never_read(tmp_path: Path, damage: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_run(tmp_path)
    files = files_for(path)
    write(path, "unit", "u1", "in_progress")
    if damage == "header":
        raw = bytearray(Path(files.index).read_bytes())
        raw[40] ^= 0xFF
        Path(files.index).write_bytes(bytes(raw))
    elif damage == "boot":
        monkeypatch.setattr(index_mod, "_boot", [b"\x01" * 16])  # as after a reboot
    elif damage == "link":
        target = tmp_path / "elsewhere"
        os.replace(files.index, target)
        os.symlink(target, files.index)
    elif damage == "journal-replaced":
        doc = load(files).doc
        assert doc is not None
        # Same records, new file: the index must not trust offsets into another inode blindly.
        data = Path(files.journal).read_bytes()
        os.unlink(files.journal)
        Path(files.journal).write_bytes(data)
    elif damage == "snapshot-edited":
        import json

        doc = json.loads(Path(path).read_text())
        doc.pop("_journal")
        doc["units"]["u9"]["note"] = "edited by hand"
        Path(path).write_text(json.dumps(doc, indent=2) + "\n")
    write(path, "unit", "u2", "in_progress")
    got = load(files).doc
    assert got is not None and got["units"]["u2"]["status"] == "in_progress"
    if damage == "snapshot-edited":
        assert got["units"]["u9"]["note"] == "edited by hand"
    if damage == "link":
        assert not os.path.islink(files.index)  # replaced, never written through
        assert (tmp_path / "elsewhere").exists()
    monkeypatch.undo()
    write(path, "unit", "u3", "in_progress")
    assert_exact(path)


def _child(path: Path, wfd: int, kill_at_io: int, seed: int) -> None:
    try:
        if kill_at_io:
            calls = 0

            def hook(_op: str, _path: str) -> None:
                nonlocal calls
                calls += 1
                if calls == kill_at_io:
                    os.kill(os.getpid(), signal.SIGKILL)

            fsio.set_fault_hook(hook)
        rnd = random.Random(seed)
        for i in range(30):
            uid = f"u{rnd.randrange(40)}"
            state = rnd.choice(["in_progress", "blocked", "done"])
            try:
                if rnd.random() < 0.1:
                    write(path, "item", {"k": i, "seed": seed})
                else:
                    write(path, "unit", uid, state)
            except resumable.RefusedError:
                pass
            os.write(wfd, b"%d\n" % i)
    finally:
        os._exit(0)


def test_sigkill_loop_keeps_the_index_exact(tmp_path: Path) -> None:
    path = make_run(tmp_path)
    rnd = random.Random(25)
    killed = 0
    for trial in range(60):
        rfd, wfd = os.pipe()
        kill_at_io = rnd.randrange(1, 120) if trial % 2 else 0
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            _child(path, wfd, kill_at_io, trial)
        os.close(wfd)
        if not kill_at_io:
            time.sleep(rnd.random() * 0.02)
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        killed += os.WIFSIGNALED(status)
        while os.read(rfd, 4096):
            pass
        os.close(rfd)
        if os.path.exists(files_for(path).index) and Index.open(files_for(path).index) is not None:
            assert_exact(path)
        write(path, "unit", f"after{trial}", "done")  # the next writer repairs whatever was left
        assert_exact(path)
    assert killed >= 30


def test_readers_print_the_same_through_the_digests(tmp_path: Path) -> None:
    """get --summary, resume and status read a large run's digests (never decoding its units
    whole) and print what they print from the whole document."""
    path = make_run(tmp_path)
    write(path, "unit", "u1", "done")
    write(path, "unit", "u2", "blocked", note="needs a human", deps=["u1"])
    write(path, "unit", "u3", "dep_blocked", deps=["u2"])
    write(path, "unit", "u4", "in_progress", attempt={"n": 1, "startedAt": "2026-01-01T00:00:00Z"})
    write(path, "unit", "u5", "done", note="reconciled-from-trailer:abc")
    write(path, "unit", "u6", "in_progress", fields={"removed": True})
    write(path, "item", {"issue": "a finding"})
    outputs = {}
    for mode in ("index", "whole"):
        if mode == "whole":
            os.unlink(files_for(path).index)
        outputs[mode] = [cli(*argv, str(path)) for argv in (("get", "--summary"), ("resume",))]
        outputs[mode].append(cli("status", str(path), "--no-color"))
        assert all(p.returncode == 0 for p in outputs[mode]), [p.stderr for p in outputs[mode]]
    for a, b in zip(outputs["index"], outputs["whole"], strict=True):
        assert _timeless(a.stdout) == _timeless(b.stdout)
    assert "needs a human" in outputs["index"][2].stdout


def _timeless(text: str) -> str:
    """Status output without the durations that tick between two calls."""
    return re.sub(r"\d+(\.\d+)?s\b|\d+m ?\d+s|\d+[hd] ?\d*m?", "T", text)


def test_a_reader_never_decodes_the_units_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_run(tmp_path)
    write(path, "unit", "u1", "blocked", note="detail")
    from resumable.store.files import loader, snapshot

    def no(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the whole document was decoded")

    monkeypatch.setattr(snapshot, "decode", no)
    monkeypatch.setattr(snapshot, "decode_chunked", no)
    monkeypatch.setattr(loader, "load", no)
    handle = resumable.open_run(path).handle
    view = handle.load_digests()  # type: ignore[attr-defined]
    assert view is not None and view.doc["units"]["u1"] == {"status": "blocked", "dependsOn": []}
    assert view.units(["u1"])["u1"]["note"] == "detail"


def test_concurrent_writers_through_the_index_lose_nothing(tmp_path: Path) -> None:
    """Writers that each load nothing (as CLI calls) serialise on the run's lock: every write
    lands, and the index stays exact."""
    path = make_run(tmp_path)
    writers, each = 4, 25
    pids = []
    for w in range(writers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for j in range(each):
                    write(path, "unit", f"w{w}-{j}", "done")
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    doc = load(files_for(path)).doc
    assert doc is not None
    assert all(doc["units"][f"w{w}-{j}"]["status"] == "done" for w in range(writers) for j in range(each))
    assert_exact(path)


def test_a_reader_during_writes_sees_one_state_or_the_next(tmp_path: Path) -> None:
    """Lock-free readers of the digests while a writer commits: every view is a state the run was
    in (the units written so far are done, in the order written, and nothing else changed)."""
    path = make_run(tmp_path)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for j in range(60):
                write(path, "unit", f"u{j}", "done")
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    seen = 0
    while True:
        view = digests.load(files_for(path))
        if view is not None:
            done = [u for u, d in view.doc["units"].items() if d.get("status") == "done"]
            assert done == [f"u{j}" for j in range(len(done))]
            seen = max(seen, len(done))
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            assert os.waitstatus_to_exitcode(status) == 0
            break
    assert_exact(path)


def test_an_index_that_fills_up_is_rebuilt_larger(tmp_path: Path) -> None:
    path = make_run(tmp_path, n=400)
    files = files_for(path)
    ix = Index.open(files.index)
    assert ix is not None
    slots = ix.h.nslots
    ix.close()
    for i in range(slots):  # more new units than the table has room for
        write(path, "unit", f"new{i}", "in_progress")
    ix = Index.open(files.index)
    assert ix is not None and ix.h.nslots > slots and ix.h.count == 400 + slots
    ix.close()
    assert_exact(path)


def _in_step(path: Path) -> bool:
    """Whether the index holds every journal record (none past it for readers to apply)."""
    files = files_for(path)
    ix = Index.open(files.index)
    assert ix is not None
    try:
        return ix.h.jend == os.path.getsize(files.journal)
    finally:
        ix.close()


def test_a_writer_that_commits_often_holds_the_index_back_and_readers_stay_exact(tmp_path: Path) -> None:
    """A long-lived writer (the runner) brings the index up to date in batches: between them the
    readers apply the records past it and see exactly the run; at its flush the index holds all."""
    path = make_run(tmp_path)
    run = resumable.open_run(path)
    behind = False
    for i in range(400):
        run.unit(f"u{i}", "in_progress")
        run.unit(f"u{i}", "done")
        if i % 50 == 49:
            behind = behind or not _in_step(path)
            assert_exact(path)
    assert behind, "the index was brought up to date on every commit"
    run.close()
    assert _in_step(path)
    assert_exact(path)


def test_a_held_back_index_takes_in_another_writers_records(tmp_path: Path) -> None:
    """While a long-lived writer holds its index commits back, a CLI-like write goes through the
    index (applying the first writer's records too); the first writer then brings the index up to
    date from the journal, losing neither's units."""
    path = make_run(tmp_path)
    run = resumable.open_run(path)
    for i in range(40):
        run.unit(f"u{i}", "done")
    write(path, "unit", "other", "done")
    assert_exact(path)
    for i in range(40, 80):
        run.unit(f"u{i}", "done")
    run.close()
    assert _in_step(path)
    assert_exact(path)
    doc = load(files_for(path)).doc
    assert doc is not None and doc["units"]["other"]["status"] == "done"


def test_a_writer_killed_while_holding_the_index_back_leaves_it_exact(tmp_path: Path) -> None:
    path = make_run(tmp_path)
    pid = os.fork()
    if pid == 0:
        run = resumable.open_run(path)
        for i in range(100):
            run.unit(f"u{i}", "done")
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert not _in_step(path)
    assert_exact(path)
    write(path, "unit", "after", "done")
    assert _in_step(path)
    assert_exact(path)
