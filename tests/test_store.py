"""store.py through the API: load = snapshot + journal tail, the amortised snapshot, rebuilding,
external edits, seed files (v1 and v2), init over old runs, and gc."""

from __future__ import annotations

import copy
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resumable
from corehelpers import data_dir_of, journal_of, journal_records, needs, records, snapshot_file, tree
from resumable.errors import CorruptRunError, InvalidInputError, NewerFormatError, NoRunError, RefusedError
from resumable.store.files import journal, refresh

Doc = dict[str, Any]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def make_run(runs: Path, run_id: str = "r", units: int = 3, *, flush: bool = True) -> resumable.Run:
    run = resumable.open_run(run_id, runs_dir=runs)
    run.init("task", units=[f"u{i}" for i in range(units)])
    if flush:
        run.flush()  # a large run writes its first view lazily; these tests want one on disk
    return run


def doc_copy(run: resumable.Run) -> Doc:
    return copy.deepcopy(run.refresh())


def test_files_and_exact_small_snapshot(runs: Path) -> None:
    run = make_run(runs)
    run.unit("u0", "done", note="n")
    assert sorted(p.name for p in runs.iterdir()) == [".gitignore", "r.journal.jsonl", "r.json", "r.lock"]
    doc, marker = snapshot_file(run.path)
    assert doc == run.doc == resumable.read_doc(run.path)
    assert marker is not None and marker["seq"] == 2 and marker["offset"] == len(journal_records(journal_of(run)))
    assert [r[1]["t"] for r in records(journal_of(run))] == ["init", "unit"]
    # The snapshot is pretty JSON, 2-space indent, seed key order.
    text = run.path.read_text()
    assert text.startswith('{\n  "schemaVersion": 2,\n  "id": "r",\n  "task": "task",\n  "status": "running",')


def test_load_is_snapshot_plus_journal_tail(runs: Path) -> None:
    run = make_run(runs)
    run.unit("u0", "in_progress")
    old_snapshot = run.path.read_bytes()
    run.unit("u0", "done")
    run.phase("build", "running")
    run.item({"a": 1})
    expected = doc_copy(run)
    run.close()
    # Put back a snapshot that lags two records behind: the tail is replayed on top of it.
    run.path.write_bytes(old_snapshot)
    before = tree(runs)
    assert resumable.read_doc(run.path) == expected
    assert resumable.open_run("r", runs_dir=runs).summary()["done"] == 1
    assert tree(runs) == before  # reads never write


def test_amortised_snapshot_refresh_for_a_large_run(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past EXACT_SNAPSHOT_BYTES the snapshot is refreshed once the journal has grown by about its
    size: it lags, loads stay exact, and flush/close make it exact."""
    monkeypatch.setattr(refresh, "EXACT_SNAPSHOT_BYTES", 2048)
    run = make_run(runs, units=40, flush=False)
    # A large run writes no view at init (it would be replaced a few writes later); flush does.
    assert not run.path.exists()
    assert resumable.read_doc(run.path) == run.doc
    run.flush()
    snap_size = run.path.stat().st_size
    assert snap_size > 2048
    refreshes, lagged = 0, 0
    last_marker = snapshot_file(run.path)[1]
    for i in range(300):
        run.unit(f"u{i % 40}", "in_progress" if i < 260 else "done")
        seq = len(records(journal_of(run)))
        marker = snapshot_file(run.path)[1]
        assert marker is not None
        if marker != last_marker:
            refreshes += 1
            last_marker = marker
        lagged += marker["seq"] < seq
        if i % 25 == 0:
            assert resumable.read_doc(run.path) == run.doc
    journal_bytes = journal_of(run).stat().st_size
    # O(1) amortised: about one refresh per snapshot-size of journal, not one per write.
    assert 1 <= refreshes <= journal_bytes // snap_size + 2, (refreshes, journal_bytes, snap_size)
    assert lagged > 250
    assert resumable.read_doc(run.path) == run.doc
    run.flush()
    doc, marker = snapshot_file(run.path)
    assert marker is not None and marker["seq"] == 301 and doc == run.doc
    run.unit("u0", "done")
    run.close()
    doc, marker = snapshot_file(run.path)
    assert marker is not None and marker["seq"] == 302
    assert doc == resumable.read_doc(run.path)


def test_real_large_run_lags_and_stays_exact(runs: Path) -> None:
    run = make_run(runs, units=800)
    assert run.path.stat().st_size > refresh.EXACT_SNAPSHOT_BYTES
    for i in range(60):
        run.unit(f"u{i}", "done")
    marker = snapshot_file(run.path)[1]
    assert marker is not None and marker["seq"] < 61  # lagging: the writes did not cost O(N) each
    assert resumable.read_doc(run.path)["units"]["u59"]["status"] == "done"
    other = resumable.open_run("r", runs_dir=runs)
    assert other.resume_set()["skip"] == [f"u{i}" for i in range(60)]
    run.close()
    doc, marker = snapshot_file(run.path)
    assert marker is not None and marker["seq"] == 61 and doc == other.doc


def test_missing_snapshot_is_rebuilt_from_the_journal(runs: Path) -> None:
    run = make_run(runs)
    run.unit("u1", "done")
    run.validation("green", note="ci")
    expected = doc_copy(run)
    run.close()
    run.path.unlink()
    assert resumable.read_doc(run.path) == expected
    assert not run.path.exists()  # a read does not rebuild it
    again = resumable.open_run("r", runs_dir=runs)
    again.unit("u2", "done")
    doc, marker = snapshot_file(again.path)
    assert marker is not None and marker["seq"] == 4
    expected["units"]["u2"] = doc["units"]["u2"]
    expected["updatedAt"] = doc["updatedAt"]
    assert doc == expected


def external_edit(path: Path, edit: Any) -> None:
    """What the seeds document as a fallback: rewrite with another tool, then `mv` into place."""
    doc = json.loads(path.read_text())
    edit(doc)
    tmp = path.with_name(path.name + ".edit")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def base_records(run: resumable.Run) -> list[Doc]:
    return [ev for _, ev in records(journal_of(run)) if ev["t"] == "base"]


@pytest.mark.parametrize("keep_writer", [False, True])
def test_external_edit_is_adopted_never_overwritten(runs: Path, keep_writer: bool) -> None:
    run = make_run(runs)
    run.unit("u0", "in_progress")
    if not keep_writer:
        run.close()
        run = resumable.open_run("r", runs_dir=runs)

    def edit(doc: Doc) -> None:
        doc["units"]["u1"]["status"] = "done"
        doc["units"]["u1"]["note"] = "fixed by hand"
        doc["handEdited"] = True

    external_edit(run.path, edit)
    # Readers see the edit at once.
    assert resumable.read_doc(run.path)["units"]["u1"]["note"] == "fixed by hand"
    # The next write adopts it with a base record, then applies on top of it.
    run.unit("u2", "done")
    bases = base_records(run)
    assert len(bases) == 1 and bases[0]["reason"] == "external-edit"
    assert bases[0]["doc"]["units"]["u1"]["status"] == "done" and bases[0]["doc"]["handEdited"] is True
    assert bases[0]["doc"]["units"]["u2"]["status"] == "pending"  # the base is the edit, not after it
    for doc in (resumable.read_doc(run.path), snapshot_file(run.path)[0]):
        assert doc["units"]["u1"]["note"] == "fixed by hand" and doc["handEdited"] is True
        assert doc["units"]["u0"]["status"] == "in_progress" and doc["units"]["u2"]["status"] == "done"
    # The edit is now history: a rebuild from the journal alone keeps it.
    run.close()
    run.path.unlink()
    assert resumable.read_doc(run.path)["units"]["u1"]["note"] == "fixed by hand"
    # And the edited done unit is protected like any other.
    with pytest.raises(RefusedError):
        resumable.open_run("r", runs_dir=runs).unit("u1", "pending")


@needs("jq", "apt-get install -y jq")
@pytest.mark.parametrize(
    "program",
    ['.units.u1.note = "by jq"', '.foo = "by jq"', '.units.u1.note = "by jq" | .foo = "by jq"', "."],
)
def test_real_jq_edit_is_adopted(runs: Path, program: str) -> None:
    run = make_run(runs)
    run.unit("u0", "done")
    run.close()
    out = subprocess.run(["jq", program, str(run.path)], capture_output=True, check=True).stdout
    tmp = run.path.with_name("tmp.json.edit")
    tmp.write_bytes(out)
    os.replace(tmp, run.path)
    edited = json.loads(out)
    edited.pop("_journal")
    assert resumable.read_doc(run.path) == edited
    writer = resumable.open_run("r", runs_dir=runs)
    writer.unit("u2", "in_progress")
    doc = resumable.read_doc(run.path)
    for key, value in edited.items():
        if key not in ("units", "updatedAt"):
            assert doc[key] == value
    assert doc["units"]["u1"] == edited["units"]["u1"]
    if program != ".":
        bases = base_records(writer)
        assert [b["reason"] for b in bases] == ["external-edit"]
        # Journal alone (snapshot gone) still has the edit.
        writer.close()
        run.path.unlink()
        rebuilt = resumable.read_doc(run.path)
        assert {k: rebuilt.get(k) for k in edited if k != "updatedAt" and k != "units"} == {
            k: v for k, v in edited.items() if k not in ("updatedAt", "units")}
        assert rebuilt["units"]["u1"] == edited["units"]["u1"]


def test_external_edit_seen_by_a_long_lived_writer_that_appends_a_key(runs: Path) -> None:
    """A key appended after the marker (what `jq '.k = v'` does) must not be dropped by the
    next refresh of a writer that has the document cached."""
    run = make_run(runs)
    run.unit("u0", "done")
    text = run.path.read_text()
    assert text.endswith("}\n}\n")
    run.path.write_text(text[: -len("\n}\n")] + ',\n  "owner": "ops"\n}\n')
    run.unit("u1", "done")
    assert snapshot_file(run.path)[0].get("owner") == "ops"
    assert resumable.read_doc(run.path).get("owner") == "ops"
    assert [b["reason"] for b in base_records(run)] == ["external-edit"]


@pytest.mark.parametrize("how", ["edited snapshot", "base record of another writer"])
def test_a_long_lived_writer_refuses_a_document_that_became_unfit(runs: Path, how: str) -> None:
    """A writer checks a document's shape when it is new to it, so a document replaced behind a
    writer that has the run cached (an edited snapshot, a base record appended by another process)
    is refused as a fresh load of it would be, and nothing is written."""
    run = make_run(runs)
    run.unit("u0", "in_progress")
    if how == "edited snapshot":
        external_edit(run.path, lambda d: d.update(phases=["not", "an", "object"]))
    else:
        bad = {**doc_copy(run), "phases": ["not", "an", "object"]}
        path = journal_of(run)
        seq = records(path)[-1][0] + 1
        with open(path, "ab") as f:
            f.write(journal.encode(seq, {"t": "base", "at": "2026-11-29T08:00:00Z", "reason": "test",
                                         "doc": bad}))
    before = journal_of(run).read_bytes()
    for writer in (run, resumable.open_run("r", runs_dir=runs)):
        with pytest.raises(InvalidInputError, match="'phases' is an array, not an object"):
            writer.unit("u1", "done")
    assert journal_of(run).read_bytes() == before


SEED_V2 = {
    "schemaVersion": 2,
    "id": "seedrun",
    "task": "from the seed",
    "status": "running",
    "createdAt": "2026-07-18T10:10:10Z",
    "updatedAt": "2026-07-18T10:10:10Z",
    "phases": {},
    "units": {"a": {"status": "done", "dependsOn": [], "note": "", "createdAt": "2026-07-18T10:10:10Z",
                    "updatedAt": "2026-07-18T10:10:10Z", "finishedAt": "2026-07-18T10:10:10Z"},
              "b": {"status": "pending", "dependsOn": ["a"], "note": "", "createdAt": "2026-07-18T10:10:10Z",
                    "updatedAt": "2026-07-18T10:10:10Z"}},
    "openItems": [],
    "resolvedItems": [],
    "result": None,
}


def write_seed(path: Path, doc: Doc) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
    path.write_bytes(data)
    return data


def test_seed_snapshot_without_journal_is_a_valid_run(runs: Path) -> None:
    path = runs / "seedrun.json"
    data = write_seed(path, SEED_V2)
    run = resumable.open_run("seedrun", runs_dir=runs)
    assert run.doc == SEED_V2
    assert run.resume_set() == {"skip": ["a"], "eligible": ["b"], "dep_blocked": {}}
    assert path.read_bytes() == data and sorted(p.name for p in runs.iterdir()) == ["seedrun.json"]
    with pytest.raises(RefusedError):
        run.unit("a", "pending")
    assert not journal_of(run).exists() or records(journal_of(run)) == []
    run.unit("b", "done")
    recs = records(journal_of(run))
    assert [(s, e["t"]) for s, e in recs] == [(1, "base"), (2, "unit")]
    assert recs[0][1]["reason"] == "import" and recs[0][1]["doc"] == SEED_V2
    doc, marker = snapshot_file(path)
    assert marker is not None and doc["units"]["b"]["status"] == "done" and doc["units"]["a"] == SEED_V2["units"]["a"]


V1 = {
    "schemaVersion": 1,
    "id": "old",
    "task": "legacy",
    "status": "running",
    "createdAt": "2025-01-01T00:00:00Z",
    "updatedAt": "2025-01-01T00:00:00Z",
    "phases": {"plan": {"status": "done", "updatedAt": "2025-01-01T00:00:00Z", "custom": [1, 2]}},
    "units": {"a": {"status": "done", "dependsOn": [], "note": "kept", "extra": {"x": 1}},
              "b": {"status": "pending", "dependsOn": ["a"]}, "c": None},
    "launch": {"scriptPath": "/old/pipeline.mjs", "args": {"run": "old"}},
    "result": None,
}


def test_v1_seed_file_reads_never_modify_and_first_write_upgrades_add_only(runs: Path) -> None:
    path = runs / "old.json"
    data = write_seed(path, V1)
    run = resumable.open_run("old", runs_dir=runs)
    assert run.doc == V1 and run.summary()["total"] == 3
    out = run.resume_set()
    assert out["skip"] == ["a"] and out["eligible"] == ["b", "c"] and out["malformed"] == ["c"]
    assert resumable.read_doc(path) == V1
    run.close()
    assert path.read_bytes() == data
    assert sorted(p.name for p in runs.iterdir()) == ["old.json"]

    run = resumable.open_run("old", runs_dir=runs)
    run.item({"a": 1})
    doc, _ = snapshot_file(path)
    assert doc["schemaVersion"] == 2 and doc["resolvedItems"] == [] and len(doc["openItems"]) == 1
    for key in ("units", "phases", "launch", "id", "task", "status", "createdAt"):
        assert doc[key] == V1[key], key
    # The import record holds the v1 document exactly as it was.
    assert records(journal_of(run))[0][1]["doc"] == V1


def test_init_over_a_finished_run_archives_it(runs: Path) -> None:
    run = make_run(runs, units=1)
    run.unit("u0", "done")
    run.finalize("done", result="ok")
    old_snapshot, old_journal = run.path.read_bytes(), journal_of(run).read_bytes()
    run.close()
    again = resumable.open_run("r", runs_dir=runs)
    assert again.init("second", units=["x"]) == "r"
    assert again.doc["task"] == "second" and list(again.doc["units"]) == ["x"]
    assert [e["t"] for _, e in records(journal_of(again))] == ["init"]
    archived = sorted((runs / "archive").iterdir())
    assert [p.read_bytes() for p in archived] == [old_journal, old_snapshot]
    assert archived[0].name.startswith("r.") and archived[0].name.endswith(".journal.jsonl")
    assert archived[1].name == archived[0].name[: -len(".journal.jsonl")] + ".json"
    # aborted too, and the earlier archive is never overwritten
    again.finalize("aborted")
    resumable.open_run("r", runs_dir=runs).init("third")
    archived2 = sorted((runs / "archive").iterdir())
    assert len(archived2) == 4
    assert {p.read_bytes() for p in archived} <= {p.read_bytes() for p in archived2}
    assert len({p.name for p in archived2 if p.name.endswith(".json")}) == 2
    assert all(p.name.endswith((".json", ".journal.jsonl")) for p in archived2)


@pytest.mark.parametrize("status", ["running", "needs_attention", "initializing"])
def test_init_over_a_live_run_is_refused(runs: Path, status: str) -> None:
    run = make_run(runs)
    if status == "needs_attention":
        run.finalize("needs_attention")
    elif status == "initializing":
        run.close()
        external_edit(run.path, lambda d: d.update(status="initializing"))
    run.close()
    before = tree(runs)
    with pytest.raises(RefusedError) as info:
        resumable.open_run("r", runs_dir=runs).init("again")
    assert info.value.exit_code == 2 and "LIVE" in str(info.value)
    assert tree(runs) == before


def test_write_to_a_missing_run(runs: Path) -> None:
    runs.mkdir()
    with pytest.raises(NoRunError):
        resumable.open_run("nope", runs_dir=runs).unit("a", "done")
    with pytest.raises(NoRunError):
        resumable.read_doc(runs / "nope.json")
    assert sorted(p.name for p in runs.iterdir()) in ([], ["nope.lock"])


# --- gc ------------------------------------------------------------------------------------------

OLD = "2020-01-01T00:00:00Z"


def seed_run(runs: Path, run_id: str, status: str, updated: object = OLD) -> Path:
    doc = {**SEED_V2, "id": run_id, "status": status, "updatedAt": updated}
    if updated is None:
        del doc["updatedAt"]
    path = runs / f"{run_id}.json"
    write_seed(path, doc)
    return path


def test_gc_selection(runs: Path) -> None:
    archived = {
        "old-done": seed_run(runs, "old-done", "done"),
        "old-aborted": seed_run(runs, "old-aborted", "aborted"),
    }
    kept = {
        "new-done": seed_run(runs, "new-done", "done", resumable_stamp := time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        "old-running": seed_run(runs, "old-running", "running"),
        "old-initializing": seed_run(runs, "old-initializing", "initializing"),
        "old-needs": seed_run(runs, "old-needs", "needs_attention"),
        "old-weird": seed_run(runs, "old-weird", "paused"),
    }
    assert resumable_stamp
    (runs / "broken.json").write_text("{ not json")
    # A journal-backed run: finished now, but the journal says when; keep-days 2 keeps it.
    jr = make_run(runs, "journaled", units=1)
    jr.finalize("aborted")
    jr.close()
    kept["journaled"] = jr.path
    live = make_run(runs, "live", units=1)
    live.close()
    kept["live"] = live.path
    before = {name: p.read_bytes() for name, p in kept.items()}

    count, archive = resumable.gc(runs, keep_days=2)
    assert count == 2 and Path(archive) == runs / "archive"
    archive = Path(archive)
    names = sorted(p.name for p in archive.iterdir())
    assert len(names) == 2 and names[0].startswith("old-aborted.") and names[1].startswith("old-done.")
    for name, p in kept.items():
        assert p.read_bytes() == before[name], name
    assert (runs / "broken.json").read_text() == "{ not json"
    for p in archived.values():
        assert not p.exists()

    # keep-days 0: the journal-backed aborted run goes, and its journal moves with it.
    count, _ = resumable.gc(runs, keep_days=0)
    assert count == 2  # journaled + new-done
    assert not jr.path.exists() and not journal_of(jr).exists()
    moved = sorted(p.name for p in archive.iterdir() if p.name.startswith("journaled."))
    assert len(moved) == 2 and moved[0].endswith(".journal.jsonl") and moved[1].endswith(".json")
    assert live.path.exists() and (runs / "old-needs.json").exists() and (runs / "old-running.json").exists()


def test_gc_with_no_runs_dir_and_bad_keep_days(tmp_path: Path) -> None:
    assert resumable.gc(tmp_path / "none", keep_days=7)[0] == -1
    for bad in (-1, float("nan")):
        with pytest.raises(resumable.InvalidInputError):
            resumable.gc(tmp_path, keep_days=bad)


def test_gc_never_overwrites_an_archived_file(runs: Path) -> None:
    contents = []
    for i in range(3):
        path = seed_run(runs, "same", "done")
        doc = json.loads(path.read_text())
        doc["task"] = f"generation {i}"
        write_seed(path, doc)
        contents.append(path.read_bytes())
        assert resumable.gc(runs, keep_days=1)[0] == 1
    archived = sorted((runs / "archive").iterdir())
    assert sorted(p.read_bytes() for p in archived) == sorted(contents)
    assert all(p.name.endswith(".json") for p in archived), [p.name for p in archived]


def test_gc_takes_the_run_lock(runs: Path) -> None:
    path = seed_run(runs, "locked", "done")
    lock = runs / "locked.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        result: list[int] = []
        worker = threading.Thread(target=lambda: result.append(resumable.gc(runs, keep_days=1)[0]))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive() and path.exists()  # waiting for the writer holding the lock
        fcntl.flock(fd, fcntl.LOCK_UN)
        worker.join(10)
        assert result == [1] and not path.exists()
    finally:
        os.close(fd)


def test_gc_rechecks_status_under_the_lock(runs: Path) -> None:
    """A run re-opened (begin) after being finished is live again: gc leaves it alone."""
    run = make_run(runs, units=1)
    run.finalize("aborted")
    run.begin()
    run.close()
    assert resumable.gc(runs, keep_days=0)[0] == 0
    assert run.path.exists() and journal_of(run).exists()


def test_a_write_that_cannot_be_stored_leaves_no_phantom_state(runs: Path) -> None:
    """apply() changes the cached document in place; when the record then cannot be encoded the
    cache must be dropped, or the next (valid) write would put the unsaved change in the snapshot."""
    run = make_run(runs, units=1)
    with pytest.raises(resumable.InvalidInputError):
        run.unit("u0", "in_progress", fields={"x": float("nan")})
    assert run.doc["units"]["u0"]["status"] == "pending" and "x" not in run.doc["units"]["u0"]
    run.unit("extra", "done")  # must neither fail nor carry the refused change along
    assert run.snapshot_error is None
    for doc in (resumable.read_doc(run.path), snapshot_file(run.path)[0]):
        assert doc["units"]["u0"]["status"] == "pending" and "x" not in doc["units"]["u0"]
        assert doc["units"]["extra"]["status"] == "done"
    assert [e["t"] for _, e in records(journal_of(run))] == ["init", "unit"]


def test_external_edit_of_a_lagging_snapshot_keeps_the_newer_journal_records(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that edits a lagging view (marker kept, as jq and the seed's own script do) edited an
    older state: the records after the marker are re-applied on top of the edit, nothing is lost."""
    monkeypatch.setattr(refresh, "EXACT_SNAPSHOT_BYTES", 256)
    run = make_run(runs, units=5)
    for i in range(5):
        run.unit(f"u{i}", "in_progress")
    run.unit("u4", "done")
    marker = snapshot_file(run.path)[1]
    assert marker is not None and marker["seq"] < 7  # the view lags the journal
    external_edit(run.path, lambda d: d["units"]["u1"].update(note="hand"))
    doc = resumable.read_doc(run.path)
    assert doc["units"]["u1"]["note"] == "hand"
    assert [doc["units"][f"u{i}"]["status"] for i in range(5)] == ["in_progress"] * 4 + ["done"]
    run.unit("u0", "done")  # the long-lived writer adopts the edit too
    for doc in (resumable.read_doc(run.path), run.doc):
        assert doc["units"]["u1"]["note"] == "hand" and doc["units"]["u0"]["status"] == "done"
        assert doc["units"]["u4"]["status"] == "done" and doc["units"]["u3"]["status"] == "in_progress"
    assert [b["reason"] for b in base_records(run)] == ["external-edit"]
    marker = snapshot_file(run.path)[1]
    assert marker is not None and marker["seq"] == len(records(journal_of(run)))  # the view is rewritten


def fail_on(op: str, suffix: str, err: int, times: int = 1) -> Any:
    left = [times]

    def hook(name: str, path: str) -> None:
        if name == op and str(path).endswith(suffix) and left[0] > 0:
            left[0] -= 1
            raise OSError(err, os.strerror(err), path)

    return hook


@pytest.mark.parametrize(("op", "err", "exc"), [("write", 28, resumable.StoreError),
                                            ("fsync", 5, resumable.StoreError)])
def test_failed_journal_write_is_rolled_back_and_the_next_write_works(
    runs: Path, op: str, err: int, exc: type[Exception]
) -> None:
    from resumable import fsio

    run = make_run(runs)
    run.unit("u0", "done")
    before_journal, before_doc = journal_records(journal_of(run)), doc_copy(run)
    previous = fsio.set_fault_hook(fail_on(op, ".journal.jsonl", err))
    try:
        with pytest.raises(exc) as info:
            run.unit("u1", "done")
    finally:
        fsio.set_fault_hook(previous)
    assert "\n" not in str(info.value) and str(journal_of(run)) in str(info.value)
    if err == 28:
        assert "no space left" in str(info.value)
    assert journal_records(journal_of(run)) == before_journal
    assert run.doc == before_doc and resumable.read_doc(run.path) == before_doc
    run.unit("u1", "done")
    assert [s for s, _ in records(journal_of(run))] == [1, 2, 3]
    assert resumable.read_doc(run.path)["units"]["u1"]["status"] == "done"


def test_failed_snapshot_refresh_loses_nothing(runs: Path) -> None:
    from resumable import fsio

    run = make_run(runs)
    previous = fsio.set_fault_hook(fail_on("replace", "r.json", 28))
    try:
        run.unit("u0", "done")  # durable in the journal; only the view is behind
    finally:
        fsio.set_fault_hook(previous)
    assert run.snapshot_error and "no space left" in run.snapshot_error
    assert resumable.read_doc(run.path)["units"]["u0"]["status"] == "done"
    assert snapshot_file(run.path)[1]["seq"] == 1  # type: ignore[index]
    assert not [p for p in runs.iterdir() if ".tmp." in p.name]  # no temp file left behind
    run.unit("u1", "done")
    assert run.snapshot_error is None and snapshot_file(run.path)[1]["seq"] == 3  # type: ignore[index]


@pytest.mark.parametrize("how", ["init", "gc"])
def test_archiving_moves_the_runs_logs_with_it(runs: Path, how: str) -> None:
    run = make_run(runs, units=1)
    logs = data_dir_of(run) / "logs"
    logs.mkdir(parents=True)
    (logs / "u0.1.log").write_text("output\n")
    run.finalize("aborted")
    run.close()
    if how == "init":
        resumable.open_run("r", runs_dir=runs).init("next")
    else:
        assert resumable.gc(runs, keep_days=0)[0] == 1
    assert not data_dir_of(run).exists()
    moved = [p for p in (runs / "archive").iterdir() if p.is_dir()]
    assert len(moved) == 1 and moved[0].name.endswith(".d")
    assert (moved[0] / "logs" / "u0.1.log").read_text() == "output\n"
    stem = moved[0].name[: -len(".d")]
    assert {p.name for p in (runs / "archive").iterdir()} == {f"{stem}.d", f"{stem}.json", f"{stem}.journal.jsonl"}


# --- a model-based check of the whole write/read path ------------------------------------------

STAMP_KEYS = frozenset({"at", "createdAt", "updatedAt", "startedAt", "finishedAt", "resolvedAt"})


def unstamped(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unstamped(v) for k, v in value.items() if k not in STAMP_KEYS}
    if isinstance(value, list):
        return [unstamped(v) for v in value]
    return value


ops = st.lists(
    st.one_of(
        st.tuples(st.just("unit"), st.integers(0, 1), st.sampled_from(["a", "b", "c"]),
                  st.sampled_from(["pending", "in_progress", "done", "blocked"])),
        st.tuples(st.just("item"), st.integers(0, 1), st.integers(0, 3)),
        st.tuples(st.just("resolve"), st.integers(0, 1), st.integers(0, 3)),
        st.tuples(st.just("torn"), st.integers(1, 30)),
        st.tuples(st.just("rmsnap")),
        st.tuples(st.just("reopen"), st.integers(0, 1)),
        st.tuples(st.just("read")),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.sampled_from([256, 64 * 1024]))
def test_two_writers_torn_tails_and_lost_views_match_a_pure_model(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[Any, ...]], exact: int
) -> None:
    from resumable.core.events import apply

    runs = tmp_path_factory.mktemp("model")
    old_exact = refresh.EXACT_SNAPSHOT_BYTES
    refresh.EXACT_SNAPSHOT_BYTES = exact
    try:
        writers = [resumable.open_run("r", runs_dir=runs) for _ in range(2)]
        writers[0].init("t", units=["a"])
        model, _ = apply(None, {"t": "init", "at": "x", "id": "r", "task": "t", "units": ["a"]})
        for step in steps:
            kind = step[0]
            if kind in ("unit", "item", "resolve"):
                w = writers[step[1]]
                if kind == "unit":
                    event = {"t": "unit", "at": "x", "unit": step[2], "state": step[3]}
                    call: Any = lambda w=w, s=step: w.unit(s[2], s[3])  # noqa: E731
                elif kind == "item":
                    event = {"t": "item", "at": "x", "items": {"n": step[2]}}
                    call = lambda w=w, s=step: w.item({"n": s[2]})  # noqa: E731
                else:
                    from resumable.core.events import item_id

                    ids = [item_id({"n": step[2]})]
                    event = {"t": "resolve", "at": "x", "ids": ids}
                    call = lambda w=w, ids=ids: w.resolve(ids)  # noqa: E731
                try:
                    model, expected_out = apply(model, event)
                except RefusedError:
                    with pytest.raises(RefusedError):
                        call()
                    continue
                out = call()
                assert out == (expected_out if kind != "unit" else None)
            elif kind == "torn":
                jpath = runs / "r.journal.jsonl"
                with jpath.open("r+b") as fh:
                    # A write in flight that died before its newline, over the padding if any.
                    fh.seek(len(journal_records(jpath)))
                    fh.write(b"9" * step[1])
            elif kind == "rmsnap":
                (runs / "r.json").unlink(missing_ok=True)
            elif kind == "reopen":
                writers[step[1]].close()
                writers[step[1]] = resumable.open_run("r", runs_dir=runs)
            assert unstamped(resumable.read_doc(runs / "r.json")) == unstamped(model)
        for w in writers:
            assert unstamped(w.doc) == unstamped(model)
            w.close()
        # After close the view is complete unless a torn tail or a deleted view is still pending.
        writers[0].unit("a", "done") if unstamped(model)["units"]["a"]["status"] != "done" else writers[0].phase(
            "p", "done")
        writers[0].close()
        doc, marker = snapshot_file(runs / "r.json")
        assert marker is not None and marker["seq"] == len(records(runs / "r.journal.jsonl"))
        assert doc == resumable.read_doc(runs / "r.json")
    finally:
        refresh.EXACT_SNAPSHOT_BYTES = old_exact


def test_a_lock_free_read_of_a_rolled_back_record_never_reaches_a_write(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads catch up without the lock, so they can see a record whose fsync then fails and which
    its writer cuts off again. The next write of that reader checks, under the lock, that what it
    read is still in the journal, and reloads when it is not."""
    monkeypatch.setattr(refresh, "EXACT_SNAPSHOT_BYTES", 0)  # keep the view out of it: journal only
    make_run(runs, units=3)
    reader = resumable.open_run("r", runs_dir=runs)
    reader.refresh()
    journal_path = runs / "r.journal.jsonl"
    good = journal_path.read_bytes()
    view = (runs / "r.json").read_bytes()
    other = resumable.open_run("r", runs_dir=runs)
    other.unit("u0", "blocked", note="a" * 14)
    assert reader.refresh()["units"]["u0"]["status"] == "blocked"  # seen, without the lock
    other.close()
    rolled_back = journal_path.read_bytes()[len(good):]
    # The writer's fsync failed: it cut its record off again (a record never acknowledged is in
    # no view); then another writer wrote seq n, a record of exactly the same length, so nothing
    # about the file's size gives it away.
    journal_path.write_bytes(good)
    (runs / "r.json").write_bytes(view)
    resumable.open_run("r", runs_dir=runs).unit("u1", "in_progress", note="b" * 10)
    assert len(journal_path.read_bytes()) - len(good) == len(rolled_back)
    reader.unit("u2", "done")
    doc = resumable.read_doc(runs / "r.json")
    assert doc["units"]["u0"]["status"] == "pending"
    assert doc["units"]["u1"]["status"] == "in_progress"
    assert doc["units"]["u2"]["status"] == "done"
    assert reader.doc == doc
    assert [seq for seq, _ in records(journal_path)] == list(range(1, len(records(journal_path)) + 1))


# --- the journal as a plain file --------------------------------------------------------------


def test_the_journal_is_json_lines_that_jq_and_tail_read(runs: Path) -> None:
    run = make_run(runs)
    run.unit("u0", "done", note="naïve\ttab \u2028 line")
    data = journal_of(run).read_bytes()
    assert b"\0" not in data and data.endswith(b"\n")
    lines = data.decode().split("\n")[:-1]  # not splitlines(): U+2028 is not a line end here
    objects = [json.loads(line) for line in lines]
    assert [o["seq"] for o in objects] == list(range(1, len(lines) + 1))
    assert all(o["v"] == journal.FORMAT and len(o["crc"]) == 8 for o in objects)
    assert objects[-1]["t"] == "unit" and objects[-1]["note"] == "naïve\ttab \u2028 line"
    out = subprocess.run(["jq", "-c", "select(.t == \"unit\") | .unit", str(journal_of(run))],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ['"u0"']


def test_a_journal_of_resumable_0_1_0_loads_and_continues_in_the_new_form(runs: Path) -> None:
    """0.1.0 wrote `<seq> <crc32> <json>` lines followed by zero padding: it still loads, and the
    next write cuts the padding off and appends records of today's form."""
    import zlib

    def old_line(seq: int, event: dict[str, Any]) -> bytes:
        payload = json.dumps(event, separators=(",", ":")).encode()
        head = b"%d " % seq
        return b"%s%08x %s\n" % (head, zlib.crc32(payload, zlib.crc32(head)), payload)

    runs.mkdir()
    at = "2026-01-01T00:00:00Z"
    old = old_line(1, {"t": "init", "id": "r", "task": "t", "units": ["a", "b"], "at": at})
    old += old_line(2, {"t": "unit", "unit": "a", "state": "done", "at": at})
    (runs / "r.journal.jsonl").write_bytes(old + bytes(16384))
    run = resumable.open_run("r", runs_dir=runs)
    assert run.doc["units"]["a"]["status"] == "done"
    run.unit("b", "done")
    data = (runs / "r.journal.jsonl").read_bytes()
    assert data.startswith(old) and b"\0" not in data
    assert json.loads(data[len(old):].decode())["seq"] == 3
    assert [s for s, _ in records(runs / "r.journal.jsonl")] == [1, 2, 3]
    assert resumable.read_doc(run.path)["units"]["b"]["status"] == "done"


def test_a_record_from_a_newer_resumable_is_refused_not_called_corrupt(runs: Path) -> None:
    run = make_run(runs)
    run.close()
    import zlib

    head = b'{"v":%d,"seq":3,"t":"unit","unit":"u0","shape":"of the future"' % (journal.FORMAT + 1)
    newer = (b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head))).decode()
    with journal_of(run).open("a") as f:
        f.write(newer)
    before = tree(runs)
    proc = subprocess.run([sys.executable, "-m", "resumable", "get", "r", "--summary"], capture_output=True,
                          text=True, env={**os.environ, "RESUMABLE_DIR": str(runs)}, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "written by a newer resumable" in proc.stderr
    assert "corrupt" not in proc.stderr
    with pytest.raises(NewerFormatError):
        resumable.open_run("r", runs_dir=runs).unit("u1", "done")
    assert tree(runs) == before


def test_a_view_ahead_of_a_journal_cut_back_is_corruption(runs: Path) -> None:
    """The snapshot's marker points past the journal's last record (the journal was restored from
    an older copy): the view acknowledged writes the journal no longer holds, so neither a read
    nor a write may go on as if they never happened: corruption, one line, nothing rewritten.
    Moving the journal aside falls back to the snapshot, as the message says."""
    run = make_run(runs)
    older = journal_of(run).read_bytes()
    run.unit("u0", "done")
    run.close()
    marker = snapshot_file(run.path)[1]
    assert marker is not None and marker["offset"] > len(older)
    journal_of(run).write_bytes(older)  # restored from an older copy
    before = tree(runs)
    with pytest.raises(CorruptRunError, match="acknowledges records up to 2"):
        resumable.read_doc(run.path)
    with pytest.raises(CorruptRunError, match="move it aside"):
        resumable.open_run("r", runs_dir=runs).unit("u1", "done")
    assert tree(runs) == before
    journal_of(run).rename(runs / "r.journal.aside")
    again = resumable.open_run("r", runs_dir=runs)
    again.unit("u1", "done")
    doc = resumable.read_doc(run.path)
    assert doc["units"]["u0"]["status"] == "done" and doc["units"]["u1"]["status"] == "done"


def test_a_write_does_not_stat_the_journal(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for the journal's timestamps makes the next write to it stamp a fine-grained
    mtime (Linux 6.13+), which costs that write's fdatasync a filesystem journal commit: a
    steady-state write learns the journal's identity and size from its open descriptor."""
    run = make_run(runs, units=100)
    monkeypatch.setattr(refresh, "EXACT_SNAPSHOT_BYTES", 0)
    run.unit("u0", "in_progress")  # opens the journal
    seen: list[str] = []
    real_stat = os.stat

    def spy(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        seen.append(str(path))
        return real_stat(path, *args, **kwargs)

    real_fstat = os.fstat
    fstats: list[int] = []

    def fspy(fd: int) -> os.stat_result:
        fstats.append(fd)
        return real_fstat(fd)

    monkeypatch.setattr(os, "stat", spy)
    monkeypatch.setattr(os, "fstat", fspy)
    for i in range(5):
        run.unit("u1", "in_progress" if i % 2 else "blocked")
    monkeypatch.undo()
    assert str(journal_of(run)) not in seen and fstats == []
    assert records(journal_of(run))[-1][1]["unit"] == "u1"


@pytest.mark.parametrize("proc", [True, False])
def test_a_journal_replaced_under_a_cached_writer_is_noticed(
    runs: Path, monkeypatch: pytest.MonkeyPatch, proc: bool
) -> None:
    """Another program moves a different journal over this run's (restore from a backup): a
    writer holding the old one open reloads, with or without /proc to ask."""
    other = make_run(runs, "o", units=3)
    other.unit("u2", "done")
    other.close()
    run = make_run(runs, units=3)
    run.unit("u0", "in_progress")
    if not proc:
        monkeypatch.setattr(run.handle.writer.cursor, "jlink", None)
    doc = resumable.read_doc(runs / "o.json")
    # The other run's journal, renamed over this one; its view says the same.
    os.replace(runs / "o.journal.jsonl", journal_of(run))
    os.replace(runs / "o.json", run.path)
    run.unit("u1", "blocked")
    got = resumable.read_doc(run.path)
    assert got["units"]["u2"]["status"] == "done" and got["units"]["u0"]["status"] == "pending"
    assert got["units"]["u1"]["status"] == "blocked"
    assert got["id"] == doc["id"]


def test_the_absent_file_probe_raises_what_lstat_raises(tmp_path: Path) -> None:
    """A writer's catch-up asks access() rather than lstat() for files usually absent; where the
    answer is not simply "no such file", lstat() is still asked, so the same errors surface."""
    from resumable.store.files.loader import lstat_unless_absent, searchable

    present = tmp_path / "present"
    present.write_text("x")
    assert searchable(str(tmp_path))
    assert lstat_unless_absent(str(tmp_path / "absent"), True) is None
    assert lstat_unless_absent(str(present), True).st_size == 1  # type: ignore[union-attr]
    with pytest.raises(FileNotFoundError):
        lstat_unless_absent(str(tmp_path / "absent"), False)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for directory, error in ((present, NotADirectoryError), (loop, OSError)):
        assert not searchable(str(directory))
        with pytest.raises(error):
            lstat_unless_absent(str(directory / "r.events.jsonl"), searchable(str(directory)))
